package bookkeeper_test

import (
	"context"
	"fmt"
	"slices"

	"github.com/gohtgs/htgs/bookkeeper"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/task"
)

// A bookkeeper rule that emits a pair as soon as both of its halves have
// arrived, whatever their order.
func Example() {
	type half struct {
		key  string
		left bool
	}
	g := graph.New[half, string]("pairs")
	bk := bookkeeper.New[half](g, "matcher")
	pairs := bookkeeper.AddRule(bk, "both halves", func() bookkeeper.Rule[half, string] {
		seen := map[string]bool{} // rule state: one map per bookkeeper instance
		return bookkeeper.RuleFunc[half, string](func(_ context.Context, h half, out task.Emitter[string]) error {
			if seen[h.key] {
				delete(seen, h.key)
				return out.Emit(h.key)
			}
			seen[h.key] = true
			return nil
		})
	})
	graph.Connect(g.Input(), bk)
	graph.Connect(pairs, g.Output())

	in := slices.Values([]half{{"a", true}, {"b", true}, {"b", false}, {"c", false}, {"a", false}})
	_ = g.Run(context.Background(), in, func(k string) error {
		fmt.Println("pair", k)
		return nil
	})
	// Output:
	// pair b
	// pair a
}

// A keyed join: each order is emitted once its item count has arrived, and
// its state is freed then.
func ExampleNewJoinN() {
	type item struct {
		order string
		name  string
	}
	size := map[string]int{"o1": 2, "o2": 1}
	g := graph.New[item, string]("orders")
	bk := bookkeeper.New[item](g, "orders")
	orders := bookkeeper.AddRule(bk, "complete orders", func() bookkeeper.Rule[item, string] {
		return bookkeeper.NewJoinN(
			func(it item) string { return it.order },
			func(order string) int { return size[order] },
			func(order string, got []item) string {
				s := order + ":"
				for _, it := range got {
					s += " " + it.name
				}
				return s
			})
	})
	graph.Connect(g.Input(), bk)
	graph.Connect(orders, g.Output())

	in := slices.Values([]item{{"o1", "pen"}, {"o2", "ink"}, {"o1", "pad"}})
	_ = g.Run(context.Background(), in, func(s string) error {
		fmt.Println(s)
		return nil
	})
	// Output:
	// o2: ink
	// o1: pen pad
}
