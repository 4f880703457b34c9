package pats

import (
	"container/heap"
	"context"
	"fmt"
	"time"

	"github.com/gohtgs/htgs/device"
)

// Simulate runs flows on machine m under cfg in virtual time and reports
// what happened. Each operation instance takes its modelled Cost (the GPU
// cost divided by m.GPUSpeed) and each transfer Latency + bytes/Bandwidth;
// implementations are not called and storage is not touched. Flows are
// admitted in order, at most cfg.Window at a time, as a demand-driven
// worker would request stage instances.
//
// The simulator makes its decisions with the same scheduling code as the
// real-time Manager, and it is deterministic: the same input gives the same
// report, in milliseconds for thousands of operations.
//
// A GPU without Prefetch handles one operation at a time: download what it
// evicts, upload the inputs, compute, and (without Locality) download the
// outputs. With Prefetch it has three engines, for uploads, computation and
// downloads: the next operation is chosen and uploaded while the current one
// computes, and downloads drain in the background.
//
// Storage is modelled by its rates (Machine.StageBandwidth,
// Machine.CommitBandwidth): without Prefetch or StageAhead the worker that
// takes an input's first reader stages it, and a worker that takes another
// reader meanwhile waits until that staging ends; with either a flow's inputs
// are staged in the background from its admission, on no unit or, with
// Machine.StageOnCores or Config.StorageOnCores, by the next idle CPU core;
// a completed flow commits its outputs that have a store one after
// another, the storage writing as many at once as Machine.CommitStreams
// (with Config.StorageOnCores Config.CoreCommits flows' at a time, each on
// the next idle core), and keeps its place in the window until they are
// committed.
func Simulate(cfg Config, m Machine, flows []*Flow) (*Report, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	if err := m.validate(); err != nil {
		return nil, err
	}
	sims := m.sims()
	devs := make([]device.Device, len(sims))
	for i, s := range sims {
		devs[i] = s
	}
	s := &simulator{sched: newScheduler(cfg, devs), sims: sims, flows: flows, stageBW: m.StageBandwidth, commitBW: m.CommitBandwidth,
		commitStreams: max(m.CommitStreams, 1),
		stageOnCores:  (m.StageOnCores || cfg.StorageOnCores) && m.CPUs > 0, commitOnCores: cfg.StorageOnCores && m.CPUs > 0, seen: map[*Flow]bool{}}
	s.kinds = s.sched.kinds()
	for _, f := range flows {
		if err := s.accept(f); err != nil {
			return nil, err
		}
	}
	s.total = len(flows)
	for _, w := range s.sched.workers {
		if w.gpu >= 0 {
			s.gpus = append(s.gpus, &simGPU{w: w, sim: sims[w.idx]})
		} else {
			s.cpus = append(s.cpus, &simCPU{w: w, sim: sims[w.idx]})
		}
	}
	s.sched.onDone = s.flowDone
	s.admit()
	s.dispatch()
	for s.q.Len() > 0 && s.err == nil {
		e := heap.Pop(&s.q).(simEvent)
		s.now = e.t
		e.fn()
		s.dispatch()
	}
	if s.err != nil {
		return nil, s.err
	}
	if s.completed != s.total {
		return nil, fmt.Errorf("pats: simulation stalled with %d of %d flows complete", s.completed, s.total)
	}
	return s.sched.report(s.last), nil
}

type simEvent struct {
	t   time.Duration
	seq int64
	fn  func()
}

type eventQueue []simEvent

// Len, Less, Swap, Push and Pop implement heap.Interface: events by time,
// then by order of scheduling.
func (q eventQueue) Len() int { return len(q) }

// Less orders events by time, then by scheduling order.
func (q eventQueue) Less(i, j int) bool {
	if q[i].t != q[j].t {
		return q[i].t < q[j].t
	}
	return q[i].seq < q[j].seq
}

// Swap swaps two events.
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }

// Push appends an event.
func (q *eventQueue) Push(x any) { *q = append(*q, x.(simEvent)) }

// Pop removes the last event.
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type simulator struct {
	sched      *scheduler
	sims       []Sim
	flows      []*Flow
	next       int // next flow to admit
	completed  int
	now, last  time.Duration
	q          eventQueue
	seq        int64
	cpus       []*simCPU
	gpus       []*simGPU
	stageBW    float64 // Machine.StageBandwidth
	commitBW   float64 // Machine.CommitBandwidth
	committing int     // flows whose outputs are being committed: they keep their place in the window
	// commitStreams is Machine.CommitStreams (at least 1); storeQ holds
	// the completed flows' outputs waiting for one, storeBusy counts the
	// streams writing.
	commitStreams int
	storeQ        []*storeJob
	storeBusy     int
	// stageOnCores: Machine.StageOnCores with CPU cores; stageQ holds
	// the background stagings waiting for a core.
	stageOnCores bool
	stageQ       []*datum
	// commitOnCores (Config.StorageOnCores): the next idle core commits a
	// completed flow's outputs, Config.CoreCommits flows at a time
	// (commitBusy counts them), stagings first.
	commitOnCores bool
	commitQ       []commitJob
	commitBusy    int // cores committing (Config.CoreCommits at most)
	kinds         []device.Kind
	seen          map[*Flow]bool
	spawned       []*Flow // flows spawned at run time, waiting for the window
	total         int     // flows given and spawned
	err           error   // a Spawn function failed: the simulation stops
}

// accept checks a flow given to the simulator or spawned in it.
func (s *simulator) accept(f *Flow) error {
	if s.seen[f] {
		return fmt.Errorf("pats: flow %q given twice", f.name)
	}
	s.seen[f] = true
	return f.check(s.kinds)
}

// flowDone is the scheduler's completion callback: it commits the flow's
// outputs that have a store (Machine.CommitBandwidth), after the commits
// queued before them, then finishes it (finish).
func (s *simulator) flowDone(fs *flowState) {
	var b int64
	var items []int64
	if fs.err == nil {
		for _, d := range fs.data {
			if d.final && d.store != nil {
				b += d.bytes
				items = append(items, d.bytes)
			}
		}
	}
	if b <= 0 || s.commitBW <= 0 {
		s.finish(fs)
		return
	}
	s.committing++ // keeps the flow's place in the window, as the Manager does
	if s.commitOnCores {
		s.commitQ = append(s.commitQ, commitJob{fs, b})
		return
	}
	s.storeQ = append(s.storeQ, &storeJob{fs, items})
	s.storeNext()
}

// storeJob is a completed flow's outputs left to commit, in the order
// the Manager commits them.
type storeJob struct {
	fs    *flowState
	items []int64 // bytes of each output left
}

// storeNext starts commits while the storage has a free stream
// (Machine.CommitStreams) and outputs wait. A flow commits its outputs
// one after another, each a write of its own: once one is written the
// flow queues its next behind the writes that arrived meanwhile, as a
// goroutine does that takes a contended lock again (Go's mutex hands it
// to its waiters in turn once they have waited a millisecond). So with
// one stream the flows that complete together interleave their outputs,
// and each finishes late; with a stream per flow each writes its own
// back to back.
func (s *simulator) storeNext() {
	for s.storeBusy < s.commitStreams && len(s.storeQ) > 0 {
		j := s.storeQ[0]
		s.storeQ = s.storeQ[1:]
		b := j.items[0]
		j.items = j.items[1:]
		s.storeBusy++
		s.at(s.commitDur(b), func() {
			s.storeBusy--
			if len(j.items) > 0 {
				s.storeQ = append(s.storeQ, j)
			} else {
				s.committed(j.fs)
			}
			s.storeNext()
		})
	}
}

// finish counts a flow complete once its outputs are committed, calls its
// Spawn function, queues the flows it returns, and admits flows into the
// window.
func (s *simulator) finish(fs *flowState) {
	s.completed++
	s.last = s.now
	if fn := fs.f.spawn; fn != nil && fs.err == nil && s.err == nil {
		kids, err := fn(context.Background())
		if err != nil {
			s.err = fmt.Errorf("pats: flow %q: spawn: %w", fs.f.name, err)
			return
		}
		for _, k := range kids {
			if k == nil {
				s.err = fmt.Errorf("pats: flow %q: spawn returned a nil flow", fs.f.name)
				return
			}
			if err := s.accept(k); err != nil {
				s.err = fmt.Errorf("pats: flow %q: spawn: %w", fs.f.name, err)
				return
			}
		}
		s.spawned = append(s.spawned, kids...)
		s.total += len(kids)
	}
	s.admit()
}

// commitDur returns the modelled time to commit b bytes (flowDone calls
// no commit without a rate).
func (s *simulator) commitDur(b int64) time.Duration {
	return time.Duration(float64(b) / s.commitBW * float64(time.Second))
}

// committed finishes fs, whose outputs are committed: its place in the
// window is free.
func (s *simulator) committed(fs *flowState) {
	s.committing--
	s.finish(fs)
}

// stageDur returns the modelled time to stage b bytes from storage.
func (s *simulator) stageDur(b int64) time.Duration {
	if s.stageBW <= 0 {
		return 0
	}
	return time.Duration(float64(b) / s.stageBW * float64(time.Second))
}

// stage returns the time the worker taking n spends before it can use
// its inputs still in storage (without Prefetch or StageAhead): it stages those nobody
// has staged, one after the other, and marks them staged; for those
// another worker is still staging, it waits until that staging ends, as a
// real worker waits on the other's read of the store.
func (s *simulator) stage(n *node) time.Duration {
	var t time.Duration
	for _, d := range n.reads {
		if !d.external {
			continue
		}
		if !d.staged {
			dt := s.stageDur(d.bytes)
			s.sched.stagedIn(d.bytes, dt)
			t += dt
			d.staged = true
			d.stageEnd = s.now + t
			continue
		}
		t = max(t, d.stageEnd-s.now)
	}
	return t
}

type simCPU struct {
	w    *worker
	sim  Sim
	busy bool
}

// simGPU is a GPU with an upload engine, a compute engine and a download
// engine; without Prefetch the three are used one at a time.
type simGPU struct {
	w                          *worker
	sim                        Sim
	prepared                   []*simPrep // taken, not yet computing
	downQ                      []*datum
	upBusy, compBusy, downBusy bool
}

// busy reports whether one of g's engines is at work.
func (g *simGPU) busy() bool { return g.upBusy || g.compBusy || g.downBusy }

type simPrep struct {
	a         action
	stage     time.Duration // staging its inputs before the upload
	uploading bool
	uploaded  bool
}

func (s *simulator) at(d time.Duration, fn func()) {
	heap.Push(&s.q, simEvent{t: s.now + d, seq: s.seq, fn: fn})
	s.seq++
}

// admit admits flows while the window has room: spawned flows first, then
// the given ones in order.
func (s *simulator) admit() {
	for (len(s.spawned) > 0 || s.next < len(s.flows)) && (s.sched.cfg.Window == 0 || s.sched.active+s.committing < s.sched.cfg.Window) {
		fs := &flowState{}
		if len(s.spawned) > 0 {
			fs.spawned = true
			f := s.spawned[0]
			s.spawned = s.spawned[1:]
			s.sched.admitInto(fs, f)
		} else {
			f := s.flows[s.next]
			s.next++ // before admitInto: a flow with no steps completes in it, and admits the next
			s.sched.admitInto(fs, f)
		}
		for _, d := range fs.data {
			if !d.external {
				continue
			}
			switch {
			case d.store == nil || s.stageBW <= 0:
				d.staged = true
				if s.sched.cfg.stagesAhead() {
					s.sched.addHost(d) // staged ahead of computation
				}
			case s.sched.cfg.stagesAhead() && s.stageOnCores: // by the next idle core
				s.stageQ = append(s.stageQ, d)
			case s.sched.cfg.stagesAhead(): // staged in the background from now
				s.at(s.stageDur(d.bytes), func() {
					d.staged = true
					s.sched.addHost(d)
				})
			}
		}
	}
}

// dispatch lets every idle engine start work until none can.
func (s *simulator) dispatch() {
	for progress := true; progress; {
		progress = false
		for _, g := range s.gpus {
			if s.stepGPU(g) {
				progress = true
			}
		}
		s.sched.beginPicks()
		for _, cp := range s.cpus {
			if cp.busy {
				continue
			}
			if len(s.stageQ) > 0 {
				s.stageOnCore(cp)
				progress = true
				continue
			}
			if len(s.commitQ) > 0 && s.commitBusy < max(s.sched.cfg.CoreCommits, 1) {
				s.commitOnCore(cp)
				progress = true
				continue
			}
			n := s.sched.pick(cp.w)
			if n == nil {
				continue
			}
			st := s.stage(n)
			s.sched.take(cp.w, n)
			cp.busy = true
			progress = true
			dur := cp.sim.compute(n.step.cost)
			s.at(st+dur, func() {
				cp.busy = false
				s.sched.computed(cp.w, n, dur, nil)
			})
		}
		s.sched.endPicks()
	}
}

// stageOnCore has idle core cp stage the first datum of the background
// staging queue (Machine.StageOnCores).
func (s *simulator) stageOnCore(cp *simCPU) {
	d := s.stageQ[0]
	s.stageQ = s.stageQ[1:]
	cp.busy = true
	s.at(s.stageDur(d.bytes), func() {
		cp.busy = false
		d.staged = true
		s.sched.addHost(d)
	})
}

// commitJob is a completed flow whose outputs, b bytes, wait for a core
// to commit them (Config.StorageOnCores).
type commitJob struct {
	fs *flowState
	b  int64
}

// commitOnCore has idle core cp commit the first flow of the commit queue
// (Config.StorageOnCores), Config.CoreCommits at most at once.
func (s *simulator) commitOnCore(cp *simCPU) {
	c := s.commitQ[0]
	s.commitQ = s.commitQ[1:]
	cp.busy = true
	s.commitBusy++
	s.at(s.commitDur(c.b), func() {
		cp.busy = false
		s.commitBusy--
		s.committed(c.fs)
	})
}

// stepGPU starts whatever g's engines can start now; it reports whether it
// started anything.
func (s *simulator) stepGPU(g *simGPU) bool {
	progress := false
	for s.startOnGPU(g) {
		progress = true
	}
	return progress
}

// startOnGPU starts the next thing one of g's engines can start, in this
// order: a download, the upload of the next prepared node, its
// computation, or taking a node (or, when idle, flushing data g alone
// holds). Without Prefetch the engines run one at a time: downloads wait
// for the other engines, and the rest for the downloads too. It reports
// whether it started anything.
func (s *simulator) startOnGPU(g *simGPU) bool {
	serial := !s.sched.cfg.Prefetch
	idle := !g.busy() && len(g.downQ) == 0 // a serial GPU may start the next phase
	switch {
	case !g.downBusy && len(g.downQ) > 0 && (!serial || !g.busy()):
		s.startDownload(g)
	case serial && !idle:
		return false
	case len(g.prepared) == 0:
		return s.takeOrFlush(g, idle)
	case !g.upBusy && !g.prepared[0].uploading:
		s.startUpload(g)
	case !g.compBusy && g.prepared[0].uploaded:
		s.startCompute(g)
	default:
		return false
	}
	return true
}

// startDownload starts downloading the first datum of g's download queue.
func (s *simulator) startDownload(g *simGPU) {
	d := g.downQ[0]
	g.downQ = g.downQ[1:]
	g.downBusy = true
	t := g.sim.transfer(d.bytes)
	s.at(t, func() {
		g.downBusy = false
		s.sched.moved(d.bytes, t)
		s.sched.downloaded(d, nil)
	})
}

// startUpload starts uploading the inputs of g's next prepared node.
func (s *simulator) startUpload(g *simGPU) {
	p := g.prepared[0]
	t := p.stage
	var b int64
	for _, d := range p.a.upload {
		t += g.sim.transfer(d.bytes)
		b += d.bytes
	}
	p.uploading = true
	g.upBusy = true
	s.at(t, func() {
		g.upBusy = false
		s.sched.moved(b, t-p.stage)
		p.uploaded = true
	})
}

// startCompute starts computing g's next prepared node, whose inputs are
// uploaded; at its end the downloads it starts join g's queue.
func (s *simulator) startCompute(g *simGPU) {
	p := g.prepared[0]
	g.prepared = g.prepared[1:]
	g.compBusy = true
	dur := g.sim.compute(p.a.n.step.cost)
	s.at(dur, func() {
		g.compBusy = false
		g.downQ = append(g.downQ, s.sched.computed(g.w, p.a.n, dur, nil)...)
	})
}

// takeOrFlush prepares the node the scheduler picks for g, queueing the
// downloads of the data it evicts; with no node to take, an idle g with
// nothing in flight flushes the data only it holds. It reports whether it
// did either.
func (s *simulator) takeOrFlush(g *simGPU, idle bool) bool {
	if n := s.sched.pick(g.w); n != nil {
		st := s.stage(n)
		a := s.sched.take(g.w, n)
		g.downQ = append(g.downQ, a.evict...)
		g.prepared = append(g.prepared, &simPrep{a: a, stage: st})
		return true
	}
	if !idle || g.w.inflight != 0 {
		return false
	}
	fl := s.sched.flush(g.w)
	g.downQ = append(g.downQ, fl...)
	return len(fl) > 0
}
