package native

import (
	"fmt"
	"math"
	"math/cmplx"
	"sync"
	"testing"
	"unsafe"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestOpenBLASDgemm(t *testing.T) {
	b, err := LoadOpenBLAS()
	if err != nil {
		t.Skipf("OpenBLAS not installed (apt-get install libopenblas0-pthread): %v", err)
	}
	ct, chosen := b.CoreType()
	t.Logf("%s: %s, core %s (OPENBLAS_CORETYPE=%q chosen=%v), %d threads", b.Soname(), b.Config(), b.CoreName(), ct, chosen, b.Threads())
	if b.Threads() != 1 {
		t.Errorf("OpenBLAS loaded with %d threads, want 1", b.Threads())
	}
	if chosen && b.CoreName() != ct && !(ct == "SkylakeX" && b.CoreName() == "Cooperlake") {
		t.Errorf("OPENBLAS_CORETYPE=%s was set before loading, the library reports core %s", ct, b.CoreName())
	}
	a := []float64{1, 2, 3, 4, 5, 6} // 2x3
	m := []float64{1, 0, 0, 1, 1, 1} // 3x2
	c := []float64{1, 1, 9, 1, 1, 9} // 2x2, stride 3
	if err := b.Dgemm(2, 2, 3, 2, a, 3, m, 2, 0.5, c, 3); err != nil {
		t.Fatal(err)
	}
	want := []float64{2*4 + 0.5, 2*5 + 0.5, 9, 2*10 + 0.5, 2*11 + 0.5, 9}
	for i := range want {
		if c[i] != want[i] {
			t.Fatalf("dgemm: got %v, want %v", c, want)
		}
	}
}

func TestFFTWRoundTrip(t *testing.T) {
	f, err := LoadFFTW()
	if err != nil {
		t.Skipf("FFTW not installed (apt-get install libfftw3-double3): %v", err)
	}
	t.Log(f.Version())
	const w, h = 6, 5
	in := make([]float64, w*h)
	for i := range in {
		in[i] = math.Sin(float64(i*i) + 1)
	}
	hw := w/2 + 1
	out := make([]complex128, hw*h)
	// Column-major half spectrum: (kx, ky) at kx*h + ky.
	dims := []Dim{{N: h, IS: w, OS: 1}, {N: w, IS: 1, OS: h}}
	p := f.PlanR2C(dims, &in[0], &out[0], FFTWEstimate)
	if p == 0 {
		t.Fatal("no plan")
	}
	defer f.Destroy(p)
	f.ExecR2C(p, &in[0], &out[0])
	for kx := 0; kx < hw; kx++ {
		for ky := 0; ky < h; ky++ {
			var s complex128
			for y := 0; y < h; y++ {
				for x := 0; x < w; x++ {
					s += complex(in[y*w+x], 0) * cmplx.Exp(complex(0, -2*math.Pi*(float64(kx*x)/w+float64(ky*y)/h)))
				}
			}
			if cmplx.Abs(s-out[kx*h+ky]) > 1e-9 {
				t.Fatalf("(%d,%d): got %v, want %v", kx, ky, out[kx*h+ky], s)
			}
		}
	}
	back := make([]float64, w*h)
	q := f.PlanC2R([]Dim{{N: h, IS: 1, OS: w}, {N: w, IS: h, OS: 1}}, &out[0], &back[0], FFTWEstimate)
	defer f.Destroy(q)
	f.ExecC2R(q, &out[0], &back[0])
	for i := range in {
		if math.Abs(back[i]/(w*h)-in[i]) > 1e-12 {
			t.Fatalf("round trip %d: %v vs %v", i, back[i]/(w*h), in[i])
		}
	}
}

func TestFFTWSharedPlans(t *testing.T) {
	lib, err := LoadFFTW()
	if err != nil {
		t.Skipf("FFTW not installed (apt-get install libfftw3-double3): %v", err)
	}
	// A private copy of the library's entry points: the process's shared
	// set stays as the other tests and packages leave it.
	f := &FFTW{planR2C: lib.planR2C, planC2R: lib.planC2R, execR2C: lib.execR2C,
		execC2R: lib.execC2R, destroy: lib.destroy, alignmentOf: lib.alignmentOf}
	planned := 0
	arrays := func(n int) func() (*float64, *complex128) {
		return func() (*float64, *complex128) {
			planned++
			return &make([]float64, n)[0], &make([]complex128, n/2+1)[0]
		}
	}
	dims := func(n int) []Dim { return []Dim{{N: int32(n), IS: 1, OS: 1}} }
	const n = 16
	class := f.AlignmentOf(unsafe.Pointer(&make([]float64, n)[0]))
	p, shared := f.SharedR2C(dims(n), FFTWEstimate, class, arrays(n))
	if p == 0 || !shared || planned != 1 {
		t.Fatalf("first request: plan %v, shared %v, planned %d times; want a shared plan planned once", p, shared, planned)
	}
	if q, shared := f.SharedR2C(dims(n), FFTWEstimate, class, arrays(n)); q != p || !shared || planned != 1 {
		t.Fatalf("second request: plan %v (first %v), shared %v, planned %d times; want the first plan, not planned again", q, p, shared, planned)
	}
	if q, _ := f.SharedR2C(dims(n), FFTWEstimate|FFTWPreserveInput, class, arrays(n)); q == p || planned != 2 {
		t.Fatalf("other flags got the same plan or no planning (planned %d times)", planned)
	}
	// Goroutines execute the shared plan on their own arrays at once.
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := make([]float64, n)
			for i := range in {
				in[i] = float64((i*7+g)%5) - 2
			}
			out := make([]complex128, n/2+1)
			if f.AlignmentOf(unsafe.Pointer(&in[0])) != class || f.AlignmentOf(unsafe.Pointer(&out[0])) != class {
				return // another alignment class: not this plan's arrays
			}
			for range 100 {
				f.ExecR2C(p, &in[0], &out[0])
			}
			var dc float64
			for _, v := range in {
				dc += v
			}
			if math.Abs(real(out[0])-dc) > 1e-9 {
				errs <- fmt.Sprintf("goroutine %d: DC %v, want %v", g, out[0], dc)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	// Past the bound, plans are the caller's own.
	for m := 2; len(f.shared) < MaxSharedPlans; m++ {
		if _, shared := f.SharedR2C(dims(2*m), FFTWEstimate, class, arrays(2*m)); !shared {
			t.Fatalf("plan %d of %d not shared", len(f.shared), MaxSharedPlans)
		}
	}
	own, shared := f.SharedR2C(dims(1000), FFTWEstimate, class, arrays(1000))
	if own == 0 || shared {
		t.Fatalf("past %d geometries: plan %v, shared %v; want the caller's own plan", MaxSharedPlans, own, shared)
	}
	f.Destroy(own)
}
