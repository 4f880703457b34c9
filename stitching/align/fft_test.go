package align

import (
	"image"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"testing"
)

func randomGray16(rng *rand.Rand, w, h int) *image.Gray16 {
	img := image.NewGray16(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = uint8(rng.IntN(256))
	}
	return img
}

func gray16Floats(img *image.Gray16) []float64 {
	b := img.Bounds()
	out := make([]float64, 0, b.Dx()*b.Dy())
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			out = append(out, float64(img.Gray16At(x, y).Y))
		}
	}
	return out
}

// naiveDFT returns the 2-D DFT coefficient (kx, ky) of a row-major w x h
// real image.
func naiveDFT(src []float64, w, h, kx, ky int) complex128 {
	var s complex128
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			ph := -2 * math.Pi * (float64(kx*x)/float64(w) + float64(ky*y)/float64(h))
			s += complex(src[y*w+x], 0) * cmplx.Exp(complex(0, ph))
		}
	}
	return s
}

func TestFFT2AgainstNaiveDFT(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, sz := range [][2]int{{1, 1}, {2, 3}, {5, 4}, {6, 5}, {8, 8}, {7, 9}} {
		w, h := sz[0], sz[1]
		img := randomGray16(rng, w, h)
		src := gray16Floats(img)
		p := NewFFT2(w, h)
		if p.SpectrumLen() != (w/2+1)*h {
			t.Fatalf("%dx%d: SpectrumLen %d", w, h, p.SpectrumLen())
		}
		spec := make([]complex128, p.SpectrumLen())
		p.Forward(img, spec)
		specF := make([]complex128, p.SpectrumLen())
		p.ForwardFloat(src, specF)
		scale := 65535.0 * float64(w*h)
		for kx := 0; kx <= w/2; kx++ {
			for ky := 0; ky < h; ky++ {
				want := naiveDFT(src, w, h, kx, ky)
				got := spec[kx*h+ky]
				if cmplx.Abs(got-want) > 1e-9*scale || cmplx.Abs(specF[kx*h+ky]-want) > 1e-9*scale {
					t.Fatalf("%dx%d (%d,%d): got %v want %v", w, h, kx, ky, got, want)
				}
			}
		}
		out := make([]float64, w*h)
		p.Inverse(spec, out)
		for i := range out {
			if math.Abs(out[i]/float64(w*h)-src[i]) > 1e-9*65535 {
				t.Fatalf("%dx%d inverse[%d] = %v, want %v", w, h, i, out[i]/float64(w*h), src[i])
			}
		}
	}
}

// TestForwardPeriodic checks the defining property of the periodic
// component p of the periodic-plus-smooth decomposition: its periodic
// discrete Laplacian equals the non-periodic Laplacian of the tile, and it
// has the tile's mean.
func TestForwardPeriodic(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	for _, sz := range [][2]int{{7, 6}, {8, 5}, {16, 12}} {
		w, h := sz[0], sz[1]
		img := randomGray16(rng, w, h)
		u := gray16Floats(img)
		p := NewFFT2(w, h)
		spec := make([]complex128, p.SpectrumLen())
		p.ForwardPeriodic(img, spec)
		per := make([]float64, w*h)
		p.Inverse(spec, per)
		mean, meanU := 0.0, 0.0
		for i := range per {
			per[i] /= float64(w * h)
			mean += per[i]
			meanU += u[i]
		}
		if math.Abs(mean-meanU) > 1e-6*meanU {
			t.Errorf("%dx%d: mean %v, want %v", w, h, mean, meanU)
		}
		pp := func(x, y int) float64 { return per[((y+h)%h)*w+(x+w)%w] }
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				lp := pp(x+1, y) + pp(x-1, y) + pp(x, y+1) + pp(x, y-1) - 4*pp(x, y)
				li := 0.0
				for _, d := range [][2]int{{1, 0}, {-1, 0}, {0, 1}, {0, -1}} {
					xx, yy := x+d[0], y+d[1]
					if xx >= 0 && xx < w && yy >= 0 && yy < h {
						li += u[yy*w+xx] - u[y*w+x]
					}
				}
				if math.Abs(lp-li) > 1e-6*65535 {
					t.Fatalf("%dx%d (%d,%d): periodic Laplacian %v, interior Laplacian %v", w, h, x, y, lp, li)
				}
			}
		}
	}
}

func TestFFT2Panics(t *testing.T) {
	p := NewFFT2(4, 4)
	mustPanic(t, "wrong tile size", func() { p.Forward(image.NewGray16(image.Rect(0, 0, 5, 4)), make([]complex128, p.SpectrumLen())) })
	mustPanic(t, "wrong spectrum size", func() { p.Forward(image.NewGray16(image.Rect(0, 0, 4, 4)), make([]complex128, 3)) })
	mustPanic(t, "invalid plan", func() { NewFFT2(0, 4) })
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s: no panic", what)
		}
	}()
	f()
}
