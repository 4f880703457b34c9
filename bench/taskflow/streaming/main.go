// Command streaming measures htgs's streaming cost (1000 items through a
// graph started once, ns per item and task), its started-once latency
// (one item through a started graph, ns per task) and g.Run of one item
// (ns per task) on chains of 8/128 and binary trees of 15/127 no-op tasks,
// one line per measure: "name elapsed" and "cpu/name cpu-time". It runs
// one benchmark per measure named with -what, so that ab.sh can alternate
// builds of two revisions measure by measure (on a shared machine the load
// drifts within seconds). A module of its own: htgs does not depend on it.
package main

import (
	"context"
	"flag"
	"fmt"
	"iter"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/task"
)

func inc(_ context.Context, v int, out task.Emitter[int]) error { return out.Emit(v + 1) }

func chain(n int) *graph.Graph[int, int] {
	g := graph.New[int, int]("chain")
	var prev graph.Producer[int] = g.Input()
	for i := range n {
		t := graph.AddFunc(g, fmt.Sprint("t", i), 1, inc)
		graph.Connect(prev, t)
		prev = t
	}
	graph.Connect(prev, g.Output())
	return g
}

func tree(depth int) *graph.Graph[int, int] {
	g := graph.New[int, int]("tree")
	level := []*graph.Node[int, int]{graph.AddFunc(g, "n0", 1, inc)}
	graph.Connect(g.Input(), level[0])
	count := 1
	for d := 1; d < depth; d++ {
		var next []*graph.Node[int, int]
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
	return g
}

// cpuTime returns the CPU time the process has used (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// bench runs f as a benchmark and returns its result and the process's
// CPU time during its last (measured) call.
func bench(f func(b *testing.B)) (testing.BenchmarkResult, time.Duration) {
	var used time.Duration
	r := testing.Benchmark(func(b *testing.B) {
		t0 := cpuTime()
		f(b)
		used = cpuTime() - t0
	})
	return r, used
}

// startedOnce sends one item at a time through a started graph and takes
// its outs results.
func startedOnce(g *graph.Graph[int, int], outs int) (testing.BenchmarkResult, time.Duration) {
	rt, err := g.Start(context.Background(), graph.WithoutStallReport())
	if err != nil {
		panic(err)
	}
	next, stop := iter.Pull(rt.Results())
	r, used := bench(func(b *testing.B) {
		for b.Loop() {
			if err := rt.Send(1); err != nil {
				panic(err)
			}
			for range outs {
				if _, ok := next(); !ok {
					panic("results ended")
				}
			}
		}
	})
	rt.Close()
	for {
		if _, ok := next(); !ok {
			break
		}
	}
	stop()
	if err := rt.Wait(); err != nil {
		panic(err)
	}
	return r, used
}

// streamBatch is how many items a streamed run sends.
const streamBatch = 1000

func streamed(g *graph.Graph[int, int]) (testing.BenchmarkResult, time.Duration) {
	return bench(func(b *testing.B) {
		for b.Loop() {
			rt, err := g.Start(context.Background(), graph.WithoutStallReport())
			if err != nil {
				panic(err)
			}
			go func() {
				defer rt.Close()
				for i := range streamBatch {
					if rt.Send(i) != nil {
						return
					}
				}
			}()
			for range rt.Results() {
			}
			if err := rt.Wait(); err != nil {
				panic(err)
			}
		}
	})
}

func runOnce(g *graph.Graph[int, int]) (testing.BenchmarkResult, time.Duration) {
	one := func(yield func(int) bool) { yield(1) }
	return bench(func(b *testing.B) {
		for b.Loop() {
			if err := g.Run(context.Background(), one, nil, graph.WithoutStallReport()); err != nil {
				panic(err)
			}
		}
	})
}

func main() {
	what := flag.String("what", "stream/tree15,once/tree15", "comma-separated measures: stream|once|run / chain8|chain128|tree15|tree127")
	rounds := flag.Int("rounds", 1, "rounds in this process")
	flag.Parse()
	type shape struct {
		g           *graph.Graph[int, int]
		tasks, outs int
	}
	shapes := map[string]shape{
		"chain8": {chain(8), 8, 1}, "chain128": {chain(128), 128, 1},
		"tree15": {tree(4), 15, 8}, "tree127": {tree(7), 127, 64},
	}
	for range *rounds {
		for _, w := range strings.Split(*what, ",") {
			kind, name, _ := strings.Cut(w, "/")
			s, ok := shapes[name]
			if !ok {
				fmt.Fprintln(os.Stderr, "unknown shape in", w)
				os.Exit(2)
			}
			var r testing.BenchmarkResult
			var used time.Duration
			per := float64(s.tasks)
			switch kind {
			case "stream":
				r, used = streamed(s.g)
				per *= streamBatch
			case "once":
				r, used = startedOnce(s.g, s.outs)
			case "run":
				r, used = runOnce(s.g)
			default:
				fmt.Fprintln(os.Stderr, "unknown measure in", w)
				os.Exit(2)
			}
			fmt.Printf("%s %.2f\n", w, float64(r.T.Nanoseconds())/float64(r.N)/per)
			fmt.Printf("cpu/%s %.2f\n", w, float64(used.Nanoseconds())/float64(r.N)/per)
		}
	}
}
