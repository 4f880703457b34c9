package align

import (
	"context"
	"strconv"
	"testing"

	"github.com/gohtgs/htgs/stitching/synth"
)

// benchPair returns a realistic adjacent pair (west) of w x h tiles, their
// spectra and the true translation.
func benchPair(b *testing.B, w, h int) (*testGrid, [][]complex128) {
	b.Helper()
	g := synthGrid(b, synthConfig(synth.Realistic, 1, 1, 2, w, h))
	return g, spectra(w, h, Options{}, g.tiles...)
}

var benchSizes = [][2]int{{512, 384}, {1392, 1040}}

func sizeName(s [2]int) string { return strconv.Itoa(s[0]) + "x" + strconv.Itoa(s[1]) }

// BenchmarkTileFFT is the per-tile forward transform (periodic component,
// the default) and the plain one.
func BenchmarkTileFFT(b *testing.B) {
	for _, s := range benchSizes {
		g, _ := benchPair(b, s[0], s[1])
		for _, plain := range []bool{false, true} {
			name := sizeName(s)
			if plain {
				name += "/plain"
			}
			b.Run(name, func(b *testing.B) {
				f := NewTileFFT(s[0], s[1], Options{NoPeriodicDecomposition: plain})
				dst := make([]complex128, f.SpectrumLen())
				for i := 0; i < b.N; i++ {
					f.Forward(g.tiles[0], dst)
				}
			})
		}
	}
}

// BenchmarkAlign is PCIAM+CCF for one pair; BenchmarkPeaks its PCIAM part.
func BenchmarkAlign(b *testing.B) {
	for _, s := range benchSizes {
		g, sp := benchPair(b, s[0], s[1])
		b.Run(sizeName(s), func(b *testing.B) {
			a := NewAligner(s[0], s[1], Options{})
			for i := 0; i < b.N; i++ {
				a.Align(g.tiles[0], g.tiles[1], sp[0], sp[1], West)
			}
		})
		b.Run(sizeName(s)+"/peaks", func(b *testing.B) {
			a := NewAligner(s[0], s[1], Options{})
			for i := 0; i < b.N; i++ {
				a.Peaks(sp[0], sp[1], 2)
			}
		})
	}
}

// BenchmarkRefine is the refinement of one pair with a search radius of
// 8 px (r = 4) and of 16 px.
func BenchmarkRefine(b *testing.B) {
	for _, s := range benchSizes {
		g, _ := benchPair(b, s[0], s[1])
		tx, ty := g.trueTranslation(Pair{0, 1, West})
		mx, my := MinOverlap(s[0], s[1], Options{})
		for _, rad := range []int{8, 16} {
			b.Run(sizeName(s)+"/radius"+strconv.Itoa(rad), func(b *testing.B) {
				r := NewRefiner()
				for i := 0; i < b.N; i++ {
					r.Refine(g.tiles[0], g.tiles[1], Translation{X: tx + 3, Y: ty - 2}, rad, mx, my)
				}
			})
		}
	}
}

// BenchmarkModelAndMST is the non-image part of the global optimization
// (stage model, repair, spanning tree) for a 42x59 grid.
func BenchmarkModelAndMST(b *testing.B) {
	rel, _, _ := modelGrid(1, 42, 59, 1392, 1040, 10, 5, 3)
	for i := 0; i < b.N; i++ {
		m, err := EstimateModel(rel, 1392, 1040, Options{})
		if err != nil {
			b.Fatal(err)
		}
		GlobalPositions(m.Repair(rel))
	}
}

// BenchmarkFlatField estimates the flat field of a 4x4 grid of 1392x1040
// tiles.
func BenchmarkFlatField(b *testing.B) {
	g := synthGrid(b, synthConfig(synth.Realistic, 1, 4, 4, 1392, 1040))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := EstimateFlatField(context.Background(), 1392, 1040, len(g.tiles), g.tile); err != nil {
			b.Fatal(err)
		}
	}
}
