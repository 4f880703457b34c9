package pathology

import (
	"context"
	"math/rand/v2"
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
