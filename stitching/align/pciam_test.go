package align

import (
	"image"
	"math"
	"math/rand/v2"
	"testing"
)

// cutTiles cuts w x h tiles at the given positions out of one random
// textured plane (blurred white noise), adding independent noise of
// standard deviation noise to every tile.
func cutTiles(seed uint64, w, h int, pos [][2]int, noise float64) []*image.Gray16 {
	rng := rand.New(rand.NewPCG(seed, 3))
	minX, minY, maxX, maxY := 0, 0, 0, 0
	for _, p := range pos {
		minX, minY = min(minX, p[0]), min(minY, p[1])
		maxX, maxY = max(maxX, p[0]), max(maxY, p[1])
	}
	pw, ph := maxX-minX+w+2, maxY-minY+h+2
	raw := make([]float64, pw*ph)
	for i := range raw {
		raw[i] = rng.Float64()
	}
	plane := make([]float64, pw*ph)
	for y := 1; y < ph-1; y++ {
		for x := 1; x < pw-1; x++ {
			s := 0.0
			for dy := -1; dy <= 1; dy++ {
				for dx := -1; dx <= 1; dx++ {
					s += raw[(y+dy)*pw+x+dx]
				}
			}
			plane[y*pw+x] = s / 9
		}
	}
	var out []*image.Gray16
	for _, p := range pos {
		t := image.NewGray16(image.Rect(0, 0, w, h))
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				v := 5000 + 40000*plane[(p[1]-minY+1+y)*pw+p[0]-minX+1+x] + rng.NormFloat64()*noise
				v = math.Max(0, math.Min(65535, math.Round(v)))
				t.Pix[y*t.Stride+2*x] = uint8(uint16(v) >> 8)
				t.Pix[y*t.Stride+2*x+1] = uint8(uint16(v))
			}
		}
		out = append(out, t)
	}
	return out
}

func spectra(w, h int, opt Options, tiles ...*image.Gray16) [][]complex128 {
	f := NewTileFFT(w, h, opt)
	var out [][]complex128
	for _, t := range tiles {
		s := make([]complex128, f.SpectrumLen())
		f.Forward(t, s)
		out = append(out, s)
	}
	return out
}

// circShift returns b with b(u, v) = a(u+sx, v+sy) (circularly): b sits
// at (sx, sy) relative to a.
func circShift(a *image.Gray16, sx, sy int) *image.Gray16 {
	bb := a.Bounds()
	w, h := bb.Dx(), bb.Dy()
	b := image.NewGray16(bb)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			b.SetGray16(x, y, a.Gray16At(((x+sx)%w+w)%w, ((y+sy)%h+h)%h))
		}
	}
	return b
}

func TestPCIAMCircularShift(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for _, tc := range []struct{ w, h, sx, sy int }{{64, 48, 10, 7}, {64, 48, -5, 20}, {63, 37, 40, 1}, {32, 32, 0, 31}} {
		a := randomGray16(rng, tc.w, tc.h)
		b := circShift(a, tc.sx, tc.sy)
		// Plain transforms (a circular shift is exactly periodic) with
		// full normalization: the PCM is a single unit impulse.
		opt := Options{NoPeriodicDecomposition: true, Whitening: 1}
		s := spectra(tc.w, tc.h, opt, a, b)
		al := NewAligner(tc.w, tc.h, opt)
		pk := al.Peaks(s[0], s[1], 2)
		wx, wy := ((tc.sx%tc.w)+tc.w)%tc.w, ((tc.sy%tc.h)+tc.h)%tc.h
		if pk[0].X != wx || pk[0].Y != wy || math.Abs(pk[0].Value-1) > 1e-9 {
			t.Errorf("%+v: peak %+v, want (%d,%d) value 1", tc, pk[0], wx, wy)
		}
		if math.Abs(pk[1].Value) > 1e-9 {
			t.Errorf("%+v: second peak %+v, want ~0", tc, pk[1])
		}
		// The default options find the same shift.
		s = spectra(tc.w, tc.h, Options{}, a, b)
		pk = NewAligner(tc.w, tc.h, Options{}).Peaks(s[0], s[1], 1)
		if pk[0].X != wx || pk[0].Y != wy {
			t.Errorf("%+v default options: peak %+v", tc, pk[0])
		}
	}
}

func TestTopPeaksAreDistinctMaxima(t *testing.T) {
	w, h := 8, 6
	m := make([]float64, w*h)
	set := func(x, y int, v float64) { m[y*w+x] = v }
	set(2, 2, 10)
	set(3, 2, 9) // shoulder of the first peak, not a peak
	set(7, 5, 8) // wraps around to (0, 0)'s neighbourhood
	set(0, 0, 7) // neighbour of (7,5) circularly: not a peak
	set(5, 0, 6)
	pk := topPeaks(m, w, h, 3, nil)
	want := [][2]int{{2, 2}, {7, 5}, {5, 0}}
	if len(pk) != 3 {
		t.Fatalf("got %d peaks", len(pk))
	}
	for i, p := range pk {
		if p.X != want[i][0] || p.Y != want[i][1] {
			t.Errorf("peak %d = %+v, want %v", i, p, want[i])
		}
	}
}

func TestPCIAMZeroMagnitudeGuard(t *testing.T) {
	flat := image.NewGray16(image.Rect(0, 0, 16, 12))
	for i := range flat.Pix {
		flat.Pix[i] = 0x40
	}
	s := spectra(16, 12, Options{}, flat, flat)
	pk := NewAligner(16, 12, Options{}).Peaks(s[0], s[1], 2)
	for _, p := range pk {
		if math.IsNaN(p.Value) || math.IsInf(p.Value, 0) {
			t.Fatalf("flat tiles give peak %+v", p)
		}
	}
	zero := image.NewGray16(image.Rect(0, 0, 16, 12))
	s = spectra(16, 12, Options{}, zero, zero)
	for _, p := range NewAligner(16, 12, Options{}).Peaks(s[0], s[1], 2) {
		if math.IsNaN(p.Value) {
			t.Fatalf("black tiles give peak %+v", p)
		}
	}
}

func TestCandidates(t *testing.T) {
	got := candidates(30, 10, 100, 80, West, nil)
	want := map[[2]int]bool{{30, 10}: true, {30, -10}: true, {30, 70}: true, {30, -70}: true, {70, 10}: true, {70, -10}: true, {70, 70}: true, {70, -70}: true}
	if len(got) != 8 {
		t.Fatalf("west: %d candidates %v", len(got), got)
	}
	for _, c := range got {
		if !want[c] {
			t.Errorf("west: unexpected candidate %v", c)
		}
	}
	got = candidates(30, 10, 100, 80, North, nil)
	want = map[[2]int]bool{{30, 10}: true, {-30, 10}: true, {70, 10}: true, {-70, 10}: true, {30, 70}: true, {-30, 70}: true, {70, 70}: true, {-70, 70}: true}
	if len(got) != 8 {
		t.Fatalf("north: %d candidates %v", len(got), got)
	}
	for _, c := range got {
		if !want[c] {
			t.Errorf("north: unexpected candidate %v", c)
		}
	}
	// Coinciding interpretations are not repeated.
	if got := candidates(50, 0, 100, 80, West, nil); len(got) != 3 {
		t.Errorf("degenerate peak: %v", got)
	}
}

// TestCCFOrientation checks that CCF picks the right aliasing
// interpretation of the PCM peak for west and north pairs with either sign
// of the orthogonal component, both from a given peak and end to end.
func TestCCFOrientation(t *testing.T) {
	const w, h = 96, 72
	cases := []struct {
		dir    Direction
		tx, ty int
	}{
		{West, 80, 5}, {West, 80, -5}, {West, 70, -12}, {West, 30, 3}, // 30: large overlap
		{North, 4, 60}, {North, -4, 60}, {North, -20, 50}, {North, 6, 20},
	}
	mx, my := MinOverlap(w, h, Options{})
	for i, c := range cases {
		tiles := cutTiles(uint64(10+i), w, h, [][2]int{{0, 0}, {c.tx, c.ty}}, 200)
		peak := Peak{X: ((c.tx % w) + w) % w, Y: ((c.ty % h) + h) % h}
		got := CCF(tiles[0], tiles[1], c.dir, []Peak{peak}, mx, my)
		if got.X != c.tx || got.Y != c.ty || got.Corr < 0.9 {
			t.Errorf("%v (%d,%d) from its peak: got %+v", c.dir, c.tx, c.ty, got)
		}
		s := spectra(w, h, Options{}, tiles...)
		got = NewAligner(w, h, Options{}).Align(tiles[0], tiles[1], s[0], s[1], c.dir)
		if got.X != c.tx || got.Y != c.ty {
			t.Errorf("%v (%d,%d) end to end: got %+v", c.dir, c.tx, c.ty, got)
		}
	}
}

// TestCCFMinOverlap builds a pair whose 1-pixel strip at the tile border
// matches perfectly (NCC 1) while the true overlap matches only up to
// noise: the strip wins without a minimum overlap and is rejected with
// the default one.
func TestCCFMinOverlap(t *testing.T) {
	const w, h = 96, 72
	tiles := cutTiles(77, w, h, [][2]int{{0, 0}, {70, 0}}, 1500)
	a, b := tiles[0], tiles[1]
	for y := 0; y < h; y++ { // b's first column := a's last column
		b.SetGray16(0, y, a.Gray16At(w-1, y))
	}
	peaks := []Peak{{X: w - 1, Y: 0}, {X: 70, Y: 0}}
	if got := CCF(a, b, West, peaks, 1, 1); got.X != w-1 || got.Corr < 0.999 {
		t.Fatalf("without minimum overlap: got %+v, want the 1-pixel strip", got)
	}
	mx, my := MinOverlap(w, h, Options{})
	if got := CCF(a, b, West, peaks, mx, my); got.X != 70 || got.Y != 0 {
		t.Errorf("default minimum overlap %dx%d: got %+v, want (70,0)", mx, my, got)
	}
	// Only the strip's peak: its other interpretations remain (X = 1).
	if got := CCF(a, b, West, peaks[:1], mx, my); got.X == w-1 {
		t.Errorf("strip accepted: %+v", got)
	}
	// A peak whose every interpretation leaves too little overlap.
	if got := CCF(a, b, West, []Peak{{X: w - 2, Y: h / 2}}, w-1, h-1); got.Corr != -1 {
		t.Errorf("no admissible candidate: got %+v, want Corr -1", got)
	}
	if mx != 8 || my != 8 {
		t.Errorf("MinOverlap(96, 72) = %d, %d; want 8, 8", mx, my)
	}
	if mx, my := MinOverlap(1392, 1040, Options{}); mx != 28 || my != 21 {
		t.Errorf("MinOverlap(1392, 1040) = %d, %d; want 28, 21", mx, my)
	}
	if mx, my := MinOverlap(1392, 1040, Options{MinOverlap: -1, MinOverlapFraction: -1}); mx != 1 || my != 1 {
		t.Errorf("limits off: %d, %d", mx, my)
	}
}

// nccReference is a straightforward two-pass float implementation.
func nccReference(a, b *image.Gray16, x, y int) float64 {
	w, h := a.Bounds().Dx(), a.Bounds().Dy()
	var va, vb []float64
	for v := max(0, y); v < min(h, h+y); v++ {
		for u := max(0, x); u < min(w, w+x); u++ {
			va = append(va, float64(a.Gray16At(u, v).Y))
			vb = append(vb, float64(b.Gray16At(u-x, v-y).Y))
		}
	}
	if len(va) == 0 {
		return -1
	}
	ma, mb := mean(va), mean(vb)
	var sab, saa, sbb float64
	for i := range va {
		sab += (va[i] - ma) * (vb[i] - mb)
		saa += (va[i] - ma) * (va[i] - ma)
		sbb += (vb[i] - mb) * (vb[i] - mb)
	}
	if saa == 0 || sbb == 0 {
		return 0
	}
	return sab / math.Sqrt(saa*sbb)
}

func TestNCC(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	a, b := randomGray16(rng, 20, 15), randomGray16(rng, 20, 15)
	for _, d := range [][2]int{{0, 0}, {5, -3}, {-19, 14}, {19, -14}, {-7, 0}, {20, 0}, {0, -15}} {
		got, want := NCC(a, b, d[0], d[1]), nccReference(a, b, d[0], d[1])
		if math.Abs(got-want) > 1e-12 {
			t.Errorf("NCC at %v = %v, want %v", d, got, want)
		}
	}
	if v := NCC(a, a, 0, 0); math.Abs(v-1) > 1e-12 {
		t.Errorf("self NCC %v", v)
	}
	flat := image.NewGray16(image.Rect(0, 0, 20, 15))
	if v := NCC(a, flat, 0, 0); v != 0 {
		t.Errorf("NCC with a constant tile = %v, want 0", v)
	}
	// Bright, low-contrast data: no cancellation.
	hi := image.NewGray16(image.Rect(0, 0, 20, 15))
	for y := 0; y < 15; y++ {
		for x := 0; x < 20; x++ {
			hi.Pix[y*hi.Stride+2*x] = 0xfe
			hi.Pix[y*hi.Stride+2*x+1] = uint8(rng.IntN(3))
		}
	}
	if got, want := NCC(hi, hi, 1, 1), nccReference(hi, hi, 1, 1); math.Abs(got-want) > 1e-9 {
		t.Errorf("bright NCC %v, want %v", got, want)
	}
}
