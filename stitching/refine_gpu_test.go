package stitching

import (
	"context"
	"fmt"
	"hash/fnv"
	"image"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gohtgs/htgs/memmgr"
	"github.com/gohtgs/htgs/stitching/align"
)

// fakeRefineGPUs are fakeGPUs that also refine "on the device": the
// uploader copies a tile's pixels into a slot of host memory, and the box
// scorer computes the NCC of every displacement of a box from the slots'
// pixels only (with align.NCC, the exact sums a GPU computes). It records
// the bytes uploaded and how often each tile (by content) went to each
// device.
type fakeRefineGPUs struct {
	*fakeGPUs
	w, h     int
	bytes    atomic.Int64
	boxes    atomic.Int64
	mu       sync.Mutex
	uploaded map[[2]uint64]int // (device, hash of the pixels) -> uploads
}

func newFakeRefineGPUs(n, w, h int) *fakeRefineGPUs {
	f := &fakeRefineGPUs{fakeGPUs: newFakeGPUs(n), w: w, h: h, uploaded: map[[2]uint64]int{}}
	f.ccfOnDevice = true
	return f
}

func (f *fakeRefineGPUs) pixels(w, h int) memmgr.Allocator[devSpectrum] {
	return fakeSpecAlloc{pix: 2 * w * h}
}

type fakeUploader struct {
	onGPU
	f *fakeRefineGPUs
}

func (f *fakeRefineGPUs) newUploader(w, h int) uploader { return &fakeUploader{f: f} }

func (u *fakeUploader) upload(_ context.Context, tile *image.Gray16, dst devSpectrum) error {
	if _, err := u.spec(dst); err != nil {
		return err
	}
	b := tile.Bounds()
	pix, w := dst.(fakeSpec).pix, b.Dx()
	if len(pix) != 2*b.Dx()*b.Dy() {
		return fmt.Errorf("slot of %d bytes for a %dx%d tile", len(pix), b.Dx(), b.Dy())
	}
	hs := fnv.New64a()
	for y := range b.Dy() {
		row := tile.Pix[tile.PixOffset(b.Min.X, b.Min.Y+y):][:2*w]
		copy(pix[2*w*y:], row)
		hs.Write(row)
	}
	u.f.bytes.Add(int64(len(pix)))
	u.f.mu.Lock()
	u.f.uploaded[[2]uint64{uint64(u.dev.id), hs.Sum64()}]++
	u.f.mu.Unlock()
	return nil
}

type fakeBoxScorer struct {
	onGPU
	f *fakeRefineGPUs
}

func (f *fakeRefineGPUs) newBoxScorer(w, h int) boxScorer { return &fakeBoxScorer{f: f} }

func (s *fakeBoxScorer) boxNCC(_ context.Context, t1, t2 devSpectrum, x0, x1, y0, y1 int, dst []float64) error {
	if _, err := s.spec(t1); err != nil {
		return err
	}
	if _, err := s.spec(t2); err != nil {
		return err
	}
	img := func(v devSpectrum) *image.Gray16 {
		return &image.Gray16{Pix: v.(fakeSpec).pix, Stride: 2 * s.f.w, Rect: image.Rect(0, 0, s.f.w, s.f.h)}
	}
	a, b := img(t1), img(t2)
	bw := x1 - x0 + 1
	for y := y0; y <= y1; y++ {
		for x := x0; x <= x1; x++ {
			dst[(y-y0)*bw+x-x0] = align.NCC(a, b, x, y)
		}
	}
	s.f.boxes.Add(1)
	return nil
}

// The refinement on the GPUs (host memory posing as them) gives the CPU
// refinement's translations and positions to the last bit. Without the
// registration's NCC surfaces, a second pass uploads each tile of a
// clone's band (and halo) once and frees every slot; with them (the
// default), the searches they cover upload nothing, and with surfaces too
// narrow for some searches, only the tiles of those pairs are uploaded.
func TestStitchGPURefineMatchesCPU(t *testing.T) {
	const rows, cols, w, h = 5, 4, 256, 192
	g := smallSynth(t, rows, cols, 11)
	src := g.source(t)
	cpu, err := Stitch(context.Background(), src, align.Options{}, GraphOptions{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	npairs := int64(len(align.Pairs(rows, cols)))
	checkSteps(t, "CPU", cpu, "stage model and repair", "refinement", "global solve")
	for _, c := range []struct{ n, surface int }{{1, -1}, {2, -1}, {3, -1}, {1, 0}, {2, 0}, {1, 1}, {3, 1}} {
		n := c.n
		fake := newFakeRefineGPUs(n, w, h)
		pools := 0
		res, err := Stitch(context.Background(), src, align.Options{}, GraphOptions{Workers: 2, gpu: fake, surface: c.surface,
			Observe: poolsDrained(t, "refinement", n, &pools)})
		if err != nil {
			t.Fatalf("%d GPUs: %v", n, err)
		}
		want := []string{"stage model and repair"}
		if c.surface >= 0 {
			want = append(want, "refinement from surfaces")
		}
		if res.HostRefined > 0 && slices.ContainsFunc(res.Steps, func(s Step) bool { return s.Name == "refinement on the host" }) {
			// Pairs sent to the host by the surfaces (not by the second
			// GPU pass, whose own task refines those it finds).
			want = append(want, "refinement on the host")
		}
		if res.RefinedAgain > 0 {
			want = append(want, "refinement on the GPUs")
		}
		checkSteps(t, fmt.Sprintf("%d GPUs, surfaces of radius %d", n, c.surface), res, append(want, "global solve")...)
		sameTranslations(t, fmt.Sprintf("%d GPUs: relative", n), res.Relative, cpu.Relative)
		sameTranslations(t, fmt.Sprintf("%d GPUs: optimized", n), res.Optimized, cpu.Optimized)
		for i := range cpu.Positions {
			if res.Positions[i] != cpu.Positions[i] {
				t.Fatalf("%d GPUs: tile %d at %+v, CPU %+v", n, i, res.Positions[i], cpu.Positions[i])
			}
		}
		for _, d := range fake.devs {
			if d.live.Load() != 0 {
				t.Errorf("%d GPUs: %v: %d slots never freed", n, d.Name(), d.live.Load())
			}
		}
		fake.mu.Lock()
		uploads := 0
		for k, v := range fake.uploaded {
			uploads += v
			if v != 1 {
				t.Errorf("%d GPUs: device %d got a tile %d times", n, k[0], v)
			}
		}
		fake.mu.Unlock()
		if c.surface >= 0 {
			// The surfaces: one per pair, computed in the registration.
			if fake.boxes.Load() < npairs {
				t.Errorf("%d GPUs, surfaces of radius %d: %d boxes for %d pairs", n, c.surface, fake.boxes.Load(), npairs)
			}
			invalid := 0
			for _, p := range align.Pairs(rows, cols) {
				if !res.Model.Valid(p) {
					invalid++
				}
			}
			switch {
			case c.surface == 0 && (res.RefinedAgain == 0 || res.RefinedAgain > invalid || uploads >= rows*cols+(n-1)*cols):
				// This grid has repaired pairs, whose searches start
				// away from their registered translations; the valid
				// pairs' searches lie in their surfaces.
				t.Errorf("%d GPUs, surfaces of the default radius: %d pairs refined again (%d repaired), %d tiles uploaded again; want the repaired pairs' tiles only",
					n, res.RefinedAgain, invalid, uploads)
			case c.surface == 1 && res.RefinedAgain != int(npairs):
				t.Errorf("%d GPUs, surfaces of radius 1, narrower than the search: %d pairs refined again, want all %d", n, res.RefinedAgain, npairs)
			}
			t.Logf("repeatability %d; %d GPUs, surfaces of radius %d: %d pairs refined again (%d repaired), %d tiles uploaded again, %d boxes, %d pairs refined with their tiles on the host",
				res.Model.Repeatability, n, c.surface, res.RefinedAgain, invalid, uploads, fake.boxes.Load(), res.HostRefined)
			continue
		}
		if pools != n {
			t.Errorf("%d GPUs: %d tile pools in the refinement, want one per GPU", n, pools)
		}
		if fake.boxes.Load() < int64(len(align.Pairs(rows, cols))) {
			t.Errorf("%d GPUs: %d boxes searched on the devices for %d pairs", n, fake.boxes.Load(), len(align.Pairs(rows, cols)))
		}
		// Each clone uploads the tiles its band uses, once each.
		var tiles int64
		for _, d := range fake.devs {
			if d.live.Load() != 0 {
				t.Errorf("%d GPUs: %v: %d slots never freed", n, d.Name(), d.live.Load())
			}
			for r := range rows {
				for c := range cols {
					if bandOf(d.id, n, rows).uses(rows, cols, r, c) > 0 {
						tiles++
					}
				}
			}
		}
		if int64(uploads) != tiles || fake.bytes.Load() != tiles*2*w*h {
			t.Errorf("%d GPUs: %d uploads of %d bytes in all, want %d tiles of %d bytes", n, uploads, fake.bytes.Load(), tiles, 2*w*h)
		}
		t.Logf("%d GPUs: %d tiles uploaded for the refinement (%d bytes), %d boxes, %d pairs refined with their tiles on the host",
			n, uploads, fake.bytes.Load(), fake.boxes.Load(), res.HostRefined)
	}
}

// On the low-contrast grid of issue 15, where the raw NCC is not
// confident and the denoised search decides, the pairs the GPU refinement
// sends to the host get the CPU's search, during the registration where
// the stage model estimated so far agrees with the final one: the
// translations are the CPU's.
func TestStitchGPURefineWeakPairsMatchCPU(t *testing.T) {
	if raceEnabled {
		t.Skip("-race: numeric; TestStitchGPUGraphMatchesCPU and TestStitchGPURefineMatchesCPU run the GPU graph under the race detector")
	}
	const w, h = 400, 300
	g := phaseCellGrid(1, 4, 5, w, h, 0.1, 2, 29)
	src := g.source(t)
	cpu, err := Stitch(context.Background(), src, align.Options{}, GraphOptions{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, surface := range []int{-1, 0} { // a second pass, the registration's surfaces
		fake := newFakeRefineGPUs(2, w, h)
		res, err := Stitch(context.Background(), src, align.Options{}, GraphOptions{Workers: 2, gpu: fake, surface: surface})
		if err != nil {
			t.Fatal(err)
		}
		sameTranslations(t, fmt.Sprintf("surfaces %d: relative", surface), res.Relative, cpu.Relative)
		sameTranslations(t, fmt.Sprintf("surfaces %d: optimized", surface), res.Optimized, cpu.Optimized)
		if res.HostRefined == 0 {
			t.Errorf("surfaces %d: no pair refined with its tiles on the host: the weak pairs' path is not tested", surface)
		}
		// With the registration's surfaces, noise-limited pairs are
		// refined during the registration (hostAhead) and kept where the
		// final model agrees: the translations above are still the CPU's.
		if surface == 0 && res.RefinedAhead == 0 {
			t.Errorf("surfaces %d: no pair refined during the registration: hostAhead is not tested", surface)
		}
		t.Logf("surfaces %d: %d of %d pairs refined with their tiles on the host, %d of them during the registration", surface, res.HostRefined, len(align.Pairs(4, 5)), res.RefinedAhead)
	}
}

// checkSteps checks that res.Steps names the steps want, in that order,
// each with a time.
func checkSteps(t *testing.T, what string, res *Result, want ...string) {
	t.Helper()
	var got []string
	for _, st := range res.Steps {
		got = append(got, st.Name)
		if st.Elapsed <= 0 {
			t.Errorf("%s: step %q took %v", what, st.Name, st.Elapsed)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: steps %q, want %q", what, got, want)
	}
}
