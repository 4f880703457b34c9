package stitching

import (
	"context"
	"errors"
	"fmt"
	"image"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/memmgr"
	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/synth"
	"github.com/gohtgs/htgs/task"
)

// fakeGPUs is a gpuBackend whose "GPUs" are host memory and whose
// transforms are the CPU ones: the GPU graph (bands, halo rows, release
// counts, device pools, CCF on the CPU) runs on any machine and must give
// exactly the CPU graph's result. Every call checks that the buffers it is
// given live on the device its task copy was initialized for.
type fakeGPUs struct {
	devs []*fakeGPU
	// ccfOnDevice makes the correlators scorers: the CCF then runs in
	// the PCIAM task, from pixels the transformer kept in the slot.
	ccfOnDevice bool
	// corrected records that a transformer was given a flat field.
	corrected atomic.Bool
	// failFFT, when positive, makes the failFFT-th transform fail.
	failFFT int64
	ffts    atomic.Int64
}

type fakeGPU struct {
	id               int
	live, total      atomic.Int64
	transforms, pcms atomic.Int64
	scores, mores    atomic.Int64
}

func (d *fakeGPU) ID() int           { return d.id }
func (d *fakeGPU) Kind() device.Kind { return device.GPU }
func (d *fakeGPU) Name() string      { return fmt.Sprintf("fakegpu%d", d.id) }
func (d *fakeGPU) Memory() int64     { return 0 }

func newFakeGPUs(n int) *fakeGPUs {
	f := &fakeGPUs{}
	for i := range n {
		f.devs = append(f.devs, &fakeGPU{id: i})
	}
	return f
}

type fakeSpec struct {
	data []complex128
	pix  []byte // the tile's pixels (ccfOnDevice)
	dev  *fakeGPU
}

func (s fakeSpec) Size() int64 { return 16 * int64(len(s.data)) }

func (f *fakeGPUs) devices() []device.Device {
	ds := make([]device.Device, len(f.devs))
	for i, d := range f.devs {
		ds[i] = d
	}
	return ds
}

func (f *fakeGPUs) spectra(w, h int) memmgr.Allocator[devSpectrum] {
	return fakeSpecAlloc{n: (w/2 + 1) * h, pix: 2 * w * h}
}

type fakeSpecAlloc struct{ n, pix int }

func (a fakeSpecAlloc) Alloc(dev device.Device) (devSpectrum, error) {
	d, ok := dev.(*fakeGPU)
	if !ok {
		return nil, fmt.Errorf("spectrum allocated on %v", dev)
	}
	d.live.Add(1)
	d.total.Add(1)
	return fakeSpec{data: make([]complex128, a.n), pix: make([]byte, a.pix), dev: d}, nil
}

func (a fakeSpecAlloc) Free(dev device.Device, s devSpectrum) error {
	fs := s.(fakeSpec)
	if fs.dev != dev {
		return fmt.Errorf("spectrum of %v freed on %v", fs.dev, dev)
	}
	fs.dev.live.Add(-1)
	return nil
}

type onGPU struct{ dev *fakeGPU }

func (o *onGPU) Initialize(_ context.Context, info task.Info) error {
	d, ok := info.Device.(*fakeGPU)
	if !ok || d.id != info.Clone {
		return fmt.Errorf("clone %d got device %v", info.Clone, info.Device)
	}
	o.dev = d
	return nil
}

func (o *onGPU) spec(s devSpectrum) ([]complex128, error) {
	fs, ok := s.(fakeSpec)
	if !ok || fs.dev != o.dev {
		return nil, fmt.Errorf("spectrum of %v used on %v", fs.dev, o.dev)
	}
	return fs.data, nil
}

type fakeTransformer struct {
	onGPU
	f    *fakeGPUs
	tfft *align.TileFFT
	ff   *align.FlatField
}

func (f *fakeGPUs) newTransformer(w, h int, opt align.Options, ff *align.FlatField) transformer {
	if ff != nil {
		f.corrected.Store(true)
	}
	return &fakeTransformer{f: f, tfft: align.NewTileFFT(w, h, opt), ff: ff}
}

func (t *fakeTransformer) forward(_ context.Context, tile *image.Gray16, dst devSpectrum) (float64, error) {
	if t.f.failFFT > 0 && t.f.ffts.Add(1) == t.f.failFFT {
		return 0, errors.New("fake cuFFT failure")
	}
	d, err := t.spec(dst)
	if err != nil {
		return 0, err
	}
	if t.ff != nil { // "on the device"
		tile = t.ff.Apply(tile)
	}
	t.tfft.Forward(tile, d)
	b := tile.Bounds()
	pix, w := dst.(fakeSpec).pix, b.Dx()
	for y := range b.Dy() {
		copy(pix[2*w*y:2*w*(y+1)], tile.Pix[tile.PixOffset(b.Min.X, b.Min.Y+y):])
	}
	t.dev.transforms.Add(1)
	return pixelSum(tile), nil
}

type fakeCorrelator struct {
	onGPU
	a *align.Aligner
}

func (f *fakeGPUs) newCorrelator(w, h int, opt align.Options) correlator {
	c := &fakeCorrelator{a: align.NewAligner(w, h, opt)}
	if f.ccfOnDevice {
		return &fakeScorer{fakeCorrelator: c, w: w, h: h}
	}
	return c
}

// fakeScorer does the CCF "on the device", from the slots' pixels only.
type fakeScorer struct {
	*fakeCorrelator
	w, h int
	last [2]devSpectrum // the spectra of the last peaks call
}

func (c *fakeScorer) peaks(ctx context.Context, f1, f2 devSpectrum, dc1, dc2 float64, n int) ([]align.Peak, error) {
	c.last = [2]devSpectrum{f1, f2}
	return c.fakeCorrelator.peaks(ctx, f1, f2, dc1, dc2, n)
}

func (c *fakeScorer) score(_ context.Context, f1, f2 devSpectrum, offs [][2]int, corr []float64) error {
	if _, err := c.spec(f1); err != nil {
		return err
	}
	if _, err := c.spec(f2); err != nil {
		return err
	}
	img := func(s devSpectrum) *image.Gray16 {
		return &image.Gray16{Pix: s.(fakeSpec).pix, Stride: 2 * c.w, Rect: image.Rect(0, 0, c.w, c.h)}
	}
	t1, t2 := img(f1), img(f2)
	for i, o := range offs {
		corr[i] = align.NCC(t1, t2, o[0], o[1])
	}
	c.dev.scores.Add(1)
	return nil
}

// more recomputes the peaks (the fake keeps no state between calls).
func (c *fakeScorer) more(_ context.Context, n int) ([]align.Peak, error) {
	if c.last[0] == nil {
		return nil, errors.New("more before peaks")
	}
	s1, err := c.spec(c.last[0])
	if err != nil {
		return nil, err
	}
	s2, err := c.spec(c.last[1])
	if err != nil {
		return nil, err
	}
	c.dev.mores.Add(1)
	return c.a.Peaks(s1, s2, n), nil
}

func (c *fakeCorrelator) peaks(_ context.Context, f1, f2 devSpectrum, _, _ float64, n int) ([]align.Peak, error) {
	s1, err := c.spec(f1)
	if err != nil {
		return nil, err
	}
	s2, err := c.spec(f2)
	if err != nil {
		return nil, err
	}
	c.dev.pcms.Add(1)
	return c.a.Peaks(s1, s2, n), nil
}

// Bands cover the grid: every pair is registered by exactly one clone, and
// a clone's release counts are the number of its pairs using each tile.
func TestBands(t *testing.T) {
	for rows := 1; rows < 7; rows++ {
		for cols := 1; cols < 5; cols++ {
			for clones := 1; clones < 5; clones++ {
				owner := map[align.Pair]int{}
				for d := range clones {
					b := bandOf(d, clones, rows)
					uses := map[tileRef]int{}
					for _, p := range align.Pairs(rows, cols) {
						if !b.has(p) {
							continue
						}
						if prev, ok := owner[p]; ok {
							t.Fatalf("%dx%d/%d: pair %v in clones %d and %d", rows, cols, clones, p, prev, d)
						}
						owner[p] = d
						nr, nc := p.Neighbor()
						uses[tileRef{p.Row, p.Col}]++
						uses[tileRef{nr, nc}]++
					}
					for r := range rows {
						for c := range cols {
							if got := b.uses(rows, cols, r, c); got != uses[tileRef{r, c}] {
								t.Fatalf("%dx%d/%d clone %d tile (%d,%d): uses %d, pairs %d", rows, cols, clones, d, r, c, got, uses[tileRef{r, c}])
							}
						}
					}
				}
				for r := range rows {
					for c := range cols {
						var to []int
						bandsOf(rows, cols)(tileRef{r, c}, clones, func(d int) { to = append(to, d) })
						if len(to) > 2 {
							t.Fatalf("%dx%d/%d: tile (%d,%d) routed to clones %v, want at most 2", rows, cols, clones, r, c, to)
						}
					}
				}
				if len(owner) != len(align.Pairs(rows, cols)) {
					t.Fatalf("%dx%d/%d: %d of %d pairs owned", rows, cols, clones, len(owner), len(align.Pairs(rows, cols)))
				}
			}
		}
	}
}

// The GPU graph, on 1 to 3 fake GPUs, with the CCF on the CPU or on the
// devices (from the pixels in the slots, the tiles' host copies dropped),
// gives exactly the CPU graph's result, spreads the work over the GPUs and
// frees every device spectrum.
func TestStitchGPUGraphMatchesCPU(t *testing.T) {
	g := smallSynth(t, 5, 4, 11)
	src := g.source(t)
	cpu, err := Stitch(context.Background(), src, align.Options{}, GraphOptions{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		n        int
		onDevice bool
	}{{1, false}, {2, false}, {3, false}, {1, true}, {3, true}} {
		n := c.n
		fake := newFakeGPUs(n)
		fake.ccfOnDevice = c.onDevice
		var pools int
		res, err := Stitch(context.Background(), src, align.Options{}, GraphOptions{Workers: 2, gpu: fake,
			Observe: poolsDrained(t, "registration", n, &pools)})
		if err != nil {
			t.Fatalf("%d GPUs: %v", n, err)
		}
		sameTranslations(t, fmt.Sprintf("%d GPUs: relative", n), res.Relative, cpu.Relative)
		sameTranslations(t, fmt.Sprintf("%d GPUs: optimized", n), res.Optimized, cpu.Optimized)
		if pools != n {
			t.Errorf("%d GPUs: %d spectrum pools, want one per GPU", n, pools)
		}
		var pcms, transforms int64
		for _, d := range fake.devs {
			if d.live.Load() != 0 {
				t.Errorf("%d GPUs: %v: %d spectra never freed", n, d.Name(), d.live.Load())
			}
			if d.pcms.Load() == 0 {
				t.Errorf("%d GPUs: %v registered no pair", n, d.Name())
			}
			pcms += d.pcms.Load()
			// Each clone transforms its band's tiles and its halo only: the
			// pipeline routes a tile to the clones that use it.
			var want int64
			for r := range 5 {
				for c := range 4 {
					if bandOf(d.id, n, 5).uses(5, 4, r, c) > 0 {
						want++
					}
				}
			}
			if got := d.transforms.Load(); got != want {
				t.Errorf("%d GPUs: %v: %d transforms, want %d", n, d.Name(), got, want)
			}
			transforms += d.transforms.Load()
		}
		// 5 rows in n bands: n-1 halo rows of 4 tiles are transformed twice.
		if want := int64(5*4 + (n-1)*4); transforms != want {
			t.Errorf("%d GPUs: %d transforms in all, want %d", n, transforms, want)
		}
		if want := int64(len(align.Pairs(5, 4))); pcms != want {
			t.Errorf("%d GPUs: %d phase correlations, want %d (each pair once)", n, pcms, want)
		}
		var scores, mores int64
		for _, d := range fake.devs {
			scores += d.scores.Load()
			mores += d.mores.Load()
		}
		if c.onDevice && scores < pcms || !c.onDevice && scores != 0 {
			t.Errorf("%d GPUs, CCF on the device %v: %d CCF batches scored on the devices for %d pairs", n, c.onDevice, scores, pcms)
		}
		// On the device the peaks past PeakCount are taken only for pairs
		// without a confident match: some here, never all.
		if c.onDevice && (mores == 0 || mores >= pcms) {
			t.Errorf("%d GPUs: peaks extended for %d of %d pairs, want some but not all", n, mores, pcms)
		}
	}
}

// With the CCF on the devices, a pair the CCF leaves unconfirmed has its
// tiles loaded again on the host, and a noise-limited one gets the same
// denoised search as on the CPU: on the low-contrast grid of issue 15,
// where raw NCC picks wrong translations, the translations are the CPU
// graph's.
func TestStitchGPUWeakPairsMatchCPU(t *testing.T) {
	if raceEnabled {
		t.Skip("-race: numeric; TestStitchGPUGraphMatchesCPU and TestStitchGPURefineMatchesCPU run the GPU graph under the race detector")
	}
	g := phaseCellGrid(1, 4, 5, 400, 300, 0.1, 2, 29)
	src := g.source(t)
	cpu, err := Stitch(context.Background(), src, align.Options{}, GraphOptions{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 2} {
		fake := newFakeGPUs(n)
		fake.ccfOnDevice = true
		res, err := Stitch(context.Background(), src, align.Options{}, GraphOptions{Workers: 2, gpu: fake})
		if err != nil {
			t.Fatalf("%d GPUs: %v", n, err)
		}
		sameTranslations(t, fmt.Sprintf("%d GPUs: relative", n), res.Relative, cpu.Relative)
		sameTranslations(t, fmt.Sprintf("%d GPUs: optimized", n), res.Optimized, cpu.Optimized)
		if a := measure(g, res); a.FracOptimal < 0.98 || a.MaxTileError > 1 {
			t.Errorf("%d GPUs: %d of %d pairs exact, max tile error %d px", n, a.ExactOptimal, a.Pairs, a.MaxTileError)
		}
	}
}

// A failing GPU transform stops the run with an error naming the task, and
// the device memory is freed all the same; without a GPU build -gpu says so.
func TestStitchGPUErrors(t *testing.T) {
	g := smallSynth(t, 3, 3, 5)
	src := g.source(t)
	fake := newFakeGPUs(2)
	fake.failFFT = 4
	_, err := Stitch(context.Background(), src, align.Options{}, GraphOptions{Workers: 2, gpu: fake})
	if err == nil || !strings.Contains(err.Error(), "fake cuFFT failure") || !strings.Contains(err.Error(), "fft") {
		t.Fatalf("error %v, want the FFT failure naming the task", err)
	}
	for _, d := range fake.devs {
		if d.live.Load() != 0 {
			t.Errorf("%v: %d spectra never freed after the failure", d.Name(), d.live.Load())
		}
	}
	if !cudaBuilt {
		if _, err := Stitch(context.Background(), src, align.Options{}, GraphOptions{GPU: true}); !errors.Is(err, ErrNoGPUBuild) {
			t.Fatalf("GPU without the cuda tag: %v, want ErrNoGPUBuild", err)
		}
	}
}

// With a significant flat field and the CCF on the devices, the GPU graph
// reads the tiles uncorrected and the devices correct them; either way the
// translations are the CPU graph's.
func TestStitchGPUFlatFieldOnDevice(t *testing.T) {
	cfg := synth.ConfigFor(synth.Hard)
	cfg.Rows, cfg.Cols, cfg.TileWidth, cfg.TileHeight, cfg.Seed = 3, 4, 256, 192, 1
	cfg.Overlap = 0.25
	g := synthGrid(t, cfg)
	src := g.source(t)
	cpu, err := Stitch(context.Background(), src, align.Options{}, GraphOptions{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if cpu.FlatField == nil || cpu.FlatField.Identity() {
		t.Fatal("the hard grid's flat field is not significant: the test needs one")
	}
	for _, onDevice := range []bool{false, true} {
		fake := newFakeGPUs(2)
		fake.ccfOnDevice = onDevice
		res, err := Stitch(context.Background(), src, align.Options{}, GraphOptions{Workers: 2, gpu: fake})
		if err != nil {
			t.Fatal(err)
		}
		// The devices correct the tiles when they also do the CCF; else
		// the CPU does, for the CCF's host copies.
		if fake.corrected.Load() != onDevice {
			t.Fatalf("CCF on the device %v: flat field given to the transformers %v", onDevice, fake.corrected.Load())
		}
		sameTranslations(t, "relative", res.Relative, cpu.Relative)
		sameTranslations(t, "optimized", res.Optimized, cpu.Optimized)
	}
}

// The GPU pool runs two lines ahead of the host graphs' slots, up to eight
// where a quarter of the device memory holds them, never more than the
// grid's tiles, and PoolSize overrides it.
func TestGPUSlots(t *testing.T) {
	const rows, cols, slots = 42, 59, 60 // the paper grid: lines of 42
	for _, c := range []struct{ fit, pool, want int }{
		{0, 0, slots + 2*42},      // memory unknown
		{100, 0, slots + 2*42},    // less than two lines fit: two anyway
		{300, 0, 300},             // part of the way
		{100000, 0, slots + 8*42}, // plenty of memory
		{100000, 60, slots},       // PoolSize
	} {
		if got := (GraphOptions{PoolSize: c.pool}).gpuSlots(rows, cols, slots, c.fit); got != c.want {
			t.Errorf("fit %d, PoolSize %d: %d slots, want %d", c.fit, c.pool, got, c.want)
		}
	}
	if got := (GraphOptions{}).gpuSlots(3, 4, 8, 100000); got != 12 {
		t.Errorf("3 x 4 grid: %d slots, want the grid's 12", got)
	}
}

// poolsDrained is an Observe that counts the pools of phase's run in
// *pools and fails t for one left in use or used beyond its capacity.
func poolsDrained(t *testing.T, phase string, gpus int, pools *int) func(string, *graph.Execution) {
	return func(ph string, r *graph.Execution) {
		if ph != phase {
			return
		}
		for _, p := range r.Stats().Pools {
			*pools++
			if p.InUse != 0 || p.Peak > p.Capacity {
				t.Errorf("%d GPUs: pool %s clone %d: in use %d, peak %d of %d", gpus, p.Name, p.Clone, p.InUse, p.Peak, p.Capacity)
			}
		}
	}
}
