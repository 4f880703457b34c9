// Command taskflow measures, side by side in one process, go-taskflow's
// Run().Wait() and htgs's g.Run of one item on the same shapes (chains of
// 8 and 128 tasks, binary trees of 15 and 127), in interleaved rounds, and
// prints medians and minima of ns per task: elapsed, and the process's
// CPU time (less sensitive to other processes on a shared machine). With
// -extra (the default) it also measures htgs's latency of one item through
// a graph started once and its streaming cost (1000 items through a
// started graph, per item and task). Run it with run.sh, which points it at
// a checkout of go-taskflow's source; this folder is a module of its own,
// so htgs does not depend on go-taskflow.
package main

import (
	"context"
	"flag"
	"fmt"
	"iter"
	"os"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	gotaskflow "github.com/noneback/go-taskflow"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/task"
)

func inc(_ context.Context, v int, out task.Emitter[int]) error { return out.Emit(v + 1) }

func chainH(n int) *graph.Graph[int, int] {
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

func treeH(depth int) *graph.Graph[int, int] {
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

func chainT(n int) *gotaskflow.TaskFlow {
	tf := gotaskflow.NewTaskFlow("chain")
	prev := tf.NewTask("t0", func() {})
	for i := 1; i < n; i++ {
		t := tf.NewTask(fmt.Sprint("t", i), func() {})
		prev.Precede(t)
		prev = t
	}
	return tf
}

func treeT(depth int) *gotaskflow.TaskFlow {
	tf := gotaskflow.NewTaskFlow("tree")
	level := []*gotaskflow.Task{tf.NewTask("n0", func() {})}
	count := 1
	for d := 1; d < depth; d++ {
		var next []*gotaskflow.Task
		for _, p := range level {
			for range 2 {
				c := tf.NewTask(fmt.Sprint("n", count), func() {})
				count++
				p.Precede(c)
				next = append(next, c)
			}
		}
		level = next
	}
	return tf
}

func one(yield func(int) bool) { yield(1) }

// cpuTime returns the CPU time the process has used (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type shape struct {
	name  string
	tasks int
	h     *graph.Graph[int, int]
	t     *gotaskflow.TaskFlow
}

// startedOnce is the latency of one item through a graph started once:
// Send, then take its result (a tree's leaves give several).
func startedOnce(s shape, outs int) testing.BenchmarkResult {
	rt, err := s.h.Start(context.Background(), graph.WithoutStallReport())
	if err != nil {
		panic(err)
	}
	defer func() {
		rt.Close()
		for range rt.Results() {
		}
		if err := rt.Wait(); err != nil {
			panic(err)
		}
	}()
	next, stop := iter.Pull(rt.Results())
	defer stop()
	return testing.Benchmark(func(b *testing.B) {
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
}

// streamed is a started graph given streamBatch items at once, per item.
const streamBatch = 1000

func streamed(s shape) testing.BenchmarkResult {
	return testing.Benchmark(func(b *testing.B) {
		for b.Loop() {
			rt, err := s.h.Start(context.Background(), graph.WithoutStallReport())
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

func main() {
	rounds := flag.Int("rounds", 5, "interleaved rounds")
	only := flag.String("only", "", "run only one side: htgs or taskflow")
	extra := flag.Bool("extra", true, "also measure htgs started once (1 item) and streamed")
	flag.Parse()
	shapes := []shape{
		{"chain 8", 8, chainH(8), chainT(8)},
		{"chain 128", 128, chainH(128), chainT(128)},
		{"tree 15", 15, treeH(4), treeT(4)},
		{"tree 127", 127, treeH(7), treeT(7)},
	}
	leaves := map[string]int{"chain 8": 1, "chain 128": 1, "tree 15": 8, "tree 127": 64}
	exec := gotaskflow.NewExecutor(uint(runtime.NumCPU()))
	ctx := context.Background()
	res := map[string][]float64{}
	add := func(k string, r testing.BenchmarkResult, per float64) {
		res[k] = append(res[k], float64(r.T.Nanoseconds())/float64(r.N)/per)
	}
	// cpu measures f's process CPU time (user and system) per op and
	// task: less sensitive to other processes than the elapsed time.
	cpu := func(k string, per float64, f func(b *testing.B)) testing.BenchmarkResult {
		var n int
		var used time.Duration
		r := testing.Benchmark(func(b *testing.B) {
			t0 := cpuTime()
			f(b)
			used, n = cpuTime()-t0, b.N
		})
		res["cpu/"+k] = append(res["cpu/"+k], float64(used.Nanoseconds())/float64(n)/per)
		return r
	}
	for r := range *rounds {
		for _, s := range shapes {
			if *only != "htgs" {
				add("tf/"+s.name, cpu("tf/"+s.name, float64(s.tasks), func(b *testing.B) {
					for b.Loop() {
						exec.Run(s.t).Wait()
					}
				}), float64(s.tasks))
			}
			if *only != "taskflow" {
				add("htgs/"+s.name, cpu("htgs/"+s.name, float64(s.tasks), func(b *testing.B) {
					for b.Loop() {
						if err := s.h.Run(ctx, one, nil, graph.WithoutStallReport()); err != nil {
							panic(err)
						}
					}
				}), float64(s.tasks))
				if *extra {
					add("once/"+s.name, startedOnce(s, leaves[s.name]), float64(s.tasks))
					add("stream/"+s.name, streamed(s), float64(s.tasks*streamBatch))
				}
			}
		}
		fmt.Fprintf(os.Stderr, "round %d done\n", r+1)
	}
	med := func(v []float64) float64 {
		if len(v) == 0 {
			return 0
		}
		v = slices.Clone(v)
		slices.Sort(v)
		if len(v)%2 == 0 {
			return (v[len(v)/2-1] + v[len(v)/2]) / 2
		}
		return v[len(v)/2]
	}
	mn := func(v []float64) float64 {
		if len(v) == 0 {
			return 0
		}
		return slices.Min(v)
	}
	fmt.Printf("ns per task, %d interleaved rounds, median (min)\n\n", *rounds)
	fmt.Printf("| shape | go-taskflow Run().Wait() | htgs g.Run(1 item) | ratio | htgs started once, 1 item | htgs streamed |\n|---|---:|---:|---:|---:|---:|\n")
	for _, s := range shapes {
		t, h := res["tf/"+s.name], res["htgs/"+s.name]
		ratio := 0.0
		if med(t) > 0 {
			ratio = med(h) / med(t)
		}
		fmt.Printf("| %s | %.0f (%.0f) | %.0f (%.0f) | %.2fx | %.0f (%.0f) | %.1f (%.1f) |\n", s.name, med(t), mn(t), med(h), mn(h), ratio,
			med(res["once/"+s.name]), mn(res["once/"+s.name]), med(res["stream/"+s.name]), mn(res["stream/"+s.name]))
	}
	fmt.Printf("\nCPU time of the process (user and system, both cores) per task, median (min)\n\n")
	fmt.Printf("| shape | go-taskflow Run().Wait() | htgs g.Run(1 item) | ratio |\n|---|---:|---:|---:|\n")
	for _, s := range shapes {
		t, h := res["cpu/tf/"+s.name], res["cpu/htgs/"+s.name]
		ratio := 0.0
		if med(t) > 0 {
			ratio = med(h) / med(t)
		}
		fmt.Printf("| %s | %.0f (%.0f) | %.0f (%.0f) | %.2fx |\n", s.name, med(t), mn(t), med(h), mn(h), ratio)
	}
	fmt.Println()
	for _, s := range shapes {
		fmt.Printf("%s: tf %.0f htgs %.0f once %.0f stream %.1f\n", s.name, res["tf/"+s.name], res["htgs/"+s.name], res["once/"+s.name], res["stream/"+s.name])
	}
}
