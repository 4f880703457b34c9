package pathology

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/pats"
	"github.com/gohtgs/htgs/region"
)

// tileHostBytes is the host memory a tile's regions take from an
// accelerator's pool: the RGB, five 8-bit masks, three 16-bit maps and the
// feature tables (float64).
func tileHostBytes(size int) int64 {
	n := int64(size) * int64(size)
	return 3*n + 5*n + 3*2*n + int64(len(featIDs()))*int64(objectRows(size))*numFeatures*8
}

// TestTileJobHostMemory checks where a tile's regions live with an
// accelerator's host memory: every image region in a buffer of the pool
// (the RGB staged into it, the others zeroed even when the buffer held
// another tile's data), Go memory once the pool is at its limit, the
// buffers back in the pool on release, and kept out of it after a failed
// run.
func TestTileJobHostMemory(t *testing.T) {
	ctx := context.Background()
	const size = 32
	s, err := NewSlide(ctx, 4, size, 1, region.NewMemory(), region.NewMemory())
	if err != nil {
		t.Fatal(err)
	}
	allocs := 0
	a := &hostAccel{host: hostPool{limit: tileHostBytes(size), alloc: func(n int64) ([]byte, error) {
		allocs++
		return make([]byte, n), nil
	}}}
	inPool := func(j *tileJob, b []byte) bool {
		return slices.ContainsFunc(j.held, func(h []byte) bool { return unsafe.SliceData(h) == unsafe.SliceData(b) })
	}
	j1, err := s.newTileJob(0, a)
	if err != nil {
		t.Fatal(err)
	}
	// The RGB, 5 masks, 3 maps and 3 feature tables.
	const buffers = 12
	if held, out := a.hostStats(); len(j1.held) != buffers || out != buffers || held != tileHostBytes(size) {
		t.Fatalf("a tile holds %d buffers, the pool %d bytes with %d out; want %d of %d bytes", len(j1.held), held, out, buffers, tileHostBytes(size))
	}
	rgb, err := j1.rgb.Data(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !inPool(j1, rgb) {
		t.Error("the RGB was not staged into the pool's memory")
	}
	for k, r := range j1.u8 {
		d, _ := r.Data(ctx)
		if !inPool(j1, d) {
			t.Errorf("%s is not in the pool's memory", k)
		}
		for i := range d {
			d[i] = 0xAB // another tile's data, for the next user of the buffer
		}
	}
	for k, r := range j1.u16 {
		if d, _ := r.Data(ctx); !inPool(j1, bytesOf(d)) {
			t.Errorf("%s is not in the pool's memory", k)
		}
	}
	for k, r := range j1.feats {
		d, _ := r.Data(ctx)
		if !inPool(j1, bytesOf(d)) {
			t.Errorf("%s is not in the pool's memory", k)
		}
		for i := range d {
			d[i] = 7 // another tile's features
		}
	}
	// The pool is at its limit: the next tile's regions are Go memory.
	j2, err := s.newTileJob(1, a)
	if err != nil {
		t.Fatal(err)
	}
	if len(j2.held) != 0 {
		t.Errorf("a tile past the pool's limit holds %d buffers", len(j2.held))
	}
	j1.release(true)
	if _, out := a.hostStats(); out != 0 {
		t.Errorf("%d buffers out after the release", out)
	}
	// A tile reusing the buffers: zeroed intermediates, its own RGB.
	j3, err := s.newTileJob(2, a)
	if err != nil {
		t.Fatal(err)
	}
	if allocs != buffers || len(j3.held) != buffers {
		t.Errorf("%d allocations, the third tile holds %d buffers: want the first tile's %d reused", allocs, len(j3.held), buffers)
	}
	for k, r := range j3.feats {
		if d, _ := r.Data(ctx); slices.ContainsFunc(d, func(v float64) bool { return v != 0 }) {
			t.Errorf("%s of a reused buffer is not zeroed", k)
		}
	}
	for k, r := range j3.u8 {
		if d, _ := r.Data(ctx); slices.ContainsFunc(d, func(v uint8) bool { return v != 0 }) {
			t.Errorf("%s of a reused buffer is not zeroed", k)
		}
	}
	goMem, err := s.newTileJob(2, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := goMem.rgb.Data(ctx)
	if got, _ := j3.rgb.Data(ctx); !bytes.Equal(got, want) {
		t.Error("the RGB staged into a reused buffer differs from the one in Go memory")
	}
	j3.release(false) // a failed run's tile: its buffers stay out of the pool
	if _, out := a.hostStats(); out != buffers {
		t.Errorf("%d buffers out after a release without reuse, want %d", out, buffers)
	}
}

// TestHardwareHostMemory runs a small hardware experiment twice, with the
// tiles' regions in the posing GPU's host memory (the default) and in Go
// memory: the same nuclei in every tile, the pool filled for the window
// and reused (not a buffer per tile and run), and every buffer back.
func TestHardwareHostMemory(t *testing.T) {
	ctx := context.Background()
	const size, window = 32, 4
	var nuclei [][]int
	for _, goMem := range []bool{false, true} {
		gpus := HostGPUs(1)
		h := Hardware{CPUs: 2, GPUs: gpus, Tiles: 6, TileSize: size, Window: window, Seed: 3, Configs: []string{"fcfs", "dl"}, GoMemory: goMem}
		res, err := h.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := res.Err(); err != nil {
			t.Error(err)
		}
		for _, r := range res.res.runs {
			nuclei = append(nuclei, r.nuclei)
		}
		var md strings.Builder
		if err := res.WriteMarkdown(&md, "test"); err != nil {
			t.Fatal(err)
		}
		want := map[bool]string{false: "image regions in the first GPU's host memory", true: "image regions in Go memory"}[goMem]
		if !strings.Contains(md.String(), want) {
			t.Errorf("GoMemory %v: the tables do not say %q", goMem, want)
		}
		held, out := gpus.accels[0].(hostAllocator).hostStats()
		switch {
		case goMem && held != 0:
			t.Errorf("Go memory: the pool holds %d bytes", held)
		case !goMem && (held < window*tileHostBytes(size) || held > 2*window*tileHostBytes(size)):
			t.Errorf("the pool holds %d bytes: want a window of %d tiles of %d bytes, up to twice that", held, window, tileHostBytes(size))
		case out != 0:
			t.Errorf("%d buffers not given back", out)
		}
		if err := gpus.Close(); err != nil {
			t.Error(err)
		}
	}
	for _, n := range nuclei[1:] {
		if !slices.Equal(n, nuclei[0]) {
			t.Errorf("nuclei per tile %v, want %v in every run", n, nuclei[0])
		}
	}
}

// TestNucleiCountFromLabels checks the count a tile reports when a GPU
// labelled it (the largest label) against bwLabel's own count, on a tile
// of the pipeline and on more components than 16-bit labels hold.
func TestNucleiCountFromLabels(t *testing.T) {
	ctx := context.Background()
	const size = 300
	s, err := NewSlide(ctx, 2, size, 5, region.NewMemory(), region.NewMemory())
	if err != nil {
		t.Fatal(err)
	}
	j, err := s.newTileJob(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	ops := kernelOps(nil)
	for _, o := range Operations() {
		if err := ops[o.Name].Impls[device.CPU](ctx, device.Host{}, j); err != nil {
			t.Fatal(err)
		}
		if o.Name == "BWLabel" {
			break
		}
	}
	labels, _ := j.u16["labels"].Data(ctx)
	checker := make([]uint16, size*size) // 45000 components: fewer than 65536
	for i := range checker {
		checker[i] = uint16((i%size + i/size + 1) % 2)
	}
	for _, c := range []struct {
		name string
		mask []uint16
	}{{"a tile", nil}, {"a checkerboard", checker}} {
		want := j.nuclei
		if c.mask != nil {
			want = bwLabel(c.mask, labels, size, size)
		}
		if want == 0 {
			t.Fatalf("%s: no nuclei to count", c.name)
		}
		j.gpuLabels.Store(true)
		got, err := j.nucleiCount(ctx)
		j.gpuLabels.Store(false)
		if err != nil || got != want {
			t.Errorf("%s: %d nuclei from the labels (%v), bwLabel counted %d", c.name, got, err, want)
		}
	}
	big := make([]uint16, 600*300) // 90000 components: the count stops at 65535
	for i := range big {
		big[i] = uint16((i%600 + i/600 + 1) % 2)
	}
	out := make([]uint16, len(big))
	if n := bwLabel(big, out, 600, 300); n != 65535 || slices.Max(out) != 65535 {
		t.Errorf("90000 components: bwLabel counted %d, largest label %d; want 65535 for both", n, slices.Max(out))
	}
}

// TestSpeedupsWithTransfers checks patst's estimates, C / (G + X), and
// that configuration patst is PATS given them.
func TestSpeedupsWithTransfers(t *testing.T) {
	ms := time.Millisecond
	c := &calibration{cpu: map[string]time.Duration{"A": 100 * ms, "B": 60 * ms, "C": 50 * ms},
		gpu:  map[string]time.Duration{"A": 1 * ms, "B": 2 * ms},
		xfer: map[string]time.Duration{"A": 9 * ms}}
	got := c.speedupsWithTransfers()
	if len(got) != 2 || got["A"] != 10 || got["B"] != 30 {
		t.Errorf("speedups with transfers %v, want A 10 (100/(1+9)), B 30 (no transfer timed), no C (CPU only)", got)
	}
	cf := hwConfigs(8, 0.5, c.speedups(), got, false)["patst"]
	if cf.cfg.Policy != pats.PATS || !cf.cfg.FinishAware || cf.cfg.TransferAware || cf.est["A"] != 10 {
		t.Errorf("patst: %+v with estimates %v, want PATS (FinishAware) given the speedups with transfers", cf.cfg, cf.est)
	}
}
