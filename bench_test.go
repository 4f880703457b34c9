package htgs_test

// Benchmarks of the framework's overhead side by side with their
// baselines: graphs against hand-written goroutines and channels (run with
// go test -run '^$' -bench 'Pipeline8|FanOutIn|Cycle' -benchtime 1000000x .;
// the ns/item of a graph benchmark divided by that of its hand-written twin
// is the framework's cost factor, target <= 1.5 for the pipeline), and
// pipeline clones. The block matrix multiplication benchmarks are in
// package matmul (go test -run '^$' -bench Matmul ./matmul).

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/graph"
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
