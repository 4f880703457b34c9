package matmul

import (
	"bytes"
	"context"
	"errors"
	"math"
	"runtime/metrics"
	"strings"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/graph/observe"
	"github.com/gohtgs/htgs/task"
)

// builtKernels returns the kernels compiled into this test binary.
func builtKernels(t *testing.T) []Kernel {
	var ks []Kernel
	for _, name := range KernelNames() {
		if name == "auto" { // an alias of openblas or gonum
			continue
		}
		k, err := LookupKernel(name)
		if errors.Is(err, ErrNotBuilt) || errors.Is(err, ErrUnavailable) {
			continue
		}
		if err != nil {
			t.Fatalf("kernel %s: %v", name, err)
		}
		ks = append(ks, k)
	}
	return ks
}

// TestMultiplierMul checks c = a·b + beta·c on strided sub-matrices for
// each built kernel, including beta = 0 over NaNs and shapes that are not
// multiples of the gonum kernel's tiles.
func TestMultiplierMul(t *testing.T) {
	for _, k := range builtKernels(t) {
		t.Run(k.Name(), func(t *testing.T) {
			mult := k.NewMultiplier()
			if in, ok := mult.(task.Initializer); ok { // a GPU kernel binds its device
				if err := in.Initialize(context.Background(), task.Info{}); err != nil {
					t.Fatal(err)
				}
				if sh, ok := mult.(task.Shutdowner); ok {
					defer func() {
						if err := sh.Shutdown(context.Background()); err != nil {
							t.Error(err)
						}
					}()
				}
			}
			for _, s := range [][3]int{{1, 1, 1}, {3, 5, 7}, {64, 128, 256}, {65, 129, 257}, {200, 31, 300}} {
				m, n, kk := s[0], s[1], s[2]
				// Embed the operands in wider matrices to test the strides.
				a, b := Random(m, kk+3, 1), Random(kk, n+5, 2)
				for _, beta := range []float64{0, 1, 2.5} {
					c := Random(m, n+2, 3)
					if beta == 0 {
						for i := range c.Data {
							c.Data[i] = math.NaN()
						}
					}
					want := make([]float64, m*n)
					for i := range m {
						for j := range n {
							s := 0.0
							for l := range kk {
								s += a.At(i, l) * b.At(l, j)
							}
							if beta != 0 {
								s += beta * c.At(i, j)
							}
							want[i*n+j] = s
						}
					}
					if err := mult.Mul(context.Background(), m, n, kk, a.Data, a.Stride, b.Data, b.Stride, beta, c.Data, c.Stride); err != nil {
						t.Fatal(err)
					}
					for i := range m {
						for j := range n {
							if d := math.Abs(c.At(i, j) - want[i*n+j]); !(d <= 1e-11*float64(kk)) {
								t.Fatalf("%v beta %g: c(%d,%d) = %g, want %g", s, beta, i, j, c.At(i, j), want[i*n+j])
							}
						}
						for j := n; j < n+2; j++ { // outside the block: untouched
							if beta != 0 && c.At(i, j) != Random(m, n+2, 3).At(i, j) {
								t.Fatalf("%v: c(%d,%d) outside the product was changed", s, i, j)
							}
						}
					}
				}
			}
		})
	}
}

func TestMultiplierArgumentErrors(t *testing.T) {
	for _, k := range builtKernels(t) {
		mult := k.NewMultiplier()
		a, b, c := make([]float64, 12), make([]float64, 12), make([]float64, 12)
		for _, tc := range []struct {
			name                    string
			m, n, kk, lda, ldb, ldc int
			a, b, c                 []float64
		}{
			{"short a", 4, 3, 4, 4, 3, 3, a[:15-4], b, c},
			{"short c", 4, 3, 4, 4, 3, 3, make([]float64, 16), b, c[:11]},
			{"small stride", 3, 3, 4, 3, 3, 3, a, b, c},
			{"negative", -1, 3, 3, 3, 3, 3, a, b, c},
		} {
			err := mult.Mul(context.Background(), tc.m, tc.n, tc.kk, tc.a, tc.lda, tc.b, tc.ldb, 0, tc.c, tc.ldc)
			if err == nil {
				t.Errorf("%s: %s accepted", k.Name(), tc.name)
			}
		}
	}
}

// goroutinesCreated reads the runtime's count of goroutines ever created
// (Go 1.26); ok is false on a runtime without that metric.
func goroutinesCreated() (n uint64, ok bool) {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0, false
	}
	return s[0].Value.Uint64(), true
}

// TestGonumKernelIsSerial checks that the gonum kernel starts no goroutines
// (no nested parallelism inside the multiply task), while a plain gonum
// Dgemm of the same block does.
func TestGonumKernelIsSerial(t *testing.T) {
	if _, ok := goroutinesCreated(); !ok {
		t.Skip("runtime has no /sched/goroutines-created metric")
	}
	const n = 512
	a, b, c := Random(n, n, 1), Random(n, n, 2), NewDense(n, n)
	before, _ := goroutinesCreated()
	gonum.Implementation{}.Dgemm(blas.NoTrans, blas.NoTrans, n, n, n, 1, a.Data, n, b.Data, n, 0, c.Data, n)
	after, _ := goroutinesCreated()
	if after-before < 4 {
		t.Fatalf("plain gonum Dgemm started %d goroutines; the measurement does not work", after-before)
	}
	mult := Gonum().NewMultiplier()
	before, _ = goroutinesCreated()
	if err := mult.Mul(context.Background(), n, n, n, a.Data, n, b.Data, n, 0, c.Data, n); err != nil {
		t.Fatal(err)
	}
	after, _ = goroutinesCreated()
	if after != before {
		t.Errorf("the gonum kernel started %d goroutines for one block", after-before)
	}
}

func TestGemmer(t *testing.T) {
	a, b := Random(70, 90, 1), Random(90, 50, 2)
	want := naive(a, b)
	for _, k := range builtKernels(t) {
		g, ok := k.(Gemmer)
		if !ok {
			continue
		}
		c := NewDense(70, 50)
		if err := g.Gemm(2, a, b, c); err != nil {
			t.Fatal(err)
		}
		checkProduct(t, a, b, c, want)
		if err := g.Gemm(0, a, a, c); err == nil || !strings.Contains(err.Error(), "70x90") {
			t.Errorf("%s: mismatched Gemm: %v", k.Name(), err)
		}
	}
}

func TestCompare(t *testing.T) {
	a, b := Random(20, 30, 1), Random(30, 10, 2)
	ref := naive(a, b)
	c := naive(a, b)
	cmp, err := Compare(a, b, c, ref)
	if err != nil || !cmp.OK || cmp.MaxAbsErr != 0 {
		t.Fatalf("identical: %+v %v", cmp, err)
	}
	c.Set(3, 4, c.At(3, 4)+1e-3)
	if cmp, _ = Compare(a, b, c, ref); cmp.OK || math.Abs(cmp.MaxAbsErr-1e-3) > 1e-9 {
		t.Errorf("perturbed: %+v", cmp)
	}
	c.Set(3, 4, math.NaN())
	if cmp, _ = Compare(a, b, c, ref); cmp.OK {
		t.Errorf("NaN passed: %+v", cmp)
	}
	if _, err := Compare(a, b, NewDense(3, 3), ref); err == nil {
		t.Error("wrong shapes accepted")
	}
}

// Compare matches non-finite values by position (issue 12): NaN where the
// reference has NaN, the same infinity where it has one; the finite
// elements are held to the error bound, whose scale ignores the rows of A
// and the elements of B that are not finite.
func TestCompareNonFinite(t *testing.T) {
	a, b := Random(20, 30, 1), Random(30, 10, 2)
	a.Set(2, 3, math.NaN())
	a.Set(5, 6, math.Inf(1))
	a.Set(6, 6, math.Inf(-1))
	b.Set(7, 4, math.Inf(1))
	b.Set(8, 8, math.NaN())
	ref := naive(a, b)
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		found := false
		for _, x := range ref.Data {
			found = found || x == v || (math.IsNaN(v) && math.IsNaN(x))
		}
		if !found {
			t.Fatalf("the reference holds no %v", v)
		}
	}
	c := naive(a, b)
	cmp, err := Compare(a, b, c, ref)
	if err != nil || !cmp.OK || cmp.Mismatches != 0 || math.IsNaN(cmp.RelErr) || math.IsInf(cmp.Scale, 0) || cmp.Scale == 0 {
		t.Fatalf("identical products with NaN and Inf: %+v %v", cmp, err)
	}
	// A finite error within the bound still passes; one beyond it fails.
	c.Set(0, 0, c.At(0, 0)*(1+4e-16))
	if cmp, _ = Compare(a, b, c, ref); !cmp.OK {
		t.Errorf("rounding-level difference failed: %+v", cmp)
	}
	c.Set(0, 0, c.At(0, 0)+1e-3)
	if cmp, _ = Compare(a, b, c, ref); cmp.OK {
		t.Errorf("a finite error of 1e-3 passed: %+v", cmp)
	}
	for _, tc := range []struct {
		i, j int
		v    float64
	}{
		{2, 0, 1},             // NaN in the reference, a number in C
		{5, 0, math.NaN()},    // an infinity in the reference, NaN in C
		{5, 0, -ref.At(5, 0)}, // the other infinity
		{0, 1, math.NaN()},    // a number in the reference, NaN in C
		{0, 1, math.Inf(1)},   // a number in the reference, an infinity in C
	} {
		c := naive(a, b)
		c.Set(tc.i, tc.j, tc.v)
		if cmp, _ := Compare(a, b, c, ref); cmp.OK || cmp.Mismatches != 1 {
			t.Errorf("C(%d,%d) = %v, reference %v: %+v", tc.i, tc.j, tc.v, ref.At(tc.i, tc.j), cmp)
		}
	}
}

// Config.StartOptions reach the graph's Start: with graph.WithTrace the
// runtime that Observe receives can write a timeline (Multiply and
// Hadamard).
func TestStartOptionsTrace(t *testing.T) {
	a, b := Random(40, 40, 1), Random(40, 40, 2)
	for _, op := range []func(context.Context, Source, Source, Sink, Config) (*Report, error){Multiply, Hadamard} {
		for _, opts := range [][]graph.StartOption{nil, {graph.WithTrace()}} {
			var rt *graph.Execution
			cfg := Config{BlockSize: 16, StartOptions: opts,
				Observe: func(r *graph.Execution) { rt = r }}
			if _, err := op(context.Background(), a, b, NewDense(40, 40), cfg); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			err := observe.WriteTrace(&buf, rt)
			if traced := len(opts) > 0; traced && (err != nil || buf.Len() == 0) {
				t.Errorf("traced run: %v, %d bytes", err, buf.Len())
			} else if !traced && !errors.Is(err, graph.ErrNoTrace) {
				t.Errorf("untraced run: WriteTrace = %v, want ErrNoTrace", err)
			}
		}
	}
}
