package bookkeeper_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/gohtgs/htgs/bookkeeper"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/task"
)

type collect[T any] struct {
	got  []T
	fail error
}

func (c *collect[T]) Emit(v T) error {
	if c.fail != nil {
		return c.fail
	}
	c.got = append(c.got, v)
	return nil
}

type part struct {
	key string
	n   int
}

func TestJoinNFreesKeys(t *testing.T) {
	need := map[string]int{"a": 2, "b": 3, "c": 1}
	j := bookkeeper.NewJoinN(func(p part) string { return p.key }, func(k string) int { return need[k] },
		func(k string, got []part) string {
			s := k + ":"
			for _, p := range got {
				s += fmt.Sprint(p.n)
			}
			return s
		})
	out := &collect[string]{}
	in := []part{{"a", 1}, {"b", 1}, {"c", 1}, {"b", 2}, {"a", 2}, {"b", 3}, {"a", 3}}
	lens := []int{1, 2, 2, 2, 1, 0, 1}
	for i, p := range in {
		if err := j.Apply(context.Background(), p, out); err != nil {
			t.Fatal(err)
		}
		if j.Len() != lens[i] {
			t.Errorf("after input %d: Len = %d, want %d", i, j.Len(), lens[i])
		}
	}
	if want := []string{"c:1", "a:12", "b:123"}; !slices.Equal(out.got, want) {
		t.Errorf("emitted %v, want %v", out.got, want)
	}
	// The key a started again: its one input is pending.
	for k, got := range j.Pending() {
		if k != "a" || len(got) != 1 || got[0].n != 3 {
			t.Errorf("pending %q %v, want a [{a 3}]", k, got)
		}
	}
}

func TestJoinPredicate(t *testing.T) {
	// A key is complete when its values sum to 10 or more.
	j := bookkeeper.NewJoin(func(p part) string { return p.key }, func(k string, got []part) (int, bool) {
		s := 0
		for _, p := range got {
			s += p.n
		}
		return s, s >= 10
	})
	out := &collect[int]{}
	for _, p := range []part{{"x", 4}, {"y", 9}, {"x", 4}, {"y", 1}, {"x", 5}} {
		if err := j.Apply(context.Background(), p, out); err != nil {
			t.Fatal(err)
		}
	}
	if want := []int{10, 13}; !slices.Equal(out.got, want) {
		t.Errorf("emitted %v, want %v", out.got, want)
	}
	if j.Len() != 0 {
		t.Errorf("Len = %d after every key completed", j.Len())
	}
}

// Values on a line 0..n-1 join by adjacent pair: value i takes part in the
// pairs (i-1, i) and (i, i+1).
func TestMultiJoinPairs(t *testing.T) {
	const n = 9
	j := bookkeeper.NewMultiJoin(func(i int, dst [][2]int) [][2]int {
		if i > 0 {
			dst = append(dst, [2]int{i - 1, i})
		}
		if i < n-1 {
			dst = append(dst, [2]int{i, i + 1})
		}
		return dst
	}, func(k [2]int, got []int) ([2]int, bool) {
		if len(got) < 2 {
			return [2]int{}, false
		}
		return [2]int{min(got[0], got[1]), max(got[0], got[1])}, true
	})
	out := &collect[[2]int]{}
	for _, i := range []int{4, 0, 8, 2, 1, 3, 7, 5, 6} {
		if err := j.Apply(context.Background(), i, out); err != nil {
			t.Fatal(err)
		}
	}
	if len(out.got) != n-1 {
		t.Fatalf("emitted %v, want %d pairs", out.got, n-1)
	}
	seen := map[[2]int]bool{}
	for _, p := range out.got {
		if p[1] != p[0]+1 || seen[p] {
			t.Errorf("bad or repeated pair %v", p)
		}
		seen[p] = true
	}
	if j.Len() != 0 {
		t.Errorf("Len = %d after every pair", j.Len())
	}
}

func TestJoinEmitError(t *testing.T) {
	j := bookkeeper.NewJoinN(func(p part) string { return p.key }, func(string) int { return 1 },
		func(k string, _ []part) string { return k })
	stop := errors.New("stop")
	if err := j.Apply(context.Background(), part{"a", 1}, &collect[string]{fail: stop}); !errors.Is(err, stop) {
		t.Fatalf("err = %v, want the emitter's", err)
	}
	if j.Len() != 0 {
		t.Errorf("Len = %d: the completed key is kept after a failed emit", j.Len())
	}
}

// A join inside a graph whose rule also terminates early: the graph ends
// once every key has been emitted.
func TestJoinInGraph(t *testing.T) {
	g := graph.New[part, string]("join")
	bk := bookkeeper.New[part](g, "bk")
	r := bookkeeper.AddRule(bk, "pairs", func() bookkeeper.Rule[part, string] {
		return bookkeeper.NewJoinN(func(p part) string { return p.key }, func(string) int { return 2 },
			func(k string, got []part) string { return fmt.Sprint(k, got[0].n+got[1].n) })
	})
	graph.Connect(g.Input(), bk)
	graph.Connect(r, g.Output())
	var got []string
	in := slices.Values([]part{{"a", 1}, {"b", 1}, {"a", 2}, {"c", 5}, {"b", 5}})
	if err := g.Run(context.Background(), in, func(s string) error { got = append(got, s); return nil }); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a3", "b6"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

var _ task.Emitter[int] = (*collect[int])(nil)

func TestJoinAllocs(t *testing.T) {
	j := bookkeeper.NewJoinN(func(i int) int { return i / 2 }, func(int) int { return 2 }, func(k int, _ []int) int { return k })
	out := &collect[int]{got: make([]int, 0, 1)}
	ctx := context.Background()
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		_ = j.Apply(ctx, i, out)
		_ = j.Apply(ctx, i+1, out)
		out.got = out.got[:0]
		i += 2
	})
	if allocs > 0.01 {
		t.Errorf("%v allocations per joined pair, want none in the steady state", allocs)
	}
}
