package align

import (
	"image"
	"math"
	"math/rand/v2"
	"testing"
)

// smoothPair cuts two w x h tiles at displacement (dx, dy) out of a plane
// of smooth content (Gaussian blobs of 3 to 8 px, standard deviation
// about 50), each with its own white noise of the given sigma.
func smoothPair(seed uint64, w, h, dx, dy int, noise float64) (t1, t2 *image.Gray16) {
	rng := rand.New(rand.NewPCG(seed, 99))
	pw, ph := w+abs(dx)+2, h+abs(dy)+2
	plane := make([]float64, pw*ph)
	for k := 0; k < pw*ph/150; k++ {
		cx, cy := rng.Float64()*float64(pw), rng.Float64()*float64(ph)
		s, amp := 3+rng.Float64()*5, (rng.Float64()*2-1)*60
		r := int(3 * s)
		for y := max(0, int(cy)-r); y < min(ph, int(cy)+r+1); y++ {
			for x := max(0, int(cx)-r); x < min(pw, int(cx)+r+1); x++ {
				ex, ey := float64(x)-cx, float64(y)-cy
				plane[y*pw+x] += amp * math.Exp(-(ex*ex+ey*ey)/(2*s*s))
			}
		}
	}
	cut := func(ox, oy int) *image.Gray16 {
		t := image.NewGray16(image.Rect(0, 0, w, h))
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				v := 1000 + plane[(oy+y)*pw+ox+x] + rng.NormFloat64()*noise
				q := uint16(math.Max(0, math.Min(65535, math.Round(v))))
				t.Pix[y*t.Stride+2*x], t.Pix[y*t.Stride+2*x+1] = uint8(q>>8), uint8(q)
			}
		}
		return t
	}
	x1, y1 := max(0, -dx)+1, max(0, -dy)+1
	return cut(x1, y1), cut(x1+dx, y1+dy)
}

// The noise estimate recovers the sigma of white noise on smooth content.
func TestNoiseVariance(t *testing.T) {
	for _, sigma := range []float64{5, 20, 40} {
		t1, _ := smoothPair(1, 200, 150, 170, 2, sigma)
		got := math.Sqrt(noiseVariance(t1, 0, 0, 200, 150))
		if math.Abs(got-sigma) > 0.1*sigma+0.5 {
			t.Errorf("noise sigma %v: estimated %.2f", sigma, got)
		}
	}
}

// With read noise comparable to smooth content, the raw NCC surface is
// flat near the truth and its maximum is often a pixel or more off;
// denoised refinement finds the truth. Without noise both agree.
func TestRefineDenoised(t *testing.T) {
	const w, h = 240, 180
	r := NewRefiner()
	rawExact, denExact, n := 0, 0, 0
	for seed := uint64(1); seed <= 8; seed++ {
		dx, dy := 212+int(seed%3), int(seed%5)-2
		t1, t2 := smoothPair(seed, w, h, dx, dy, 45)
		start := Translation{X: dx + 3, Y: dy - 2}
		raw := r.Refine(t1, t2, start, 6, 8, 8)
		den := r.RefineDenoised(t1, t2, start, 6, 8, 8)
		n++
		if raw.X == dx && raw.Y == dy {
			rawExact++
		}
		if den.X == dx && den.Y == dy {
			denExact++
		} else {
			t.Errorf("seed %d: denoised refinement %+v, truth (%d,%d)", seed, den, dx, dy)
		}
		if want := NCC(t1, t2, den.X, den.Y); den.Corr != want {
			t.Errorf("seed %d: Corr %v, want the raw NCC %v", seed, den.Corr, want)
		}
		c1, c2 := smoothPair(seed, w, h, dx, dy, 0)
		cr, cd := r.Refine(c1, c2, start, 6, 8, 8), r.RefineDenoised(c1, c2, start, 6, 8, 8)
		if cr.X != dx || cr.Y != dy || cd.X != dx || cd.Y != dy {
			t.Errorf("seed %d without noise: raw %+v, denoised %+v, truth (%d,%d)", seed, cr, cd, dx, dy)
		}
	}
	t.Logf("exact: raw NCC %d of %d, denoised %d", rawExact, n, denExact)
	if rawExact == n {
		t.Errorf("the raw NCC found every truth: the case does not exercise denoising")
	}
}

// The noise ceiling is near 1 for clean tiles and near the ratio of
// content to total variance for noisy ones.
func TestNoiseCeiling(t *testing.T) {
	t1, t2 := smoothPair(3, 200, 150, 170, 1, 1)
	if c := NoiseCeiling(t1, t2); c < 0.99 {
		t.Errorf("noise sigma 1: ceiling %.3f, want about 1", c)
	}
	c1, c2 := smoothPair(3, 200, 150, 170, 1, 0)
	v := math.Sqrt(regionVariance(c1, 0, 0, 200, 150) * regionVariance(c2, 0, 0, 200, 150))
	n1, n2 := smoothPair(3, 200, 150, 170, 1, 45)
	want := v / (v + 45*45)
	if c := NoiseCeiling(n1, n2); math.Abs(c-want) > 0.05 {
		t.Errorf("noise sigma 45: ceiling %.3f, want about %.3f", c, want)
	}
}

// A noise-limited pair whose phase correlation misleads is registered by
// the denoised search whatever the peaks (here with no useful peak at
// all): within a pixel always, and exactly for most pairs (a pixel off is
// the limit of one pair where the filtered surface is flat; see
// docs/stitching.md).
func TestChoosePeakNoiseLimited(t *testing.T) {
	const w, h = 240, 180
	exact := 0
	for seed := uint64(1); seed <= 6; seed++ {
		dx, dy := 210+int(seed), int(seed%3)-1
		t1, t2 := smoothPair(seed, w, h, dx, dy, 45)
		if c := NoiseCeiling(t1, t2); c >= ConfidentCorr {
			t.Fatalf("seed %d: noise ceiling %.3f: the case is not noise-limited", seed, c)
		}
		peaks := []Peak{{X: 5, Y: 7, Value: 0.1}, {X: 100, Y: 50, Value: 0.05}}
		got := ChoosePeak(t1, t2, West, peaks, Options{})
		if got.X == dx && got.Y == dy {
			exact++
		} else if abs(got.X-dx) > 1 || abs(got.Y-dy) > 1 {
			t.Errorf("seed %d: %+v, truth (%d,%d)", seed, got, dx, dy)
		}
		if want := NCC(t1, t2, got.X, got.Y); got.Corr != want {
			t.Errorf("seed %d: Corr %v, want the raw NCC %v", seed, got.Corr, want)
		}
	}
	if exact < 5 {
		t.Errorf("%d of 6 pairs exact, want at least 5", exact)
	}
}
