package pats

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gohtgs/htgs/device"
)

// The GPU worker when every core is busy, on the CPU alone: CPU units that
// spin for their operations' time (as real operations hold their thread)
// and a GPU whose copies and kernels are waited for by polling, as
// pathology's CUDA GPU does (cuda.Event.Wait), with GOMAXPROCS = units.
// The GPU has a copy engine per direction beside its compute engine. The
// three-goroutine worker (the GPU's Move) hands operations between its
// upload and compute goroutines, which then share one thread: each polls
// while the other waits. The one-goroutine worker (Queuer) does not.
// docs/pats/hardware.md, "The GPU worker on one thread", has the numbers.

// spinUntil polls the clock until t, holding the thread, and calls serve
// between looks if it is not nil.
func spinUntil(t time.Time, serve func()) {
	for time.Now().Before(t) {
		if serve != nil {
			serve()
		}
	}
}

// spinCPU is a CPU core whose operations hold their thread for their
// modelled time.
type spinCPU struct{ device.Host }

func (spinCPU) Run(ctx context.Context, impl func(context.Context) error, c Cost) error {
	start := time.Now()
	if err := impl(ctx); err != nil {
		return err
	}
	spinUntil(start.Add(c.CPU), nil)
	return nil
}

func (spinCPU) Move(context.Context, Data, bool) error { return nil }

// spinGPU is a GPU with an upload, a compute and a download engine, whose
// waits poll. With queue it queues its copies (Queuer).
type spinGPU struct {
	queue bool
	rate  float64 // bytes per second
	mu    sync.Mutex
	free  [2]time.Time // when the download (0) and upload (1) engines are free
}

func (g *spinGPU) ID() int           { return 0 }
func (g *spinGPU) Kind() device.Kind { return device.GPU }
func (g *spinGPU) Name() string      { return "spingpu" }
func (g *spinGPU) Memory() int64     { return 0 }

// reserve books b bytes on the engine of a direction and returns when the
// copy ends.
func (g *spinGPU) reserve(b int64, toDevice bool) time.Time {
	e := 0
	if toDevice {
		e = 1
	}
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	start := g.free[e]
	if start.Before(now) {
		start = now
	}
	g.free[e] = start.Add(time.Duration(float64(b) / g.rate * float64(time.Second)))
	return g.free[e]
}

func (g *spinGPU) Run(ctx context.Context, impl func(context.Context) error, c Cost) error {
	start := time.Now()
	if err := impl(ctx); err != nil {
		return err
	}
	spinUntil(start.Add(c.GPU), serveOf(ctx))
	return nil
}

func (g *spinGPU) Move(_ context.Context, d Data, toDevice bool) error {
	spinUntil(g.reserve(d.Bytes, toDevice), nil)
	return nil
}

func (g *spinGPU) Queues() bool { return g.queue }

func (g *spinGPU) Queue(_ context.Context, d Data, toDevice bool) (Pending, error) {
	return spinPending(g.reserve(d.Bytes, toDevice)), nil
}

type spinPending time.Time

func (p spinPending) Done() bool { return !time.Now().Before(time.Time(p)) }

func (p spinPending) Wait(context.Context) (time.Duration, error) {
	spinUntil(time.Time(p), nil)
	return 0, nil
}

// runBusyCores runs flows on cpus spinning cores and a spinning GPU, with
// GOMAXPROCS = cpus + 1, and returns the makespan. load is
//   - "busy": per flow, one GPU operation (1 ms of upload, 1 ms of kernel,
//     a tiny result) and an independent CPU-only operation (1 ms over the
//     cpus cores): the cores are kept busy, and the GPU's work overlaps its
//     copies at 1 ms per flow at best, 2 ms when they take turns;
//   - "idle": the same, the CPU operation costing nothing: the cores wait,
//     their threads are free;
//   - "chain": per flow, a CPU operation (0.5 ms over the cores) whose
//     output the GPU operation reads (1 ms up, 1 ms of kernel) and a CPU
//     operation that reads the GPU's output (0.5 ms down, 0.5 ms): the
//     downloads and the wake-ups count too; 1 ms per flow at best.
func runBusyCores(tb testing.TB, cpus, flows int, queue bool, load string) time.Duration {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(cpus + 1))
	gpu := &spinGPU{queue: queue, rate: 1e9}
	units := []Unit{gpu}
	for i := range cpus {
		units = append(units, spinCPU{device.Host{Index: i}})
	}
	nop := func(context.Context, device.Device, int) error { return nil }
	gpuOp := &Op[int]{Name: "kernel", Impls: map[device.Kind]Impl[int]{device.GPU: nop}}
	cpuOp := &Op[int]{Name: "cpuwork", Impls: map[device.Kind]Impl[int]{device.CPU: nop}}
	cpuOp2 := &Op[int]{Name: "cpuwork2", Impls: map[device.Kind]Impl[int]{device.CPU: nop}}
	m, err := Start(context.Background(), Config{Prefetch: true, Locality: true, Window: 4 * (cpus + 1)}, units...)
	if err != nil {
		tb.Fatal(err)
	}
	per := func(d time.Duration) Cost { return Cost{CPU: d / time.Duration(cpus)} }
	fs := make([]*Flow, flows)
	for i := range flows {
		f := NewFlow(fmt.Sprint("f", i))
		switch load {
		case "chain":
			Add(f, cpuOp, i, Writes(Data{Key: "a", Bytes: 1_000_000}), WithCost(per(500*time.Microsecond)))
			Add(f, gpuOp, i, Reads(Data{Key: "a", Bytes: 1_000_000}), Writes(Data{Key: "b", Bytes: 500_000}), WithCost(Cost{GPU: time.Millisecond}))
			Add(f, cpuOp2, i, Reads(Data{Key: "b", Bytes: 500_000}), Writes(Data{Key: "out", Bytes: 1000}), WithCost(per(500*time.Microsecond)))
		default:
			Add(f, gpuOp, i, Reads(Data{Key: "in", Bytes: 1_000_000}), Writes(Data{Key: "out", Bytes: 1000}), WithCost(Cost{GPU: time.Millisecond}))
			c := per(time.Millisecond)
			if load == "idle" {
				c = Cost{}
			}
			Add(f, cpuOp, i, WithCost(c))
		}
		fs[i] = f
	}
	start := time.Now()
	runAll(tb, m, fs)
	elapsed := time.Since(start)
	if err := m.Close(); err != nil {
		tb.Fatal(err)
	}
	return elapsed
}

// BenchmarkGPUWorkerBusyCores compares the two GPU workers on runBusyCores
// (one spinning core and the GPU on this two-core machine) under each
// load: ms per flow (1 at best). Run the variants alternately, e.g.
// -bench 'GPUWorkerBusyCores/busy/three' then '.../busy/one', five times.
func BenchmarkGPUWorkerBusyCores(b *testing.B) {
	for _, load := range []string{"busy", "idle", "chain"} {
		for _, c := range []struct {
			name  string
			queue bool
		}{{"three-goroutines", false}, {"one-goroutine", true}} {
			b.Run(load+"/"+c.name, func(b *testing.B) {
				const flows = 200
				var total time.Duration
				for range b.N {
					total += runBusyCores(b, 1, flows, c.queue, load)
				}
				b.ReportMetric(float64(total.Microseconds())/1e3/float64(b.N*flows), "ms/flow")
			})
		}
	}
}
