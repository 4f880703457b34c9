package pats

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"
)

// benchFlows returns n flows of a chain of 4 operations fanning out into 4
// more, with modelled costs and data.
func benchFlows(n int) []*Flow {
	ops := []*Op[int]{hybrid("a", 2), hybrid("b", 12), hybrid("c", 1.5), hybrid("d", 8), hybrid("e", 20), hybrid("f", 3), hybrid("g", 15), hybrid("h", 5)}
	fs := make([]*Flow, n)
	for i := range fs {
		f := NewFlow(fmt.Sprint("f", i))
		prev := "in"
		for j, op := range ops[:4] {
			out := fmt.Sprint("d", j)
			Add(f, op, i, Reads(d(prev, 1<<20)), Writes(d(out, 1<<20)), cost(100+10*j, 100/int(op.Speedup)+5))
			prev = out
		}
		for j, op := range ops[4:] {
			Add(f, op, i, Reads(d(prev, 1<<20), d("in", 1<<20)), Writes(d(fmt.Sprint("o", j), 1<<10)), cost(200, 200/int(op.Speedup)+5))
		}
		fs[i] = f
	}
	return fs
}

// BenchmarkSimulate measures the simulator: operations simulated per second
// with PATS, locality and prefetching on 9 CPU cores and 3 GPUs, and with
// FinishAware on 15 cores and a GPU (the pathology experiment's node),
// where every idle core asks at each step whether the GPU would finish a
// ready operation first: the scheduling work the real-time manager does
// between two operations of a GPU.
func BenchmarkSimulate(b *testing.B) {
	for _, c := range []struct {
		name string
		m    Machine
		cfg  Config
	}{
		{"dl+prefetch", Machine{CPUs: 9, GPUs: 3, Bandwidth: 5e9, Latency: 20 * time.Microsecond},
			Config{Policy: PATS, Window: 24, Locality: true, TransferImpact: 0.15, Prefetch: true}},
		{"finish-aware", Machine{CPUs: 15, GPUs: 1, Bandwidth: 40e9, GPUSpeed: 4},
			Config{Policy: PATS, Window: 32, FinishAware: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			ops := 0
			var elapsed time.Duration
			for b.Loop() {
				b.StopTimer()
				fs := benchFlows(200)
				b.StartTimer()
				start := time.Now()
				if _, err := Simulate(c.cfg, c.m, fs); err != nil {
					b.Fatal(err)
				}
				elapsed += time.Since(start)
				ops += 200 * 8
			}
			b.ReportMetric(float64(ops)/elapsed.Seconds(), "ops/s")
		})
	}
}

// BenchmarkManagerOverhead measures the real-time manager's cost per
// operation instance: empty implementations on two CPU cores, so the time
// is all scheduling (dependency tracking, dispatch, wake-ups).
func BenchmarkManagerOverhead(b *testing.B) {
	for _, policy := range []Policy{FCFS, PATS} {
		b.Run(policy.String(), func(b *testing.B) {
			benchManager(b, Config{Policy: policy, Window: 16}, CPUUnits(2), 20)
		})
	}
}

// BenchmarkManagerHybridOverhead is BenchmarkManagerOverhead on 15 cores
// and a GPU whose modelled times are scaled to almost nothing, with
// FinishAware and with data locality and prefetch. (The pathology
// experiment's workload, where most cores idle while PATS waits for the
// GPU, is pathology's BenchmarkSimulateHardwarePATS.)
func BenchmarkManagerHybridOverhead(b *testing.B) {
	for _, cfg := range []Config{
		{Policy: FCFS, Window: 32},
		{Policy: PATS, Window: 32, FinishAware: true},
		{Policy: PATS, Window: 32, FinishAware: true, Locality: true, Prefetch: true},
	} {
		b.Run(cfg.String(), func(b *testing.B) {
			benchManager(b, cfg, Machine{CPUs: 15, GPUs: 1, Bandwidth: 40e9}.Units(1e-9), 96)
		})
	}
}

// runAll submits fs to m and waits for them all.
func runAll(tb testing.TB, m *Manager, fs []*Flow) {
	tb.Helper()
	hs := make([]*Job, 0, len(fs))
	for _, f := range fs {
		h, err := m.Submit(context.Background(), f)
		if err != nil {
			tb.Fatal(err)
		}
		hs = append(hs, h)
	}
	for _, h := range hs {
		if err := h.Wait(context.Background()); err != nil {
			tb.Fatal(err)
		}
	}
}

// benchManager submits n of benchFlows to a manager on units per round
// and reports the time per operation instance.
func benchManager(b *testing.B, cfg Config, units []Unit, n int) {
	m, err := Start(context.Background(), cfg, units...)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	ops := 0
	for b.Loop() {
		b.StopTimer()
		fs := benchFlows(n)
		b.StartTimer()
		runAll(b, m, fs)
		ops += n * 8
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(ops), "ns/operation")
}

// h200Ops are the pathology experiment's operations with the times of
// the tenth session's third H200 call (ms: a core under load in FCFS, the
// GPU in PATS), their inputs and outputs (MiB; 0: a small feature table).
var h200Ops = []struct {
	name     string
	cpu, gpu float64
	reads    []string
	out      string
	outMiB   int64
}{
	{"RBCDetection", 146, 0.3, []string{"rgb"}, "rbc", 16},
	{"MorphOpen", 143, 0.9, []string{"rgb"}, "opened", 16},
	{"ReconToNuclei", 435, 3.1, []string{"opened", "rbc"}, "candidates", 16},
	{"AreaThreshold", 174, 0.7, []string{"candidates"}, "area", 16},
	{"FillHoles", 74, 7.5, []string{"area"}, "filled", 16},
	{"PreWatershed", 524, 3.4, []string{"filled"}, "distance", 64},
	{"Watershed", 328, 4.1, []string{"distance", "filled"}, "watershed", 64},
	{"BWLabel", 52, 0.5, []string{"watershed"}, "labels", 64},
	{"FeatIntensity", 29, 0.2, []string{"labels", "rgb"}, "featIntensity", 0},
	{"FeatGradient", 327, 0.7, []string{"labels", "rgb"}, "featGradient", 0},
	{"FeatMorphometry", 34, 0.1, []string{"labels"}, "featMorph", 0},
}

// h200Flows returns n tiles of h200Ops.
func h200Flows(n int) []*Flow { return h200FlowsStored(n, nil) }

// h200FlowsStored is h200Flows whose outputs (the labels and the feature
// tables) go to the storage that store returns for their size (nil: none).
func h200FlowsStored(n int, store func(bytes int64) Stager) []*Flow {
	size := map[string]int64{"rgb": 48 << 20}
	ops := map[string]*Op[int]{}
	for _, o := range h200Ops {
		ops[o.name] = hybrid(o.name, o.cpu/o.gpu)
		size[o.out] = max(o.outMiB<<20, 64<<10)
	}
	ms := func(x float64) time.Duration { return time.Duration(x * float64(time.Millisecond)) }
	fs := make([]*Flow, n)
	for i := range fs {
		f := NewFlow(fmt.Sprint("tile", i))
		for _, o := range h200Ops {
			out := d(o.out, size[o.out])
			if store != nil && (o.out == "labels" || o.outMiB == 0) {
				out.Store = store(out.Bytes)
			}
			opts := []StepOption{Writes(out), WithCost(Cost{CPU: ms(o.cpu), GPU: ms(o.gpu)})}
			for _, r := range o.reads {
				opts = append(opts, Reads(d(r, size[r])))
			}
			Add(f, ops[o.name], i, opts...)
		}
		fs[i] = f
	}
	return fs
}

// benchScale is BenchmarkManagerAgainstSimulator's wall time per modelled
// time.
var benchScale = flag.Float64("pats.scale", 0.2, "BenchmarkManagerAgainstSimulator: wall time per modelled time")

// BenchmarkManagerAgainstSimulator runs the pathology experiment's FCFS
// and PATS (FinishAware) (96 tiles, 15 cores and a GPU, window 32, 48
// GB/s) on the real-time manager with simulated units (Machine.Units, a
// modelled second taking 0.2 s by default, -pats.scale) and on the
// simulator, and reports the manager's makespan in modelled seconds, the
// simulator's error against it, and how many operations ran on the GPU in
// each: where the manager dispatches as the simulator does, they agree
// within the units' timing noise. Before the serial GPU worker counted as
// waiting when its downloads ended, FCFS's GPU ran 784-809 operations
// against the simulator's 816, now 801-824 (7 alternated processes each);
// before the manager recorded simulated units' modelled times (modelTimed)
// rather than the wall clock's, PATS's cores took FeatIntensity and
// FeatMorphometry, their GPU means timed at 5 µs (760-788 operations on
// the GPU against 960), now 960 (docs/pats/hardware.md). PATS+DL+prefetch
// is left out: its queued copies and polling waits are many timer waits
// an operation, and at this scale their overshoot lengthens its runs by a
// third (at -pats.scale 1 it is within 5% of the simulator). FCFS also
// runs with its outputs committed to a storage of 3 GB/s writing one at a
// time or all at once: before the manager kept a committing flow's place
// in the window and ended its makespan with the last commit, as the
// simulator does, PATS+DL+prefetch with one write at a time ran 1.45
// modelled seconds against the simulator's 2.72 (now 2.93, -7%).
func BenchmarkManagerAgainstSimulator(b *testing.B) {
	for _, cfg := range []Config{{Policy: FCFS, Window: 32}, {Policy: PATS, Window: 32, FinishAware: true}} {
		b.Run(cfg.String(), func(b *testing.B) { benchAgainstSimulator(b, cfg, 0) })
	}
	// The same with the outputs committed to a storage of 3 GB/s that
	// writes them one at a time (1 stream) or all at once (96).
	for _, streams := range []int{1, 96} {
		cfg := Config{Policy: FCFS, Window: 32}
		b.Run(fmt.Sprintf("%v/storage-%d", cfg, streams), func(b *testing.B) { benchAgainstSimulator(b, cfg, streams) })
	}
}

// sleepStore is a storage whose commits of bytes take bytes/rate,
// scaled, one at a time under mu (nil: all at once).
type sleepStore struct {
	bytes       int64
	rate, scale float64
	mu          *sync.Mutex
}

func (sleepStore) Stage(context.Context) error { return nil }

func (s sleepStore) Commit(ctx context.Context) error {
	if s.mu != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	return sleepUntil(ctx, time.Now().Add(time.Duration(float64(s.bytes)/s.rate*s.scale*float64(time.Second))))
}

// benchAgainstSimulator is BenchmarkManagerAgainstSimulator for cfg, with
// the outputs committed to a storage of streams writes at once (0: none).
func benchAgainstSimulator(b *testing.B, cfg Config, streams int) {
	scale := *benchScale
	const rate = 3e9
	mach := Machine{CPUs: 15, GPUs: 1, Bandwidth: 48e9}
	var mu *sync.Mutex
	if streams > 0 {
		mach.CommitBandwidth, mach.CommitStreams = rate, streams
		if streams == 1 {
			mu = &sync.Mutex{}
		}
	}
	flows := func(scale float64) []*Flow {
		if streams == 0 {
			return h200Flows(96)
		}
		return h200FlowsStored(96, func(n int64) Stager { return sleepStore{n, rate, scale, mu} })
	}
	sim, err := Simulate(cfg, mach, flows(1))
	if err != nil {
		b.Fatal(err)
	}
	gpuOps := func(r *Report) (n int) {
		for _, o := range r.Ops {
			n += o.GPU
		}
		return n
	}
	var real time.Duration
	var ops int
	for b.Loop() {
		m, err := Start(context.Background(), cfg, mach.Units(scale)...)
		if err != nil {
			b.Fatal(err)
		}
		runAll(b, m, flows(scale))
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
		r := m.Report()
		real += r.Makespan
		ops += gpuOps(r)
	}
	mean := real.Seconds() / float64(b.N) / scale
	b.ReportMetric(mean, "modelled-s")
	b.ReportMetric(100*(sim.Makespan.Seconds()/mean-1), "sim-error-%")
	b.ReportMetric(float64(ops)/float64(b.N), "gpu-ops")
	b.ReportMetric(float64(gpuOps(sim)), "sim-gpu-ops")
}
