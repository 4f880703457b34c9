package matmul

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gohtgs/htgs/matmul/npy"
	"github.com/gohtgs/htgs/task"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// naive is the textbook triple loop, the reference for small products.
func naive(a, b *Dense) *Dense {
	c := NewDense(a.R, b.C)
	for i := range a.R {
		for j := range b.C {
			s := 0.0
			for l := range a.C {
				s += a.At(i, l) * b.At(l, j)
			}
			c.Set(i, j, s)
		}
	}
	return c
}

// reference is one multithreaded gonum Dgemm call.
func reference(t testing.TB, a, b *Dense) *Dense {
	t.Helper()
	c := NewDense(a.R, b.C)
	if err := Gonum().(Gemmer).Gemm(0, a, b, c); err != nil {
		t.Fatal(err)
	}
	return c
}

func checkProduct(t testing.TB, a, b, c, ref *Dense) {
	t.Helper()
	cmp, err := Compare(a, b, c, ref)
	if err != nil {
		t.Fatal(err)
	}
	if !cmp.OK {
		t.Fatalf("product differs from the reference: max abs error %g, relative %g > bound %g", cmp.MaxAbsErr, cmp.RelErr, cmp.Bound)
	}
}

func writeNpy(t testing.TB, dir, name string, d *Dense) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := npy.Write(p, d.R, d.C, d.Data); err != nil {
		t.Fatal(err)
	}
	return p
}

func readNpy(t testing.TB, p string) *Dense {
	t.Helper()
	r, c, data, err := npy.Read(p)
	if err != nil {
		t.Fatal(err)
	}
	return &Dense{R: r, C: c, Stride: c, Data: data}
}

// TestOddShapes multiplies 1000x777 by 777x1234 with 256-blocks: edge blocks
// in every dimension, in memory, with every thread count from 1 to 8.
func TestOddShapes(t *testing.T) {
	a, b := Random(1000, 777, 1), Random(777, 1234, 2)
	ref := reference(t, a, b)
	for threads := 1; threads <= 8; threads++ {
		t.Run(fmt.Sprintf("threads=%d", threads), func(t *testing.T) {
			if testing.Short() && threads > 2 {
				t.Skip("short")
			}
			c, rep, err := MultiplyDense(context.Background(), a, b, Config{BlockSize: 256, Copies: threads})
			if err != nil {
				t.Fatal(err)
			}
			checkProduct(t, a, b, c, ref)
			if rep.Plan.MB != 4 || rep.Plan.KB != 4 || rep.Plan.NB != 5 {
				t.Errorf("blocks %dx%dx%d, want 4x4x5", rep.Plan.MB, rep.Plan.KB, rep.Plan.NB)
			}
			if rep.Products != 4*4*5 {
				t.Errorf("%d block products, want 80", rep.Products)
			}
			if rep.BytesRead != 0 {
				t.Errorf("in-memory product read %d bytes", rep.BytesRead)
			}
		})
	}
}

// TestSmallShapes covers degenerate and tiny shapes exactly against the
// triple loop, with blocks larger than, equal to and smaller than the
// matrices, for in-memory operands and for streamed ones, with 1 to 8
// multiply threads.
func TestSmallShapes(t *testing.T) {
	shapes := [][3]int{{1, 1, 1}, {1, 5, 1}, {5, 1, 7}, {3, 4, 5}, {7, 7, 7}, {8, 3, 9}, {2, 9, 2}, {13, 17, 11}}
	run := 0
	for _, s := range shapes {
		for _, bs := range []int{1, 2, 3, 4, 16} {
			run++
			threads := 1 + run%8
			m, k, n := s[0], s[1], s[2]
			a, b := Random(m, k, uint64(m*100+k)), Random(k, n, uint64(n*7+k))
			want := naive(a, b)
			for _, mode := range []string{"dense", "streamed"} {
				var as, bs2 Source = a, b
				if mode == "streamed" {
					as, bs2 = readOnly{a}, readOnly{b}
				}
				c := NewDense(m, n)
				_, err := Multiply(context.Background(), as, bs2, c, Config{BlockSize: bs, Copies: threads})
				if err != nil {
					t.Fatalf("%v bs %d %s: %v", s, bs, mode, err)
				}
				for i := range want.Data {
					if d := math.Abs(want.Data[i] - c.Data[i]); d > 1e-12 {
						t.Fatalf("%v bs %d %s: element %d is %g, want %g", s, bs, mode, i, c.Data[i], want.Data[i])
					}
				}
			}
		}
	}
}

// readOnly hides the *Dense type so that the graph reads it as a stream.
type readOnly struct{ *Dense }

// writeOnly hides the *Dense type so that the graph writes it block by block.
type writeOnly struct{ *Dense }

func TestZeroDimensions(t *testing.T) {
	ctx := context.Background()
	// k = 0: the product is all zeros, also over old contents.
	c := Random(3, 4, 9)
	if _, err := Multiply(ctx, NewDense(3, 0), NewDense(0, 4), c, Config{}); err != nil {
		t.Fatal(err)
	}
	for _, v := range c.Data {
		if v != 0 {
			t.Fatalf("k = 0 product has %g, want zeros", v)
		}
	}
	c = Random(3, 4, 9)
	if _, err := Multiply(ctx, NewDense(3, 0), NewDense(0, 4), writeOnly{c}, Config{BlockSize: 2}); err != nil {
		t.Fatal(err)
	}
	for _, v := range c.Data {
		if v != 0 {
			t.Fatalf("k = 0 product written by blocks has %g, want zeros", v)
		}
	}
	if _, err := Multiply(ctx, NewDense(0, 5), NewDense(5, 4), NewDense(0, 4), Config{}); err != nil {
		t.Fatal(err)
	}
}

func TestShapeErrors(t *testing.T) {
	ctx := context.Background()
	_, err := Multiply(ctx, NewDense(3, 4), NewDense(5, 6), NewDense(3, 6), Config{})
	if !errors.Is(err, ErrShape) || !strings.Contains(err.Error(), "3x4") || !strings.Contains(err.Error(), "5x6") {
		t.Errorf("mismatched inner dimensions: %v", err)
	}
	_, err = Multiply(ctx, NewDense(3, 4), NewDense(4, 6), NewDense(3, 5), Config{})
	if !errors.Is(err, ErrShape) {
		t.Errorf("wrong C shape: %v", err)
	}
	_, err = Hadamard(ctx, NewDense(3, 4), NewDense(4, 3), NewDense(3, 4), Config{})
	if !errors.Is(err, ErrShape) {
		t.Errorf("Hadamard with different shapes: %v", err)
	}
	_, err = Multiply(ctx, NewDense(3, 4), NewDense(4, 6), NewDense(3, 6), Config{Copies: -1})
	if !errors.Is(err, ErrConfig) {
		t.Errorf("negative threads: %v", err)
	}
	sq := Random(4, 4, 1)
	if _, err = Multiply(ctx, sq, NewDense(4, 4), sq, Config{}); !errors.Is(err, ErrConfig) {
		t.Errorf("C aliasing A: %v", err)
	}
	bad := &Dense{R: 3, C: 4, Stride: 4, Data: make([]float64, 5)}
	if _, err = Multiply(ctx, bad, NewDense(4, 6), NewDense(3, 6), Config{}); err == nil {
		t.Error("a Dense with too few elements was accepted")
	}
}

// TestFilesOutOfCore multiplies .npy files with a budget smaller than one
// operand, and checks the result, the plan's bound on pooled memory, and
// that the bytes read match the plan's I/O formula.
func TestFilesOutOfCore(t *testing.T) {
	dir := t.TempDir()
	a, b := Random(600, 700, 3), Random(700, 500, 4)
	ap, bp := writeNpy(t, dir, "a.npy", a), writeNpy(t, dir, "b.npy", b)
	ref := reference(t, a, b)
	blockBytes := int64(8 * 100 * 100)
	// A is 6x7 = 42 blocks of 100x100, B 7x5 = 35; with 2 threads a
	// streamed operand gets 4 buffers and partial products panel+6.
	for _, tc := range []struct {
		name   string
		budget int64
		order  Order
		panels int
	}{
		{"unlimited", 0, RowPanels, 1},
		{"whole B resident", 50 * blockBytes, ColumnPanels, 1}, // 35 + 4 + 11
		{"two row panels", 45 * blockBytes, RowPanels, 2},      // 3 rows: 3·8 + 4 + 9 = 37
		{"three row panels", 30 * blockBytes, RowPanels, 3},    // less than A alone
		{"streamed", 16 * blockBytes, Streamed, 6},             // no panel fits: 4 + 4 + 7
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := filepath.Join(dir, tc.name+".npy")
			var calls atomic.Int64
			rep, err := MultiplyFiles(context.Background(), ap, bp, cp, Config{BlockSize: 100, Copies: 2, MemoryBudget: tc.budget,
				Progress: func(done, total int) {
					if total != 30 || done != int(calls.Add(1)) {
						t.Errorf("progress %d/%d after %d calls", done, total, calls.Load())
					}
				}})
			if err != nil {
				t.Fatal(err)
			}
			checkProduct(t, a, b, readNpy(t, cp), ref)
			p := rep.Plan
			if p.Order != tc.order || p.Panels != tc.panels {
				t.Errorf("%v in %d passes, want %v in %d (plan %v)", p.Order, p.Panels, tc.order, tc.panels, p)
			}
			if tc.budget > 0 && p.PoolBytes > tc.budget {
				t.Errorf("pools hold %d bytes, budget %d", p.PoolBytes, tc.budget)
			}
			for _, ps := range rep.Stats.Pools {
				if ps.Peak > ps.Capacity {
					t.Errorf("pool %s peaked at %d > capacity %d", ps.Name, ps.Peak, ps.Capacity)
				}
			}
			if rep.BytesRead != p.ReadBytes || rep.BytesWritten != p.WriteBytes {
				t.Errorf("read %d bytes, written %d; plan says %d and %d", rep.BytesRead, rep.BytesWritten, p.ReadBytes, p.WriteBytes)
			}
			mk, kn := int64(8*600*700), int64(8*700*500)
			var want int64
			switch p.Order {
			case RowPanels:
				want = mk + int64(p.Panels)*kn
			case ColumnPanels:
				want = kn + int64(p.Panels)*mk
			case Streamed:
				want = mk*int64(p.NB) + kn*int64(p.MB)
			}
			if p.ReadBytes != want {
				t.Errorf("plan reads %d bytes, formula gives %d", p.ReadBytes, want)
			}
			if calls.Load() != 30 {
				t.Errorf("progress called %d times, want 30", calls.Load())
			}
			t.Logf("%v", p)
		})
	}
}

func TestBudgetTooSmall(t *testing.T) {
	dir := t.TempDir()
	ap := writeNpy(t, dir, "a.npy", Random(64, 64, 1))
	_, err := MultiplyFiles(context.Background(), ap, ap, filepath.Join(dir, "c.npy"), Config{BlockSize: 32, MemoryBudget: 1000})
	if !errors.Is(err, ErrBudget) {
		t.Fatalf("budget of 1000 bytes: %v", err)
	}
	if _, serr := os.Stat(filepath.Join(dir, "c.npy")); serr == nil {
		t.Error("C was left behind after a failure")
	}
}

func TestBadFiles(t *testing.T) {
	dir := t.TempDir()
	good := writeNpy(t, dir, "good.npy", Random(4, 4, 1))
	other := writeNpy(t, dir, "other.npy", Random(5, 3, 1))
	garbage := filepath.Join(dir, "garbage.npy")
	if err := os.WriteFile(garbage, []byte("this is not a numpy file at all"), 0o666); err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated.npy")
	raw, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(truncated, raw[:len(raw)-8], 0o666); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "c.npy")
	for _, tc := range []struct {
		a, b, want string
		is         error
	}{
		{garbage, good, "garbage.npy", npy.ErrFormat},
		{good, truncated, "truncated.npy", npy.ErrFormat},
		{good, filepath.Join(dir, "missing.npy"), "missing.npy", os.ErrNotExist},
		{good, other, "inner dimensions", ErrShape},
	} {
		_, err := MultiplyFiles(context.Background(), tc.a, tc.b, out, Config{})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, tc.is) {
			t.Errorf("A=%s B=%s: error %v, want one naming %q and wrapping %v", filepath.Base(tc.a), filepath.Base(tc.b), err, tc.want, tc.is)
		}
	}
	if _, err := MultiplyFiles(context.Background(), good, good, filepath.Join(dir, "no/such/dir/c.npy"), Config{}); err == nil || !strings.Contains(err.Error(), "no/such/dir") {
		t.Errorf("uncreatable C: %v", err)
	}
}

// failingSource fails reading one block, like a file that turns bad.
type failingSource struct {
	*Dense
	failAt int64
	reads  atomic.Int64
}

var errDisk = errors.New("simulated disk error")

func (f *failingSource) ReadBlock(r0, c0, rows, cols int, dst []float64) error {
	if f.reads.Add(1) == f.failAt {
		return errDisk
	}
	return f.Dense.ReadBlock(r0, c0, rows, cols, dst)
}

func (f *failingSource) Name() string { return "flaky.npy" }

func TestReadErrorStopsTheRun(t *testing.T) {
	a := &failingSource{Dense: Random(300, 300, 1), failAt: 5}
	_, err := Multiply(context.Background(), a, Random(300, 300, 2), NewDense(300, 300), Config{BlockSize: 50, Copies: 2})
	if !errors.Is(err, errDisk) || !strings.Contains(err.Error(), "flaky.npy") || !strings.Contains(err.Error(), "load A") {
		t.Fatalf("error %v, want the read error naming the file and the task", err)
	}
}

// slowKernel makes every product take a while, so that a run can be
// cancelled in the middle.
type slowKernel struct{ started chan struct{} }

func (k slowKernel) Name() string { return "slow" }
func (k slowKernel) NewMultiplier() Multiplier {
	return &slowMultiplier{Multiplier: Gonum().NewMultiplier(), started: k.started}
}

type slowMultiplier struct {
	Multiplier
	started chan struct{}
}

func (s *slowMultiplier) Mul(ctx context.Context, m, n, k int, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) error {
	select {
	case s.started <- struct{}{}:
	default:
	}
	time.Sleep(2 * time.Millisecond)
	return s.Multiplier.Mul(ctx, m, n, k, a, lda, b, ldb, beta, c, ldc)
}

func TestCancelMidRun(t *testing.T) {
	for _, streamed := range []bool{false, true} {
		t.Run(fmt.Sprint("streamed=", streamed), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			k := slowKernel{started: make(chan struct{}, 1)}
			var a, b Source = Random(400, 400, 1), Random(400, 400, 2)
			if streamed {
				a, b = readOnly{a.(*Dense)}, readOnly{b.(*Dense)}
			}
			go func() { <-k.started; cancel() }()
			start := time.Now()
			rep, err := Multiply(ctx, a, b, NewDense(400, 400), Config{BlockSize: 20, Copies: 4, Kernel: k, MemoryBudget: 1 << 20})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("error %v, want context.Canceled", err)
			}
			if rep == nil || rep.Products >= int64(rep.Plan.Multiplies) {
				t.Fatalf("the run finished all products despite the cancellation: %+v", rep)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("cancellation took %v", d)
			}
		})
	}
}

// initKernel records the Initialize and Shutdown calls of its multipliers.
type initKernel struct {
	inits, shutdowns *atomic.Int64
	failInit         bool
}

func (k initKernel) Name() string { return "init" }
func (k initKernel) NewMultiplier() Multiplier {
	return &initMultiplier{Multiplier: Gonum().NewMultiplier(), k: k}
}

type initMultiplier struct {
	Multiplier
	k           initKernel
	initialized bool
}

func (m *initMultiplier) Initialize(context.Context, task.Info) error {
	m.k.inits.Add(1)
	if m.k.failInit {
		return errors.New("no device")
	}
	m.initialized = true
	return nil
}

func (m *initMultiplier) Shutdown(context.Context) error {
	m.k.shutdowns.Add(1)
	return nil
}

func (m *initMultiplier) Mul(ctx context.Context, mm, n, k int, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) error {
	if !m.initialized {
		return errors.New("Mul before Initialize")
	}
	return m.Multiplier.Mul(ctx, mm, n, k, a, lda, b, ldb, beta, c, ldc)
}

func TestKernelLifecycle(t *testing.T) {
	var inits, shutdowns atomic.Int64
	a, b := Random(50, 60, 1), Random(60, 70, 2)
	c, _, err := MultiplyDense(context.Background(), a, b, Config{BlockSize: 16, Copies: 3, Kernel: initKernel{inits: &inits, shutdowns: &shutdowns}})
	if err != nil {
		t.Fatal(err)
	}
	checkProduct(t, a, b, c, naive(a, b))
	if inits.Load() != 3 || shutdowns.Load() != 3 {
		t.Errorf("%d Initialize and %d Shutdown calls, want 3 each", inits.Load(), shutdowns.Load())
	}
	inits.Store(0)
	_, _, err = MultiplyDense(context.Background(), a, b, Config{BlockSize: 16, Copies: 2, Kernel: initKernel{inits: &inits, shutdowns: &shutdowns, failInit: true}})
	if err == nil || !strings.Contains(err.Error(), "no device") || !strings.Contains(err.Error(), "multiply") {
		t.Errorf("failing Initialize: %v", err)
	}
}

func TestLookupKernel(t *testing.T) {
	k, err := LookupKernel("gonum")
	if err != nil || k.Name() != "gonum" {
		t.Fatalf("gonum: %v, %v", k, err)
	}
	_, err = LookupKernel("cuda")
	switch {
	case !cudaTag && (!errors.Is(err, ErrNotBuilt) || !strings.Contains(err.Error(), "not built with -tags cuda")):
		t.Errorf("cuda, not built: %v", err)
	case cudaTag && err != nil && !errors.Is(err, ErrUnavailable):
		t.Errorf("cuda, built: %v", err)
	}
	if _, err = LookupKernel("fortran"); err == nil || !strings.Contains(err.Error(), "unknown kernel") {
		t.Errorf("unknown kernel: %v", err)
	}
	if _, err := LookupKernel("openblas"); err != nil && !errors.Is(err, ErrUnavailable) {
		t.Errorf("openblas: %v", err)
	}
}

func TestHadamard(t *testing.T) {
	a, b := Random(301, 257, 1), Random(301, 257, 2)
	check := func(t *testing.T, c *Dense) {
		t.Helper()
		for i := range a.R {
			for j := range a.C {
				if got, want := c.At(i, j), a.At(i, j)*b.At(i, j); got != want {
					t.Fatalf("C(%d,%d) = %g, want %g", i, j, got, want)
				}
			}
		}
	}
	for threads := 1; threads <= 4; threads++ {
		c := NewDense(a.R, a.C)
		rep, err := Hadamard(context.Background(), a, b, c, Config{BlockSize: 64, Copies: threads})
		if err != nil {
			t.Fatal(err)
		}
		check(t, c)
		if rep.Products != 5*5 {
			t.Errorf("%d block products, want 25", rep.Products)
		}
	}
	dir := t.TempDir()
	fa, err := npy.Open(writeNpy(t, dir, "a.npy", a))
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	fb, err := npy.Open(writeNpy(t, dir, "b.npy", b))
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	w, err := npy.Create(filepath.Join(dir, "c.npy"), a.R, a.C)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Hadamard(context.Background(), fa, fb, w, Config{BlockSize: 64, Copies: 2, MemoryBudget: 16 * 8 * 64 * 64})
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	check(t, readNpy(t, filepath.Join(dir, "c.npy")))
	if rep.BytesRead != 2*8*301*257 || rep.BytesWritten != 8*301*257 {
		t.Errorf("read %d, wrote %d bytes", rep.BytesRead, rep.BytesWritten)
	}
}

// TestLargeStreamedBlocks streams large blocks through a generic Source and
// Sink (not *Dense, not files).
func TestLargeStreamedBlocks(t *testing.T) {
	a, b := Random(900, 700, 1), Random(700, 800, 2)
	c := NewDense(900, 800)
	rep, err := Multiply(context.Background(), readOnly{a}, readOnly{b}, writeOnly{c}, Config{BlockSize: 400, Copies: 2, MemoryBudget: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	checkProduct(t, a, b, c, reference(t, a, b))
	if rep.BytesRead != rep.Plan.ReadBytes || rep.BytesWritten != 8*900*800 {
		t.Errorf("read %d (plan %d), wrote %d", rep.BytesRead, rep.Plan.ReadBytes, rep.BytesWritten)
	}
}
