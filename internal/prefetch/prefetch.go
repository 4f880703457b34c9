// Package prefetch loads the items of an ordered sequence ahead of the
// one goroutine that consumes them, with a bounded number of loads at once
// and of items waiting: the tiles of a flat-field sample, or of a mosaic
// in the order its band sweep takes them.
package prefetch

import (
	"context"
	"sync"
)

// Ordered loads items 0..k-1 with load, up to par at once and at most par
// ahead of the consumer, which takes them in order with get (each index
// once). load must be safe for concurrent use. stop ends the loading and
// waits for the loads in flight; call it when done, also after an error.
func Ordered[T any](ctx context.Context, k, par int, load func(j int) (T, error)) (get func(j int) (T, error), stop func()) {
	type result struct {
		v   T
		err error
	}
	ctx, cancel := context.WithCancel(ctx)
	results := make([]chan result, k)
	for j := range results {
		results[j] = make(chan result, 1)
	}
	slots := make(chan struct{}, max(1, par))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for j := range k {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				v, err := load(j)
				results[j] <- result{v, err}
			}()
		}
	}()
	get = func(j int) (T, error) {
		select {
		case r := <-results[j]:
			<-slots
			return r.v, r.err
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		}
	}
	stop = func() {
		cancel()
		wg.Wait()
	}
	return get, stop
}
