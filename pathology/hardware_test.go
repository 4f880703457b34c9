package pathology

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gohtgs/htgs/region"
)

// TestFillHoles checks the reconstruction on a ring (its hole is filled)
// and an open ring (its inside reaches the border: not filled).
func TestFillHoles(t *testing.T) {
	const w, h = 9, 7
	ring := func(open bool) []uint8 {
		m := make([]uint8, w*h)
		for y := 1; y <= 5; y++ {
			for x := 1; x <= 5; x++ {
				if x == 1 || x == 5 || y == 1 || y == 5 {
					m[y*w+x] = 1
				}
			}
		}
		if open {
			m[3*w+5] = 0
		}
		return m
	}
	for _, open := range []bool{false, true} {
		in, out := ring(open), make([]uint8, w*h)
		fillHoles(in, out, w, h)
		if got := out[3*w+3]; got != map[bool]uint8{false: 1, true: 0}[open] {
			t.Errorf("open=%v: centre = %d", open, got)
		}
		if out[0] != 0 || out[3*w+7] != 0 {
			t.Errorf("open=%v: the outside was filled", open)
		}
	}
}

// TestGPUMirrorsMatchCPU runs every operation with a GPU implementation on
// generated tiles, on the CPU and through the Go mirrors of the CUDA
// kernels (a host accelerator, with uploads and downloads), and compares
// the outputs: exactly, the feature tables within 1e-9.
func TestGPUMirrorsMatchCPU(t *testing.T) {
	ctx := context.Background()
	for _, size := range []int{1, 17, 96} {
		s, err := NewSlide(ctx, 3, size, 7, region.NewMemory(), region.NewMemory())
		if err != nil {
			t.Fatal(err)
		}
		h := &hwSetup{cpus: 1, accels: hostAccels(1), tiles: 3, size: size, calTiles: 3, specs: hardwareOperations(), regionBuf: realBytes(size)}
		c, err := h.calibrate(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.mismatch) > 0 {
			t.Errorf("size %d: GPU mirrors differ from the CPU in %v", size, c.mismatch)
		}
		if len(c.gpu) != len(gpuOpNames()) {
			t.Errorf("size %d: timed %d operations on the GPU, want %d", size, len(c.gpu), len(gpuOpNames()))
		}
	}
}

// TestCalibrateCommits checks what the calibration gives the simulator
// beyond operation costs: the output storage holds the slide-wide output
// regions before any tile commits (prepareOutput), and the rates at
// which tiles' outputs were committed, alone and under load, reach the
// simulator's machine: by default a commit's rate beside the busy cores
// with every tile's commit at once, with Hardware.SerialCommits the
// storage's rate with one commit at a time.
func TestCalibrateCommits(t *testing.T) {
	ctx := context.Background()
	for _, serial := range []bool{false, true} {
		s, err := NewSlide(ctx, 4, 32, 1, region.NewMemory(), region.NewMemory())
		if err != nil {
			t.Fatal(err)
		}
		h := &hwSetup{cpus: 2, accels: hostAccels(1), tiles: 4, size: 32, calTiles: 3, specs: hardwareOperations(), regionBuf: realBytes(32), serialOut: serial}
		c, err := h.calibrate(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []region.ID{labelsID(), featIDs()["featGradient"]} {
			if _, err := s.out.Stat(ctx, id); err != nil {
				t.Errorf("output %v: %v", id, err)
			}
		}
		if c.commitBWAlone <= 0 || c.commitBW <= 0 || c.commitBWBeside <= 0 || c.commitBWStore <= 0 || c.commitBWEach <= 0 || c.commitBWWorker <= 0 {
			t.Errorf("serial %v: commit rates %g alone, %g under load, %g beside the worker, %g / %g / %g storage / each / worker: want all measured",
				serial, c.commitBWAlone, c.commitBW, c.commitBWBeside, c.commitBWStore, c.commitBWEach, c.commitBWWorker)
		}
		want, streams := c.commitBWWorker, 4
		if serial {
			want, streams = c.commitBWStore, 1
		}
		if c.commitBW != want {
			t.Errorf("serial %v: the simulator's commit rate is %g, want %g", serial, c.commitBW, want)
		}
		if m := h.machine(c); m.CommitBandwidth != c.commitBW || m.StageBandwidth != c.stageBW || m.Bandwidth != c.bandwidth || m.CommitStreams != streams {
			t.Errorf("serial %v: machine %+v does not carry the calibrated rates %+v and %d commit streams", serial, m, c, streams)
		}
	}
}

// serialStore is a region.Storage that writes one region at a time and
// takes d for each write (a slow disk), and counts the time it spent
// writing.
type serialStore struct {
	region.Storage
	d     time.Duration
	mu    sync.Mutex
	busy  time.Duration
	bytes int64
}

func (s *serialStore) Write(ctx context.Context, m region.Meta, box region.Box, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t0 := time.Now()
	time.Sleep(s.d)
	err := s.Storage.Write(ctx, m, box, data)
	s.busy += time.Since(t0)
	s.bytes += int64(len(data))
	return err
}

// commitsUnderLoad runs cpuUnderLoad on 4 cores and 4 tiles of 32 px
// that commit into out, and returns its commit rates.
func commitsUnderLoad(t *testing.T, out region.Storage) commitRates {
	t.Helper()
	ctx := context.Background()
	s, err := NewSlide(ctx, 4, 32, 1, region.NewMemory(), out)
	if err != nil {
		t.Fatal(err)
	}
	h := &hwSetup{cpus: 4, accels: hostAccels(1), tiles: 4, size: 32, calTiles: 3, specs: hardwareOperations(), regionBuf: realBytes(32)}
	_, _, got, err := h.cpuUnderLoad(ctx, s, make(chan struct{}))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestCommitRateUnderLoad checks that the calibration's commit rate under
// load is the storage's own rate when the cores' commits queue for it:
// the bytes over the time it was writing, not over the sum of the cores'
// commit times, which counts their wait for one another (at 4 cores
// committing together that sum is about 2.5 times the writing).
func TestCommitRateUnderLoad(t *testing.T) {
	out := &serialStore{Storage: region.NewMemory(), d: 15 * time.Millisecond}
	got := commitsUnderLoad(t, out)
	out.mu.Lock()
	want := float64(out.bytes) / out.busy.Seconds()
	out.mu.Unlock()
	if r := got.store / want; r < 0.75 || r > 1.05 {
		t.Errorf("commit rate under load %.3g B/s, the storage wrote at %.3g B/s (%.2fx): want about the storage's rate", got.store, want, r)
	}
}

// parallelStore is a region.Storage whose writes take d each and run at
// the same time (as region.Memory's of disjoint boxes do); it counts the
// writes and their bytes.
type parallelStore struct {
	region.Storage
	d      time.Duration
	mu     sync.Mutex
	writes int
	bytes  int64
}

func (s *parallelStore) Write(ctx context.Context, m region.Meta, box region.Box, data []byte) error {
	time.Sleep(s.d)
	s.mu.Lock()
	s.writes++
	s.bytes += int64(len(data))
	s.mu.Unlock()
	return s.Storage.Write(ctx, m, box, data)
}

// TestCommitRateEach checks the calibration's per-commit rate under load
// where the storage writes the cores' commits at once: the bytes over the
// sum of the commits' own times (about the writes' d each), where the
// storage's rate (the union of their spans) is as many times higher as
// commits overlapped.
func TestCommitRateEach(t *testing.T) {
	out := &parallelStore{Storage: region.NewMemory(), d: 15 * time.Millisecond}
	got := commitsUnderLoad(t, out)
	out.mu.Lock()
	want := float64(out.bytes) / (float64(out.writes) * out.d.Seconds())
	out.mu.Unlock()
	if r := got.each / want; r < 0.75 || r > 1.05 {
		t.Errorf("each commit's rate under load %.3g B/s, the writes took %v each (%.3g B/s, %.2fx): want about their rate", got.each, out.d, want, r)
	}
	if got.of(false) != got.each || got.of(true) != got.store {
		t.Errorf("commitRates.of picks %g (parallel) and %g (serial) of %+v", got.of(false), got.of(true), got)
	}
}

// TestWorkerUnderLoad checks the calibration of a GPU worker's work:
// it waits for the cores' stagings, then stages tiles, commits their
// outputs and moves them to and from the GPU until told to stop, and
// reports the three rates.
func TestWorkerUnderLoad(t *testing.T) {
	ctx := context.Background()
	s, err := NewSlide(ctx, 4, 32, 1, region.NewMemory(), region.NewMemory())
	if err != nil {
		t.Fatal(err)
	}
	h := &hwSetup{cpus: 2, accels: hostAccels(1), tiles: 4, size: 32, specs: hardwareOperations(), regionBuf: realBytes(32)}
	staged, done := make(chan struct{}), make(chan struct{})
	close(done)
	if x, st, cm, err := h.workerUnderLoad(ctx, s, staged, done); err != nil || x != 0 || st != 0 || cm != 0 {
		t.Errorf("stopped before the cores staged: %g, %g, %g, %v; want nothing measured", x, st, cm, err)
	}
	if err := prepareOutput(ctx, s); err != nil {
		t.Fatal(err)
	}
	staged, done = make(chan struct{}), make(chan struct{})
	close(staged)
	time.AfterFunc(100*time.Millisecond, func() { close(done) })
	x, st, cm, err := h.workerUnderLoad(ctx, s, staged, done)
	if err != nil || x <= 0 || st <= 0 || cm <= 0 {
		t.Errorf("transfers %g B/s, staging %g B/s, commits %g B/s, %v: want all measured", x, st, cm, err)
	}
}

// TestWarmHeap checks the size of the heap touched before the runs: a
// window of tiles (all tiles for an unbounded window), each with every
// datum and its RGB staging buffer, or only the feature tables where the
// image regions are in the GPU's host memory.
func TestWarmHeap(t *testing.T) {
	rb := realBytes(32)
	per := rb["rgb"]
	for _, b := range rb {
		per += b
	}
	var feats int64 // the Go memory of a tile whose image regions are in the GPU's host memory
	for k := range featIDs() {
		feats += rb[k]
	}
	for _, c := range []struct{ window, want int }{{2, 2}, {0, 4}, {9, 4}} {
		h := &hwSetup{tiles: 4, window: c.window, regionBuf: rb}
		if got := h.warmHeap(); got != int64(c.want)*per {
			t.Errorf("window %d: touched %d bytes, want %d tiles of %d", c.window, got, c.want, per)
		}
		h.accels = hostAccels(1)
		if got := h.warmHeap(); got != int64(c.want)*feats {
			t.Errorf("window %d, regions in host memory: touched %d bytes, want %d tiles of %d", c.window, got, c.want, feats)
		}
	}
}

// wrongAccel is an accelerator whose implementation of op gives a wrong
// output (the low bit of every byte flipped).
type wrongAccel struct {
	accel
	op string
}

func (a wrongAccel) run(ctx context.Context, op string, bufs []gpuBuf, w, h int) error {
	if err := a.accel.run(ctx, op, bufs, w, h); err != nil || op != a.op {
		return err
	}
	out := bufs[len(bufs)-1].host
	for i := range out {
		out[i] ^= 1
	}
	return nil
}

// TestHardwareLeavesDifferingOpsToCores: an operation whose GPU output
// differs from the CPU's in the calibration runs on the cores only in
// every configuration, so that the nuclei stay the CPU's and the rest of
// the experiment still measures; the tables say so and Err reports it.
func TestHardwareLeavesDifferingOpsToCores(t *testing.T) {
	ctx := context.Background()
	gpus := &GPUs{accels: []accel{wrongAccel{hostAccels(1)[0], "Watershed"}}, kind: "a GPU with a wrong Watershed"}
	h := Hardware{CPUs: 2, GPUs: gpus, Tiles: 4, TileSize: 32, Window: 4, Seed: 5, Configs: []string{"fcfs", "pats"}}
	res, err := h.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Err(); err == nil || !strings.Contains(err.Error(), "Watershed") {
		t.Errorf("Err %v, want the Watershed mismatch", err)
	}
	if !res.res.same {
		t.Error("the configurations found different nuclei: the wrong Watershed ran")
	}
	for _, r := range res.res.runs {
		for _, o := range r.rep.Ops {
			if o.Name == "Watershed" && o.GPU > 0 {
				t.Errorf("%s: Watershed ran %d times on the GPU", r.name, o.GPU)
			}
		}
	}
	if _, ok := res.res.cal.speedups()["Watershed"]; ok {
		t.Error("Watershed has a speedup")
	}
	var md strings.Builder
	if err := res.WriteMarkdown(&md, "test"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"output differs: CPU only", "GPU outputs DIFFER from the CPU's: Watershed", "ran those operations on the CPU cores only"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("the tables lack %q:\n%s", want, md.String())
		}
	}
}

// TestKernelSpin checks HTGS_PATHO_SPIN's reading: the default when
// unset, a Go duration, 0 to block at once, and errors naming the variable
// for a malformed or negative value.
func TestKernelSpin(t *testing.T) {
	for v, want := range map[string]time.Duration{"": defaultKernelSpin, "2ms": 2 * time.Millisecond, "0": 0, "1s": time.Second} {
		if got, err := kernelSpin(v); err != nil || got != want {
			t.Errorf("kernelSpin(%q) = %v, %v; want %v", v, got, err, want)
		}
	}
	for _, v := range []string{"fast", "-1ms", "20"} {
		if _, err := kernelSpin(v); err == nil || !strings.Contains(err.Error(), "HTGS_PATHO_SPIN") {
			t.Errorf("kernelSpin(%q): %v, want an error naming HTGS_PATHO_SPIN", v, err)
		}
	}
}
