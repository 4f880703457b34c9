package htgs_test

// Benchmarks side by side with their baselines: the framework's overhead
// against hand-written goroutines and channels (run with
// go test -run '^$' -bench 'Pipeline8|FanOutIn|Cycle' -benchtime 1000000x .;
// the ns/item of a graph benchmark divided by that of its hand-written twin
// is the framework's cost factor, target <= 1.5 for the pipeline), pipeline
// clones, and block matrix multiplication against one Dgemm call (end of
// file).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/matmul"
	"github.com/gohtgs/htgs/matmul/npy"
	"github.com/gohtgs/htgs/pipeline"
	"github.com/gohtgs/htgs/task"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const stages = 8

type item struct{ v int }

func noop(_ context.Context, in *item, out task.Emitter[*item]) error { return out.Emit(in) }

func pipelineGraph(opts ...graph.Option) *graph.Graph[*item, *item] {
	g := graph.New[*item, *item]("pipeline")
	var prev graph.Producer[*item] = g.Input()
	for i := range stages {
		n := graph.AddFunc(g, "stage"+string(rune('a'+i)), 1, noop, opts...)
		graph.Connect(prev, n)
		prev = n
	}
	graph.Connect(prev, g.Output())
	return g
}

func feed(b *testing.B, send func(*item) error, close func()) {
	it := &item{}
	for range b.N {
		if err := send(it); err != nil {
			b.Error(err)
			break
		}
	}
	close()
}

// BenchmarkPipeline8Graph: 8 no-op tasks in a line, pointers passed through,
// each with an input queue bounded to 64 like the channels of
// BenchmarkPipeline8Channels.
func BenchmarkPipeline8Graph(b *testing.B) { benchPipeline(b, pipelineGraph(graph.QueueCap(64))) }

// BenchmarkPipeline8GraphNoCounters is BenchmarkPipeline8Graph with the
// always-on counters turned off: the ratio of the two is their cost.
func BenchmarkPipeline8GraphNoCounters(b *testing.B) {
	benchPipeline(b, pipelineGraph(graph.QueueCap(64)), graph.WithoutCounters())
}

// BenchmarkPipeline8GraphUnbounded is the same with the default unbounded
// queues: the sender runs ahead of the pipeline and the queues grow.
func BenchmarkPipeline8GraphUnbounded(b *testing.B) { benchPipeline(b, pipelineGraph()) }

func benchPipeline(b *testing.B, g *graph.Graph[*item, *item], opts ...graph.StartOption) {
	b.ReportAllocs()
	b.ResetTimer()
	rt, err := g.Start(context.Background(), opts...)
	if err != nil {
		b.Fatal(err)
	}
	go feed(b, rt.Send, rt.Close)
	n := 0
	for range rt.Results() {
		n++
	}
	if err := rt.Wait(); err != nil || n != b.N {
		b.Fatalf("err %v, %d of %d", err, n, b.N)
	}
}

// BenchmarkPipeline8Channels is the same shape written by hand: one
// goroutine per stage joined by buffered channels.
func BenchmarkPipeline8Channels(b *testing.B) {
	b.ReportAllocs()
	b.ResetTimer()
	in := make(chan *item, 64)
	src := in
	var wg sync.WaitGroup
	for range stages {
		out := make(chan *item, 64)
		wg.Add(1)
		go func(in <-chan *item, out chan<- *item) {
			defer wg.Done()
			defer close(out)
			for v := range in {
				out <- v
			}
		}(src, out)
		src = out
	}
	go feed(b, func(it *item) error { in <- it; return nil }, func() { close(in) })
	n := 0
	for range src {
		n++
	}
	wg.Wait()
	if n != b.N {
		b.Fatalf("%d of %d", n, b.N)
	}
}

// BenchmarkFanOutInGraph: input broadcast to 4 tasks whose outputs meet in one.
func BenchmarkFanOutInGraph(b *testing.B) {
	g := graph.New[*item, *item]("fan")
	join := graph.AddFunc(g, "join", 1, noop)
	for i := range 4 {
		n := graph.AddFunc(g, "branch"+string(rune('a'+i)), 1, noop)
		graph.Connect(g.Input(), n)
		graph.Connect(n, join)
	}
	graph.Connect(join, g.Output())
	b.ReportAllocs()
	b.ResetTimer()
	rt, err := g.Start(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	go feed(b, rt.Send, rt.Close)
	n := 0
	for range rt.Results() {
		n++
	}
	if err := rt.Wait(); err != nil || n != 4*b.N {
		b.Fatalf("err %v, %d of %d", err, n, 4*b.N)
	}
}

// BenchmarkFanOutInChannels is the hand-written twin of BenchmarkFanOutInGraph.
func BenchmarkFanOutInChannels(b *testing.B) {
	b.ReportAllocs()
	b.ResetTimer()
	in := make(chan *item, 64)
	joined := make(chan *item, 64)
	out := make(chan *item, 64)
	var branches, joiner sync.WaitGroup
	var bins []chan *item
	for range 4 {
		c := make(chan *item, 64)
		bins = append(bins, c)
		branches.Add(1)
		go func() {
			defer branches.Done()
			for v := range c {
				joined <- v
			}
		}()
	}
	go func() { // broadcast
		for v := range in {
			for _, c := range bins {
				c <- v
			}
		}
		for _, c := range bins {
			close(c)
		}
	}()
	joiner.Add(1)
	go func() {
		defer joiner.Done()
		for v := range joined {
			out <- v
		}
		close(out)
	}()
	go func() { branches.Wait(); close(joined) }()
	go feed(b, func(it *item) error { in <- it; return nil }, func() { close(in) })
	n := 0
	for range out {
		n++
	}
	joiner.Wait()
	if n != 4*b.N {
		b.Fatalf("%d of %d", n, 4*b.N)
	}
}

// BenchmarkCycleGraph: every item goes 4 times around a 2-task loop and then
// leaves; the graph ends by quiescence.
func BenchmarkCycleGraph(b *testing.B) {
	g := graph.New[int, int]("cycle")
	step := graph.AddFunc(g, "step", 1, func(_ context.Context, n int, out task.Emitter[int]) error { return out.Emit(n + 1) })
	route := graph.AddFunc(g, "route", 1, func(_ context.Context, n int, out task.Emitter[int]) error { return out.Emit(n) })
	back := graph.AddFunc(g, "back", 1, func(_ context.Context, n int, out task.Emitter[int]) error {
		if n < 4 {
			return out.Emit(n)
		}
		return nil
	})
	done := graph.AddFunc(g, "done", 1, func(_ context.Context, n int, out task.Emitter[int]) error {
		if n >= 4 {
			return out.Emit(n)
		}
		return nil
	})
	graph.Connect(g.Input(), step)
	graph.Connect(step, route)
	graph.Connect(route, back)
	graph.Connect(route, done)
	graph.Connect(back, step)
	graph.Connect(done, g.Output())
	b.ReportAllocs()
	b.ResetTimer()
	rt, err := g.Start(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		defer rt.Close()
		for range b.N {
			if rt.Send(0) != nil {
				return
			}
		}
	}()
	n := 0
	for range rt.Results() {
		n++
	}
	if err := rt.Wait(); err != nil || n != b.N {
		b.Fatalf("err %v, %d of %d", err, n, b.N)
	}
}

// spin does n steps of dependent floating-point work (20000: ~20 us).
func spin(n int) float64 {
	x := 1.0
	for i := range n {
		x = x*1.0000001 + float64(i&7)
	}
	return x
}

func benchClones(b *testing.B, clones int) {
	inner := graph.New[int, float64]("work")
	w := graph.AddFunc(inner, "compute", 1, func(_ context.Context, v int, out task.Emitter[float64]) error {
		return out.Emit(spin(20000)) // ~20 us
	})
	graph.Connect(inner.Input(), w)
	graph.Connect(w, inner.Output())
	g := graph.New[int, float64]("pipelines")
	p := pipeline.New(g, "cpus", inner, device.Hosts(clones), pipeline.ByKey(func(v int) int { return v }))
	graph.Connect(g.Input(), p)
	graph.Connect(p, g.Output())
	b.ResetTimer()
	n := 0
	err := g.Run(context.Background(), func(yield func(int) bool) {
		for i := range b.N {
			if !yield(i) {
				return
			}
		}
	}, func(float64) error { n++; return nil })
	if err != nil || n != b.N {
		b.Fatalf("err %v, %d of %d", err, n, b.N)
	}
}

// BenchmarkPipelineClones: an execution pipeline of 1, 2 and 4 clones of a
// CPU-bound task on CPU devices; on 2 cores, 2 clones should take half the
// time per item of 1, and 4 clones no less than 2.
func BenchmarkPipelineClones(b *testing.B) {
	for _, c := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("clones=%d", c), func(b *testing.B) { benchClones(b, c) })
	}
}

// ---- Block matrix multiplication (package matmul) ----
//
// Each iteration runs the graph and its one-call baseline back to back, so
// that both see the same machine load, and reports both rates and their
// ratio (baseline time / graph time: above 1 the graph is faster):
//
//	go test -run '^$' -bench 'Matmul' -benchtime 3x .
//	go test -tags openblas -run '^$' -bench 'Matmul' -benchtime 3x .
//
// The gonum kernel is compared with one gonum Dgemm call (multithreaded,
// GOMAXPROCS goroutines), the OpenBLAS kernel (one library thread per
// multiply task) with one OpenBLAS dgemm call using GOMAXPROCS threads.

// matmulTimed runs the given runs b.N times each, in turn, with a pause
// before each so that one's idle library threads (OpenBLAS spins a while
// after a call) do not disturb the next, and returns their total times.
func matmulTimed(b *testing.B, runs ...func() error) []time.Duration {
	b.Helper()
	total := make([]time.Duration, len(runs))
	for range b.N {
		for i, run := range runs {
			time.Sleep(200 * time.Millisecond)
			t0 := time.Now()
			if err := run(); err != nil {
				b.Fatal(err)
			}
			total[i] += time.Since(t0)
		}
	}
	return total
}

func gflops(b *testing.B, n int, d time.Duration) float64 {
	return 2 * float64(n) * float64(n) * float64(n) * float64(b.N) / d.Seconds() / 1e9
}

func benchMatmulInMemory(b *testing.B, kernel string, block func(n int) int) {
	k, err := matmul.LookupKernel(kernel)
	if err != nil {
		b.Skip(err)
	}
	for _, n := range []int{2048, 4096} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			a, bm, c, ref := matmul.Random(n, n, 1), matmul.Random(n, n, 2), matmul.NewDense(n, n), matmul.NewDense(n, n)
			// One buffer cache for every iteration, as a program multiplying
			// repeatedly would keep: first-touch page faults are costly.
			cfg := matmul.Config{BlockSize: block(n), Kernel: k, Buffers: &matmul.BufferCache{}}
			ctx := context.Background()
			t := matmulTimed(b,
				func() error { _, err := matmul.Multiply(ctx, a, bm, c, cfg); return err },
				func() error { return k.(matmul.Gemmer).Gemm(0, a, bm, ref) })
			b.ReportMetric(gflops(b, n, t[0]), "graph-GFLOP/s")
			b.ReportMetric(gflops(b, n, t[1]), "call-GFLOP/s")
			b.ReportMetric(t[1].Seconds()/t[0].Seconds(), "ratio")
			if cmp, err := matmul.Compare(a, bm, c, ref); err != nil || !cmp.OK {
				b.Fatalf("graph and one call differ: %+v %v", cmp, err)
			}
		})
	}
}

// BenchmarkMatmulGonum: in-memory products, gonum kernel (512-blocks) vs one
// gonum Dgemm call. Target ratio >= 0.95.
func BenchmarkMatmulGonum(b *testing.B) {
	benchMatmulInMemory(b, "gonum", func(int) int { return 512 })
}

// BenchmarkMatmulOpenBLAS: in-memory products, OpenBLAS kernel vs one
// threaded OpenBLAS dgemm call; skipped unless built with -tags openblas.
// Target ratio >= 0.9. Blocks of n/2: a single-threaded OpenBLAS call
// loses efficiency on smaller blocks (about 73 GFLOP/s on 1024-blocks, 77
// on 2048-blocks, per core here), and 8 products keep 2 cores busy.
func BenchmarkMatmulOpenBLAS(b *testing.B) {
	benchMatmulInMemory(b, "openblas", func(n int) int { return n / 2 })
}

// BenchmarkMatmulOutOfCore multiplies .npy files whose pages are evicted
// from the page cache before every run (matmul.EvictFromCache: fsync, then
// posix_fadvise DONTNEED), so that the inputs come from the disk; every
// run fsyncs its C. Three runs per iteration:
//
//   - graph: out of core, memory budget 2 x one matrix (the baseline
//     holds 3): A stays in memory, B streams once, C is written block by
//     block while the products go on;
//   - call (the target's baseline): read A and B fully, one multithreaded
//     Dgemm call of the same library, write C;
//   - staged: read A and B fully, the same graph in memory, write C. Its
//     time over the graph's isolates what overlapping I/O with computation
//     gains, apart from the kernels.
//
// "ratio" is call/graph (target >= 1.3), "overlap-ratio" staged/graph.
func BenchmarkMatmulOutOfCore(b *testing.B) {
	for _, tc := range []struct {
		kernel string
		n, bs  int
	}{{"gonum", 2048, 512}, {"openblas", 8192, 2048}} {
		b.Run(fmt.Sprintf("%s/n=%d", tc.kernel, tc.n), func(b *testing.B) {
			k, err := matmul.LookupKernel(tc.kernel)
			if err != nil {
				b.Skip(err)
			}
			benchOutOfCore(b, k, tc.n, tc.bs)
		})
	}
}

func benchOutOfCore(b *testing.B, k matmul.Kernel, n, bs int) {
	dir := b.TempDir()
	ap, bp := filepath.Join(dir, "a.npy"), filepath.Join(dir, "b.npy")
	for i, p := range []string{ap, bp} {
		if err := npy.Write(p, n, n, matmul.Random(n, n, uint64(i+1)).Data); err != nil {
			b.Fatal(err)
		}
	}
	cold := func() error {
		for _, p := range []string{ap, bp} {
			if err := matmul.EvictFromCache(p); err != nil {
				return err
			}
		}
		return nil
	}
	syncFile := func(name string) error {
		f, err := os.OpenFile(name, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}
	readBoth := func() (a, bm *matmul.Dense, err error) {
		var m [2]*matmul.Dense
		for i, p := range []string{ap, bp} {
			r, c, data, err := npy.Read(p)
			if err != nil {
				return nil, nil, err
			}
			m[i] = &matmul.Dense{R: r, C: c, Stride: c, Data: data}
		}
		return m[0], m[1], nil
	}
	writeC := func(name string, c *matmul.Dense) error {
		if err := npy.Write(name, c.R, c.C, c.Data); err != nil {
			return err
		}
		return syncFile(name)
	}
	ctx := context.Background()
	matrix := 8 * int64(n) * int64(n)
	buffers := &matmul.BufferCache{}
	cfg := matmul.Config{BlockSize: bs, Kernel: k, MemoryBudget: 2 * matrix, Buffers: buffers}
	var plan matmul.Plan
	t := matmulTimed(b,
		func() error { // graph, out of core
			if err := cold(); err != nil {
				return err
			}
			rep, err := matmul.MultiplyFiles(ctx, ap, bp, filepath.Join(dir, "c.npy"), cfg)
			if err != nil {
				return err
			}
			plan = rep.Plan
			return syncFile(filepath.Join(dir, "c.npy"))
		},
		func() error { // read, one call, write
			if err := cold(); err != nil {
				return err
			}
			a, bm, err := readBoth()
			if err != nil {
				return err
			}
			c := matmul.NewDense(n, n)
			if err := k.(matmul.Gemmer).Gemm(0, a, bm, c); err != nil {
				return err
			}
			return writeC(filepath.Join(dir, "c-call.npy"), c)
		},
		func() error { // read, graph in memory, write
			if err := cold(); err != nil {
				return err
			}
			a, bm, err := readBoth()
			if err != nil {
				return err
			}
			c, _, err := matmul.MultiplyDense(ctx, a, bm, matmul.Config{BlockSize: bs, Kernel: k, Buffers: buffers})
			if err != nil {
				return err
			}
			return writeC(filepath.Join(dir, "c-staged.npy"), c)
		})
	b.ReportMetric(gflops(b, n, t[0]), "graph-GFLOP/s")
	b.ReportMetric(gflops(b, n, t[1]), "call-GFLOP/s")
	b.ReportMetric(gflops(b, n, t[2]), "staged-GFLOP/s")
	b.ReportMetric(t[1].Seconds()/t[0].Seconds(), "ratio")
	b.ReportMetric(t[2].Seconds()/t[0].Seconds(), "overlap-ratio")
	b.Logf("graph plan: %v", plan)
}
