package htgs_test

// Building a graph and running it once, on the shapes go-taskflow measures
// (a chain, a fan out and in, a binary tree): the cost a user pays who
// builds a graph per request. Run with
//
//	go test -run '^$' -bench 'BuildRun' -benchmem .
//
// and read ns/task and allocs/task.

import (
	"context"
	"fmt"
	"testing"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/task"
)

// inc is the trivial task body of every shape.
func inc(_ context.Context, v int, out task.Emitter[int]) error { return out.Emit(v + 1) }

// chainGraph is input → t1 → … → tn → output.
func chainGraph(n int) (*graph.Graph[int, int], int) {
	g := graph.New[int, int]("chain")
	var prev graph.Producer[int] = g.Input()
	for i := range n {
		t := graph.AddFunc(g, fmt.Sprint("t", i), 1, inc)
		graph.Connect(prev, t)
		prev = t
	}
	graph.Connect(prev, g.Output())
	return g, n
}

// fanGraph is input → source → n tasks → sink → output.
func fanGraph(n int) (*graph.Graph[int, int], int) {
	g := graph.New[int, int]("fan")
	src := graph.AddFunc(g, "source", 1, inc)
	sink := graph.AddFunc(g, "sink", 1, inc)
	graph.Connect(g.Input(), src)
	for i := range n {
		t := graph.AddFunc(g, fmt.Sprint("t", i), 1, inc)
		graph.Connect(src, t)
		graph.Connect(t, sink)
	}
	graph.Connect(sink, g.Output())
	return g, n + 2
}

// treeGraph is a binary out-tree of the given depth (1: one node): every
// task emits to its two children, and the leaves feed the output.
func treeGraph(depth int) (*graph.Graph[int, int], int) {
	g := graph.New[int, int]("tree")
	level := []*graph.Node[int, int]{graph.AddFunc(g, "n0", 1, inc)}
	graph.Connect(g.Input(), level[0])
	count := 1
	for d := 1; d < depth; d++ {
		next := make([]*graph.Node[int, int], 0, 2*len(level))
		for _, p := range level {
			for range 2 {
				c := graph.AddFunc(g, fmt.Sprint("n", count), 1, inc)
				count++
				graph.Connect(p, c)
				next = append(next, c)
			}
		}
		level = next
	}
	for _, l := range level {
		graph.Connect(l, g.Output())
	}
	return g, count
}

func benchBuildRun(b *testing.B, build func() (*graph.Graph[int, int], int)) {
	ctx := context.Background()
	tasks := 0
	b.ReportAllocs()
	for b.Loop() {
		g, n := build()
		tasks = n
		rt, err := g.Start(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := rt.Send(1); err != nil {
			b.Fatal(err)
		}
		rt.Close()
		for range rt.Results() {
		}
		if err := rt.Wait(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*tasks), "ns/task")
}

func BenchmarkBuildRunChain8(b *testing.B) {
	benchBuildRun(b, func() (*graph.Graph[int, int], int) { return chainGraph(8) })
}
func BenchmarkBuildRunChain128(b *testing.B) {
	benchBuildRun(b, func() (*graph.Graph[int, int], int) { return chainGraph(128) })
}
func BenchmarkBuildRunFan8(b *testing.B) {
	benchBuildRun(b, func() (*graph.Graph[int, int], int) { return fanGraph(8) })
}
func BenchmarkBuildRunFan128(b *testing.B) {
	benchBuildRun(b, func() (*graph.Graph[int, int], int) { return fanGraph(128) })
}
func BenchmarkBuildRunTree4(b *testing.B) {
	benchBuildRun(b, func() (*graph.Graph[int, int], int) { return treeGraph(4) })
}
func BenchmarkBuildRunTree7(b *testing.B) {
	benchBuildRun(b, func() (*graph.Graph[int, int], int) { return treeGraph(7) })
}

// BenchmarkStart measures Start alone (and the run's teardown) on a chain
// of 128 built once: the per-node cost of instantiating a blueprint.
func BenchmarkStart(b *testing.B) {
	g, n := chainGraph(128)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		rt, err := g.Start(ctx)
		if err != nil {
			b.Fatal(err)
		}
		rt.Close()
		if err := rt.Wait(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/node")
}

// benchRunOnce runs a graph built once with g.Run of one item per
// iteration: the cost compared with go-taskflow's Run().Wait() (a
// taskflow built once, run many times) in issue 36.
func benchRunOnce(b *testing.B, g *graph.Graph[int, int], tasks int) {
	b.Helper()
	ctx := context.Background()
	one := func(yield func(int) bool) { yield(1) }
	b.ReportAllocs()
	for b.Loop() {
		if err := g.Run(ctx, one, nil, graph.WithoutStallReport()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*tasks), "ns/task")
}

// BenchmarkRunOnceChain1 is the fixed cost of g.Run: one task.
func BenchmarkRunOnceChain1(b *testing.B)   { g, n := chainGraph(1); benchRunOnce(b, g, n) }
func BenchmarkRunOnceChain8(b *testing.B)   { g, n := chainGraph(8); benchRunOnce(b, g, n) }
func BenchmarkRunOnceChain128(b *testing.B) { g, n := chainGraph(128); benchRunOnce(b, g, n) }
func BenchmarkRunOnceTree15(b *testing.B)   { g, n := treeGraph(4); benchRunOnce(b, g, n) }
func BenchmarkRunOnceTree127(b *testing.B)  { g, n := treeGraph(7); benchRunOnce(b, g, n) }
