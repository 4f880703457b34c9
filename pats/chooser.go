package pats

import (
	"math"
	"slices"

	"github.com/gohtgs/htgs/device"
)

// Chooser is a scheduling policy: it chooses the operation instance an idle
// processing unit runs next among the ready ones it can run. Set
// Config.Chooser to use one instead of the built-in Config.Policy; the
// built-in policies [FCFS] and [PATS] implement it too, so a custom policy
// can fall back on them.
//
// The manager calls Choose with its lock held, and the simulator from its
// event loop: Choose must be fast and must not call back into the
// [Manager]. It is called from one goroutine at a time, so a Chooser may
// keep state without locking.
type Chooser interface {
	// Choose returns the index in ready of the operation u runs next, or -1
	// to leave u idle until the state changes (an operation completes, a
	// flow is admitted). ready is not empty and holds only operations u can
	// run now, in first-come first-served order (with Config.DepthFirst:
	// the oldest flow's first); it is valid only during the call. An index
	// out of range counts as -1.
	//
	// A Chooser that leaves every unit idle while operations are ready
	// stalls the run: [Simulate] reports it, a [Manager] waits.
	Choose(u UnitInfo, ready []Candidate) int
}

// UnitInfo describes the idle processing unit a [Chooser] chooses for.
type UnitInfo struct {
	Name  string      // the unit's device name
	Kind  device.Kind // CPU or GPU
	Index int         // position among the manager's units (or the machine's: CPUs first)
}

// Candidate describes a ready operation instance offered to a [Chooser].
type Candidate struct {
	Op   string // the operation's name
	Flow string // the name of its flow
	Step int    // its index in the flow
	// Estimate is the speedup estimate PATS ranks by: the Op's Speedup (1
	// if unknown), the learned one with Config.Learn, 0 for an operation
	// with only a CPU implementation and +Inf for one with only a GPU one.
	Estimate float64
	// CPU and GPU report which implementations the operation has.
	CPU, GPU bool
	// Cost is the step's modelled cost (zero unless given with WithCost).
	Cost Cost
	// Local reports, for a GPU unit, that the operation reads data already
	// in the unit's memory.
	Local bool
	// Bytes is what running it on a GPU would move: its inputs held by no
	// GPU and its outputs.
	Bytes int64
}

// Choose implements [Chooser] for the built-in policies: FCFS takes the
// first candidate; PATS takes, on a GPU, the first candidate with the
// highest estimate, and on a CPU core the first with the lowest. It is what
// Config.Policy does without Locality and DepthFirst (which Config.Chooser
// replaces by the candidates' Local field and order).
func (p Policy) Choose(u UnitInfo, ready []Candidate) int {
	if len(ready) == 0 {
		return -1
	}
	if p != PATS {
		return 0
	}
	best := 0
	for i, c := range ready[1:] {
		e, b := c.Estimate, ready[best].Estimate
		if u.Kind == device.GPU && e > b || u.Kind != device.GPU && e < b {
			best = i + 1
		}
	}
	return best
}

// pickChooser is pick with a user-supplied Chooser: it offers w the nodes
// it can run (less those a CPU core leaves to the GPUs with FinishAware)
// in first-come first-served order, depth-first if configured.
func (sc *scheduler) pickChooser(w *worker) *node {
	var q *gpuQueue
	if w.gpu < 0 && sc.cfg.FinishAware && sc.gpus > 0 {
		q = sc.gpuQueue()
	}
	nodes := sc.offer[:0]
	for _, n := range sc.ready {
		if sc.eligible(w, n) && !q.leave(sc, n) {
			nodes = append(nodes, n)
		}
	}
	sc.offer = nodes[:0]
	if len(nodes) == 0 {
		return nil
	}
	slices.SortStableFunc(nodes, func(a, b *node) int {
		if sc.cfg.DepthFirst && a.fl.started != b.fl.started {
			if a.fl.started {
				return -1
			}
			return 1
		}
		if sc.before(a, b) {
			return -1
		}
		return 1
	})
	cands := sc.cands[:0]
	for _, n := range nodes {
		_, cpu := n.step.run[device.CPU]
		_, gpu := n.step.run[device.GPU]
		c := Candidate{
			Op: n.step.op, Flow: n.fl.f.name, Step: n.step.index,
			Estimate: sc.estimate(n), CPU: cpu, GPU: gpu, Cost: n.step.cost,
			Local: w.gpu >= 0 && sc.reuses(w, n), Bytes: sc.nodeBytes(n),
		}
		if math.IsNaN(c.Estimate) {
			c.Estimate = 1
		}
		cands = append(cands, c)
	}
	sc.cands = cands[:0]
	i := sc.cfg.Chooser.Choose(UnitInfo{Name: w.dev.Name(), Kind: w.kind, Index: w.idx}, cands)
	if i < 0 || i >= len(nodes) {
		return nil
	}
	return nodes[i]
}
