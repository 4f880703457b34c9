package matmul

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync/atomic"

	"gonum.org/v1/gonum/floats"

	"github.com/gohtgs/htgs/bookkeeper"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/internal/phase"
	"github.com/gohtgs/htgs/memmgr"
	"github.com/gohtgs/htgs/task"
)

// DefaultBlockSize is the block size used when Config.BlockSize is 0 and
// the kernel runs on the CPU.
const DefaultBlockSize = 512

// DefaultDeviceBlockSize is the block size used when Config.BlockSize is 0
// and the kernel runs on devices (the cuda kernel): a GPU needs large
// products to reach its peak, and every product costs a few driver calls.
// Matrices of at least LargeDeviceBlockSize*2 in every dimension, without a
// device-memory budget, get LargeDeviceBlockSize blocks instead (on an
// H100 at n = 16384 from page-locked memory: 48 TFLOP/s with 4096-blocks,
// 39 with 2048; on an H200 at n = 8192 from page-locked memory 32.6 against
// 27.5, from ordinary memory 23.3-23.6 against 20.0-22.1).
const DefaultDeviceBlockSize = 2048

// LargeDeviceBlockSize is the device block size for large products (see
// [DefaultDeviceBlockSize]).
const LargeDeviceBlockSize = 4096

// deviceBlockSize is the default device block size of an m x k by k x n
// product with the given device budget (0: none).
func deviceBlockSize(m, k, n int, budget int64) int {
	if budget == 0 && min(m, k, n) >= 2*LargeDeviceBlockSize {
		return LargeDeviceBlockSize
	}
	return DefaultDeviceBlockSize
}

// Errors of bad arguments, wrapped by the errors of this package's
// functions; test for them with errors.Is.
var (
	// ErrShape: the operands' shapes do not fit (inner dimensions differ,
	// or the sink has the wrong shape).
	ErrShape = errors.New("matmul: shapes do not match")
	// ErrBudget: the memory budget cannot hold the pools of one pass.
	ErrBudget = errors.New("matmul: memory budget too small")
	// ErrConfig: a Config field is out of range.
	ErrConfig = errors.New("matmul: invalid configuration")
)

// Config tunes a product. The zero value is valid: blocks of
// DefaultBlockSize, one multiply thread per CPU, the gonum kernel, no memory
// limit.
type Config struct {
	// BlockSize is the side of the square blocks (0: DefaultBlockSize, or
	// DefaultDeviceBlockSize for a product on devices).
	BlockSize int
	// Copies is the number of copies of the multiply task (0:
	// runtime.GOMAXPROCS). With a kernel that runs on devices (the cuda
	// kernel), each device has one multiply task queueing its products on
	// one stream, and Copies only sizes the streamed blocks held ahead on
	// each device (0: 2).
	Copies int
	// BLASThreads is the number of threads of each block product's
	// library call, for kernels whose library runs threads of its own
	// (OpenBLAS; 0: see below). Other kernels ignore it.
	//
	// With OpenBLAS, operands in memory and BlockSize, Copies and
	// BLASThreads all 0, Multiply takes the whole product as one block
	// multiplied by one library call on every CPU, which is what OpenBLAS
	// runs fastest (see BlockSizeFor); otherwise each call has BLASThreads
	// threads (0: one, the task copies being the parallelism).
	BLASThreads int
	// AccumulateCopies is the number of copies of the accumulate task
	// (0: half of Copies, or of runtime.GOMAXPROCS with a device kernel,
	// at least 1).
	AccumulateCopies int
	// Kernel computes the block products (nil: Auto(), OpenBLAS when it
	// can be loaded, else Gonum()).
	Kernel Kernel
	// MemoryBudget bounds, in bytes, the blocks that the memory pools hold
	// at once: blocks of operands read from a Source and partial products.
	// 0 means no limit. Operands that are *Dense are used in place and not
	// counted. Multiply plans its traversal to fit (see Plan) or fails
	// with ErrBudget.
	MemoryBudget int64
	// DeviceMemory bounds, in bytes per device, the blocks that the device
	// memory pools of a device kernel (the cuda kernel) hold at once (0:
	// the kernel's default, three quarters of the memory free on the
	// device with the least when the product starts). It is ignored by
	// CPU kernels.
	DeviceMemory int64
	// Progress, when set, is called after each block of the result is
	// stored, with the number stored so far and the total, from the
	// goroutine that called Multiply.
	Progress func(done, total int)
	// Observe, when set, is called once the graph has started and before
	// any input is sent: profilers read run.Stats() while the run goes on,
	// and can draw it or write its timeline once it has ended.
	Observe func(run *graph.Execution)
	// Logger receives the run's diagnostics (nil: discarded).
	Logger *slog.Logger
	// StartOptions are passed to the graph's Start, after the logger: for
	// instance graph.WithTrace() to record a timeline that Observe's
	// runtime can write at the end.
	StartOptions []graph.StartOption
	// Buffers, when set, recycles block buffers between products (see
	// BufferCache); nil allocates fresh buffers for every product.
	Buffers *BufferCache
}

// BlockSizeFor returns the block size Multiply uses for an m x k by k x n
// product of operands in memory with c: c.BlockSize when set, else the
// kernel's default for the shapes (for a device kernel,
// DefaultDeviceBlockSize or LargeDeviceBlockSize; for OpenBLAS with
// Copies and BLASThreads 0, one block: see cpuShape).
func (c Config) BlockSizeFor(m, k, n int) int {
	bs, _, _ := c.cpuShape(m, k, n, true)
	return bs
}

// threadedKernel is a kernel whose library calls can run threads of their
// own (OpenBLAS).
type threadedKernel interface {
	Kernel
	// newThreadedMultiplier returns a multiplier whose calls use threads
	// library threads.
	newThreadedMultiplier(threads int) Multiplier
}

// cpuShape returns the block size, the multiply-task copies and the
// library threads of each call for an m x k by k x n product with c.
//
// The default for OpenBLAS on operands in memory is one block: one
// library call, with every CPU, through the graph. OpenBLAS runs one large
// multithreaded call faster than any split of it into calls of its own:
// its packing and threading amortize over the call, while blocks add
// calls, partial products to sum (memory passes that take cores from the
// library) and a tail where some threads wait. Measured on the
// development VM (2 cores, loaded), against numpy on the same OpenBLAS:
// blocks of 512 on 2 copies 0.62x/0.70x at n = 2048/4096, blocks of n/2
// on 2 single-threaded copies 0.90-1.03x, 2x2x2 blocks with 2-thread
// calls 0.89x, one block 1.0x within the noise (compare-numpy.sh). Out of
// core, and whenever the caller sets any of the three, the blocking is the
// usual one.
func (c Config) cpuShape(m, k, n int, inMemory bool) (bs, threads, blasThreads int) {
	if _, ok := offloadOf(c); ok {
		bs = c.blockSize()
		if c.BlockSize == 0 {
			bs = deviceBlockSize(m, k, n, c.DeviceMemory)
		}
		return bs, c.threads(), 1
	}
	_, threaded := c.kernel().(threadedKernel)
	if threaded && inMemory && c.BlockSize == 0 && c.Copies == 0 && c.BLASThreads == 0 {
		return max(DefaultBlockSize, m, k, n), 1, runtime.GOMAXPROCS(0)
	}
	return c.blockSize(), c.threads(), max(1, c.BLASThreads)
}

func (c Config) blockSize() int {
	if c.BlockSize > 0 {
		return c.BlockSize
	}
	return DefaultBlockSize
}

func (c Config) threads() int {
	if c.Copies > 0 {
		return c.Copies
	}
	if _, ok := offloadOf(c); ok {
		return defaultDeviceThreads
	}
	return runtime.GOMAXPROCS(0)
}

// cpuThreads is Copies for work on the CPU whatever the kernel (the
// element-wise product).
func (c Config) cpuThreads() int {
	if c.Copies > 0 {
		return c.Copies
	}
	return runtime.GOMAXPROCS(0)
}

func (c Config) accumulateThreads() int {
	if c.AccumulateCopies > 0 {
		return c.AccumulateCopies
	}
	if _, ok := offloadOf(c); ok {
		return max(1, runtime.GOMAXPROCS(0)/2)
	}
	return max(1, c.threads()/2)
}

func (c Config) kernel() Kernel {
	if c.Kernel != nil {
		return c.Kernel
	}
	return Auto()
}

func (c Config) validate() error {
	switch {
	case c.BlockSize < 0:
		return fmt.Errorf("%w: block size %d", ErrConfig, c.BlockSize)
	case c.Copies < 0:
		return fmt.Errorf("%w: %d threads", ErrConfig, c.Copies)
	case c.AccumulateCopies < 0:
		return fmt.Errorf("%w: %d accumulate copies", ErrConfig, c.AccumulateCopies)
	case c.MemoryBudget < 0:
		return fmt.Errorf("%w: memory budget %d", ErrConfig, c.MemoryBudget)
	case c.DeviceMemory < 0:
		return fmt.Errorf("%w: device memory %d", ErrConfig, c.DeviceMemory)
	}
	return nil
}

// Operand names a matrix of the product: A or B.
type Operand uint8

// The operands of a product.
const (
	OperandA Operand = iota
	OperandB
)

// String returns "A" or "B".
func (o Operand) String() string {
	if o == OperandA {
		return "A"
	}
	return "B"
}

// blockRequest, the graph's input, asks for one block of an operand to be
// loaded. The distribute bookkeeper routes it to the loader of its operand.
type blockRequest struct {
	Operand  Operand
	Row, Col int // block indices within the operand
	// Gen tells apart the loads of the same block: the block is read again
	// on every pass that needs it (the panel index, or for Streamed the
	// index of the block of C it is read for).
	Gen int
	// Uses is the number of block products that use this load: the
	// release count of its buffer.
	Uses int
}

// blockDone, the graph's output, reports a finished block of C.
type blockDone struct {
	Row, Col   int // block indices
	R0, C0     int // top-left element
	Rows, Cols int
}

// block is a loaded block of an operand: a view into a *Dense operand, or
// a pool buffer holding what was read.
type block struct {
	op         Operand
	row, col   int
	gen        int
	uses       int // products that use this load (blockRequest.Uses)
	rows, cols int
	data       []float64
	stride     int
	buf        *memmgr.Buffer[[]float64] // nil for a view
}

func (b *block) release() error {
	if b.buf == nil {
		return nil
	}
	return b.buf.Release()
}

// product asks the multiply task for A(i,l)·B(l,j).
type product struct{ a, b *block }

// partial is a partial sum of C(i,j): count of its KB contributions. Its
// fields do not change once it is emitted (the data of its buffer does).
type partial struct {
	row, col   int
	rows, cols int
	data       []float64
	stride     int
	count      int
	buf        *memmgr.Buffer[[]float64] // nil: the block lives in the *Dense result ("home")
}

func (p *partial) release() error {
	if p.buf == nil {
		return nil
	}
	return p.buf.Release()
}

// pair asks the accumulate task for acc += add.
type pair struct{ acc, add *partial }

// operand is one side of a product (or the result) as the graph sees it.
type operand struct {
	label string // "A" or "A (name)"
	src   Source
	dense *Dense // non-nil: blocks are views
	pool  *memmgr.Pool[[]float64]
	read  atomic.Int64 // bytes read
}

func newOperand(what string, src Source) *operand {
	o := &operand{label: what, src: src}
	if n, ok := src.(interface{ Name() string }); ok {
		o.label = fmt.Sprintf("%s (%s)", what, n.Name())
	}
	o.dense, _ = src.(*Dense)
	return o
}

// load gets the block a request names: a view, or a buffer from the pool
// filled by ReadBlock and released after r.Uses releases.
func (o *operand) load(ctx context.Context, r blockRequest, bs int) (*block, error) {
	r0, c0 := r.Row*bs, r.Col*bs
	b := &block{op: r.Operand, row: r.Row, col: r.Col, gen: r.Gen, uses: r.Uses,
		rows: min(bs, o.src.Rows()-r0), cols: min(bs, o.src.Cols()-c0)}
	if o.dense != nil {
		b.data, b.stride = o.dense.view(r0, c0, b.rows, b.cols), o.dense.Stride
		return b, nil
	}
	buf, err := o.pool.GetShared(ctx, r.Uses)
	if err != nil {
		return nil, err
	}
	b.buf, b.data, b.stride = buf, buf.Data[:b.rows*b.cols], b.cols
	if err := o.src.ReadBlock(r0, c0, b.rows, b.cols, b.data); err != nil {
		// The buffer goes back to the pool with its Uses releases.
		for range r.Uses {
			buf.Release()
		}
		return nil, fmt.Errorf("matmul: reading block (%d, %d) of %s: %w", r.Row, r.Col, o.label, err)
	}
	o.read.Add(8 * int64(b.rows) * int64(b.cols))
	return b, nil
}

// addLoaders adds the distribute bookkeeper (BK1 of the HTGS paper) and
// one loader task per operand to g; it returns the loaders, which emit
// loaded blocks.
func addLoaders(g *graph.Graph[blockRequest, blockDone], a, b *operand, bs int) (loadA, loadB *graph.Node[blockRequest, *block]) {
	dist := bookkeeper.New[blockRequest](g, "distribute")
	route := func(op Operand) func() bookkeeper.Rule[blockRequest, blockRequest] {
		return func() bookkeeper.Rule[blockRequest, blockRequest] {
			return bookkeeper.RuleFunc[blockRequest, blockRequest](func(_ context.Context, r blockRequest, out task.Emitter[blockRequest]) error {
				if r.Operand != op {
					return nil
				}
				return out.Emit(r)
			})
		}
	}
	toA := bookkeeper.AddRule(dist, "to load A", route(OperandA))
	toB := bookkeeper.AddRule(dist, "to load B", route(OperandB))
	graph.Connect(g.Input(), dist)
	// One copy per loader: buffers are then taken from each pool in request
	// order, which the schedule's deadlock freedom relies on (a later block
	// must never hold the last buffer an earlier one waits for).
	loader := func(o *operand) func(ctx context.Context, r blockRequest, out task.Emitter[*block]) error {
		return func(ctx context.Context, r blockRequest, out task.Emitter[*block]) error {
			blk, err := o.load(ctx, r, bs)
			if err != nil {
				return err
			}
			return out.Emit(blk)
		}
	}
	loadA = graph.AddFunc(g, "load A", 1, loader(a))
	loadB = graph.AddFunc(g, "load B", 1, loader(b))
	graph.Connect(toA, loadA)
	graph.Connect(toB, loadB)
	if a.pool != nil {
		memmgr.Use(a.pool, loadA)
	}
	if b.pool != nil {
		memmgr.Use(b.pool, loadB)
	}
	return loadA, loadB
}

type blockKey struct {
	op            Operand
	row, col, gen int
}

type heldBlock struct {
	b    *block
	left int // products emitted so far
}

// pairRule is the pairing bookkeeper's rule (BK2): it keeps the loaded
// blocks and emits the block products in schedule order, each as soon as
// both of its blocks are loaded. Emitting in schedule order (rather than in
// arrival order) is what bounds the partial products alive (see
// partialCap).
type pairRule struct {
	cur    *cursor
	next   step
	more   bool
	blocks map[blockKey]*heldBlock
}

func (r *pairRule) Apply(_ context.Context, b *block, out task.Emitter[product]) error {
	r.blocks[blockKey{b.op, b.row, b.col, b.gen}] = &heldBlock{b: b}
	for r.more {
		ka := blockKey{OperandA, r.next.i, r.next.l, r.next.genA}
		kb := blockKey{OperandB, r.next.l, r.next.j, r.next.genB}
		ha, hb := r.blocks[ka], r.blocks[kb]
		if ha == nil || hb == nil {
			return nil
		}
		if err := out.Emit(product{a: ha.b, b: hb.b}); err != nil {
			return err
		}
		if ha.left++; ha.left == ha.b.uses {
			delete(r.blocks, ka)
		}
		if hb.left++; hb.left == hb.b.uses {
			delete(r.blocks, kb)
		}
		r.next, r.more = r.cur.next()
	}
	return nil
}

// mulTask is one copy of the multiply task: it owns a Multiplier.
type mulTask struct {
	mult  Multiplier
	pool  *memmgr.Pool[[]float64]
	home  *Dense // the *Dense result, or nil
	bs    int
	count *atomic.Int64 // products done
}

func (t *mulTask) Initialize(ctx context.Context, info task.Info) error {
	return phase.Initialize(ctx, t.mult, info)
}

func (t *mulTask) Shutdown(ctx context.Context) error { return phase.Shutdown(ctx, t.mult) }

// Execute computes one contribution A(i,l)·B(l,j) of C(i,j). The
// contribution l = 0 of a *Dense result is computed in place (its "home");
// the others go to buffers of the partial-product pool.
func (t *mulTask) Execute(ctx context.Context, pr product, out task.Emitter[*partial]) error {
	a, b := pr.a, pr.b
	p := &partial{row: a.row, col: b.col, rows: a.rows, cols: b.cols, count: 1}
	if t.home != nil && a.col == 0 {
		p.data, p.stride = t.home.view(a.row*t.bs, b.col*t.bs, p.rows, p.cols), t.home.Stride
	} else {
		buf, err := t.pool.Get(ctx)
		if err != nil {
			return err
		}
		p.buf, p.data, p.stride = buf, buf.Data[:p.rows*p.cols], p.cols
	}
	if err := t.mult.Mul(ctx, p.rows, p.cols, a.cols, a.data, a.stride, b.data, b.stride, 0, p.data, p.stride); err != nil {
		p.release()
		return fmt.Errorf("matmul: multiplying A(%d,%d)·B(%d,%d): %w", a.row, a.col, b.row, b.col, err)
	}
	t.count.Add(1)
	if err := errors.Join(a.release(), b.release()); err != nil {
		return err
	}
	return out.Emit(p)
}

// newSumRule is the accumulate bookkeeper's rule (BK3) that pairs partial
// sums of the same block of C for the accumulate task: a join by block of
// C, two partials a key, of the partials that are not complete yet
// (complete sums are left to doneRule).
func newSumRule(kb int) *bookkeeper.Join[*partial, [2]int, pair] {
	return bookkeeper.NewMultiJoin(func(p *partial, dst [][2]int) [][2]int {
		if p.count == kb {
			return dst
		}
		return append(dst, [2]int{p.row, p.col})
	}, func(_ [2]int, got []*partial) (pair, bool) {
		if len(got) < 2 {
			return pair{}, false
		}
		return pair{acc: got[0], add: got[1]}, true
	})
}

// accumulate adds one partial sum into another; the home block of a
// *Dense result is always the one added into, so the result ends in place.
func accumulate(_ context.Context, pr pair, out task.Emitter[*partial]) error {
	acc, add := pr.acc, pr.add
	if add.buf == nil {
		acc, add = add, acc
	}
	for r := range acc.rows {
		floats.Add(acc.data[r*acc.stride:r*acc.stride+acc.cols], add.data[r*add.stride:r*add.stride+add.cols])
	}
	// A new value, not acc itself: a partial is never changed once emitted,
	// because every rule of the bookkeeper may still be reading it.
	sum := *acc
	sum.count += add.count
	if err := add.release(); err != nil {
		return err
	}
	return out.Emit(&sum)
}

// build wires the block matrix multiplication graph of the HTGS paper
// (Fig. 7): distribute -> load A / load B -> pair -> multiply ->
// accumulate bookkeeper <-> accumulate, -> store C -> output.
func build(plan *Plan, cfg Config, a, b *operand, c Sink, written *atomic.Int64, products *atomic.Int64) *graph.Graph[blockRequest, blockDone] {
	g := graph.New[blockRequest, blockDone]("matmul")
	bs := plan.BlockSize
	toMul := addPairs(g, plan, cfg, a, b)
	partials := memmgr.New(g, "C partials", plan.PoolC, blockBuffers(min(bs, plan.M)*min(bs, plan.N), cfg.Buffers), memmgr.Dynamic())
	home, _ := c.(*Dense)
	kernel := cfg.kernel()
	mul := graph.AddTask(g, "multiply", plan.Copies, func() task.Task[product, *partial] {
		mult := kernel.NewMultiplier()
		if tk, ok := kernel.(threadedKernel); ok && plan.BLASThreads > 1 {
			mult = tk.newThreadedMultiplier(plan.BLASThreads)
		}
		return &mulTask{mult: mult, pool: partials, home: home, bs: bs, count: products}
	})
	memmgr.Use(partials, mul)
	graph.Connect(toMul, mul)
	addSums(g, plan, cfg, mul, c, written)
	return g
}

// addPairs adds the front of the product graphs to g: the pools of the
// operands read from sources, the distribute bookkeeper and loaders, and
// the pairing bookkeeper (BK2), whose rule it returns: it emits the block
// products in schedule order.
func addPairs(g *graph.Graph[blockRequest, blockDone], plan *Plan, cfg Config, a, b *operand) graph.Producer[product] {
	bs := plan.BlockSize
	if plan.PoolA > 0 && a.dense == nil {
		a.pool = memmgr.New(g, "A blocks", plan.PoolA, blockBuffers(min(bs, plan.M)*min(bs, plan.K), cfg.Buffers), memmgr.Dynamic())
	}
	if plan.PoolB > 0 && b.dense == nil {
		b.pool = memmgr.New(g, "B blocks", plan.PoolB, blockBuffers(min(bs, plan.K)*min(bs, plan.N), cfg.Buffers), memmgr.Dynamic())
	}
	loadA, loadB := addLoaders(g, a, b, bs)
	pairBK := bookkeeper.New[*block](g, "pair")
	products := bookkeeper.AddRule(pairBK, "A(i,l) with B(l,j)", func() bookkeeper.Rule[*block, product] {
		r := &pairRule{cur: newCursor(plan), blocks: map[blockKey]*heldBlock{}}
		r.next, r.more = r.cur.next()
		return r
	})
	graph.Connect(loadA, pairBK)
	graph.Connect(loadB, pairBK)
	return products
}

// addSums adds the back of the product graphs to g: the accumulate
// bookkeeper (BK3) fed by partials, the accumulate task in a cycle with it,
// and store C, which feeds g's output.
func addSums(g *graph.Graph[blockRequest, blockDone], plan *Plan, cfg Config, partials graph.Producer[*partial], c Sink, written *atomic.Int64) {
	accBK := bookkeeper.New[*partial](g, "accumulate bookkeeper")
	toAcc := bookkeeper.AddRule(accBK, "pair partial sums", func() bookkeeper.Rule[*partial, pair] {
		return newSumRule(plan.KB)
	})
	kb := plan.KB
	toStore := bookkeeper.AddRule(accBK, "complete", func() bookkeeper.Rule[*partial, *partial] {
		return bookkeeper.RuleFunc[*partial, *partial](func(_ context.Context, p *partial, out task.Emitter[*partial]) error {
			if p.count != kb {
				return nil
			}
			return out.Emit(p)
		})
	})
	acc := graph.AddFunc(g, "accumulate", cfg.accumulateThreads(), accumulate)
	graph.Connect(partials, accBK)
	graph.Connect(toAcc, acc)
	graph.Connect(acc, accBK)
	store := addStore(g, c, plan.BlockSize, written)
	graph.Connect(toStore, store)
	graph.Connect(store, g.Output())
}

// addStore adds the task that stores finished blocks of C: it writes those
// held in pool buffers to c (blocks of a *Dense c are already in place),
// releases them, and reports them as the graph's output.
func addStore(g *graph.Graph[blockRequest, blockDone], c Sink, bs int, written *atomic.Int64) *graph.Node[*partial, blockDone] {
	return graph.AddFunc(g, "store C", 1, func(_ context.Context, p *partial, out task.Emitter[blockDone]) error {
		d := blockDone{Row: p.row, Col: p.col, R0: p.row * bs, C0: p.col * bs, Rows: p.rows, Cols: p.cols}
		if p.buf != nil {
			if err := c.WriteBlock(d.R0, d.C0, d.Rows, d.Cols, p.data); err != nil {
				p.release()
				return fmt.Errorf("matmul: writing block (%d, %d) of C%s: %w", p.row, p.col, sinkName(c), err)
			}
			written.Add(8 * int64(d.Rows) * int64(d.Cols))
		}
		if err := p.release(); err != nil {
			return err
		}
		return out.Emit(d)
	})
}

// sinkName returns " (name)" for sinks that have a name.
func sinkName(c Sink) string {
	if n, ok := c.(interface{ Name() string }); ok {
		return fmt.Sprintf(" (%s)", n.Name())
	}
	return ""
}
