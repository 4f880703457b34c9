package pathology

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestFeaturesEveryNucleus checks that every object of a tile with more
// objects than the old 256-row tables had gets its features, on the CPU
// and through the Go mirrors of the feature kernels: 900 squares of 3x3
// pixels, the last one's area 9 and perimeter 8.
func TestFeaturesEveryNucleus(t *testing.T) {
	const size = 120
	n := size * size
	mask := make([]uint16, n)
	for y := range size {
		for x := range size {
			if x%4 < 3 && y%4 < 3 {
				mask[y*size+x] = 1
			}
		}
	}
	labels := make([]uint16, n)
	if got := bwLabel(mask, labels, size, size); got != 900 {
		t.Fatalf("%d objects, want 900", got)
	}
	r := rand.New(rand.NewPCG(3, 4))
	rgb := make([]uint8, 3*n)
	for i := range rgb {
		rgb[i] = uint8(r.IntN(256))
	}
	rows := objectRows(size)
	if rows < 900 {
		t.Fatalf("%d rows for a %d-pixel tile", rows, size)
	}
	intensity, gradient, morph := make([]float64, rows*numFeatures), make([]float64, rows*numFeatures), make([]float64, rows*numFeatures)
	intensityFeatures(rgb, labels, intensity)
	gradientFeatures(rgb, labels, gradient, size, size)
	morphometryFeatures(labels, morph, size, size)
	feats := featureRows(900, intensity, gradient, morph)
	if len(feats) != 900 {
		t.Fatalf("%d feature rows, want 900", len(feats))
	}
	last := feats[899]
	if last[featArea] != 9 || last[featPerim] != 8 || last[featMean] <= 0 || last[featGrad] <= 0 {
		t.Errorf("object 900: area %g, perimeter %g, mean %g, gradient %g; want 9, 8 and positive values", last[featArea], last[featPerim], last[featMean], last[featGrad])
	}
	a := hostAccels(1)[0]
	for _, c := range []struct {
		op   string
		ins  [][]byte
		want []float64
	}{{"FeatIntensity", [][]byte{rgb, bytesOf(labels)}, intensity}, {"FeatGradient", [][]byte{rgb, bytesOf(labels)}, gradient},
		{"FeatMorphometry", [][]byte{bytesOf(labels)}, morph}} {
		got, err := runOnAccel(context.Background(), a, c.op, c.ins, 8*len(c.want), size, size)
		if err != nil {
			t.Fatal(err)
		}
		if !sameOutput("featIntensity", bytesOf(c.want), got) {
			t.Errorf("%s: the GPU mirror's table differs from the CPU's", c.op)
		}
	}
}

// TestStainVectors checks the hematoxylin column (hemaR, hemaG, hemaB)
// against Ruifrok and Johnston's H&E-DAB stain matrix: a pure stain's
// densities (its row) give a hematoxylin density of 1 for hematoxylin, 0
// for eosin and DAB.
func TestStainVectors(t *testing.T) {
	m := [3][3]float64{{0.65, 0.70, 0.29}, {0.07, 0.99, 0.11}, {0.27, 0.57, 0.78}}
	col := [3]float64{hemaR, hemaG, hemaB}
	for j := range 3 {
		v := 0.0
		for k := range 3 {
			v += m[j][k] * col[k]
		}
		want := 0.0
		if j == 0 {
			want = 1
		}
		if math.Abs(v-want) > 1e-7 {
			t.Errorf("stain %d . column = %v, want %v", j, v, want)
		}
	}
}

// TestColourAndEdgeFeatures: a nucleus of hematoxylin's colour has a
// higher hematoxylin density than one of eosin's; a nucleus on a sharp
// step of grey has edge pixels, a flat one none. On the CPU and through
// the Go mirrors of the kernels.
func TestColourAndEdgeFeatures(t *testing.T) {
	const w, h = 60, 30
	n := w * h
	rgb, labels := make([]uint8, 3*n), make([]uint16, n)
	for y := range h {
		for x := range w {
			i := y*w + x
			c := [3]uint8{240, 235, 240} // background
			switch {
			case x >= 5 && x < 20 && y >= 8 && y < 22:
				labels[i], c = 1, [3]uint8{70, 50, 140} // hematoxylin: blue-purple, flat
			case x >= 35 && x < 55 && y >= 8 && y < 22:
				labels[i], c = 2, [3]uint8{230, 110, 170} // eosin: pink
				if x >= 45 {
					c = [3]uint8{120, 40, 90} // a dark half: a step inside
				}
			}
			rgb[i], rgb[n+i], rgb[2*n+i] = c[0], c[1], c[2]
		}
	}
	rows := objectRows(w)
	intensity, gradient := make([]float64, rows*numFeatures), make([]float64, rows*numFeatures)
	intensityFeatures(rgb, labels, intensity)
	gradientFeatures(rgb, labels, gradient, w, h)
	f := featureRows(2, intensity, gradient)
	if f[0][featHema] <= f[1][featHema] || f[0][featHema] <= 0 {
		t.Errorf("hematoxylin: %g for the blue nucleus, %g for the pink one; want the first larger and positive", f[0][featHema], f[1][featHema])
	}
	// Nucleus 1's border with the background is an edge (a step of
	// grey 200 to 86); inside it is flat. Nucleus 2's step is an edge.
	if e := f[0][featEdge]; e <= 0 || e >= 0.5 {
		t.Errorf("nucleus 1: edge share %g, want its outline only (0 < share < 0.5)", e)
	}
	if e := f[1][featEdge]; e <= 0 {
		t.Errorf("nucleus 2: edge share %g, want its step", e)
	}
	a := hostAccels(1)[0]
	for _, c := range []struct {
		op   string
		want []float64
	}{{"FeatIntensity", intensity}, {"FeatGradient", gradient}} {
		got, err := runOnAccel(context.Background(), a, c.op, [][]byte{rgb, bytesOf(labels)}, 8*len(c.want), w, h)
		if err != nil {
			t.Fatal(err)
		}
		if !sameOutput("featIntensity", bytesOf(c.want), got) {
			t.Errorf("%s: the GPU mirror's table differs from the CPU's", c.op)
		}
	}
}

// TestCannyMirrorMatchesCPU compares the Go mirror of patho_canny, with
// the hysteresis as the reconstruction the GPU runs, with canny on random
// RGB images of every size from 1 x 1, smooth and noisy.
func TestCannyMirrorMatchesCPU(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for _, s := range randomSizes(r, 30) {
		w, h := s[0], s[1]
		n := w * h
		rgb := make([]uint8, 3*n)
		span := 1 + r.IntN(255)
		for i := range rgb {
			x, y := i%n%w, i%n/w
			rgb[i] = uint8(min(255, (x*7+y*3)%200+r.IntN(span)))
		}
		grey, want := make([]uint8, n), make([]uint8, n)
		greyImage(rgb, grey, n)
		canny(grey, want, w, h)
		marker, mask := make([]uint8, n), make([]uint8, n)
		refCanny(rgb, marker, mask, w, h)
		for refReconStep(marker, mask, w, h, 8) {
		}
		if !slices.Equal(marker, want) {
			t.Fatalf("%dx%d (noise %d): %s", w, h, span, firstDiffs(want, marker, 1, w))
		}
	}
}
