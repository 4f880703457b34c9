//go:build cuda

package stitching

import (
	"context"
	"image"
	"testing"

	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/synth"
)

// The GPU's box search (stitch_box_sums and align.Pearson on its sums)
// gives align.NCC of every displacement of a box, bit for bit, from a
// refinement slot (pixels only) and from a registration slot (spectrum,
// then pixels), for boxes anywhere (negative displacements, no overlap,
// one cell, boxes larger than the first allocation of sums), on tiles of
// an even and an odd width.
func TestCUDABoxNCC(t *testing.T) {
	be := cudaOrSkip(t)
	for _, size := range [][2]int{{256, 192}, {301, 203}} {
		w, h := size[0], size[1]
		cfg := synth.ConfigFor(synth.Realistic)
		cfg.Rows, cfg.Cols, cfg.TileWidth, cfg.TileHeight, cfg.Seed = 1, 2, w, h, 5
		g := synthGrid(t, cfg)
		src := g.source(t)
		t1, err := src.Load(0, 0)
		if err != nil {
			t.Fatal(err)
		}
		t2, err := src.Load(0, 1)
		if err != nil {
			t.Fatal(err)
		}
		tx, ty := g.trueTranslation(align.Pair{Row: 0, Col: 1, Dir: align.West})
		for _, kind := range []string{"refinement slot", "registration slot"} {
			alloc := be.pixels(w, h)
			if kind == "registration slot" {
				alloc = be.spectra(w, h)
			}
			s1, err := alloc.Alloc(be.devs[0])
			if err != nil {
				t.Fatal(err)
			}
			s2, err := alloc.Alloc(be.devs[0])
			if err != nil {
				t.Fatal(err)
			}
			up := be.newUploader(w, h)
			sc := be.newBoxScorer(w, h)
			bound(t, be, up, func() {
				for i, tl := range []*image.Gray16{t1, t2} {
					if err := up.upload(context.Background(), tl, []devSpectrum{s1, s2}[i]); err != nil {
						t.Fatal(err)
					}
				}
			})
			bound(t, be, sc, func() {
				for _, box := range [][4]int{
					{tx - 6, tx + 6, ty - 6, ty + 6}, // a refinement box
					{tx, tx, ty, ty},                 // one cell
					{tx - 20, tx + 20, ty - 20, ty + 20},
					{-w - 2, -w + 3, -3, 2}, // partly without overlap
					{-5, 5, -h + 2, -h + 9},
				} {
					x0, x1, y0, y1 := box[0], box[1], box[2], box[3]
					bw := x1 - x0 + 1
					got := make([]float64, bw*(y1-y0+1))
					if err := sc.boxNCC(context.Background(), s1, s2, x0, x1, y0, y1, got); err != nil {
						t.Fatal(err)
					}
					bad := 0
					for i, v := range got {
						x, y := x0+i%bw, y0+i/bw
						if want := align.NCC(t1, t2, x, y); v != want {
							if bad < 5 {
								t.Errorf("%dx%d, %s, box %v: displacement (%d, %d): GPU NCC %v (%x), CPU %v",
									w, h, kind, box, x, y, v, v, want)
							}
							bad++
						}
					}
					if bad > 0 {
						t.Errorf("%dx%d, %s, box %v: %d of %d displacements differ", w, h, kind, box, bad, len(got))
					}
				}
			})
			for _, s := range []devSpectrum{s1, s2} {
				if err := alloc.Free(be.devs[0], s); err != nil {
					t.Error(err)
				}
			}
		}
	}
}

// Stitching with -gpu, refinement included, gives the CPU's translations
// (relative and refined) and positions to the last bit on a small
// generated grid. On a mismatch it lists the pairs that differ.
func TestCUDARefineMatchesCPU(t *testing.T) {
	be := cudaOrSkip(t)
	g := smallSynth(t, 4, 5, 3)
	src := g.source(t)
	cpu, err := Stitch(context.Background(), src, align.Options{}, GraphOptions{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Stitch(context.Background(), src, align.Options{}, GraphOptions{Workers: 2, gpu: be})
	if err != nil {
		t.Fatal(err)
	}
	diff := func(what string, a, b *align.Translations) {
		n := 0
		for _, p := range align.Pairs(a.Rows, a.Cols) {
			if a.At(p) != b.At(p) {
				if n < 10 {
					t.Errorf("%s: pair %v: GPU %+v, CPU %+v", what, p, a.At(p), b.At(p))
				}
				n++
			}
		}
		if n > 0 {
			t.Errorf("%s: %d of %d pairs differ", what, n, len(align.Pairs(a.Rows, a.Cols)))
		}
	}
	diff("relative", res.Relative, cpu.Relative)
	diff("refined", res.Optimized, cpu.Optimized)
	for i := range cpu.Positions {
		if res.Positions[i] != cpu.Positions[i] {
			t.Errorf("tile %d at %+v, CPU %+v", i, res.Positions[i], cpu.Positions[i])
		}
	}
	t.Logf("%d of %d pairs refined with their tiles on the host, %d in a second GPU pass; %d bytes over the bus",
		res.HostRefined, len(align.Pairs(4, 5)), res.RefinedAgain, be.bus.Load())
	// Without the registration's surfaces: every pair in the second pass.
	res2, err := Stitch(context.Background(), src, align.Options{}, GraphOptions{Workers: 2, gpu: be, surface: -1})
	if err != nil {
		t.Fatal(err)
	}
	diff("refined, second pass only", res2.Optimized, cpu.Optimized)
	checkBar(t, "gpu", g, res)
}
