package align

import (
	"fmt"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gohtgs/htgs/internal/native"
)

func needFFTW(t testing.TB) {
	t.Helper()
	if _, err := native.LoadFFTW(); err != nil {
		t.Skipf("FFTW is not installed, only the gonum kernel is tested (apt-get install libfftw3-double3): %v", err)
	}
}

func maxRelDiff(a, b []complex128) float64 {
	var d, m float64
	for i := range a {
		d = max(d, cmplx.Abs(a[i]-b[i]))
		m = max(m, cmplx.Abs(b[i]))
	}
	return d / m
}

// TestFFTWMatchesGonum checks every transform of the FFTW kernel against
// the gonum one, on even and odd sizes, with aligned and misaligned
// arrays (the latter go through the plan's scratch buffers).
func TestFFTWMatchesGonum(t *testing.T) {
	needFFTW(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, s := range [][2]int{{16, 12}, {17, 9}, {64, 33}, {1, 5}, {7, 1}, {200, 150}} {
		w, h := s[0], s[1]
		t.Run(fmt.Sprintf("%dx%d", w, h), func(t *testing.T) {
			ff, fg := NewFFT2Kernel(w, h, FFTFFTW), NewFFT2Kernel(w, h, FFTGonum)
			if w*h > 100 {
				ff = newFFT2(w, h, FFTFFTW, native.FFTWMeasure) // TileFFT's plans
			}
			if ff.Kernel() != FFTFFTW || fg.Kernel() != FFTGonum {
				t.Fatalf("kernels %s, %s", ff.Kernel(), fg.Kernel())
			}
			tile := randomGray16(rng, w, h)
			n := ff.SpectrumLen()
			for _, misalign := range []bool{false, true} {
				// A sub-slice starting one complex128 in is 16-byte off a
				// 32- or 64-byte boundary: FFTW's class may or may not
				// change, both paths must give the same result.
				mk := func() []complex128 {
					s := make([]complex128, n+1)
					if misalign {
						return s[1:]
					}
					return s[:n]
				}
				a, b := mk(), mk()
				ff.Forward(tile, a)
				fg.Forward(tile, b)
				if d := maxRelDiff(a, b); d > 1e-9 {
					t.Errorf("Forward: relative difference %g", d)
				}
				ff.ForwardPeriodic(tile, a)
				fg.ForwardPeriodic(tile, b)
				if d := maxRelDiff(a, b); d > 1e-9 {
					t.Errorf("ForwardPeriodic: relative difference %g", d)
				}
				src := gray16Floats(tile)
				if misalign {
					src = append(make([]float64, 1, len(src)+1), src...)[1:]
				}
				ff.ForwardFloat(src, a)
				fg.ForwardFloat(src, b)
				if d := maxRelDiff(a, b); d > 1e-9 {
					t.Errorf("ForwardFloat: relative difference %g", d)
				}
				// A cross-power spectrum, as the aligner inverts.
				for i := range a {
					a[i] *= cmplx.Conj(a[(i*7)%n])
					b[i] = a[i]
				}
				ra, rb := make([]float64, w*h+1), make([]float64, w*h)
				if misalign {
					ra = ra[1:]
				} else {
					ra = ra[:w*h]
				}
				ff.Inverse(a, ra)
				fg.Inverse(b, rb)
				var d, m float64
				for i := range ra {
					d = max(d, math.Abs(ra[i]-rb[i]))
					m = max(m, math.Abs(rb[i]))
				}
				if d > 1e-9*m {
					t.Errorf("Inverse: relative difference %g", d/m)
				}
			}
		})
	}
}

func TestDescribeFFT(t *testing.T) {
	for _, k := range []FFTKernel{FFTAuto, FFTGonum, FFTFFTW} {
		d, err := DescribeFFT(k)
		t.Logf("%s: %q, %v", k, d, err)
		if k != FFTFFTW && err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}
	if _, err := ParseFFTKernel("fftw3"); err == nil {
		t.Error("ParseFFTKernel accepted fftw3")
	}
}

// BenchmarkFFT2Forward is the per-tile forward transform of the stitching
// code path ([TileFFT]: periodic component, and plain) of a 1392x1040 tile
// on one goroutine, gonum against FFTW.
func BenchmarkFFT2Forward(b *testing.B) {
	tile := randomGray16(rand.New(rand.NewPCG(1, 2)), 1392, 1040)
	for _, plain := range []bool{false, true} {
		for _, k := range []FFTKernel{FFTGonum, FFTFFTW} {
			name := string(k)
			if plain {
				name += "/plain"
			}
			b.Run(name, func(b *testing.B) {
				if k == FFTFFTW {
					needFFTW(b)
				}
				f := NewTileFFT(1392, 1040, Options{FFT: k, NoPeriodicDecomposition: plain})
				dst := make([]complex128, f.SpectrumLen())
				f.Forward(tile, dst) // plan
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					f.Forward(tile, dst)
				}
			})
		}
	}
}

// TestFFT2ForwardTimes prints interleaved timings of the 1392x1040
// per-tile forward transform (TileFFT, periodic component), gonum and FFTW
// alternating (min and median of 11 rounds), with -v.
func TestFFT2ForwardTimes(t *testing.T) {
	if testing.Short() || !testing.Verbose() {
		t.Skip("timing: run with -v")
	}
	needFFTW(t)
	tile := randomGray16(rand.New(rand.NewPCG(1, 2)), 1392, 1040)
	plans := map[FFTKernel]*TileFFT{}
	for _, k := range []FFTKernel{FFTGonum, FFTFFTW} {
		plans[k] = NewTileFFT(1392, 1040, Options{FFT: k})
	}
	dst := make([]complex128, plans[FFTGonum].SpectrumLen())
	times := map[FFTKernel][]time.Duration{}
	for r := 0; r < 12; r++ {
		for _, k := range []FFTKernel{FFTGonum, FFTFFTW} {
			t0 := time.Now()
			plans[k].Forward(tile, dst)
			if r > 0 { // round 0 plans and warms up
				times[k] = append(times[k], time.Since(t0))
			}
		}
	}
	for _, k := range []FFTKernel{FFTGonum, FFTFFTW} {
		s := times[k]
		slices.Sort(s)
		t.Logf("1392x1040 TileFFT.Forward %-5s: min %v, median %v (%d rounds)", k, s[0], s[len(s)/2], len(s))
	}
}
