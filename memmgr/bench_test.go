package memmgr_test

import (
	"context"
	"sync"
	"testing"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/memmgr"
	"github.com/gohtgs/htgs/task"
)

// Get+Release of a pooled buffer, side by side with sync.Pool and with a
// buffered channel of buffers (run: go test -run '^$' -bench . ./memmgr).

const bufLen = 1024

func BenchmarkGetReleasePool(b *testing.B) {
	g := graph.New[int, int]("bench")
	pool := memmgr.New(g, "p", 4, memmgr.Slices[byte](bufLen))
	n := graph.AddFunc(g, "loop", 1, func(ctx context.Context, _ int, _ task.Emitter[int]) error {
		b.ResetTimer()
		for range b.N {
			buf, err := pool.Get(ctx)
			if err != nil {
				return err
			}
			buf.Data[0]++
			if err := buf.Release(); err != nil {
				return err
			}
		}
		b.StopTimer()
		return nil
	})
	graph.Connect(g.Input(), n)
	b.ReportAllocs()
	if err := g.Run(context.Background(), func(y func(int) bool) { y(0) }, nil); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkGetReleaseSyncPool(b *testing.B) {
	p := sync.Pool{New: func() any { s := make([]byte, bufLen); return &s }}
	b.ReportAllocs()
	for range b.N {
		s := p.Get().(*[]byte)
		(*s)[0]++
		p.Put(s)
	}
}

func BenchmarkGetReleaseChannel(b *testing.B) {
	c := make(chan []byte, 4)
	for range 4 {
		c <- make([]byte, bufLen)
	}
	b.ReportAllocs()
	for range b.N {
		s := <-c
		s[0]++
		c <- s
	}
}
