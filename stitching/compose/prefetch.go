package compose

import (
	"context"
	"fmt"
	"image"
	"slices"

	"github.com/gohtgs/htgs/internal/prefetch"
)

// Prefetch returns a loader for ComposeFunc, ComposeTiled and
// ComposeBigTIFF that loads the tiles of slots ahead of their band sweep:
// in the order the sweep takes them (by increasing Y, ties by index), par
// at a time, at most par tiles ahead of it. Decoding tile files is then
// spread over par goroutines and overlaps the composing, where otherwise
// the sweep would wait for each tile in turn. load must be safe for
// concurrent use. The loader takes each tile once, in that order; a tile
// asked for out of order is an error. Call stop when the composing is
// done, also after an error: it ends the loads and waits for those in
// flight.
func Prefetch(ctx context.Context, slots []Slot, load func(i int) (*image.Gray16, error), par int) (loader func(i int) (*image.Gray16, error), stop func()) {
	order := sweepOrder(slots)
	get, stop := prefetch.Ordered(ctx, len(order), par, func(j int) (*image.Gray16, error) { return load(order[j]) })
	next := 0
	loader = func(i int) (*image.Gray16, error) {
		if next >= len(order) || order[next] != i {
			return nil, fmt.Errorf("compose: Prefetch: tile %d asked for out of the sweep's order", i)
		}
		next++
		return get(next - 1)
	}
	return loader, stop
}

// sweepOrder returns the indices of slots in the order the band sweep
// loads them: by increasing Y, ties in index order.
func sweepOrder(slots []Slot) []int {
	order := make([]int, len(slots))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return slots[a].Y - slots[b].Y })
	return order
}
