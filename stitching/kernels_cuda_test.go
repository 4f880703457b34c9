//go:build cuda

package stitching

import (
	"context"
	"image"
	"testing"

	"github.com/gohtgs/htgs/cuda"
	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/synth"
)

// BenchmarkCUDAPairKernels times, for pairs of the paper's tile size
// (1392 x 1040, 10% overlap), each step the PCIAM+CCF task runs on the GPU,
// one at a time on one stream and waited for: the phase correlation and its
// first peaks of a west pair ("pcm"), the CCF's candidates ("ccf": the
// offsets ChoosePeak scores), and the NCC surface of the refinement, the
// 21 x 21 box around the translation, of a west and of a north pair
// ("surface-west", "surface-north": launch, download and correlations).
// "sums-DIR" is the surfaces' kernel alone (launch and wait, no download).
// (On one H200 the versions it replaced took 157 µs (a thread a pixel, 64-bit
// indices) and 102 µs (a block a cell) for the west box, against 104 µs;
// the candidates took 53 µs with cuda.NCCSums, against 31.) ns/op is one pair's
// step; on the paper grid each runs 4855 times, on 10 streams at once.
func BenchmarkCUDAPairKernels(b *testing.B) {
	be := cudaOrSkip(b)
	cfg := synth.ConfigFor(synth.Realistic)
	cfg.Rows, cfg.Cols, cfg.TileWidth, cfg.TileHeight, cfg.Seed = 2, 2, 1392, 1040, 38
	g := synthGrid(b, cfg)
	src := g.source(b)
	w, h := src.TileSize()
	var tiles [3]*image.Gray16 // (0, 0), (0, 1), (1, 0)
	for i, rc := range [3][2]int{{0, 0}, {0, 1}, {1, 0}} {
		t, err := src.Load(rc[0], rc[1])
		if err != nil {
			b.Fatal(err)
		}
		tiles[i] = t
	}
	opt := align.Options{}
	alloc := be.spectra(w, h)
	var slots [3]devSpectrum
	for i := range slots {
		s, err := alloc.Alloc(be.devs[0])
		if err != nil {
			b.Fatal(err)
		}
		slots[i] = s
	}
	defer func() {
		for _, s := range slots {
			if err := alloc.Free(be.devs[0], s); err != nil {
				b.Error(err)
			}
		}
	}()
	ctx := context.Background()
	tr := be.newTransformer(w, h, opt, nil)
	var dc [3]float64
	bound(b, be, tr, func() {
		for i := range slots {
			var err error
			if dc[i], err = tr.forward(ctx, tiles[i], slots[i]); err != nil {
				b.Fatal(err)
			}
		}
	})
	co := be.newCorrelator(w, h, opt).(*cudaCorrelator)
	box := be.newBoxScorer(w, h).(*cudaBoxScorer)
	n := opt.EffectivePeakCount()
	s1, s2 := slots[0], slots[1]
	bound(b, be, co, func() {
		bound(b, be, box, func() {
			ps, err := co.peaks(ctx, s1, s2, dc[0], dc[1], n)
			if err != nil {
				b.Fatal(err)
			}
			var offs [][2]int
			score := func(o [][2]int, corr []float64) error {
				offs = append(offs, o...)
				return co.score(ctx, s1, s2, o, corr)
			}
			got, err := align.ChoosePeakScored(w, h, align.West, ps, opt, score)
			if err != nil {
				b.Fatal(err)
			}
			tx, ty := g.trueTranslation(align.Pair{Row: 0, Col: 1, Dir: align.West})
			if got.X != tx || got.Y != ty {
				b.Fatalf("translation %+v, want (%d, %d)", got, tx, ty)
			}
			b.Logf("%d candidates scored; translation %+v", len(offs), got)
			corr := make([]float64, len(offs))
			b.Run("pcm", func(b *testing.B) {
				for b.Loop() {
					if _, err := co.peaks(ctx, s1, s2, dc[0], dc[1], n); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("ccf", func(b *testing.B) {
				for b.Loop() {
					if err := co.score(ctx, s1, s2, offs, corr); err != nil {
						b.Fatal(err)
					}
				}
			})
			const r = 10
			cells := (2*r + 1) * (2*r + 1)
			surf := make([]float64, cells)
			for _, pair := range []struct {
				name   string
				p      align.Pair
				t1, t2 devSpectrum
			}{
				{"west", align.Pair{Row: 0, Col: 1, Dir: align.West}, slots[0], slots[1]},
				{"north", align.Pair{Row: 1, Col: 0, Dir: align.North}, slots[0], slots[2]},
			} {
				x, y := g.trueTranslation(pair.p)
				b.Run("surface-"+pair.name, func(b *testing.B) {
					for b.Loop() {
						if err := box.boxNCC(ctx, pair.t1, pair.t2, x-r, x+r, y-r, y+r, surf); err != nil {
							b.Fatal(err)
						}
					}
				})
				p1, _ := pixelsOf(pair.t1, w, h)
				p2, _ := pixelsOf(pair.t2, w, h)
				sums := box.sums.Slice(0, 8*sumsLen*int64(cells))
				per, grid := boxParts(cells, h-abs(y)), (cells+boxWarps-1)/boxWarps
				b.Run("sums-"+pair.name, func(b *testing.B) {
					for b.Loop() {
						if err := cuda.Memset(box.stream, sums, 0); err != nil {
							b.Fatal(err)
						}
						if err := box.fn.Launch(box.stream, uint32(grid*per), boxBlock, p1, p2, w, h, x-r, y-r, 2*r+1, cells, per, sums); err != nil {
							b.Fatal(err)
						}
						if err := box.stream.Synchronize(); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	})
}
