package memmgr_test

import (
	"context"
	"fmt"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/memmgr"
	"github.com/gohtgs/htgs/task"
)

// A producer fills pooled buffers; a consumer releases each after use. With
// a pool of 2 the producer can never be more than 2 buffers ahead.
func Example() {
	type frame struct {
		n   int
		buf *memmgr.Buffer[[]int]
	}
	g := graph.New[int, int]("frames")
	pool := memmgr.New(g, "frames", 2, memmgr.Slices[int](4))
	fill := graph.AddFunc(g, "fill", 1, func(ctx context.Context, n int, out task.Emitter[frame]) error {
		b, err := pool.Get(ctx) // back after one release
		if err != nil {
			return err
		}
		for i := range b.Data {
			b.Data[i] = n
		}
		return out.Emit(frame{n, b})
	})
	memmgr.Use(pool, fill)
	sum := graph.AddFunc(g, "sum", 1, func(_ context.Context, f frame, out task.Emitter[int]) error {
		s := 0
		for _, v := range f.buf.Data {
			s += v
		}
		if err := f.buf.Release(); err != nil {
			return err
		}
		return out.Emit(s)
	})
	graph.Connect(g.Input(), fill)
	graph.Connect(fill, sum)
	graph.Connect(sum, g.Output())

	rt, _ := g.Start(context.Background())
	go func() {
		defer rt.Close()
		for i := 1; i <= 5; i++ {
			_ = rt.Send(i)
		}
	}()
	var sums []int
	for s := range rt.Results() {
		sums = append(sums, s)
	}
	err := rt.Wait()
	fmt.Println(sums, err, "peak buffers out:", rt.Stats().Pools[0].Peak <= 2)
	// Output: [4 8 12 16 20] <nil> peak buffers out: true
}
