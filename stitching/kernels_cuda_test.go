//go:build cuda

package stitching

import (
	"context"
	"testing"

	"github.com/gohtgs/htgs/cuda"
	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/synth"
)

// BenchmarkCUDAPairKernels times, for one pair of the paper's tile size
// (1392 x 1040, a west pair of 10% overlap), each step the PCIAM+CCF task
// runs on the GPU, one at a time on one stream and waited for: the phase
// correlation and its first peaks ("pcm"), the CCF's candidates ("ccf", the
// offsets ChoosePeak scores), the NCC surface of the refinement ("surface",
// the 21 x 21 box around the translation), and, for comparison in the same
// run, the kernels they replaced: the surface with stitch_box_sums_v1 and
// the candidates with cuda.NCCSums. ns/op is the time of one pair's step;
// on the paper grid each step runs 4855 times, on 10 streams at once.
func BenchmarkCUDAPairKernels(b *testing.B) {
	be := cudaOrSkip(b)
	cfg := synth.ConfigFor(synth.Realistic)
	cfg.Rows, cfg.Cols, cfg.TileWidth, cfg.TileHeight, cfg.Seed = 1, 2, 1392, 1040, 38
	g := synthGrid(b, cfg)
	src := g.source(b)
	w, h := src.TileSize()
	t1, err := src.Load(0, 0)
	if err != nil {
		b.Fatal(err)
	}
	t2, err := src.Load(0, 1)
	if err != nil {
		b.Fatal(err)
	}
	opt := align.Options{}
	alloc := be.spectra(w, h)
	s1, err := alloc.Alloc(be.devs[0])
	if err != nil {
		b.Fatal(err)
	}
	s2, err := alloc.Alloc(be.devs[0])
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		for _, s := range []devSpectrum{s1, s2} {
			if err := alloc.Free(be.devs[0], s); err != nil {
				b.Error(err)
			}
		}
	}()
	ctx := context.Background()
	tr := be.newTransformer(w, h, opt, nil)
	var dc [2]float64
	bound(b, be, tr, func() {
		for i, tl := range [2]devSpectrum{s1, s2} {
			img := t1
			if i == 1 {
				img = t2
			}
			if dc[i], err = tr.forward(ctx, img, tl); err != nil {
				b.Fatal(err)
			}
		}
	})
	co := be.newCorrelator(w, h, opt).(*cudaCorrelator)
	box := be.newBoxScorer(w, h).(*cudaBoxScorer)
	n := opt.EffectivePeakCount()
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
			const r = 10
			surf := make([]float64, (2*r+1)*(2*r+1))
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
			b.Run("ccf-cuda.NCCSums", func(b *testing.B) {
				p1, _ := pixelsOf(s1, w, h)
				p2, _ := pixelsOf(s2, w, h)
				ho := cuda.HostSlice[int64](co.stage.Slice(0, 16*maxOffsets))
				for i, o := range offs {
					ho[2*i], ho[2*i+1] = int64(o[0]), int64(o[1])
				}
				k := int64(len(offs))
				if err := cuda.CopyHtoD(co.stream, co.offs.Slice(0, 16*k), co.stage.Slice(0, 16*k)); err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					if err := cuda.NCCSums(co.stream, co.sums, p1, p2, w, h, co.offs, len(offs)); err != nil {
						b.Fatal(err)
					}
					if err := co.stream.Synchronize(); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("surface", func(b *testing.B) {
				for b.Loop() {
					if err := box.boxNCC(ctx, s1, s2, tx-r, tx+r, ty-r, ty+r, surf); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("surface-v1", func(b *testing.B) {
				fn, err := box.mod.Function("stitch_box_sums_v1")
				if err != nil {
					b.Fatal(err)
				}
				p1, _ := pixelsOf(s1, w, h)
				p2, _ := pixelsOf(s2, w, h)
				cells := (2*r + 1) * (2*r + 1)
				sums := box.sums.Slice(0, 8*cuda.NCCSumsLen*int64(cells))
				per := boxParts(cells, int64(w-abs(tx))*int64(h-abs(ty)))
				for b.Loop() {
					if err := cuda.Memset(box.stream, sums, 0); err != nil {
						b.Fatal(err)
					}
					if err := fn.Launch(box.stream, uint32(cells*per), boxBlock, p1, p2, w, h, tx-r, ty-r, 2*r+1, cells, per, sums); err != nil {
						b.Fatal(err)
					}
					if err := box.stream.Synchronize(); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	})
}
