package native

import (
	"math"
	"math/cmplx"
	"testing"
)

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
