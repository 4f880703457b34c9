package pathology

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/internal/stat"
	"github.com/gohtgs/htgs/pats"
	"github.com/gohtgs/htgs/region"
)

// This file holds the experiment on real hardware (Hardware): the
// pipeline's operations run for real on 4K x 4K tiles, on the CPU cores of
// this machine and on its GPUs (or on host memory posing as GPUs), under
// FCFS and PATS with its optimizations; the simulator predicts each run
// from operation costs measured on this machine beforehand.

// hwSetup is the machine and the workload of a hardware experiment.
type hwSetup struct {
	cpus       int
	accels     []accel
	tiles      int
	size       int
	window     int
	seed       uint64
	calTiles   int      // tiles timed op by op before the runs (the first is a warm-up)
	noOrder    bool     // skip "PATS, speedup order only" (Hardware.SkipOrderOnly)
	configs    []string // HardwareConfigs names in order (nil: every configuration)
	traceDir   string   // where trace.csv goes (empty: no trace file)
	gpuKind    string
	log        io.Writer
	specs      []Operation
	regionBuf  map[string]int64 // real size of each datum
	goMemory   bool             // the tiles' regions in Go memory, not the GPU's host memory
	firstUse   bool             // tiles staged by their first reader's worker (Hardware.StageOnFirstUse)
	syncUp     bool             // a prefetching GPU worker as three goroutines (Hardware.SyncUploads)
	storeCores bool             // stagings and commits by the CPU workers (Hardware.StorageOnCores)
	serialOut  bool             // the output storage writes one box at a time (Hardware.SerialCommits)
}

// calibration is what the sequential pass measured: mean compute time of
// each operation per device kind, host-GPU bandwidth, and the check of
// every GPU output against the CPU one.
type calibration struct {
	cpu, gpu map[string]time.Duration
	cpuAlone map[string]time.Duration // on one core with the others idle
	// xfer is each GPU operation's transfers in the sequential pass: its
	// inputs uploaded and its output downloaded, the mean per tile (none
	// in a replay of a log from before it was printed).
	xfer      map[string]time.Duration
	loaded    int     // tiles timed concurrently for cpu (0: cpu is cpuAlone)
	bandwidth float64 // bytes per second, uploads and downloads together (under load where measured)
	stageBW   float64 // bytes per second staging a tile's RGB from storage (under load where measured)
	// bandwidthAlone and stageBWAlone are the same measured with the
	// other cores idle; bandwidth and stageBW replace them by the rates
	// under the load of every core (the run's condition) where measured.
	bandwidthAlone, stageBWAlone float64
	// stageBWAll is the rate of each core's staging when every core
	// stages a tile at once (the start of the calibration under load; 0
	// where not measured): with stageBW, what many stagings at once, as
	// at a run's start, get each.
	stageBWAll float64
	// commitBW is the rate, in bytes per second, at which a tile's
	// outputs (labels and feature tables) were committed to the output
	// storage, under load where measured, commitBWAlone with the other
	// cores idle: the simulator's Machine.CommitBandwidth. Under load it
	// is, with a storage that writes one box at a time
	// (Hardware.SerialCommits), the storage's rate while the cores commit
	// together (commitBWStore); by default, one commit's rate beside the
	// busy cores, as a run's completed tiles commit (commitBWWorker, or
	// where none was measured commitBWEach).
	commitBW, commitBWAlone float64
	// commitBWStore is the bytes the cores committed under load over the
	// time the storage was writing (the union of their commits' spans);
	// commitBWEach the same bytes over the sum of the commits' times (each
	// commit's own rate when they run at once); commitBWWorker the rate of
	// the commits a GPU worker's goroutine made, one at a time beside the
	// busy cores, in the second pass; commitBWBeside the cores' rate as
	// commitBW takes it, in that second pass.
	commitBWStore, commitBWEach, commitBWWorker, commitBWBeside float64
	mismatch                                                    []string
	// differs holds the GPU time of each operation whose GPU output
	// differed from the CPU's: the runs leave it to the cores, and it
	// has no speedup (it is out of gpu and xfer).
	differs map[string]time.Duration
	ti      float64 // mean fraction of a GPU operation's time spent moving its data
	// content is the dark-pixel share of every tile of the slide
	// (tileContent), fit each operation's CPU cost under load as a line in
	// it (costmodel.go); without them (no load measured) every tile costs
	// cpu.
	content []float64
	fit     map[string]costFit
	// gfit is each GPU operation's compute time as a line in the tile's
	// content, fitted over the loaded tiles run one after another on the
	// first GPU (gpuByContent); without it every tile costs gpu.
	gfit map[string]costFit
}

// speedupsWithTransfers returns each GPU operation's speedup counting
// its transfers, C / (G + X), as the "computation+data transfer" bars of
// seed 001's Fig. 5: the estimates of configuration patst.
func (c *calibration) speedupsWithTransfers() map[string]float64 {
	out := map[string]float64{}
	for op, g := range c.gpu {
		if t := g + c.xfer[op]; t > 0 {
			out[op] = float64(c.cpu[op]) / float64(t)
		}
	}
	return out
}

// speedups returns the measured speedup of each operation with a GPU
// implementation (CPU-only operations have none).
func (c *calibration) speedups() map[string]float64 {
	out := map[string]float64{}
	for op, g := range c.gpu {
		if g > 0 {
			out[op] = float64(c.cpu[op]) / float64(g)
		}
	}
	return out
}

// hwOps returns the operations of a hardware run: every one with its CPU
// implementation, those of gpuOpNames() also with their GPU one on accels
// unless in off (their GPU outputs differed from the CPU's). With rec,
// every instance's compute time is recorded there.
func hwOps(specs []Operation, est map[string]float64, accels []accel, rec *instTimes, off map[string]time.Duration) map[string]*pats.Op[*tileJob] {
	cpu := kernelOps(nil)
	ops := map[string]*pats.Op[*tileJob]{}
	for _, o := range specs {
		impls := map[device.Kind]pats.Impl[*tileJob]{device.CPU: cpu[o.Name].Impls[device.CPU]}
		if _, bad := off[o.Name]; hasGPUImpl(o.Name) && len(accels) > 0 && !bad {
			impls[device.GPU] = gpuImpl(o, accels)
		}
		if rec != nil {
			for k, impl := range impls {
				impls[k] = rec.wrap(o.Name, k == device.GPU, impl)
			}
		}
		ops[o.Name] = &pats.Op[*tileJob]{Name: o.Name, Speedup: est[o.Name], Impls: impls}
	}
	return ops
}

// hardwareOperations returns Operations as the hardware experiment runs
// them: ReconToNuclei also reads the RGB tile (the darkness its opening
// is reconstructed under), which its GPU implementation uploads; the
// paper's modelled workload leaves that read out.
func hardwareOperations() []Operation {
	ops := Operations()
	for i, o := range ops {
		if o.Name == "ReconToNuclei" {
			ops[i].Reads = append([]string{"rgb"}, o.Reads...)
		}
	}
	return ops
}

// realBytes returns the size of each datum of a size x size tile.
func realBytes(size int) map[string]int64 {
	n := int64(size) * int64(size)
	out := map[string]int64{"rgb": 3 * n}
	for _, k := range []string{"rbc", "opened", "candidates", "area", "filled"} {
		out[k] = n
	}
	for _, k := range []string{"distance", "watershed", "labels"} {
		out[k] = 2 * n
	}
	for k := range featIDs() {
		out[k] = int64(objectRows(size)) * numFeatures * 8
	}
	return out
}

// host returns the host memory the tiles' regions live in: the first
// GPU's, nil for Go memory.
func (h *hwSetup) host() hostAllocator {
	if h.goMemory {
		return nil
	}
	return hostOf(h.accels)
}

// warmHost fills the pool of host() with the regions of a window of
// tiles, so that no run pays for allocating page-locked memory (the first
// would otherwise pay alone), and logs its size.
func (h *hwSetup) warmHost(s *Slide) error {
	host := h.host()
	if host == nil {
		h.logf("the tiles' regions are in Go memory")
		return nil
	}
	t0 := time.Now()
	n := h.window
	if n <= 0 {
		n = s.tiles
	}
	var jobs []*tileJob
	defer func() {
		for _, j := range jobs {
			j.release(true)
		}
	}()
	for i := range n {
		j, err := s.newTileJob(i%s.tiles, host)
		if err != nil {
			return err
		}
		jobs = append(jobs, j)
	}
	held, _ := host.hostStats()
	h.logf("the tiles' regions are in the host memory of %s: %.0f MB for %d tiles in %v", h.accels[0].Name(), float64(held)/1e6, n, time.Since(t0).Round(time.Millisecond))
	return nil
}

func (h *hwSetup) logf(format string, args ...any) {
	if h.log != nil {
		fmt.Fprintf(h.log, format+"\n", args...)
	}
}

// calibrate processes calTiles tiles one operation at a time: each on one
// CPU core and, where it has a GPU implementation, on the first GPU
// (inputs uploaded, output downloaded and compared with the CPU's).
//
// The CPU costs the simulator uses are then measured again under the load
// of a run (cpuUnderLoad): with every core busy, a core is slower than
// alone (a lower clock, shared memory bandwidth and caches, the garbage
// collector).
func (h *hwSetup) calibrate(ctx context.Context, s *Slide) (*calibration, error) {
	if err := prepareOutput(ctx, s); err != nil { // the tiles' commits find the output regions, as in a run
		return nil, err
	}
	c, err := h.calibrateAlone(ctx, s)
	if err != nil {
		return nil, err
	}
	c.cpuAlone = c.cpu
	c.bandwidthAlone, c.stageBWAlone, c.commitBWAlone = c.bandwidth, c.stageBW, c.commitBW
	if h.cpus > 1 {
		if c.content, err = tileContent(ctx, s); err != nil {
			return nil, err
		}
		// The operations' costs under load come from the cores alone: with
		// a GPU's worker staging and moving tiles beside them as well, the
		// 15 cores, which run the same operation at the same moment here,
		// measured 10% to 2x slower per operation than beside a bare
		// transfer probe, and the runs' CPU time came to 0.70-0.84 of the
		// prediction (GPU call of 2026-11-27 09:15Z), against 0.94-1.00
		// the call before: in a run the operations are spread out in time.
		times, stageBW, commits, err := h.cpuUnderLoad(ctx, s, make(chan struct{}))
		if err != nil {
			return nil, err
		}
		// The worker's rates, beside the busy cores, as in a run: the
		// cores run again, their times dropped.
		done, staged := make(chan struct{}), make(chan struct{})
		var xferBW, workerStageBW, workerCommitBW float64
		var xferErr error
		var xwg sync.WaitGroup
		xwg.Add(1)
		go func() {
			defer xwg.Done()
			xferBW, workerStageBW, workerCommitBW, xferErr = h.workerUnderLoad(ctx, s, staged, done)
		}()
		_, _, beside, err := h.cpuUnderLoad(ctx, s, staged)
		close(done)
		xwg.Wait()
		if err != nil {
			return nil, err
		}
		if xferErr != nil {
			return nil, xferErr
		}
		if xferBW > 0 {
			c.bandwidth = xferBW
		}
		c.stageBWAll = stageBW
		if workerStageBW > 0 { // one staging at a time while the cores compute, as in a run
			stageBW = workerStageBW
		}
		if stageBW > 0 {
			c.stageBW = stageBW
		}
		c.commitBWStore, c.commitBWEach, c.commitBWWorker = commits.store, commits.each, workerCommitBW
		c.commitBWBeside = beside.of(h.serialOut)
		if r := commits.of(h.serialOut); r > 0 {
			c.commitBW = r
		}
		if !h.serialOut && workerCommitBW > 0 { // one commit at a time beside the busy cores, as a run's
			c.commitBW = workerCommitBW
		}
		c.cpu, c.fit = map[string]time.Duration{}, map[string]costFit{}
		x := make([]float64, len(times))
		for k := range times {
			x[k] = c.content[k%s.tiles]
		}
		for _, o := range h.specs {
			ts := make([]time.Duration, len(times))
			for k, m := range times {
				ts[k] = m[o.Name]
				c.cpu[o.Name] += m[o.Name] / time.Duration(len(times))
			}
			c.fit[o.Name] = fitCost(x, ts)
		}
		c.loaded = h.cpus
		if len(h.accels) > 0 {
			gt, err := h.gpuByContent(ctx, s, h.cpus, c.differs)
			if err != nil {
				return nil, err
			}
			c.gfit = map[string]costFit{}
			for op := range c.gpu {
				ts := make([]time.Duration, len(gt))
				for k, m := range gt {
					ts[k] = m[op]
				}
				c.gfit[op] = fitCost(x, ts)
			}
		}
	}
	return c, nil
}

// registeredJob returns the job of tile i of s (modulo its tiles) in the
// run's host memory, added to reg for the transfers, and the function
// that removes and releases it.
func (h *hwSetup) registeredJob(s *Slide, reg *jobRegistry, i int) (*tileJob, func(), error) {
	j, err := s.newTileJob(i%s.tiles, h.host())
	if err != nil {
		return nil, nil, err
	}
	reg.add(j)
	return j, func() {
		reg.remove(j.tpl.Name())
		j.release(true)
	}, nil
}

// gpuByContent times every GPU operation of tiles 0..n-1 of s (modulo
// its tiles), the tiles the cores ran under load, on the first GPU, one
// tile after another through the whole pipeline: each operation with a
// GPU implementation whose output equals the CPU's (not in differs) runs
// there, inputs uploaded and output downloaded, the others on a core. A
// GPU operation's time depends on the tile as a core's does: the
// reconstructions iterate until nothing changes, and on the H200 of the
// call of 2026-11-27 14:13Z ReconToNuclei took 0.5 ms on the calibration's
// two tiles and 4.3 ms in the runs on average (34 ms the longest), which
// left the simulator 17% short of the runs where the GPU was busiest.
func (h *hwSetup) gpuByContent(ctx context.Context, s *Slide, n int, differs map[string]time.Duration) ([]map[string]time.Duration, error) {
	a := h.accels[0]
	reg := &jobRegistry{}
	xfer := reg.transfer(a)
	if b := a.bind(); b != nil {
		unbind, err := b(ctx, a)
		if err != nil {
			return nil, fmt.Errorf("GPU times by content on %s: %w", a.Name(), err)
		}
		defer unbind()
	}
	ops := hwOps(h.specs, nil, h.accels, nil, nil)
	times := make([]map[string]time.Duration, n)
	for k := range n {
		err := func() error {
			j, drop, err := h.registeredJob(s, reg, k)
			if err != nil {
				return err
			}
			defer drop()
			if err := j.rgb.Stage(ctx); err != nil {
				return err
			}
			times[k] = map[string]time.Duration{}
			for _, o := range h.specs {
				op := ops[o.Name]
				g := op.Impls[device.GPU]
				if _, bad := differs[o.Name]; g == nil || bad {
					if err := op.Impls[device.CPU](ctx, device.Host{}, j); err != nil {
						return fmt.Errorf("%s on cpu: %w", o.Name, err)
					}
					continue
				}
				for _, r := range o.Reads {
					if err := xfer(ctx, j.data(r, h.regionBuf), true); err != nil {
						return fmt.Errorf("%s: %w", o.Name, err)
					}
				}
				t0 := time.Now()
				if err := g(ctx, a, j); err != nil {
					return fmt.Errorf("%s on %s: %w", o.Name, a.Name(), err)
				}
				times[k][o.Name] = time.Since(t0)
				if err := xfer(ctx, j.data(o.Writes, h.regionBuf), false); err != nil {
					return fmt.Errorf("%s: %w", o.Name, err)
				}
			}
			return nil
		}()
		if err != nil {
			return nil, fmt.Errorf("GPU times by content, tile %d: %w", k%s.tiles, err)
		}
	}
	return times, nil
}

// cpuUnderLoad runs one tile per CPU core at once (core k takes tile k
// modulo the slide's tiles), each through the whole pipeline on its core,
// and returns the time of each operation on each core's tile, and the
// rates at which the cores staged their tiles' RGB from storage (all at
// once, at the start) and the storage took their outputs meanwhile. It
// closes staged once every core has staged its tile (or failed to).
//
// The commit rates are the bytes over the time the storage was writing
// (the union of the commits' spans: a storage that writes one box at a
// time, as a disk does, makes cores that finish together wait for one
// another, and the sum of their commit times counts that wait as
// writing; on the H200 of the tenth session the sum gave 1.46 GB/s in
// one calibration and 3.0-4.7 in the others) and over the sum of the
// commits' times (each commit's own rate, where they run at once).
func (h *hwSetup) cpuUnderLoad(ctx context.Context, s *Slide, staged chan<- struct{}) (times []map[string]time.Duration, stageBW float64, commits commitRates, err error) {
	ops := hwOps(h.specs, nil, nil, nil, nil)
	times = make([]map[string]time.Duration, h.cpus)
	errs := make([]error, h.cpus)
	stagedIn := make([]time.Duration, h.cpus)
	committed := make([]span, h.cpus) // from origin
	origin := time.Now()
	var swg sync.WaitGroup
	swg.Add(h.cpus)
	stagedClosed := make(chan struct{})
	go func() {
		defer close(stagedClosed)
		swg.Wait()
		close(staged)
	}()
	defer func() { <-stagedClosed }() // staged closed before the caller ends a worker beside it
	committedBytes := make([]int64, h.cpus)
	var stagedBytes int64
	var wg sync.WaitGroup
	for k := range h.cpus {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[k] = func() error {
				once := sync.OnceFunc(swg.Done)
				defer once()
				j, err := s.newTileJob(k%s.tiles, h.host())
				if err != nil {
					return err
				}
				defer j.release(true)
				t0 := time.Now()
				if err := j.rgb.Stage(ctx); err != nil {
					return err
				}
				stagedIn[k] = time.Since(t0)
				once()
				times[k] = map[string]time.Duration{}
				for _, o := range h.specs {
					t0 := time.Now()
					if err := ops[o.Name].Impls[device.CPU](ctx, device.Host{}, j); err != nil {
						return fmt.Errorf("calibrate %s on cpu: %w", o.Name, err)
					}
					times[k][o.Name] = time.Since(t0)
				}
				t0 = time.Now()
				b, err := j.commitOutputs(ctx)
				committed[k], committedBytes[k] = span{t0.Sub(origin), time.Since(origin)}, b
				return err
			}()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, 0, commitRates{}, err
	}
	var st, ct time.Duration
	var cb int64
	for k := range stagedIn {
		st += stagedIn[k]
		stagedBytes += 3 * int64(h.size) * int64(h.size)
		cb += committedBytes[k]
		ct += committed[k].end - committed[k].start
	}
	return times, rate(stagedBytes, st), commitRates{store: rate(cb, stat.Covered(committed, span.bounds)), each: rate(cb, ct)}, nil
}

// commitRates are the rates, in bytes per second, of commits made at
// once: store, the bytes over the union of the commits' spans (the
// storage's rate when it writes one box at a time); each, the bytes over
// the sum of the commits' times (a commit's own rate when they run
// together).
type commitRates struct{ store, each float64 }

// of returns the rate a simulation uses: store for a storage that writes
// one box at a time (serial), else each.
func (r commitRates) of(serial bool) float64 {
	if serial {
		return r.store
	}
	return r.each
}

// span is a stretch of time, from start to end (from some origin).
type span struct{ start, end time.Duration }

func (x span) bounds() (time.Duration, time.Duration) { return x.start, x.end }

// rate returns b bytes over d in bytes per second, 0 without a time.
func rate(b int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(b) / d.Seconds()
}

// commitOutputs commits the tile's outputs that a run commits when the
// tile completes (committed: the labels and the feature tables) to the
// slide's output storage, and returns their size.
func (j *tileJob) commitOutputs(ctx context.Context) (int64, error) {
	labels := j.u16["labels"]
	if err := labels.Commit(ctx); err != nil {
		return 0, fmt.Errorf("commit the labels of tile %d: %w", j.index, err)
	}
	b := labels.Bytes()
	for k, r := range j.feats {
		if err := r.Commit(ctx); err != nil {
			return b, fmt.Errorf("commit %s of tile %d: %w", k, j.index, err)
		}
		b += r.Bytes()
	}
	return b, nil
}

// workerUnderLoad does what a GPU's worker does in a run, while every
// core runs cpuUnderLoad: once the cores have staged their tiles
// (staged closed), it stages the RGB of one tile after another (tiles the
// cores do not have) and, with a GPU, uploads it to the first GPU and
// downloads it back, and commits the tile's outputs, until done is
// closed. It returns the rates of the transfers (uploads and downloads
// together; 0 without a GPU), of the stagings and of the commits in bytes
// per second (0 if none completed). These are the
// conditions of a run: one staging at a time on a goroutine beside the
// busy cores (a run's stagings overlapped 1 to 2 at a time on the H200
// of GPU call 3, where the cores' stagings all at once gave 0.51 GB/s a
// core and the run's 0.54 to 0.68), and transfers of data fresh from
// storage, not of one tile's RGB back and forth (8.2 GB/s there, the
// run's uploads of a tile's RGB 5.5 to 6.5 GB/s, median).
func (h *hwSetup) workerUnderLoad(ctx context.Context, s *Slide, staged, done <-chan struct{}) (xferBW, stageBW, commitBW float64, err error) {
	select {
	case <-staged:
	case <-done:
		select {
		case <-staged: // closed before done: both were, when this goroutine got here
		default:
			return 0, 0, 0, nil
		}
	}
	var a accel
	reg := &jobRegistry{}
	var xfer func(context.Context, pats.Data, bool) error
	if len(h.accels) > 0 {
		a = h.accels[0]
		xfer = reg.transfer(a)
		if b := a.bind(); b != nil {
			unbind, err := b(ctx, a)
			if err != nil {
				return 0, 0, 0, fmt.Errorf("transfers under load on %s: %w", a.Name(), err)
			}
			defer unbind()
		}
	}
	var moved, stagedBytes, committedBytes int64
	var took, stageTime, commitTime time.Duration
	for n := 0; ; n++ {
		select {
		case <-done:
			if n > 0 { // one tile at least, however soon the cores finish
				return rate(moved, took), rate(stagedBytes, stageTime), rate(committedBytes, commitTime), nil
			}
		default:
		}
		err := func() error {
			j, drop, err := h.registeredJob(s, reg, h.cpus+n)
			if err != nil {
				return err
			}
			defer drop()
			t0 := time.Now()
			if err := j.rgb.Stage(ctx); err != nil {
				return err
			}
			stageTime += time.Since(t0)
			stagedBytes += j.rgb.Bytes()
			// The tile's outputs committed as a run's completed tile's
			// are, one commit at a time beside the busy cores (its
			// outputs are zeros: the rate is what is measured).
			t0 = time.Now()
			b, err := j.commitOutputs(ctx)
			if err != nil {
				return err
			}
			commitTime += time.Since(t0)
			committedBytes += b
			if a == nil {
				return nil
			}
			d := j.data("rgb", h.regionBuf)
			t0 = time.Now()
			if err := xfer(ctx, d, true); err != nil {
				return fmt.Errorf("transfers under load on %s: %w", a.Name(), err)
			}
			if err := xfer(ctx, d, false); err != nil {
				return fmt.Errorf("transfers under load on %s: %w", a.Name(), err)
			}
			if n > 0 { // the first pair allocates the GPU's buffer; later tiles reuse it
				took += time.Since(t0)
				moved += 2 * d.Bytes
			}
			return nil
		}()
		if err != nil {
			return 0, 0, 0, err
		}
	}
}

// calibrateAlone is the sequential pass of calibrate.
func (h *hwSetup) calibrateAlone(ctx context.Context, s *Slide) (*calibration, error) {
	c := &calibration{cpu: map[string]time.Duration{}, gpu: map[string]time.Duration{}, xfer: map[string]time.Duration{}, differs: map[string]time.Duration{}}
	ops := hwOps(h.specs, nil, h.accels, nil, nil)
	var stagedBytes, commitBytes int64
	var stageTime, commitTime time.Duration
	reg := &jobRegistry{}
	var a accel
	var xfer func(context.Context, pats.Data, bool) error
	if len(h.accels) > 0 {
		a = h.accels[0]
		xfer = reg.transfer(a)
	}
	var xferBytes int64
	var xferTime time.Duration
	counted := 0
	var tiFr []float64
	for i := range h.calTiles {
		j, err := s.newTileJob(i%s.tiles, h.host())
		if err != nil {
			return nil, err
		}
		reg.add(j)
		warm := i == 0 && h.calTiles > 1
		if !warm {
			counted++
		}
		t0 := time.Now()
		if err := j.rgb.Stage(ctx); err != nil { // as a worker does before the first reader
			return nil, err
		}
		if !warm {
			stagedBytes += j.rgb.Bytes()
			stageTime += time.Since(t0)
		}
		for _, o := range h.specs {
			op := ops[o.Name]
			t0 := time.Now()
			if err := op.Impls[device.CPU](ctx, device.Host{}, j); err != nil {
				return nil, fmt.Errorf("calibrate %s on cpu: %w", o.Name, err)
			}
			dc := time.Since(t0)
			if !warm {
				c.cpu[o.Name] += dc
			}
			g := op.Impls[device.GPU]
			if g == nil {
				continue
			}
			err := func() error {
				unbind := func() {}
				if b := a.bind(); b != nil {
					u, err := b(ctx, a)
					if err != nil {
						return err
					}
					unbind = u
				}
				defer unbind()
				var moved int64
				t0 := time.Now()
				for _, k := range o.Reads {
					d := j.data(k, h.regionBuf)
					if err := xfer(ctx, d, true); err != nil {
						return err
					}
					moved += d.Bytes
				}
				up := time.Since(t0)
				t1 := time.Now()
				if err := g(ctx, a, j); err != nil {
					return err
				}
				dg := time.Since(t1)
				host, err := j.hostBytes(ctx, o.Writes)
				if err != nil {
					return err
				}
				cpuOut := slices.Clone(host)
				t2 := time.Now()
				if err := xfer(ctx, j.data(o.Writes, h.regionBuf), false); err != nil {
					return err
				}
				down := time.Since(t2)
				moved += int64(len(host))
				if !sameOutput(o.Writes, cpuOut, host) {
					c.mismatch = append(c.mismatch, fmt.Sprintf("%s (tile %d)", o.Name, i))
					c.differs[o.Name] = 0
				}
				copy(host, cpuOut) // the CPU's result feeds the next operations
				if !warm {
					c.gpu[o.Name] += dg
					c.xfer[o.Name] += up + down
					xferBytes += moved
					xferTime += up + down
					tiFr = append(tiFr, float64(up+down)/float64(up+down+dg))
				}
				return nil
			}()
			if err != nil {
				return nil, fmt.Errorf("calibrate %s on %s: %w", o.Name, a.Name(), err)
			}
		}
		if !warm {
			t0 := time.Now()
			b, err := j.commitOutputs(ctx)
			if err != nil {
				return nil, err
			}
			commitTime += time.Since(t0)
			commitBytes += b
		}
		reg.remove(j.tpl.Name())
		j.release(true)
	}
	c.commitBW = rate(commitBytes, commitTime)
	for op := range c.cpu {
		c.cpu[op] /= time.Duration(max(counted, 1))
	}
	for op := range c.gpu {
		c.gpu[op] /= time.Duration(max(counted, 1))
		c.xfer[op] /= time.Duration(max(counted, 1))
	}
	for op := range c.differs { // left to the cores in the runs
		c.differs[op] = c.gpu[op]
		delete(c.gpu, op)
		delete(c.xfer, op)
	}
	if xferTime > 0 {
		c.bandwidth = float64(xferBytes) / xferTime.Seconds()
	}
	if len(tiFr) > 0 {
		c.ti = math.Round(mean(tiFr)*100) / 100
	}
	if stageTime > 0 {
		c.stageBW = float64(stagedBytes) / stageTime.Seconds()
	}
	return c, nil
}

// sameOutput compares a CPU and a GPU output: exactly, except the feature
// tables (sums in another order), within a relative 1e-9.
func sameOutput(key string, cpu, gpu []byte) bool {
	if _, ok := featIDs()[key]; !ok {
		return bytes.Equal(cpu, gpu)
	}
	a, b := view[float64](cpu), view[float64](gpu)
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-9*max(1, math.Abs(a[i])) {
			return false
		}
	}
	return true
}

// wrongEstimates returns the measured speedups with an error of pct
// percent in the manner of seed 001 §IV.F: the operations below the median
// speedup are overestimated, the others underestimated, which squeezes
// the order PATS relies on.
func wrongEstimates(sp map[string]float64, pct int) map[string]float64 {
	var vs []float64
	for _, v := range sp {
		vs = append(vs, v)
	}
	sort.Float64s(vs)
	med := 0.0
	if len(vs) > 0 {
		med = vs[len(vs)/2]
	}
	e := float64(pct) / 100
	out := map[string]float64{}
	for k, v := range sp {
		if v < med {
			out[k] = v * (1 + e)
		} else {
			out[k] = max(v*(1-e), 1e-9)
		}
	}
	return out
}

// simFlows returns the hardware workload for the simulator: the same
// operations (CPU-only where they are), tile i's instance of op costing
// cost(i, op).
func (h *hwSetup) simFlows(c *calibration, est map[string]float64, cost func(tile int, op string) pats.Cost) []*pats.Flow {
	ops := map[string]*pats.Op[int]{}
	for _, o := range h.specs {
		impls := map[device.Kind]pats.Impl[int]{device.CPU: noop}
		if _, ok := c.gpu[o.Name]; ok && len(h.accels) > 0 {
			impls[device.GPU] = noop
		}
		ops[o.Name] = &pats.Op[int]{Name: o.Name, Speedup: est[o.Name], Impls: impls}
	}
	fs := make([]*pats.Flow, h.tiles)
	for i := range fs {
		f := pats.NewFlow(tileName(i))
		for _, o := range h.specs {
			var reads []pats.Data
			for _, k := range o.Reads {
				d := pats.Data{Key: k, Bytes: h.regionBuf[k]}
				if k == "rgb" {
					d.Store = noStore{} // staged from storage, as in the run
				}
				reads = append(reads, d)
			}
			out := pats.Data{Key: o.Writes, Bytes: h.regionBuf[o.Writes]}
			if committed(o.Writes) {
				out.Store = noStore{} // committed to the output storage, as in the run
			}
			pats.Add(f, ops[o.Name], i, pats.Reads(reads...), pats.Writes(out),
				pats.WithCost(cost(i, o.Name)))
		}
		fs[i] = f
	}
	return fs
}

// committed reports whether the run commits datum k to the output
// storage when its tile completes (tileJob.data gives it a Store): the
// labels and the feature tables.
func committed(k string) bool {
	_, feat := featIDs()[k]
	return k == "labels" || feat
}

// noStore is the storage of a simulated input or output: the simulator
// models its staging and commit times (pats.Machine.StageBandwidth and
// CommitBandwidth) and never calls it.
type noStore struct{}

func (noStore) Stage(context.Context) error  { return nil }
func (noStore) Commit(context.Context) error { return nil }

// predicted returns the cost of tile i's instance of op that the
// calibration predicts: the content models' (on a core under load, on a
// GPU one tile at a time), or the sequential pass's mean where there is
// none.
func (c *calibration) predicted(tile int, op string) pats.Cost {
	return pats.Cost{CPU: c.cpuCost(op, tile), GPU: c.gpuCost(op, tile)}
}

// hwRun is one configuration's measured and simulated result.
type hwRun struct {
	name      string
	cfg       pats.Config
	rep       *pats.Report
	sim       *pats.Report  // from the calibration's costs
	simObs    *pats.Report  // from the op times observed in this run, instance by instance
	cpuFactor float64       // the run's CPU time over the predicted (instTimes.cpuFactor)
	gpuOcc    float64       // share of the makespan the GPUs computed or moved data (instTimes.gpuOccupied)
	goCPU     goCPU         // the Go runtime's CPU time during the run, by class
	procCPU   time.Duration // the process's CPU time (user and system) during the run, 0 where unknown
	nuclei    []int
	wall      time.Duration
	estimates map[string]float64
}

// hwResults is the outcome of a hardware experiment.
type hwResults struct {
	cal  *calibration
	runs []hwRun
	same bool // every configuration found the same nuclei in every tile
}

// run runs the experiment: generation, calibration, a warm heap
// (warmHeap), then every configuration, each after a garbage collection,
// committing into the output regions prepareOutput made (each run
// overwrites every tile's outputs).
func (h *hwSetup) run(ctx context.Context) (*hwResults, error) {
	h.specs = hardwareOperations()
	h.regionBuf = realBytes(h.size)
	if h.traceDir != "" { // the spans of this experiment only
		if err := os.Remove(filepath.Join(h.traceDir, "trace.csv")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("trace: %w", err)
		}
	}
	t0 := time.Now()
	in := region.NewMemory()
	mem := region.NewMemory()
	var out region.Storage = mem
	if h.serialOut {
		out = &serialWrites{Memory: mem}
	}
	s, err := NewSlide(ctx, h.tiles, h.size, h.seed, in, out)
	if err != nil {
		return nil, err
	}
	h.logf("generated %d tiles of %dx%d px in %v", h.tiles, h.size, h.size, time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	cal, err := h.calibrate(ctx, s)
	if err != nil {
		return nil, err
	}
	h.logf("calibrated on %d tiles in %v", h.calTiles, time.Since(t0).Round(time.Millisecond))
	if err := h.warmHost(s); err != nil {
		return nil, err
	}
	t0 = time.Now()
	n := h.warmHeap()
	h.logf("touched %.1f GB of heap in %v before the runs", float64(n)/1e9, time.Since(t0).Round(time.Millisecond))
	sp := cal.speedups()
	ti := cal.ti
	all := hwConfigs(h.window, ti, sp, cal.speedupsWithTransfers(), !h.firstUse)
	names := h.configs
	if len(names) == 0 {
		names = defaultHardwareConfigs(h.noOrder)
	}
	var configs []hwConfig
	seen := map[string]int{}
	for _, n := range names {
		c, ok := all[n]
		if !ok {
			return nil, fmt.Errorf("unknown configuration %q", n)
		}
		seen[n]++
		if seen[n] > 1 { // a repeat, named apart
			c.name += fmt.Sprintf(" #%d", seen[n])
		}
		c.cfg = h.storage(c.cfg) // the simulations model it too
		configs = append(configs, c)
	}
	res := &hwResults{cal: cal, same: true}
	machine := h.machine(cal)
	for _, c := range configs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		runtime.GC() // the runs before leave no garbage to collect in this one
		reg := &jobRegistry{}
		rec := newInstTimes()
		tr := tileRun{specs: h.specs, ops: hwOps(h.specs, c.est, h.accels, rec, cal.differs), reg: reg, onStore: rec.store, host: h.host()}
		if c.est != nil { // the predicted costs, FinishAware's times until the run has its own (as in the simulator)
			tr.cost = func(i int, o Operation) pats.Cost { return cal.predicted(i, o.Name) }
		}
		units := traced(append(pats.CPUUnits(h.cpus), reg.accelUnits(h.accels, !h.syncUp)...), rec)
		t0 := time.Now()
		rec.t0 = t0
		cpu0, waits0 := readGoCPU(), readSchedWaits()
		proc0, _ := processCPUTime()
		results, rep, _, err := tr.run(ctx, s, c.cfg, units)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		proc1, _ := processCPUTime()
		waits := readSchedWaits().sub(waits0)
		r := hwRun{goCPU: readGoCPU().sub(cpu0), procCPU: proc1 - proc0, name: c.name, cfg: c.cfg, rep: rep, wall: time.Since(t0), estimates: c.est, cpuFactor: rec.cpuFactor(cal)}
		for _, t := range results {
			r.nuclei = append(r.nuclei, t.nuclei)
		}
		if len(res.runs) > 0 && !slices.Equal(r.nuclei, res.runs[0].nuclei) {
			res.same = false
		}
		if r.sim, err = pats.Simulate(c.cfg, machine, h.simFlows(cal, c.est, cal.predicted)); err != nil {
			return nil, fmt.Errorf("%s: simulate: %w", c.name, err)
		}
		if r.simObs, err = pats.Simulate(c.cfg, machine, h.simFlows(cal, c.est, rec.costs(cal))); err != nil {
			return nil, fmt.Errorf("%s: simulate: %w", c.name, err)
		}
		gpuNames := map[string]bool{}
		for _, a := range h.accels {
			gpuNames[a.Name()] = true
		}
		r.gpuOcc = rec.gpuOccupied(len(h.accels), gpuNames, rep.Makespan)
		h.logf("%s: %.2f tiles/s, makespan %.2f s (simulated %.2f s, %+.1f%%; from the run's op times %.2f s, %+.1f%%); CPU time %.2fx predicted; cores busy %.0f%% (simulated %.0f%%); GPU computing or moving %.0f%% (simulated %.0f%%)",
			c.name, tilesPerSecond(h.tiles, rep), rep.Makespan.Seconds(), r.sim.Makespan.Seconds(), 100*(r.sim.Makespan.Seconds()/rep.Makespan.Seconds()-1),
			r.simObs.Makespan.Seconds(), 100*(r.simObs.Makespan.Seconds()/rep.Makespan.Seconds()-1), r.cpuFactor, 100*busyShare(rep, device.CPU), 100*busyShare(r.sim, device.CPU),
			100*r.gpuOcc, 100*simGPUOccupied(r.sim, machine))
		h.logf("%s: CPU time over the run: process %.1f core-s (user and system; %d Ps x %.2f s = %.1f core-s); Go runtime: user %.1f, GC %.1f, scavenger %.1f, idle %.1f core-s (updated at GC cycles); operations on the cores %.1f core-s",
			c.name, r.procCPU.Seconds(), runtime.GOMAXPROCS(0), r.wall.Seconds(), float64(runtime.GOMAXPROCS(0))*r.wall.Seconds(),
			r.goCPU.user, r.goCPU.gc, r.goCPU.scavenge, r.goCPU.idle, busyShare(rep, device.CPU)*float64(h.cpus)*rep.Makespan.Seconds())
		if n, ms1, ms10, total := waits.summary(); n > 0 {
			h.logf("%s: Go scheduler: goroutines waited for a thread %d times, %d of them 1 ms or more, %d 10 ms or more, %.2f s in all at least (/sched/latencies, which the runtime samples: about one wake-up in 8)",
				c.name, n, ms1, ms10, total.Seconds())
		}
		h.logf("%s: wake-ups: %s", c.name, wakeUps(rep))
		if h.traceDir != "" {
			if err := appendTrace(filepath.Join(h.traceDir, "trace.csv"), rec, c.name); err != nil {
				return nil, err
			}
		}
		res.runs = append(res.runs, r)
	}
	return res, nil
}

// warmHeap allocates and touches the memory a run's window of tiles
// holds (every datum of a tile, and the RGB once more for its staging
// buffer), then lets it go, and returns its size. The first run of the
// process would otherwise take every page of it from the operating
// system (a fault at each first touch: staging, downloads, outputs),
// which the later runs, reusing the heap, do not: on the H200 of GPU
// call 3 the first FCFS took 8.78 s and the same FCFS after it 7.52 s,
// its staging 87 ms a tile against 74 and its downloads 2.1 GB/s
// against 4.7. Every configuration then runs on a warm heap, the state
// the calibration's costs and the simulator describe. With the image
// regions in the GPU's host memory (warmHost), only the feature tables
// are Go memory.
func (h *hwSetup) warmHeap() int64 {
	tiles := h.window
	if tiles <= 0 || tiles > h.tiles {
		tiles = h.tiles
	}
	var per int64
	if h.host() == nil {
		per = h.regionBuf["rgb"]
		for _, b := range h.regionBuf {
			per += b
		}
	} else {
		for k := range featIDs() {
			per += h.regionBuf[k]
		}
	}
	bufs := make([][]byte, tiles)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(tiles, runtime.GOMAXPROCS(0)) { // page faults proceed in parallel
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				b := make([]byte, per)
				for k := 0; k < len(b); k += 4096 {
					b[k] = 1
				}
				bufs[i] = b
			}
		}()
	}
	for i := range tiles {
		next <- i
	}
	close(next)
	wg.Wait()
	clear(bufs)
	runtime.GC()
	return int64(tiles) * per
}

// prepareOutput creates, in s's output storage, the slide-wide regions
// the tiles commit into (the labels and the feature tables) and touches
// every tile's part of each, before the calibration and the runs; every
// run then commits into them, overwriting every tile's outputs. Without
// it, the first commit of a run allocated the labels of the whole slide
// (3.4 GB for 96 tiles of 4096^2) under the storage's write lock: on the
// H200 of GPU call 3 that held up every commit, and so the next tiles'
// admission, and every staging of that run for 0.1 to 1.6 s (Go zeroes
// memory it reuses: 0.4 to 2.2 s for 3.4 GB on a 2-core VM), an effect
// of the experiment's in-memory output, not of the scheduling, that the
// simulator does not model; and the first run's commits took every page
// of it from the operating system.
func prepareOutput(ctx context.Context, s *Slide) error {
	j, err := s.newTileJob(0, nil)
	if err != nil {
		return err
	}
	metas := []region.Meta{j.u16["labels"].Meta()}
	for _, f := range j.feats {
		metas = append(metas, f.Meta())
	}
	for _, m := range metas {
		lo := m.Bounds.Lo
		empty := region.Rect(lo[0], lo[1], lo[0], lo[1])
		if err := s.out.Write(ctx, m, empty, nil); err != nil {
			return fmt.Errorf("create the output %v: %w", m.ID, err)
		}
	}
	zero := make([]byte, j.u16["labels"].Bytes())
	zeroRows := make([]byte, 8*numFeatures*objectRows(s.size))
	for i := range s.tiles {
		b := s.Box(i)
		if err := s.out.Write(ctx, metas[0], b, zero); err != nil {
			return fmt.Errorf("touch the output %v of tile %d: %w", metas[0].ID, i, err)
		}
		for _, m := range metas[1:] { // the feature tables: 2 MiB each for a 4K tile
			if err := s.out.Write(ctx, m, s.tileFeatures(i), zeroRows); err != nil {
				return fmt.Errorf("touch the output %v of tile %d: %w", m.ID, i, err)
			}
		}
	}
	return nil
}

// machine returns the simulator's model of this machine with the rates
// the calibration measured.
func (h *hwSetup) machine(cal *calibration) pats.Machine {
	return pats.Machine{CPUs: h.cpus, GPUs: len(h.accels), Bandwidth: cal.bandwidth, StageBandwidth: cal.stageBW, CommitBandwidth: cal.commitBW, CommitStreams: h.commitStreams()}
}

// storage returns cfg with this experiment's storage work: on the CPU
// workers with Hardware.StorageOnCores, every core committing at once
// unless the storage writes one box at a time (Hardware.SerialCommits).
func (h *hwSetup) storage(cfg pats.Config) pats.Config {
	cfg.StorageOnCores = h.storeCores
	if !h.serialOut {
		cfg.CoreCommits = h.cpus // the storage writes the tiles' disjoint boxes at once
	}
	return cfg
}

// commitStreams is how many tiles' commits the output storage writes at
// once: one with Hardware.SerialCommits, else every tile's (region.Memory
// writes disjoint boxes at the same time).
func (h *hwSetup) commitStreams() int {
	if h.serialOut {
		return 1
	}
	return h.tiles
}

// hwConfig is one configuration of a hardware experiment: its name in the
// tables, the scheduler's configuration and the speedup estimates (nil:
// learned).
type hwConfig struct {
	name string
	cfg  pats.Config
	est  map[string]float64
}

// hwConfigs returns the configurations of a hardware experiment by their
// HardwareConfigs names, for the given window, transfer impact and measured
// speedups; with ahead, every one stages its tiles from admission
// (pats.Config.StageAhead; prefetch does anyway).
func hwConfigs(window int, ti float64, sp, spx map[string]float64, ahead bool) map[string]hwConfig {
	dl := pats.Config{Policy: pats.PATS, Window: window, FinishAware: true, Locality: true, TransferImpact: ti, Prefetch: true, StageAhead: ahead}
	learn := dl
	learn.Learn = true
	dlx := dl
	dlx.TransferAware = true
	return map[string]hwConfig{
		"fcfs":    {"FCFS", pats.Config{Policy: pats.FCFS, Window: window, StageAhead: ahead}, sp},
		"pats":    {"PATS", pats.Config{Policy: pats.PATS, Window: window, FinishAware: true, StageAhead: ahead}, sp},
		"patsx":   {"PATS+xfer", pats.Config{Policy: pats.PATS, Window: window, FinishAware: true, TransferAware: true, StageAhead: ahead}, sp},
		"patst":   {"PATS, speedups with transfers", pats.Config{Policy: pats.PATS, Window: window, FinishAware: true, StageAhead: ahead}, spx},
		"dl":      {"PATS+DL+prefetch", dl, sp},
		"dlx":     {"PATS+xfer+DL+prefetch", dlx, sp},
		"learned": {"PATS+DL+prefetch, learned", learn, nil},
		"wrong50": {"PATS+DL+prefetch, 50% wrong", dl, wrongEstimates(sp, 50)},
		"order":   {"PATS, speedup order only", pats.Config{Policy: pats.PATS, Window: window, StageAhead: ahead}, sp},
		// The rest of the sensitivity sweep (dl is its 0%).
		"wrong25":  {"PATS+DL+prefetch, 25% wrong", dl, wrongEstimates(sp, 25)},
		"wrong75":  {"PATS+DL+prefetch, 75% wrong", dl, wrongEstimates(sp, 75)},
		"wrong100": {"PATS+DL+prefetch, 100% wrong", dl, wrongEstimates(sp, 100)},
	}
}

// markdown writes the results as the tables of docs/pats.
func (h *hwSetup) markdown(w io.Writer, res *hwResults, command string) {
	cal := res.cal
	mem := "Go memory"
	if h.host() != nil {
		mem = "the first GPU's host memory (page-locked on a CUDA GPU)"
	}
	staging := "from its admission into the window, in the background (every configuration)"
	if h.firstUse {
		staging = "by the worker of its first reader (GPU workers included), but from admission with prefetch"
	}
	worker := "one goroutine that queues its copies on the GPU's streams and runs an operation while the next one's inputs upload"
	if h.syncUp {
		worker = "an upload, a compute and a download goroutine, each waiting for its copies or kernels"
	}
	if h.storeCores {
		staging += ", by the CPU workers, which also commit the outputs (storage on the cores)"
	}
	fmt.Fprintf(w, "## Real hardware\n\n`%s`: %d tiles of %dx%d px (RGB), %d CPU cores + %d %s, window %d; the tiles' image regions in %s; each tile's RGB staged from storage %s; a prefetching GPU worker is %s.\n\n",
		command, h.tiles, h.size, h.size, h.cpus, len(h.accels), h.gpuKind, h.window, mem, staging, worker)
	load := "not measured (one core): as alone"
	if cal.loaded > 0 {
		load = fmt.Sprintf("the mean over %d tiles run at once, one per core", cal.loaded)
	}
	fmt.Fprintf(w, "Measured op by op on %d tiles (after one warm-up), one CPU core alone and one GPU, transfers excluded; host-GPU bandwidth %.2f GB/s, transfer impact %.2f, staging from storage %.2f GB/s. CPU under load: %s (the costs the simulator and the speedups use).",
		max(h.calTiles-1, 1), cal.bandwidthAlone/1e9, cal.ti, cal.stageBWAlone/1e9, load)
	if cal.loaded > 0 {
		fmt.Fprintf(w, " Under that load, host-GPU bandwidth %.2f GB/s and staging %.2f GB/s per core (the rates the simulator uses; measured as a GPU's worker works in a run: tiles staged, uploaded and downloaded one at a time on a goroutine beside the busy cores).", cal.bandwidth/1e9, cal.stageBW/1e9)
	}
	fmt.Fprintf(w, " A tile's outputs are committed to storage at %.2f GB/s alone", cal.commitBWAlone/1e9)
	if cal.loaded > 0 {
		fmt.Fprintf(w, ", %.2f GB/s under load (the rate the simulator uses: a tile keeps its place in the window until its commit is done)", cal.commitBW/1e9)
		if cal.commitBWBeside > 0 {
			fmt.Fprintf(w, " and %.2f GB/s beside a GPU worker's stagings and transfers as well (not used)", cal.commitBWBeside/1e9)
		}
	}
	if h.serialOut {
		fmt.Fprint(w, "; the storage writes one tile's outputs at a time (-serial-commits)")
	} else {
		fmt.Fprint(w, "; the storage writes the tiles' outputs in parallel")
		if cal.loaded > 0 {
			fmt.Fprintf(w, " (under load: %.2f GB/s a commit made one at a time beside the busy cores, the rate used; %.2f GB/s each when the cores commit together, %.2f GB/s for the storage)", cal.commitBWWorker/1e9, cal.commitBWEach/1e9, cal.commitBWStore/1e9)
		}
	}
	fmt.Fprint(w, ".")
	if cal.stageBWAll > 0 {
		fmt.Fprintf(w, " When the %d cores stage their tiles at once, each stages at %.2f GB/s (%.2f GB/s together).", cal.loaded, cal.stageBWAll/1e9, float64(cal.loaded)*cal.stageBWAll/1e9)
	}
	if len(cal.fit) > 0 {
		lo, hi := slices.Min(cal.content), slices.Max(cal.content)
		fmt.Fprintf(w, " A tile's CPU cost under load is predicted from its dark-pixel share (%.2f%% to %.2f%% over the %d tiles, mean %.2f%%), as a line fitted per operation over the loaded tiles: the fit at the lightest and the heaviest tile, and its mean over the slide's tiles, are what the simulator and FinishAware's initial times use.",
			100*lo, 100*hi, len(cal.content), 100*mean(cal.content))
	}
	fmt.Fprintf(w, "\n\n| operation | CPU ms alone | CPU ms under load | fit, lightest..heaviest tile | fit, slide mean | GPU ms | speedup |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, o := range h.specs {
		g, sp := "CPU only", "-"
		if d, ok := cal.differs[o.Name]; ok {
			g = fmt.Sprintf("%.2f, output differs: CPU only", d.Seconds()*1e3)
		}
		if d, ok := cal.gpu[o.Name]; ok {
			g = fmt.Sprintf("%.2f", d.Seconds()*1e3)
			sp = fmtSpeedup(cal.speedups()[o.Name])
		}
		span, slide := "-", "-"
		if f, ok := cal.fit[o.Name]; ok {
			span = fmt.Sprintf("%.1f..%.1f", f.at(f.lo).Seconds()*1e3, f.at(f.hi).Seconds()*1e3)
			slide = fmt.Sprintf("%.1f", cal.predictedMean(o.Name, h.tiles).Seconds()*1e3)
		}
		fmt.Fprintf(w, "| %s | %.1f | %.1f | %s | %s | %s | %s |\n", o.Name, cal.cpuAlone[o.Name].Seconds()*1e3, cal.cpu[o.Name].Seconds()*1e3, span, slide, g, sp)
	}
	var xs []string
	spx := cal.speedupsWithTransfers()
	for _, o := range h.specs {
		if _, ok := cal.gpu[o.Name]; ok {
			xs = append(xs, fmt.Sprintf("%s %.2f ms %s", o.Name, cal.xfer[o.Name].Seconds()*1e3, fmtSpeedup(spx[o.Name])))
		}
	}
	if len(xs) > 0 {
		fmt.Fprintf(w, "\nTransfers of each GPU operation in the sequential pass (inputs up, output down), and its speedup counting them (patst's estimates): %s.\n", strings.Join(xs, ", "))
	}
	var gs []string
	for _, o := range h.specs {
		if f, ok := cal.gfit[o.Name]; ok {
			var sum time.Duration
			for i := range h.tiles {
				sum += cal.gpuCost(o.Name, i)
			}
			gs = append(gs, fmt.Sprintf("%s %.2f..%.2f ms (slide mean %.2f)", o.Name, f.at(f.lo).Seconds()*1e3, f.at(f.hi).Seconds()*1e3, (sum/time.Duration(max(h.tiles, 1))).Seconds()*1e3))
		}
	}
	if len(gs) > 0 {
		fmt.Fprintf(w, "\nGPU compute time by content, fitted as the cores' over the %d loaded tiles run one after another on %s, at the lightest..heaviest tile (the simulator's GPU costs): %s.\n", cal.loaded, h.accels[0].Name(), strings.Join(gs, ", "))
	}
	check := "every GPU output equals the CPU's"
	if len(cal.mismatch) > 0 {
		check = "GPU outputs DIFFER from the CPU's: " + strings.Join(cal.mismatch, ", ") + "; every configuration ran those operations on the CPU cores only"
	}
	fmt.Fprintf(w, "\nCheck: %s.", check)
	if res.same {
		fmt.Fprintf(w, " Every configuration found the same nuclei in every tile.\n\n")
	} else {
		fmt.Fprintf(w, " The configurations found DIFFERENT nuclei.\n\n")
	}
	fcfs := res.runs[0].rep.Makespan
	fmt.Fprintf(w, "Simulated: from the calibration's predicted costs (the prediction), and from the op times observed in the run itself, instance by instance (which leaves the scheduling model's own error). CPU time vs predicted: the run's CPU compute time over the prediction for the same instances (above 1: the cores were slower under this run's mix of operations than under the calibration's load).\n\n")
	fmt.Fprintf(w, "| configuration | makespan s | tiles/s | vs FCFS | simulated s | error | simulated, run's op times s | error | CPU time vs predicted |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range res.runs {
		m := r.rep.Makespan
		fmt.Fprintf(w, "| %s | %.2f | %.2f | %.2fx | %.2f | %+.1f%% | %.2f | %+.1f%% | %.2f |\n", r.name, m.Seconds(), tilesPerSecond(h.tiles, r.rep),
			fcfs.Seconds()/m.Seconds(), r.sim.Makespan.Seconds(), 100*(r.sim.Makespan.Seconds()/m.Seconds()-1),
			r.simObs.Makespan.Seconds(), 100*(r.simObs.Makespan.Seconds()/m.Seconds()-1), r.cpuFactor)
	}
	// One table per question: a row per operation, a column per run.
	perOp := func(title string, cell func(r hwRun, op string) string) {
		fmt.Fprintf(w, "\n%s:\n\n| operation |", title)
		for _, r := range res.runs {
			fmt.Fprintf(w, " %s |", r.name)
		}
		fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---:|", len(res.runs)))
		for _, o := range h.specs {
			fmt.Fprintf(w, "| %s |", o.Name)
			for _, r := range res.runs {
				fmt.Fprintf(w, " %s |", cell(r, o.Name))
			}
			fmt.Fprintln(w)
		}
	}
	perOp("Share of each operation's instances run on the GPU (measured; simulated in brackets)", func(r hwRun, op string) string {
		return gpuShare(r.rep, op) + " (" + gpuShare(r.sim, op) + ")"
	})
	perOp("Mean compute time of each operation in each run, CPU ms / GPU ms (- where it did not run there)", func(r hwRun, op string) string {
		return opTimes(r.rep, op)
	})
	fmt.Fprintf(w, "\n| configuration | uploads MiB | downloads MiB | GPU busy | CPU cores busy | simulated |\n|---|---:|---:|---:|---:|---:|\n")
	for _, r := range res.runs {
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %.0f%% | %.0f%% | %.0f%% |\n", r.name, float64(r.rep.UploadBytes)/(1<<20), float64(r.rep.DownloadBytes)/(1<<20),
			100*busyShare(r.rep, device.GPU), 100*busyShare(r.rep, device.CPU), 100*busyShare(r.sim, device.CPU))
	}
	fmt.Fprint(w, hwSummary(res.runs))
	worst := 0.0
	for _, r := range res.runs {
		worst = max(worst, math.Abs(r.sim.Makespan.Seconds()/r.rep.Makespan.Seconds()-1))
	}
	fmt.Fprintf(w, "Largest simulator error: %.1f%%.\n", 100*worst)
}

// hwSummary returns the comparison lines under the tables: PATS over
// FCFS and PATS+DL+prefetch over FCFS, and the learned, 50%-wrong and
// speedup-order runs against theirs, each only where the runs it needs
// were made. A configuration's makespan is the mean of its runs (repeats
// named "NAME #k"), found by name, so that any Hardware.Configs order reads
// right.
func hwSummary(runs []hwRun) string {
	cf := hwConfigs(0, 0, nil, nil, false)
	mean := func(key string) (time.Duration, bool) {
		name := cf[key].name
		var sum time.Duration
		n := 0
		for _, r := range runs {
			if r.name == name || strings.HasPrefix(r.name, name+" #") {
				sum += r.rep.Makespan
				n++
			}
		}
		if n == 0 || sum <= 0 {
			return 0, false
		}
		return sum / time.Duration(n), true
	}
	var b strings.Builder
	fcfs, okF := mean("fcfs")
	p, okP := mean("pats")
	dl, okD := mean("dl")
	switch {
	case okF && okP && okD:
		fmt.Fprintf(&b, "\nPATS over FCFS %.2fx (PATS+DL+prefetch %.2fx).", fcfs.Seconds()/p.Seconds(), fcfs.Seconds()/dl.Seconds())
	case okF && okP:
		fmt.Fprintf(&b, "\nPATS over FCFS %.2fx.", fcfs.Seconds()/p.Seconds())
	case okF && okD:
		fmt.Fprintf(&b, "\nPATS+DL+prefetch over FCFS %.2fx.", fcfs.Seconds()/dl.Seconds())
	}
	if okD {
		var parts []string
		if l, ok := mean("learned"); ok {
			parts = append(parts, fmt.Sprintf("learned speedups %+.1f%%", 100*(l.Seconds()/dl.Seconds()-1)))
		}
		if wr, ok := mean("wrong50"); ok {
			parts = append(parts, fmt.Sprintf("50%%-wrong estimates %+.1f%%", 100*(wr.Seconds()/dl.Seconds()-1)))
		}
		if len(parts) > 0 {
			fmt.Fprintf(&b, " %s makespan against PATS+DL+prefetch with measured speedups.", strings.Join(parts, " and "))
		}
	}
	if b.Len() > 0 {
		b.WriteString("\n")
	}
	if okD {
		// The sensitivity sweep, where more than 50% was run.
		var parts []string
		for _, e := range []int{25, 50, 75, 100} { // dl is 0%, wrongN is N%
			if w, ok := mean(fmt.Sprintf("wrong%d", e)); ok {
				parts = append(parts, fmt.Sprintf("%d%% %+.1f%%", e, 100*(w.Seconds()/dl.Seconds()-1)))
			}
		}
		if len(parts) > 1 {
			fmt.Fprintf(&b, "Sensitivity to speedup-estimate errors, PATS+DL+prefetch's makespan against its own with the measured speedups: %s.\n", strings.Join(parts, ", "))
		}
	}
	if x, ok := mean("patsx"); ok && okF {
		fmt.Fprintf(&b, "PATS+xfer (effective speedups with data movement) over FCFS %.2fx.\n", fcfs.Seconds()/x.Seconds())
	}
	if x, ok := mean("dlx"); ok && okF {
		fmt.Fprintf(&b, "PATS+xfer+DL+prefetch over FCFS %.2fx.\n", fcfs.Seconds()/x.Seconds())
	}
	if o, ok := mean("order"); ok && okF {
		fmt.Fprintf(&b, "PATS by speedup order only (cores take any operation when nothing ranks lower) over FCFS %.2fx.\n", fcfs.Seconds()/o.Seconds())
	}
	return b.String()
}

// busyShare returns the mean share of r's makespan the units of kind k
// spent computing (0 without such units).
func busyShare(r *pats.Report, k device.Kind) float64 {
	var busy time.Duration
	n := 0
	for _, u := range r.Units {
		if u.Kind == k {
			busy += u.Busy
			n++
		}
	}
	if n == 0 || r.Makespan <= 0 {
		return 0
	}
	return busy.Seconds() / float64(n) / r.Makespan.Seconds()
}

// wakeUps formats how long the workers of r's units, woken with work
// while asleep for want of it, took to run again (pats.UnitReport.Woken),
// the GPUs' and the cores' apart: a GPU's worker slow to run beside busy
// cores leaves its GPU idle and its operations to the cores.
func wakeUps(r *pats.Report) string {
	var parts []string
	for _, k := range []device.Kind{device.GPU, device.CPU} {
		n, units := 0, 0
		var total, longest time.Duration
		for _, u := range r.Units {
			if u.Kind == k {
				units++
				n += u.Woken
				total += u.WakeDelay
				longest = max(longest, u.LongestWake)
			}
		}
		if units == 0 {
			continue
		}
		name := "the GPUs' workers"
		if k == device.CPU {
			name = "the cores' workers"
		}
		parts = append(parts, fmt.Sprintf("%s woken with work %d times, %.1f ms in all to run again (longest %.2f ms)",
			name, n, float64(total)/1e6, float64(longest)/1e6))
	}
	return strings.Join(parts, "; ")
}

// opTimes formats the mean CPU and GPU compute times of op in r.
func opTimes(r *pats.Report, op string) string {
	o, ok := r.Op(op)
	if !ok {
		return "-"
	}
	f := func(n int, t time.Duration) string {
		if n == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f", t.Seconds()*1e3/float64(n))
	}
	return f(o.CPU, o.CPUTime) + " / " + f(o.GPU, o.GPUTime)
}

// gpuShare formats the GPU share of op in r, or "-" when it did not run.
func gpuShare(r *pats.Report, op string) string {
	for _, o := range r.Ops {
		if o.Name == op && o.CPU+o.GPU > 0 {
			return fmt.Sprintf("%.0f%%", 100*o.GPUShare())
		}
	}
	return "-"
}

// tilesPerSecond is the throughput of a run of tiles tiles.
func tilesPerSecond(tiles int, r *pats.Report) float64 {
	return float64(tiles) / r.Makespan.Seconds()
}

// mean returns the mean of xs.
func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// fmtSpeedup formats a speedup with two decimals, or "n/a" when it is not
// known: pats reports an unknown speedup as 0.
func fmtSpeedup(v float64) string {
	if !(v > 0) || math.IsInf(v, 0) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", v)
}

// GPUs are the accelerators of a hardware experiment: the CUDA GPUs of
// this machine running the kernels of kernels/pathology.cu, or host
// memory posing as GPUs, running Go mirrors of the kernels. Close them
// after use.
type GPUs struct {
	accels []accel
	kind   string // what they are, for the tables
}

// HostGPUs returns n accelerators of host memory posing as GPUs: the
// operations with a GPU implementation run Go mirrors of the CUDA
// kernels on them, for machines without a GPU.
func HostGPUs(n int) *GPUs {
	return &GPUs{accels: hostAccels(n), kind: "host accelerators (host memory posing as GPUs)"}
}

// CUDAGPUs opens the CUDA GPUs of this machine, at most limit of them (0:
// all), and loads the kernels on each. In a build without -tags cuda, or
// on a machine without a GPU, it fails with an error wrapping
// cuda.ErrNoDevice.
func CUDAGPUs(limit int) (*GPUs, error) {
	as, err := cudaAccels(limit)
	if err != nil {
		return nil, fmt.Errorf("pathology: open the CUDA GPUs: %w", err)
	}
	var names []string
	for _, a := range as {
		names = append(names, a.Name())
	}
	return &GPUs{accels: as, kind: "GPU (" + strings.Join(names, ", ") + ")"}, nil
}

// Len returns the number of GPUs.
func (g *GPUs) Len() int { return len(g.accels) }

// String says what the GPUs are: their names, or that they are host
// memory.
func (g *GPUs) String() string { return g.kind }

// Close releases the GPUs' memory and, for CUDA GPUs, the devices.
func (g *GPUs) Close() error {
	if err := closeAccels(g.accels); err != nil {
		return fmt.Errorf("pathology: close the GPUs: %w", err)
	}
	return nil
}

// HardwareConfigs returns the names of the configurations a hardware
// experiment can run (Hardware.Configs): FCFS, PATS (FinishAware), PATS
// ranking by the effective speedup that counts data movement
// (pats.Config.TransferAware), PATS given speedups that count each
// operation's transfers as the calibration measured them (the
// "computation+data transfer" speedups of seed 001's Fig. 5), PATS with
// locality and prefetch, the same
// ranking by effective speedup, with learned speedups, with 50%-wrong
// estimates, PATS by speedup order only, and the rest of the sensitivity
// sweep of PATS+DL+prefetch's estimates (the paper's Fig. 11: dl, then
// wrong25, wrong50, wrong75 and wrong100, the estimates that much wrong).
// The default runs (Hardware.Configs nil) are those up to "order"; the
// sweep's other points run only when named.
func HardwareConfigs() []string {
	return []string{"fcfs", "pats", "patsx", "patst", "dl", "dlx", "learned", "wrong50", "order", "wrong25", "wrong75", "wrong100"}
}

// defaultHardwareConfigs returns the configurations run when none are
// named: HardwareConfigs up to "order", without it when noOrder.
func defaultHardwareConfigs(noOrder bool) []string {
	all := HardwareConfigs()
	i := slices.Index(all, "order")
	if noOrder {
		return all[:i]
	}
	return all[:i+1]
}

// Hardware is an experiment on real hardware: the pipeline's operations
// run for real on the tiles of a generated slide, on CPU cores of this
// machine and on GPUs, under each configuration, and the simulator
// predicts each run from the operation costs measured beforehand
// (calibration: every operation timed on one core and one GPU, each GPU
// output checked against the CPU's, then on every core at once, the CPU
// cost of each operation fitted as a line in a tile's dark-pixel share).
type Hardware struct {
	// CPUs is the number of CPU core units (at least one).
	CPUs int
	// GPUs are the GPU units (none: CPU cores only). Run does not close
	// them.
	GPUs *GPUs
	// Tiles is the number of tiles of TileSize x TileSize pixels.
	Tiles, TileSize int
	// Window is the number of tiles in progress at a time (0: all).
	Window int
	// Seed is the seed of the generated slide.
	Seed uint64
	// Configs are the configurations to run (HardwareConfigs' names), in
	// order, repeats allowed (named apart); nil runs those up to "order"
	// (see HardwareConfigs), without "order" with SkipOrderOnly.
	Configs []string
	// SkipOrderOnly leaves "order" out of the default configurations.
	SkipOrderOnly bool
	// TraceDir, when set, is where trace.csv goes: every operation
	// instance, staging and GPU transfer of every run.
	TraceDir string
	// Log, when set, receives the progress: a line per step and per run.
	Log io.Writer
	// GoMemory keeps the tiles' image regions in Go memory. By default
	// they live in the first GPU's host memory where it has some: a CUDA
	// GPU's page-locked memory (a pool of at most 16 GiB, filled for a
	// window of tiles before the runs), which its copy engines move at the
	// bus's speed without a staging copy on a core.
	GoMemory bool
	// StageOnFirstUse has the worker that takes a tile's first reader
	// stage its RGB from storage (a GPU's worker too, before uploading),
	// except in the configurations with prefetch. By default every
	// configuration stages a tile in the background from its admission
	// (pats.Config.StageAhead), as seed 001's Workers read a stage
	// instance's input when they instantiate it: no worker, and no GPU,
	// waits on storage.
	StageOnFirstUse bool
	// SyncUploads runs a prefetching GPU worker as the earlier sessions
	// did, for comparison: an upload, a compute and a download goroutine,
	// each waiting for its copies or kernels. By default the worker is one
	// goroutine that queues the copies on the GPU's streams, runs the
	// current operation while the next one's inputs upload, and hands the
	// finished downloads on between and during operations (pats.Queuer):
	// when every core is busy, the Go scheduler can leave the three
	// goroutines one thread between them, and each then waits for the
	// others (docs/pats/hardware.md).
	SyncUploads bool
	// StorageOnCores has the CPU workers stage the tiles and commit their
	// outputs (pats.Config.StorageOnCores) in every configuration, and the
	// simulator model it: no goroutine runs beside the workers, so the GPU
	// worker's polling is not preempted in favour of a copy to or from
	// storage, but the cores do that copying instead of operations. Every
	// core may commit at once (pats.Config.CoreCommits), one at a time
	// with SerialCommits.
	StorageOnCores bool
	// SerialCommits has the output storage write one box at a time, as
	// region.Memory did under its lock until the eleventh session, and
	// the simulator model it (pats.Machine.CommitStreams of one), for
	// comparison. By default the completed tiles' outputs, disjoint boxes
	// of the slide's regions, are written at the same time.
	SerialCommits bool
}

// serialWrites is a region.Memory whose writes run one at a time
// (Hardware.SerialCommits).
type serialWrites struct {
	*region.Memory
	mu sync.Mutex
}

// Write implements region.Storage, one call at a time.
func (s *serialWrites) Write(ctx context.Context, m region.Meta, box region.Box, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Memory.Write(ctx, m, box, data)
}

// HardwareResult is the outcome of a hardware experiment.
type HardwareResult struct {
	h   *hwSetup
	res *hwResults
}

// Run runs the experiment: generation, calibration (on three tiles, the
// first a warm-up), then every configuration, each on a warm heap after a
// garbage collection, committing into output regions created before the
// runs (each run overwrites every tile's outputs).
func (h Hardware) Run(ctx context.Context) (*HardwareResult, error) {
	if h.CPUs < 1 || h.Tiles < 1 || h.TileSize < 1 || h.Window < 0 {
		return nil, fmt.Errorf("pathology: hardware experiment of %d CPU cores, %d tiles of %d px, window %d: want positive counts", h.CPUs, h.Tiles, h.TileSize, h.Window)
	}
	if bad, ok := hwUnknown(h.Configs); ok {
		return nil, fmt.Errorf("pathology: hardware experiment: unknown configuration %q", bad)
	}
	s := &hwSetup{cpus: h.CPUs, tiles: h.Tiles, size: h.TileSize, window: h.Window, seed: h.Seed, calTiles: 3,
		noOrder: h.SkipOrderOnly, configs: h.Configs, traceDir: h.TraceDir, log: h.Log, gpuKind: "GPUs", goMemory: h.GoMemory, firstUse: h.StageOnFirstUse, syncUp: h.SyncUploads, storeCores: h.StorageOnCores, serialOut: h.SerialCommits}
	if h.GPUs != nil {
		s.accels, s.gpuKind = h.GPUs.accels, h.GPUs.kind
	}
	res, err := s.run(ctx)
	if err != nil {
		return nil, fmt.Errorf("pathology: hardware experiment: %w", err)
	}
	return &HardwareResult{h: s, res: res}, nil
}

// WriteMarkdown writes the results as the tables of docs/pats/hardware.md;
// command is the command line the tables say made them.
func (r *HardwareResult) WriteMarkdown(w io.Writer, command string) error {
	var b strings.Builder
	r.h.markdown(&b, r.res, command)
	_, err := io.WriteString(w, b.String())
	return err
}

// Err returns an error when a GPU output differed from the CPU's or the
// configurations found different nuclei, nil when the results agree.
func (r *HardwareResult) Err() error {
	if len(r.res.cal.mismatch) > 0 || !r.res.same {
		return fmt.Errorf("pathology: hardware experiment: results differ (GPU vs CPU: %v; same nuclei in every configuration: %v)", r.res.cal.mismatch, r.res.same)
	}
	return nil
}
