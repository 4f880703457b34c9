package bookkeeper_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/gohtgs/htgs/bookkeeper"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/task"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The HTGS Hadamard-product tutorial: blocks of A and B arrive in any order;
// a bookkeeper rule pairs A(i,j) with B(i,j); a task multiplies the pair
// element-wise.

type block struct {
	mat      byte // 'A' or 'B'
	row, col int
	data     []float64
}

type blockPair struct{ a, b *block }

type pairRule struct {
	waiting map[[2]int]*block
}

func (p *pairRule) Apply(_ context.Context, b *block, out task.Emitter[blockPair]) error {
	k := [2]int{b.row, b.col}
	other, ok := p.waiting[k]
	if !ok {
		p.waiting[k] = b
		return nil
	}
	delete(p.waiting, k)
	if b.mat == 'A' {
		return out.Emit(blockPair{b, other})
	}
	return out.Emit(blockPair{other, b})
}

func hadamardGraph(threads int) *graph.Graph[*block, *block] {
	g := graph.New[*block, *block]("hadamard")
	bk := bookkeeper.New[*block](g, "pairs")
	pairs := bookkeeper.AddRule(bk, "pair A with B", func() bookkeeper.Rule[*block, blockPair] {
		return &pairRule{waiting: map[[2]int]*block{}}
	})
	mul := graph.AddFunc(g, "multiply", threads, func(_ context.Context, p blockPair, out task.Emitter[*block]) error {
		if p.a.mat != 'A' || p.b.mat != 'B' || len(p.a.data) != len(p.b.data) {
			return errors.New("bad pair")
		}
		c := &block{mat: 'C', row: p.a.row, col: p.a.col, data: make([]float64, len(p.a.data))}
		for i := range c.data {
			c.data[i] = p.a.data[i] * p.b.data[i]
		}
		return out.Emit(c)
	})
	graph.Connect(g.Input(), bk)
	graph.Connect(pairs, mul)
	graph.Connect(mul, g.Output())
	return g
}

func TestHadamardProduct(t *testing.T) {
	const n, bs = 6, 16 // 6x6 grid of 16-element blocks
	rng := rand.New(rand.NewPCG(1, 2))
	var blocks []*block
	want := map[[2]int][]float64{}
	for i := range n {
		for j := range n {
			a := &block{mat: 'A', row: i, col: j, data: make([]float64, bs)}
			b := &block{mat: 'B', row: i, col: j, data: make([]float64, bs)}
			w := make([]float64, bs)
			for k := range bs {
				a.data[k], b.data[k] = rng.Float64(), rng.Float64()
				w[k] = a.data[k] * b.data[k]
			}
			want[[2]int{i, j}] = w
			blocks = append(blocks, a, b)
		}
	}
	rng.Shuffle(len(blocks), func(i, j int) { blocks[i], blocks[j] = blocks[j], blocks[i] })

	for threads := 1; threads <= 8; threads++ {
		got := map[[2]int][]float64{}
		err := hadamardGraph(threads).Run(context.Background(), func(yield func(*block) bool) {
			for _, b := range blocks {
				if !yield(b) {
					return
				}
			}
		}, func(c *block) error {
			got[[2]int{c.row, c.col}] = c.data
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != n*n {
			t.Fatalf("threads=%d: %d blocks, want %d", threads, len(got), n*n)
		}
		for k, w := range want {
			for i := range w {
				if got[k][i] != w[i] {
					t.Fatalf("threads=%d: C%v[%d] = %v, want %v", threads, k, i, got[k][i], w[i])
				}
			}
		}
	}
}

// countRule emits the running count of inputs and stops after limit.
type countRule struct{ seen, limit int }

func (c *countRule) Apply(_ context.Context, _ int, out task.Emitter[int]) error {
	c.seen++
	return out.Emit(c.seen)
}
func (c *countRule) CanTerminate() bool { return c.seen >= c.limit }

func TestRuleStateIsPerInstanceAndRulesTerminate(t *testing.T) {
	g := graph.New[int, int]("counts")
	bk := bookkeeper.New[int](g, "bk")
	first3 := bookkeeper.AddRule(bk, "first3", func() bookkeeper.Rule[int, int] { return &countRule{limit: 3} })
	evens := bookkeeper.AddRule(bk, "evens", func() bookkeeper.Rule[int, int] {
		return bookkeeper.RuleFunc[int, int](func(_ context.Context, v int, out task.Emitter[int]) error {
			if v%2 == 0 {
				return out.Emit(-v)
			}
			return nil
		})
	})
	graph.Connect(g.Input(), bk)
	graph.Connect(first3, g.Output()) // a rule feeds the graph output directly
	graph.Connect(evens, g.Output())

	for run := range 2 { // a second run must start from fresh rule state
		var pos, neg []int
		err := g.Run(context.Background(), func(yield func(int) bool) {
			for i := 1; i <= 10; i++ {
				if !yield(i) {
					return
				}
			}
		}, func(v int) error {
			if v > 0 {
				pos = append(pos, v)
			} else {
				neg = append(neg, v)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(pos) != 3 || pos[0] != 1 || pos[2] != 3 {
			t.Fatalf("run %d: first3 emitted %v, want [1 2 3]", run, pos)
		}
		if len(neg) != 5 {
			t.Fatalf("run %d: evens emitted %v", run, neg)
		}
	}
}

func TestBookkeeperStopsWhenAllRulesTerminate(t *testing.T) {
	g := graph.New[int, int]("stop")
	bk := bookkeeper.New[int](g, "bk")
	r := bookkeeper.AddRule(bk, "two", func() bookkeeper.Rule[int, int] { return &countRule{limit: 2} })
	graph.Connect(g.Input(), bk)
	graph.Connect(r, g.Output())
	rt, err := g.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_ = rt.Send(1)
	_ = rt.Send(2)
	n := 0
	for range rt.Results() { // ends while the input is still open
		n++
	}
	rt.Close()
	if err := rt.Wait(); err != nil || n != 2 {
		t.Fatalf("err %v, n %d", err, n)
	}
}

func TestRuleErrorNamesBookkeeperAndRule(t *testing.T) {
	g := graph.New[int, int]("errs")
	bk := bookkeeper.New[int](g, "keeper")
	r := bookkeeper.AddRule(bk, "picky", func() bookkeeper.Rule[int, int] {
		return bookkeeper.RuleFunc[int, int](func(context.Context, int, task.Emitter[int]) error { return errors.New("no") })
	})
	graph.Connect(g.Input(), bk)
	graph.Connect(r, g.Output())
	err := g.Run(context.Background(), func(yield func(int) bool) { yield(1) }, nil)
	var te *task.Error
	if !errors.As(err, &te) || te.Task != "keeper" {
		t.Fatalf("err = %v", err)
	}
	if want := `rule "picky"`; !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want it to mention %s", err, want)
	}
}

func TestBookkeeperMisuse(t *testing.T) {
	g := graph.New[int, int]("bad")
	bk := bookkeeper.New[int](g, "empty")
	graph.Connect(g.Input(), bk)
	if _, err := g.Start(context.Background()); err == nil {
		t.Fatal("a bookkeeper without rules started")
	}
	g2 := graph.New[int, int]("bad2")
	bk2 := bookkeeper.New[int](g2, "dup")
	bookkeeper.AddRule(bk2, "r", func() bookkeeper.Rule[int, int] { return &countRule{} })
	bookkeeper.AddRule(bk2, "r", func() bookkeeper.Rule[int, int] { return &countRule{} })
	graph.Connect(g2.Input(), bk2)
	if _, err := g2.Start(context.Background()); err == nil {
		t.Fatal("two rules with one name accepted")
	}
}
