package memmgr_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/memmgr"
	"github.com/gohtgs/htgs/task"
)

// countingSized is a sized allocator that records its calls.
type countingSized struct {
	mu         sync.Mutex
	sizes      []int
	live, peak int
	frees      int
	fail       int // a size that fails
}

func (c *countingSized) AllocSize(_ device.Device, n int) ([]float64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n == c.fail {
		return nil, errors.New("too big")
	}
	c.sizes = append(c.sizes, n)
	c.live++
	c.peak = max(c.peak, c.live)
	return make([]float64, n), nil
}

func (c *countingSized) Free(_ device.Device, v []float64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.live--
	c.frees++
	return nil
}

// sizedGraph gets a buffer of v elements per input v, in a pool of 2,
// and releases it in a second task.
func sizedGraph(alloc memmgr.SizedAllocator[[]float64]) *graph.Graph[int, int] {
	g := graph.New[int, int]("sized")
	pool := memmgr.NewSized(g, "rows", 2, alloc)
	get := graph.AddFunc(g, "get", 2, func(ctx context.Context, n int, out task.Emitter[*memmgr.Buffer[[]float64]]) error {
		b, err := pool.Get(ctx, n)
		if err != nil {
			return err
		}
		return out.Emit(b)
	})
	memmgr.Use(pool, get)
	use := graph.AddFunc(g, "use", 1, func(_ context.Context, b *memmgr.Buffer[[]float64], out task.Emitter[int]) error {
		n := len(b.Data)
		if err := b.Release(); err != nil {
			return err
		}
		return out.Emit(n)
	})
	graph.Connect(g.Input(), get)
	graph.Connect(get, use)
	graph.Connect(use, g.Output())
	return g
}

// Each Get of a sized pool allocates the size it asks for; the buffer is
// freed on its last release, and no more than the capacity is out at once
// (issue 22, item 11).
func TestSizedPoolSizesPerRequest(t *testing.T) {
	alloc := &countingSized{fail: -1}
	sizes := []int{1, 1000, 7, 64, 0, 333, 5, 2}
	var got []int
	err := sizedGraph(alloc).Run(context.Background(), slices.Values(sizes), func(n int) error {
		got = append(got, n)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(sizes))
	alloc.mu.Lock()
	defer alloc.mu.Unlock()
	if !slices.Equal(got, want) || !slices.Equal(slices.Sorted(slices.Values(alloc.sizes)), want) {
		t.Errorf("buffer lengths %v, allocations %v, want %v", got, alloc.sizes, want)
	}
	if alloc.frees != len(sizes) || alloc.live != 0 || alloc.peak > 2 {
		t.Errorf("%d frees, %d live, peak %d: want %d, 0, at most 2", alloc.frees, alloc.live, alloc.peak, len(sizes))
	}
}

// An allocation that fails is an error naming the pool and the size; a
// sized pool without allocator is refused by Start.
func TestSizedPoolErrors(t *testing.T) {
	err := sizedGraph(&countingSized{fail: 13}).Run(context.Background(), slices.Values([]int{1, 13}), nil)
	if err == nil || !strings.Contains(err.Error(), `pool "rows": allocating 13 elements`) || !strings.Contains(err.Error(), "too big") {
		t.Errorf("Run: %v, want the pool's allocation error", err)
	}
	if _, err := sizedGraph(nil).Start(context.Background()); err == nil || !strings.Contains(err.Error(), "nil allocator") {
		t.Errorf("Start: %v, want nil allocator", err)
	}
}

// A sized pool: rows of different lengths, at most 2 out at once.
func ExampleNewSized() {
	g := graph.New[int, int]("rows")
	rows := memmgr.NewSized(g, "rows", 2, memmgr.SizedSlices[float64]())
	fill := graph.AddFunc(g, "fill", 1, func(ctx context.Context, n int, out task.Emitter[*memmgr.Buffer[[]float64]]) error {
		b, err := rows.Get(ctx, n) // a buffer of n elements, freed after one release
		if err != nil {
			return err
		}
		for i := range b.Data {
			b.Data[i] = 1
		}
		return out.Emit(b)
	})
	memmgr.Use(rows, fill)
	sum := graph.AddFunc(g, "sum", 1, func(_ context.Context, b *memmgr.Buffer[[]float64], out task.Emitter[int]) error {
		s := 0.0
		for _, v := range b.Data {
			s += v
		}
		if err := b.Release(); err != nil {
			return err
		}
		return out.Emit(int(s))
	})
	graph.Connect(g.Input(), fill)
	graph.Connect(fill, sum)
	graph.Connect(sum, g.Output())
	err := g.Run(context.Background(), slices.Values([]int{3, 10, 1}), func(s int) error {
		fmt.Print(s, " ")
		return nil
	})
	fmt.Println(err)
	// Output: 3 10 1 <nil>
}
