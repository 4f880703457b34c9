package pats

import (
	"math"
	"slices"

	"github.com/gohtgs/htgs/device"
)

// Choose implements [device.Chooser] for the built-in policies: FCFS takes
// the first candidate; PATS takes, on a GPU, the first candidate with the
// highest estimate, and on a CPU core the first with the lowest. It is what
// Config.Policy does without Locality and DepthFirst (which Config.Chooser
// replaces by the candidates' Local field and order). The same policies
// choose for a graph task with a CPU and a GPU implementation, given to
// graph.AddVariants with graph.Choose.
func (p Policy) Choose(u device.Unit, ready []device.Candidate) int {
	if len(ready) == 0 {
		return -1
	}
	if p != PATS {
		return 0
	}
	best := 0
	for i, c := range ready[1:] {
		e, b := c.Estimate, ready[best].Estimate
		gpu := u.Device != nil && u.Device.Kind() == device.GPU
		if gpu && e > b || !gpu && e < b {
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
		c := device.Candidate{
			Name: n.step.op, Group: n.fl.f.name, Estimate: sc.estimate(n),
			CPUTime: n.step.cost.CPU, GPUTime: n.step.cost.GPU,
			Local: w.gpu >= 0 && sc.reuses(w, n), Bytes: sc.nodeBytes(n),
		}
		if math.IsNaN(c.Estimate) {
			c.Estimate = 1
		}
		cands = append(cands, c)
	}
	sc.cands = cands[:0]
	i := sc.cfg.Chooser.Choose(device.Unit{Device: w.dev, Index: w.idx}, cands)
	if i < 0 || i >= len(nodes) {
		return nil
	}
	return nodes[i]
}
