package matmul

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/gohtgs/htgs/bookkeeper"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/internal/units"
	"github.com/gohtgs/htgs/memmgr"
	"github.com/gohtgs/htgs/task"
)

// hadamardPlan plans C = A∘B for m x n operands: every block is loaded
// once, row-major, and used once.
func hadamardPlan(m, n int, inMemory bool, cfg Config) (Plan, error) {
	bs, threads := cfg.blockSize(), cfg.cpuThreads()
	p := Plan{M: m, K: 1, N: n, BlockSize: bs, Copies: threads, InMemory: inMemory,
		MB: ceilDiv(m, bs), KB: 1, NB: ceilDiv(n, bs), Order: RowPanels, Panel: 1}
	p.Panels = p.MB
	p.Multiplies = p.MB * p.NB
	p.Flops = float64(m) * float64(n)
	p.WriteBytes = 8 * int64(m) * int64(n)
	s := 8 * int64(min(bs, m)) * int64(min(bs, n))
	p.PoolC = max(1, min(threads+2, p.Multiplies))
	if !inMemory {
		p.PoolA = max(1, min(lookahead(threads), p.Multiplies))
		p.PoolB = p.PoolA
		p.ReadBytes = 2 * p.WriteBytes
	}
	p.PoolBytes = int64(p.PoolA+p.PoolB+p.PoolC) * s
	if cfg.MemoryBudget > 0 && p.PoolBytes > cfg.MemoryBudget {
		return p, fmt.Errorf("%w: %s cannot hold the blocks in flight with %dx%d blocks and %d threads: need at least %s",
			ErrBudget, units.FormatBytes(cfg.MemoryBudget), bs, bs, threads, units.FormatBytes(p.PoolBytes))
	}
	return p, nil
}

// newHadamardPairRule pairs A(i,j) with B(i,j) as soon as both are loaded:
// a join by block position, two blocks a key.
func newHadamardPairRule() *bookkeeper.Join[*block, [2]int, product] {
	return bookkeeper.NewJoinN(func(b *block) [2]int { return [2]int{b.row, b.col} }, two,
		func(_ [2]int, got []*block) product {
			if got[0].op == OperandA {
				return product{a: got[0], b: got[1]}
			}
			return product{a: got[1], b: got[0]}
		})
}

// two is the count of a join of pairs.
func two([2]int) int { return 2 }

// Hadamard computes the element-wise product C = A∘B (c_ij = a_ij·b_ij) of
// two m x n matrices on a small task graph: distribute -> load A / load B
// -> pair A(i,j) with B(i,j) -> multiply elements -> store C. Sources,
// sinks, memory budget and cancellation behave as in [Multiply];
// Config.Kernel and AccumulateThreads are not used.
func Hadamard(ctx context.Context, a, b Source, c Sink, cfg Config) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := checkHadamard(a, b, c); err != nil {
		return nil, err
	}
	m, n := a.Rows(), a.Cols()
	_, aDense := a.(*Dense)
	_, bDense := b.(*Dense)
	plan, err := hadamardPlan(m, n, aDense && bDense, cfg)
	if err != nil {
		return nil, err
	}
	rep := &Report{Plan: plan, Kernel: "element-wise (Go)"}
	if m == 0 || n == 0 {
		return rep, nil
	}
	oa, ob := newOperand("A", a), newOperand("B", b)
	var written, products atomic.Int64
	g := buildHadamard(&plan, cfg, oa, ob, c, &written, &products)
	err = runGraph(ctx, g, plan.hadamardRequests, plan.MB*plan.NB, cfg, rep)
	rep.BytesRead = oa.read.Load() + ob.read.Load()
	rep.BytesWritten = written.Load()
	rep.Products = products.Load()
	return rep, err
}

// checkHadamard checks the operands of Hadamard: none nil, the *Dense ones
// well formed, all three of the same shape.
func checkHadamard(a, b Source, c Sink) error {
	if a == nil || b == nil || c == nil {
		return errors.New("matmul: Hadamard: nil operand")
	}
	for _, m := range []struct {
		v    any
		what string
	}{{a, "A"}, {b, "B"}, {c, "C"}} {
		if d, ok := m.v.(*Dense); ok {
			if err := d.check(m.what); err != nil {
				return err
			}
		}
	}
	m, n := a.Rows(), a.Cols()
	if b.Rows() != m || b.Cols() != n || c.Rows() != m || c.Cols() != n {
		return shapeErr("Hadamard product needs equal shapes: A is %dx%d, B is %dx%d, C is %dx%d",
			m, n, b.Rows(), b.Cols(), c.Rows(), c.Cols())
	}
	return nil
}

// buildHadamard wires the element-wise product graph: the pools of the
// operands read from sources and of C, the distribute bookkeeper and
// loaders, the pairing bookkeeper, the multiply task and store C.
func buildHadamard(plan *Plan, cfg Config, a, b *operand, c Sink, written, products *atomic.Int64) *graph.Graph[blockRequest, blockDone] {
	g := graph.New[blockRequest, blockDone]("hadamard")
	bs := plan.BlockSize
	size := min(bs, plan.M) * min(bs, plan.N)
	if a.dense == nil {
		a.pool = memmgr.New(g, "A blocks", plan.PoolA, blockBuffers(size, cfg.Buffers), memmgr.Dynamic())
	}
	if b.dense == nil {
		b.pool = memmgr.New(g, "B blocks", plan.PoolB, blockBuffers(size, cfg.Buffers), memmgr.Dynamic())
	}
	outPool := memmgr.New(g, "C blocks", plan.PoolC, blockBuffers(size, cfg.Buffers), memmgr.Dynamic())
	loadA, loadB := addLoaders(g, a, b, bs)
	pairBK := bookkeeper.New[*block](g, "pair")
	toMul := bookkeeper.AddRule(pairBK, "A(i,j) with B(i,j)", func() bookkeeper.Rule[*block, product] {
		return newHadamardPairRule()
	})
	graph.Connect(loadA, pairBK)
	graph.Connect(loadB, pairBK)
	home, _ := c.(*Dense)
	mul := graph.AddFunc(g, "multiply elements", plan.Copies, multiplyElements(outPool, home, bs, products))
	memmgr.Use(outPool, mul)
	graph.Connect(toMul, mul)
	store := addStore(g, c, bs, written)
	graph.Connect(mul, store)
	graph.Connect(store, g.Output())
	return g
}

// multiplyElements returns the body of the multiply elements task: it
// multiplies a pair of blocks element by element into C's block of home (a
// *Dense result) or, without one, into a buffer of pool, releases the
// pair and emits the block; products counts the blocks done.
func multiplyElements(pool *memmgr.Pool[[]float64], home *Dense, bs int, products *atomic.Int64) func(context.Context, product, task.Emitter[*partial]) error {
	return func(ctx context.Context, pr product, out task.Emitter[*partial]) error {
		a, b := pr.a, pr.b
		p := &partial{row: a.row, col: a.col, rows: a.rows, cols: a.cols, count: 1}
		if home != nil {
			p.data, p.stride = home.view(a.row*bs, a.col*bs, p.rows, p.cols), home.Stride
		} else {
			buf, err := pool.Get(ctx)
			if err != nil {
				return err
			}
			p.buf, p.data, p.stride = buf, buf.Data[:p.rows*p.cols], p.cols
		}
		for r := range p.rows {
			dst := p.data[r*p.stride : r*p.stride+p.cols]
			x := a.data[r*a.stride : r*a.stride+p.cols]
			y := b.data[r*b.stride : r*b.stride+p.cols]
			for j := range dst {
				dst[j] = x[j] * y[j]
			}
		}
		products.Add(1)
		if err := errors.Join(a.release(), b.release()); err != nil {
			return err
		}
		return out.Emit(p)
	}
}

// hadamardRequests yields the loads of an element-wise product: A(i,j)
// and B(i,j), each used once, in row-major order.
func (p *Plan) hadamardRequests(yield func(blockRequest) bool) {
	for i := range p.MB {
		for j := range p.NB {
			if !yield(blockRequest{Operand: OperandA, Row: i, Col: j, Uses: 1}) ||
				!yield(blockRequest{Operand: OperandB, Row: i, Col: j, Uses: 1}) {
				return
			}
		}
	}
}
