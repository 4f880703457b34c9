package graph_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/task"
)

// A task blocked in a call that ignores its context (here, a channel
// read) would keep Wait waiting after the deadline; WithAbandonAfter lets
// Wait return, naming the copy, whose goroutine is left running.
func ExampleWithAbandonAfter() {
	device := make(chan int) // a read that knows no context
	g := graph.New[int, int]("reader")
	read := graph.AddFunc(g, "read", 1, func(_ context.Context, _ int, out task.Emitter[int]) error {
		return out.Emit(<-device)
	})
	graph.Connect(g.Input(), read)
	graph.Connect(read, g.Output())

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	rt, err := g.Start(ctx, graph.WithAbandonAfter(100*time.Millisecond))
	if err != nil {
		panic(err)
	}
	_ = rt.Send(1)
	rt.Close()
	err = rt.Wait()

	var ab *graph.AbandonedError
	if errors.As(err, &ab) {
		fmt.Printf("gave up on task %q copy %d\n", ab.Copies[0].Task, ab.Copies[0].Copy)
	}
	fmt.Println("deadline:", errors.Is(err, context.DeadlineExceeded))

	close(device) // the read returns; its goroutine ends
	<-rt.Done()
	// Output:
	// gave up on task "read" copy 0
	// deadline: true
}
