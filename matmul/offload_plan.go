package matmul

import (
	"fmt"

	"github.com/gohtgs/htgs/internal/units"
)

// defaultDeviceThreads is Config.Copies when it is 0 and the kernel runs
// on devices. The offload graph runs one multiply task per device, which
// queues its products on one stream; Copies only sizes the lookahead of
// the streamed operand (see lookahead).
const defaultDeviceThreads = 2

// stagingInBuffers is the number of pinned staging buffers of each
// device's copy-in task: one being packed while the upload of another
// runs, and one spare so that packing never waits for the bus.
const stagingInBuffers = 3

// planOffload plans C = A·B for a kernel that runs on devices devices with
// devBudget bytes of pool memory each (0: no limit); p holds the shapes.
//
// The traversal is the CPU graph's (see newPlan), with the device memory
// as a second budget: the resident operand's panel is split among the
// devices (row panels give device d the panel's block rows i with
// i mod devices = d, column panels its block columns j), so each device
// holds ceil(P/devices)·KB resident blocks, plus one each for the next
// panel, a few streamed blocks and its blocks of C: the ceil(P/devices)
// open ones, into which the products add on the device, plus up to two
// more being downloaded. Among the traversals that fit both budgets the
// plan takes the one that moves the fewest bytes: those read from the
// sources plus those copied to the devices (each streamed block goes to
// every device with rows, or columns, in the panel). C crosses the bus
// once whatever the traversal (Plan.DownloadBytes).
func planOffload(p Plan, cfg Config, devices int, devBudget int64) (Plan, error) {
	if devices < 1 {
		return p, fmt.Errorf("%w: kernel %q has no device", ErrConfig, cfg.kernel().Name())
	}
	p.Devices = devices
	pl := newOffloadPlanner(&p, tuningFor(devices), cfg.MemoryBudget, devBudget)
	var best *offloadOption
	for _, s := range p.panelSides() {
		if o, ok := pl.panelOption(s); ok && (best == nil || o.traffic() < best.traffic()) {
			best = &o
		}
	}
	if best == nil {
		o := pl.streamed()
		if !pl.fits(&o) {
			return p, fmt.Errorf("%w: the blocks of one pass with %dx%d blocks and %d threads per device need %s of host memory (budget %s) and %s per device (budget %s); use smaller blocks or fewer threads",
				ErrBudget, p.BlockSize, p.BlockSize, p.Copies, units.FormatBytes(o.hostBytes), budgetString(cfg.MemoryBudget),
				units.FormatBytes(o.devBytes), budgetString(devBudget))
		}
		best = &o
	}
	best.apply(&p)
	p.DownloadBytes = 8 * int64(p.M) * int64(p.N)
	return p, nil
}

// deviceBudget is the memory per device the pools of a product on off
// may hold: cfg.DeviceMemory, or the kernel's default (0: no limit).
func deviceBudget(cfg Config, off offloader) int64 {
	if cfg.DeviceMemory != 0 {
		return cfg.DeviceMemory
	}
	return off.offloadMemory()
}

// offloadOption is one traversal that planOffload considers, with the pool
// capacities it needs and the bytes it moves.
type offloadOption struct {
	order               Order
	panel               int
	capA, capB, capC    int // host, per pool (capC per device)
	devA, devB, devC    int
	hostBytes, devBytes int64
	reads, uploads      int64
}

// traffic is the bytes the option moves: read from the sources plus copied
// to the devices.
func (o *offloadOption) traffic() int64 { return o.reads + o.uploads }

// apply sets p's traversal and pools to the option's.
func (o *offloadOption) apply(p *Plan) {
	p.setOrder(o.order, o.panel)
	p.PoolA, p.PoolB, p.PoolC = o.capA, o.capB, o.capC
	p.PoolBytes, p.ReadBytes = o.hostBytes, o.reads
	p.DevicePoolA, p.DevicePoolB, p.DevicePoolC = o.devA, o.devB, o.devC
	p.DevicePoolBytes, p.UploadBytes = o.devBytes, o.uploads
}

// offloadPlanner holds what every option of planOffload is sized with.
type offloadPlanner struct {
	p                     *Plan
	devices, threads      int
	sA, sB, sC            int64 // bytes of the largest blocks
	hostLook, devLook     int   // streamed blocks held on the host and on each device
	hostC                 int   // blocks of C per device on the host (sinks that are not *Dense)
	staging               int64 // bytes of pinned staging buffers, all devices
	hostBudget, devBudget int64 // 0: no limit
}

func newOffloadPlanner(p *Plan, tune offloadTuning, hostBudget, devBudget int64) *offloadPlanner {
	pl := &offloadPlanner{p: p, devices: p.Devices, threads: p.Copies, hostBudget: hostBudget, devBudget: devBudget}
	pl.sA, pl.sB, pl.sC = p.blockBytes()
	pl.hostLook = min(lookahead(pl.devices*pl.threads), p.Multiplies)
	pl.devLook = min(lookahead(pl.threads), p.Multiplies)
	pl.hostC = max(1, min(tune.copyOut+2, p.MB*p.NB))
	in, out, nIn, nOut := tune.staging(p, int(pl.sA/8), int(pl.sB/8), int(pl.sC/8))
	pl.staging = 8 * int64(pl.devices) * (int64(nIn)*int64(in) + int64(nOut)*int64(out))
	return pl
}

// devC is the capacity of a device's pool of C blocks when it holds share
// open blocks at a time: those, and up to two more whose download runs
// while the next ones start (roomy: share more, so that the products of
// the next blocks never wait for a download); at most the device's blocks
// of C.
func (pl *offloadPlanner) devC(share int, roomy bool) int {
	c := share + min(share, 2)
	if roomy {
		c = 2 * share
	}
	return max(1, min(c, ceilDiv(pl.p.MB*pl.p.NB, pl.devices)))
}

// fits reports whether o fits both the host and the device budget.
func (pl *offloadPlanner) fits(o *offloadOption) bool {
	return (pl.hostBudget == 0 || o.hostBytes <= pl.hostBudget) && (pl.devBudget == 0 || o.devBytes <= pl.devBudget)
}

// panelOption returns the largest panel of side s that fits, evened out to
// the smallest panel with the same number of passes; false if none fits.
// Each panel size is tried roomy first (twice the streamed blocks and the
// blocks of C on the devices, which lets the copies run further ahead),
// then lean.
func (pl *offloadPlanner) panelOption(s panelSide) (offloadOption, bool) {
	for P := s.blocks; P >= 1; P-- {
		for _, roomy := range []bool{true, false} {
			if o := pl.panel(s, P, roomy); pl.fits(&o) {
				return pl.panel(s, s.evened(P), roomy), true
			}
		}
	}
	return offloadOption{}, false
}

// panel sizes the option of panels of P blocks of side s: each device
// holds its share of the panel, a few streamed blocks and its blocks of C;
// the host holds the whole panel and the streamed blocks in flight unless
// the operands are in memory.
func (pl *offloadPlanner) panel(s panelSide, P int, roomy bool) offloadOption {
	share := ceilDiv(P, pl.devices)
	o := offloadOption{order: s.order, panel: P, capC: pl.hostC, devC: pl.devC(share, roomy)}
	devRes := s.resident(share, P, pl.p.KB)
	look := pl.devLook
	if roomy {
		look = min(2*look, pl.p.Multiplies)
	}
	o.devBytes = int64(devRes)*s.sRes + int64(look)*s.sStr + int64(o.devC)*pl.sC
	o.devA, o.devB = s.split(devRes, look)
	o.hostBytes = int64(pl.devices)*int64(o.capC)*pl.sC + pl.staging
	if !pl.p.InMemory {
		capRes := s.resident(P, P, pl.p.KB)
		o.hostBytes += int64(capRes)*s.sRes + int64(pl.hostLook)*s.sStr
		o.reads = s.resBytes + int64(s.passes(P))*s.strBytes
		o.capA, o.capB = s.split(capRes, pl.hostLook)
	}
	o.uploads = pl.uploads(s, P)
	return o
}

// uploads is the bytes that panels of P blocks of side s copy to the
// devices: the resident blocks go to one device each, the streamed ones to
// every device with a row (column) in the panel.
func (pl *offloadPlanner) uploads(s panelSide, P int) int64 {
	n := s.resBytes
	for q := range s.passes(P) {
		lo, hi := q*P, min((q+1)*P, s.blocks)
		n += int64(min(pl.devices, hi-lo)) * s.strBytes
	}
	return n
}

// streamed sizes the Streamed option, the fallback when no panel fits:
// every block is read, and copied, once per use.
func (pl *offloadPlanner) streamed() offloadOption {
	p := pl.p
	mk, kn := 8*int64(p.M)*int64(p.K), 8*int64(p.K)*int64(p.N)
	o := offloadOption{order: Streamed, panel: 1, devA: pl.devLook, devB: pl.devLook, devC: pl.devC(1, false),
		capC: pl.hostC, uploads: mk*int64(p.NB) + kn*int64(p.MB)}
	o.devBytes = int64(pl.devLook)*(pl.sA+pl.sB) + int64(o.devC)*pl.sC
	o.hostBytes = int64(pl.devices)*int64(o.capC)*pl.sC + pl.staging
	if !p.InMemory {
		o.capA, o.capB = pl.hostLook, pl.hostLook
		o.hostBytes += int64(pl.hostLook) * (pl.sA + pl.sB)
		o.reads = o.uploads
	}
	return o
}

func budgetString(b int64) string {
	if b == 0 {
		return "none"
	}
	return units.FormatBytes(b)
}

// trySlabFirst switches a one-panel device plan to the slab-first order
// (Plan.SlabFirst) if each device's pool of C can grow to all of its
// blocks of C within devBudget bytes per device (0: no limit); it reports
// whether it did.
func (p *Plan) trySlabFirst(devBudget int64) bool {
	if p.Devices < 1 || p.Panels != 1 || p.Order == Streamed || p.KB < 2 || p.SlabFirst {
		return false
	}
	rows, cols := p.MB, p.NB // blocks of C: the panel's side is split among the devices
	if p.Order == ColumnPanels {
		rows, cols = p.NB, p.MB
	}
	c := ceilDiv(rows, p.Devices) * cols
	_, _, sC := p.blockBytes()
	bytes := p.DevicePoolBytes + int64(max(0, c-p.DevicePoolC))*sC
	if devBudget > 0 && bytes > devBudget {
		return false
	}
	p.SlabFirst, p.DevicePoolC, p.DevicePoolBytes = true, max(c, p.DevicePoolC), bytes
	return true
}

// trySlabLead gives a one-panel device plan of operands in memory the
// SlabLead order with lead columns (rows with column panels) slab first,
// if each device's pools fit within devBudget bytes per device (0: no
// limit) with room for the lead's blocks of C and a column more, and for
// the streamed blocks the order holds at once (the last column's KB, or
// two slabs of the lead) and two more; it reports whether it did. A lead
// of every column is SlabFirst's order, which it leaves to trySlabFirst.
func (p *Plan) trySlabLead(devBudget int64, lead int) bool {
	if lead < 1 || !p.InMemory || p.Devices < 1 || p.Panels != 1 || p.Order == Streamed || p.KB < 2 || p.SlabFirst || p.SlabLead > 0 {
		return false
	}
	rows, cols := p.MB, p.NB // blocks of C: the panel's side is split among the devices
	sA, sB, sC := p.blockBytes()
	streamed, sStr := &p.DevicePoolB, sB
	if p.Order == ColumnPanels {
		rows, cols = p.NB, p.MB
		streamed, sStr = &p.DevicePoolA, sA
	}
	if lead >= cols {
		return false
	}
	c := max(p.DevicePoolC, ceilDiv(rows, p.Devices)*(lead+1))
	str := max(*streamed, max(p.KB, 2*lead)+2)
	bytes := p.DevicePoolBytes + int64(c-p.DevicePoolC)*sC + int64(str-*streamed)*sStr
	if devBudget > 0 && bytes > devBudget {
		return false
	}
	p.SlabLead, p.DevicePoolC, *streamed, p.DevicePoolBytes = lead, c, str, bytes
	return true
}
