package matmul

import (
	"fmt"

	"github.com/gohtgs/htgs/internal/units"
)

// Order is the traversal of a product: which operand stays in memory while
// the other streams past it.
type Order int

const (
	// RowPanels keeps a panel of block rows of A in memory (Plan.Panel
	// block rows, all of their KB blocks) and streams B past it once per
	// panel, column of blocks by column of blocks. Multiplies run in the
	// order panel, j, l, i.
	RowPanels Order = iota
	// ColumnPanels keeps a panel of block columns of B in memory and
	// streams A past it once per panel. Multiplies run in the order
	// panel, i, l, j.
	ColumnPanels
	// Streamed keeps nothing: for every block of C, in row-major order,
	// the KB blocks of A's row and B's column are read again. It is the
	// fallback for budgets too small for one panel. Multiplies run in the
	// order i, j, l.
	Streamed
)

// String names the order.
func (o Order) String() string {
	switch o {
	case RowPanels:
		return "row panels"
	case ColumnPanels:
		return "column panels"
	case Streamed:
		return "streamed"
	}
	return fmt.Sprintf("Order(%d)", int(o))
}

// MarshalText writes the order's name (for JSON profiles).
func (o Order) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// Plan is how a product is traversed and how much memory its pools hold.
// It is computed from the shapes, the block size, the thread count and the
// memory budget, and reported with the result.
type Plan struct {
	M, K, N    int   // C (M x N) = A (M x K) · B (K x N)
	BlockSize  int   // blocks are BlockSize x BlockSize, smaller at the edges
	MB, KB, NB int   // blocks along M, K and N
	InMemory   bool  // A and B are *Dense: blocks are used in place, not read
	Order      Order // traversal
	Panel      int   // block rows (RowPanels) or block columns (ColumnPanels) per panel; 1 for Streamed
	Panels     int   // number of panels (passes over the streamed operand)
	Copies     int   // multiply-task copies
	// BLASThreads is the threads of each library call of a kernel that
	// runs threads of its own (OpenBLAS; 1 otherwise).
	BLASThreads int
	// Pool capacities in blocks (0: no pool, the operand is in memory).
	PoolA, PoolB, PoolC int
	// PoolBytes is the memory the three pools can hold at once.
	PoolBytes int64
	// ReadBytes and WriteBytes are the bytes of matrix data read from the
	// sources and written to the sink (0 read for in-memory operands).
	ReadBytes, WriteBytes int64
	// Multiplies is the number of block products, MB·NB·KB.
	Multiplies int
	// Flops is the number of floating-point operations: 2·M·N·K for a
	// product, M·N for an element-wise product.
	Flops float64

	// Devices is the number of devices of a device kernel (the cuda
	// kernel), 0 for kernels that run on the CPU. With devices, Copies is
	// the number of multiply-task copies per device and PoolC the capacity
	// of each device's pool of host partial products.
	Devices int
	// DevicePoolA, DevicePoolB and DevicePoolC are the capacities, in
	// blocks, of each device's pools of A, B and C blocks.
	DevicePoolA, DevicePoolB, DevicePoolC int
	// DevicePoolBytes is the device memory those pools can hold at once,
	// per device.
	DevicePoolBytes int64
	// SlabFirst (devices only, one panel) runs the products slab by slab
	// along the inner dimension: all the products of A(·,l) and B(l,·)
	// before those of l+1, every block of C staying open on its device
	// until the last slab (DevicePoolC holds them all). Each slab needs a
	// column of A and a row of B, so uploads keep pace with the products
	// from the start, where the panel order needs all of the resident
	// operand for the first products. By default only when A and B are
	// page-locked with PinHost and SlabLead does not apply;
	// HTGS_MATMUL_SLABFIRST=1 asks for it always, 0 never; and only where
	// the device memory allows.
	SlabFirst bool
	// SlabLead (devices only, one panel, 0: off) runs the first SlabLead
	// streamed block columns (row panels; block rows with column panels)
	// slab by slab, as SlabFirst runs them all: each slab of them needs a
	// column of the resident operand and SlabLead blocks of the streamed
	// one, so the uploads keep pace with the products from the start,
	// where the panel order first needs the whole resident operand for one
	// column's products. The rest follow in the panel order, the last of
	// them one block of C after another (the inner index fastest), so that
	// its blocks finish, and go back, one by one rather than all at the
	// end. The blocks of C of the lead stay open together (DevicePoolC
	// holds them, and a column more). By default 2 when A and B are
	// page-locked with PinHost (+8-10% at n = 16384 on an H200:
	// docs/matmul.md), else off; HTGS_MATMUL_SLABLEAD=N sets it (0: off);
	// only where the device memory allows.
	SlabLead int
	// UploadBytes is the matrix data the plan copies from the host to the
	// devices, all devices together.
	UploadBytes int64
	// DownloadBytes is the data the plan copies back from the devices: C,
	// once, for it is summed on the devices.
	DownloadBytes int64
}

// BusBytes returns the bytes a device plan moves over the bus, both ways,
// and the least any plan could: |A| + |B| + |C|.
func (p Plan) BusBytes() (moved, least int64) {
	return p.UploadBytes + p.DownloadBytes, 8 * (int64(p.M)*int64(p.K) + int64(p.K)*int64(p.N) + int64(p.M)*int64(p.N))
}

// String summarizes the plan on one line.
func (p Plan) String() string {
	s := fmt.Sprintf("%dx%d · %dx%d, block %d (%dx%dx%d blocks), %d threads", p.M, p.K, p.K, p.N, p.BlockSize, p.MB, p.KB, p.NB, p.Copies)
	if p.BLASThreads > 1 {
		s += fmt.Sprintf(" of %d BLAS threads", p.BLASThreads)
	}
	if p.Devices > 0 {
		moved, least := p.BusBytes()
		slab := ""
		switch {
		case p.SlabFirst:
			slab = ", slab first"
		case p.SlabLead > 0:
			slab = fmt.Sprintf(", the first %d slab first", p.SlabLead)
		}
		s += fmt.Sprintf(" per device on %d devices: %s of %d blocks (%d passes%s), device pools A %d B %d C %d (%s per device), uploads %s, downloads %s (bus %.2fx the minimum %s)",
			p.Devices, p.Order, p.Panel, p.Panels, slab, p.DevicePoolA, p.DevicePoolB, p.DevicePoolC, units.FormatBytes(p.DevicePoolBytes),
			units.FormatBytes(p.UploadBytes), units.FormatBytes(p.DownloadBytes), float64(moved)/float64(max(1, least)), units.FormatBytes(least))
		if p.InMemory {
			return s + ", operands in memory"
		}
		return s + fmt.Sprintf(", host pools A %d B %d C %d per device (%s), reads %s", p.PoolA, p.PoolB, p.PoolC,
			units.FormatBytes(p.PoolBytes), units.FormatBytes(p.ReadBytes))
	}
	if p.InMemory {
		return s + fmt.Sprintf(", in memory, %d-block panels", p.Panel)
	}
	return s + fmt.Sprintf(", out of core: %s of %d blocks (%d passes), pools A %d B %d C %d (%s), reads %s, writes %s",
		p.Order, p.Panel, p.Panels, p.PoolA, p.PoolB, p.PoolC, units.FormatBytes(p.PoolBytes),
		units.FormatBytes(p.ReadBytes), units.FormatBytes(p.WriteBytes))
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// lookahead is the capacity of the pool of a streamed operand: enough
// blocks for every multiply thread to have work queued while the loader
// reads ahead.
func lookahead(threads int) int { return max(4, 2*threads) }

// partialCap is the capacity of the pool of partial products for panels of
// panel blocks. Multiplies are emitted and dequeued in schedule order, so
// at most panel + threads blocks of C are open (have some but not all of
// their contributions summed): the panel's C blocks at the frontier of the
// schedule plus one per multiply still executing behind it. Each open block
// holds one buffer once the accumulations in flight drain, which needs no
// new buffer; with panel + 2·threads + 2 buffers a multiply waiting for one
// always gets it (see the package documentation).
func partialCap(panel, threads int) int { return panel + 2*threads + 2 }

// capPartials limits a partial-product pool to the number of products: no
// more buffers can ever be out at once.
func capPartials(c, multiplies int) int { return max(1, min(c, multiplies)) }

// newPlan plans C = A·B for the given shapes. inMemory means both operands
// are in memory (no pools for A and B, no budget for them).
func newPlan(m, k, n int, inMemory bool, cfg Config) (Plan, error) {
	bs, threads, blasThreads := cfg.cpuShape(m, k, n, inMemory)
	p := Plan{M: m, K: k, N: n, BlockSize: bs, Copies: threads, BLASThreads: blasThreads, InMemory: inMemory,
		MB: ceilDiv(m, bs), KB: ceilDiv(k, bs), NB: ceilDiv(n, bs)}
	p.Multiplies = p.MB * p.NB * p.KB
	p.Flops = 2 * float64(m) * float64(n) * float64(k)
	p.WriteBytes = 8 * int64(m) * int64(n)
	if p.Multiplies == 0 {
		return p, nil // nothing to multiply: C is empty or all zeros
	}
	if off, ok := offloadOf(cfg); ok {
		return planOffload(p, cfg, len(off.offloadDevices()), deviceBudget(cfg, off))
	}
	if inMemory {
		return planInMemory(p), nil
	}
	return planOutOfCore(p, cfg.MemoryBudget)
}

// planInMemory plans a product of operands in memory on the CPU. Panels
// only order the work here (nothing is read): a few block rows per panel
// keep the partial products few and each B block hot in the cache for the
// panel's consecutive multiplies.
func planInMemory(p Plan) Plan {
	_, _, sC := p.blockBytes()
	p.Order, p.Panel = RowPanels, min(p.MB, max(8, 2*p.Copies))
	p.Panels = ceilDiv(p.MB, p.Panel)
	p.PoolC = capPartials(partialCap(p.Panel, p.Copies), p.Multiplies)
	p.PoolBytes = int64(p.PoolC) * sC
	return p
}

// planOutOfCore plans a product on the CPU whose operands are read from
// sources, within budget bytes of pools (0: no limit). It considers
// resident panels of each orientation, the largest that fits the budget,
// and, when neither fits, the Streamed order; it takes the one that reads
// the fewest bytes.
func planOutOfCore(p Plan, budget int64) (Plan, error) {
	pl := &cpuPlanner{p: &p, budget: budget, look: lookahead(p.Copies)}
	pl.sA, pl.sB, pl.sC = p.blockBytes()
	var best *cpuOption
	for _, s := range p.panelSides() {
		if o, ok := pl.panelOption(s); ok && pl.fits(&o) && (best == nil || o.reads < best.reads) {
			best = &o
		}
	}
	if best == nil {
		if o := pl.streamed(); pl.fits(&o) {
			best = &o
		}
	}
	if best == nil {
		need := int64(pl.look)*(pl.sA+pl.sB) + int64(partialCap(1, p.Copies))*pl.sC
		return p, fmt.Errorf("%w: %s cannot hold the blocks of one pass with %dx%d blocks and %d threads: need at least %s (use smaller blocks or fewer threads)",
			ErrBudget, units.FormatBytes(budget), p.BlockSize, p.BlockSize, p.Copies, units.FormatBytes(need))
	}
	p.setOrder(best.order, best.panel)
	p.PoolA, p.PoolB, p.PoolC = best.capA, best.capB, best.capC
	p.PoolBytes, p.ReadBytes = best.memory, best.reads
	return p, nil
}

// cpuOption is one traversal that planOutOfCore considers, with the pool
// capacities it needs, the bytes they hold and the bytes it reads.
type cpuOption struct {
	order            Order
	panel            int
	capA, capB, capC int
	reads, memory    int64
}

// cpuPlanner holds what every option of planOutOfCore is sized with.
type cpuPlanner struct {
	p          *Plan
	budget     int64 // 0: no limit
	sA, sB, sC int64 // bytes of the largest blocks
	look       int   // lookahead of a streamed operand
}

// fits reports whether o's pools fit the budget.
func (pl *cpuPlanner) fits(o *cpuOption) bool { return pl.budget == 0 || o.memory <= pl.budget }

// panelOption returns the resident panels of side s: the largest panel
// that fits gives the fewest passes; the panel is then evened out to the
// smallest size with that many passes. False if no panel fits.
func (pl *cpuPlanner) panelOption(s panelSide) (cpuOption, bool) {
	for P := s.blocks; P >= 1; P-- {
		if o := pl.panel(s, P); pl.fits(&o) {
			return pl.panel(s, s.evened(P)), true
		}
	}
	return cpuOption{}, false
}

// panel sizes the option of panels of P blocks of side s. While the last
// column (row) of blocks of a panel is multiplied, the next panel's first
// blocks load into P extra buffers.
func (pl *cpuPlanner) panel(s panelSide, P int) cpuOption {
	capRes := s.resident(P, P, pl.p.KB)
	capStr := min(pl.look, s.streamedPerPass*s.passes(P))
	o := cpuOption{order: s.order, panel: P, capC: capPartials(partialCap(P, pl.p.Copies), pl.p.Multiplies),
		reads: s.resBytes + int64(s.passes(P))*s.strBytes}
	o.capA, o.capB = s.split(capRes, capStr)
	o.memory = int64(o.capA)*pl.sA + int64(o.capB)*pl.sB + int64(o.capC)*pl.sC
	return o
}

// streamed sizes the Streamed option, the fallback when no panel fits:
// every block is read once per use.
func (pl *cpuPlanner) streamed() cpuOption {
	p := pl.p
	mk, kn := 8*int64(p.M)*int64(p.K), 8*int64(p.K)*int64(p.N)
	o := cpuOption{order: Streamed, panel: 1,
		capA: min(pl.look, p.Multiplies), capB: min(pl.look, p.Multiplies), capC: capPartials(partialCap(1, p.Copies), p.Multiplies),
		reads: mk*int64(p.NB) + kn*int64(p.MB)}
	o.memory = int64(o.capA)*pl.sA + int64(o.capB)*pl.sB + int64(o.capC)*pl.sC
	return o
}

// blockBytes returns the bytes of the largest blocks of A, B and C.
func (p *Plan) blockBytes() (sA, sB, sC int64) {
	bs := p.BlockSize
	sA = 8 * int64(min(bs, p.M)) * int64(min(bs, p.K))
	sB = 8 * int64(min(bs, p.K)) * int64(min(bs, p.N))
	sC = 8 * int64(min(bs, p.M)) * int64(min(bs, p.N))
	return sA, sB, sC
}

// A panelSide is one orientation of resident panels: the operand whose
// panel stays in memory (A for RowPanels, B for ColumnPanels) and the one
// streamed past it.
type panelSide struct {
	order              Order
	blocks             int   // block rows (columns) cut into panels: MB (NB)
	streamedPerPass    int   // streamed blocks per pass: KB·NB (MB·KB)
	sRes, sStr         int64 // bytes of a resident and of a streamed block
	resBytes, strBytes int64 // bytes of the resident and of the streamed operand
}

// panelSides returns the plan's two panel orientations, row panels first.
func (p *Plan) panelSides() [2]panelSide {
	sA, sB, _ := p.blockBytes()
	mk, kn := 8*int64(p.M)*int64(p.K), 8*int64(p.K)*int64(p.N)
	return [2]panelSide{
		{order: RowPanels, blocks: p.MB, streamedPerPass: p.KB * p.NB, sRes: sA, sStr: sB, resBytes: mk, strBytes: kn},
		{order: ColumnPanels, blocks: p.NB, streamedPerPass: p.MB * p.KB, sRes: sB, sStr: sA, resBytes: kn, strBytes: mk},
	}
}

// passes is the number of panels of P blocks.
func (s panelSide) passes(P int) int { return ceilDiv(s.blocks, P) }

// evened returns the smallest panel size with as many passes as P.
func (s panelSide) evened(P int) int { return ceilDiv(s.blocks, s.passes(P)) }

// resident is the capacity for resident blocks of a holder of held block
// rows (columns) of each panel of P blocks: all KB blocks of each, plus,
// when there is more than one panel, one block of each for the next
// panel's first loads.
func (s panelSide) resident(held, P, kb int) int {
	n := held * kb
	if P < s.blocks {
		n += held
	}
	return n
}

// split returns the capacities of A and B given those of the resident and
// the streamed operand.
func (s panelSide) split(res, str int) (a, b int) {
	if s.order == RowPanels {
		return res, str
	}
	return str, res
}

// setOrder sets the traversal and its panel size, and counts the panels.
func (p *Plan) setOrder(o Order, panel int) {
	p.Order, p.Panel = o, panel
	switch o {
	case RowPanels:
		p.Panels = ceilDiv(p.MB, panel)
	case ColumnPanels:
		p.Panels = ceilDiv(p.NB, panel)
	case Streamed:
		p.Panels = p.MB
	}
}

// step is one block product of the schedule: C(i,j) += A(i,l)·B(l,j),
// using the gen-th loads of those blocks.
type step struct{ i, j, l, genA, genB int }

// panelRange returns the block indices [lo, hi) of panel q.
func (p *Plan) panelRange(q, blocks int) (lo, hi int) {
	return q * p.Panel, min((q+1)*p.Panel, blocks)
}

// cursor walks the plan's multiplies in schedule order.
type cursor struct {
	p          *Plan
	q, u, l, v int // panel, outer index, inner-product index, index within the panel
	lo, hi     int // the current panel's range
	done       bool
}

func newCursor(p *Plan) *cursor {
	c := &cursor{p: p, done: p.Multiplies == 0}
	c.setPanel(0)
	return c
}

func (c *cursor) setPanel(q int) {
	c.q, c.u, c.l = q, 0, 0
	switch c.p.Order {
	case RowPanels:
		c.lo, c.hi = c.p.panelRange(q, c.p.MB)
	case ColumnPanels:
		c.lo, c.hi = c.p.panelRange(q, c.p.NB)
	case Streamed:
		c.lo, c.hi = q, q+1 // a panel is one block row, i = q
	}
	c.v = c.lo
}

// next returns the next step of the schedule.
func (c *cursor) next() (step, bool) {
	if c.done {
		return step{}, false
	}
	var s step
	switch c.p.Order {
	case RowPanels: // panel of rows, then j, l, i
		s = step{i: c.v, j: c.u, l: c.l, genA: c.q, genB: c.q}
	case ColumnPanels: // panel of columns, then i, l, j
		s = step{i: c.u, j: c.v, l: c.l, genA: c.q, genB: c.q}
	case Streamed: // i, j, l; every use is its own load
		s = step{i: c.v, j: c.u, l: c.l, genA: c.u, genB: c.v}
	}
	// Advance: v fastest, then l, then u, then the panel.
	outer := c.p.NB
	if c.p.Order == ColumnPanels {
		outer = c.p.MB
	}
	panels := c.p.Panels
	if c.p.SlabLead > 0 {
		c.advanceLead(outer)
		return s, true
	}
	if c.p.SlabFirst { // v fastest, then u, then l (one panel)
		if c.v++; c.v == c.hi {
			c.v = c.lo
			if c.u++; c.u == outer {
				c.u = 0
				if c.l++; c.l == c.p.KB {
					c.done = true
				}
			}
		}
		return s, true
	}
	if c.v++; c.v == c.hi {
		c.v = c.lo
		if c.l++; c.l == c.p.KB {
			c.l = 0
			if c.u++; c.u == outer {
				if c.q+1 == panels {
					c.done = true
				} else {
					c.setPanel(c.q + 1)
				}
			}
		}
	}
	return s, true
}

// advanceLead advances a SlabLead cursor (one panel): its first lead outer
// indices slab first (v fastest, then u, then l), the next ones in the
// panel order (v, then l, then u), the last one with l fastest, then v.
func (c *cursor) advanceLead(outer int) {
	lead := min(c.p.SlabLead, outer)
	switch {
	case c.u < lead:
		if c.v++; c.v < c.hi {
			return
		}
		c.v = c.lo
		if c.u++; c.u < lead {
			return
		}
		c.u = 0
		if c.l++; c.l < c.p.KB {
			return
		}
		c.u, c.l = lead, 0
	case c.u < outer-1:
		if c.v++; c.v < c.hi {
			return
		}
		c.v = c.lo
		if c.l++; c.l < c.p.KB {
			return
		}
		c.l = 0
		c.u++
	default: // the last outer index: l fastest, then v
		if c.l++; c.l < c.p.KB {
			return
		}
		c.l = 0
		if c.v++; c.v < c.hi {
			return
		}
		c.done = true
		return
	}
	c.done = c.u >= outer // the lead took every outer index
}

// requests returns the loads of the plan in the order their blocks are
// first needed by the schedule, each with its number of uses (its release
// count). Both loaders read their requests in this order.
func (p *Plan) requests(yield func(blockRequest) bool) {
	c := newCursor(p)
	for {
		s, ok := c.next()
		if !ok {
			return
		}
		var needA, needB bool
		usesA, usesB := 1, 1
		switch p.Order {
		case RowPanels:
			lo, hi := p.panelRange(s.genA, p.MB)
			needA, usesA = s.j == 0, p.NB
			needB, usesB = s.i == lo, hi-lo
		case ColumnPanels:
			lo, hi := p.panelRange(s.genB, p.NB)
			needB, usesB = s.i == 0, p.MB
			needA, usesA = s.j == lo, hi-lo
		case Streamed:
			needA, needB = true, true
		}
		if needA && !yield(blockRequest{Operand: OperandA, Row: s.i, Col: s.l, Gen: s.genA, Uses: usesA}) {
			return
		}
		if needB && !yield(blockRequest{Operand: OperandB, Row: s.l, Col: s.j, Gen: s.genB, Uses: usesB}) {
			return
		}
	}
}
