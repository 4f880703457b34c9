package pats

import (
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/gohtgs/htgs/device"
)

// This file holds the scheduling state shared by the discrete-event
// simulator and the real-time manager: the dependency graph of the flows in
// progress, the ready queue, the policies' decisions, data residency and
// transfer bookkeeping, time statistics and memory accounting. It is not
// safe for concurrent use; the manager guards it with a mutex.

type nodeState uint8

const (
	nPending nodeState = iota // waiting for dependencies
	nReady                    // in the ready queue
	nRunning                  // taken by a worker (uploading, computing)
	nDone                     // computed (or skipped because its flow failed)
	nDropped                  // never run: its flow failed first
)

// node is one operation instance of an admitted flow.
type node struct {
	step     *Step
	fl       *flowState
	reads    []*datum
	writes   []*datum
	succ     []*node
	pending  int
	state    nodeState
	readySeq int64
	explore  bool // taken to obtain a first time sample
}

// datum is one version of a datum of an admitted flow, with its location.
type datum struct {
	key         string
	bytes       int64
	store       Stager
	fl          *flowState
	external    bool // an input of the flow, not written by it
	final       bool // an output: the last version of a key the flow writes that has a store or no reader
	readersLeft int
	hostValid   bool   // host memory holds the current value
	hostLive    bool   // counted in host memory
	gpus        uint64 // GPUs (bit = GPU ordinal) holding a copy
	transit     bool   // being downloaded
	freed       bool
	staged      bool // external input read from its store (or has none)
	stage       *stageOnce
	// stageEnd is, in the simulator, when the staging of an external
	// input ends in virtual time: a worker that takes a reader earlier
	// waits until then, as a real one waits on the staging another worker
	// is doing (stageOnce).
	stageEnd time.Duration
}

// flowState is an admitted flow.
type flowState struct {
	f       *Flow
	seq     int64
	nodes   []*node
	data    []*datum
	left    int // nodes neither done nor dropped
	running int
	started bool // a node has been taken
	err     error
	done    bool
	spawned bool  // created at run time by the Spawn function of another flow
	tree    *tree // real-time manager only: the stage instance it belongs to
}

// worker is the scheduling state of one processing unit.
type worker struct {
	idx      int
	dev      device.Device
	kind     device.Kind
	gpu      int // ordinal among GPUs, -1 for a CPU core
	resident []*datum
	pins     map[*datum]int
	inflight int
	ops      int
	busy     time.Duration

	// Real-time manager only: the worker waits for work, and the work
	// dispatched to it.
	waiting  bool
	assigned *action
	flushed  []*datum
	offered  atomic.Bool // assigned is set: read without m.mu by a computing worker
	store    *storeItem  // storage work given to a CPU worker (Config.StorageOnCores)

	// Real-time manager only: the worker's wake-ups (UnitReport.Woken).
	parked    bool      // asleep in next
	wokenAt   time.Time // when it was woken with work, zero if not
	woken     int
	wakeDelay time.Duration
	wakeMax   time.Duration
}

func (w *worker) bit() uint64 { return 1 << uint(w.gpu) }

// action is what a worker does for one taken node: download the data it
// evicts from its memory or writes back (keeping the copy), upload the
// node's inputs, compute.
type action struct {
	n      *node
	evict  []*datum
	upload []*datum
}

type opKind struct {
	op   string
	kind device.Kind
}

type opCount struct {
	given float64
	count [2]int
	time  [2]time.Duration
}

// scheduler is the scheduling state shared by the discrete-event simulator
// and the real-time manager (see the top of this file).
type scheduler struct {
	cfg       Config
	workers   []*worker
	ready     []*node
	readySeq  int64
	flowSeq   int64
	active    int
	stats     timeStats
	exploring map[opKind]int
	onDone    func(*flowState)
	offer     []*node            // pickChooser's buffers
	cands     []device.Candidate // (reused between picks)

	hostLive, peakHost int64
	devLive, peakDev   int64
	uploads, downloads int
	upBytes, downBytes int64
	movedBytes         int64         // bytes of the transfers timed so far
	movedTime          time.Duration // their total time
	stagedBytes        int64         // bytes of the inputs staged by workers so far
	stagedTime         time.Duration // their total staging time
	gpus               int
	// corePick is a core's pick, every core's through a round of picks
	// (beginPicks .. endPicks) until a take changes the ready work: with
	// FinishAware each pick builds the GPUs' queue and weighs every ready
	// operation against it, and in a PATS run on the H200 machine, 15
	// cores mostly idle, doing so once per core put 0.1 to 0.3 ms of the
	// manager between each two steps of the GPU's worker.
	corePick           *node
	inRound, coreValid bool
	ops                map[string]*opCount
	opOrder            []string
	flowsDone          int
	flowsFailed        int
	flowsSpawned       int
	peakActive         int
}

func newScheduler(cfg Config, devs []device.Device) *scheduler {
	sc := &scheduler{cfg: cfg, exploring: map[opKind]int{}, ops: map[string]*opCount{}, stats: timeStats{}}
	gpus := 0
	for i, d := range devs {
		w := &worker{idx: i, dev: d, kind: d.Kind(), gpu: -1, pins: map[*datum]int{}}
		if w.kind == device.GPU {
			w.gpu = gpus
			gpus++
		}
		sc.workers = append(sc.workers, w)
	}
	sc.gpus = gpus
	return sc
}

// kinds returns the device kinds present.
func (sc *scheduler) kinds() []device.Kind {
	var ks []device.Kind
	for _, w := range sc.workers {
		if !slices.Contains(ks, w.kind) {
			ks = append(ks, w.kind)
		}
	}
	return ks
}

// admit turns f into a flow in progress and queues its ready nodes.
func (sc *scheduler) admit(f *Flow) *flowState {
	fs := &flowState{}
	sc.admitInto(fs, f)
	return fs
}

// admitInto is admit with a flow state made by the caller.
func (sc *scheduler) admitInto(fs *flowState, f *Flow) {
	f.used = true
	fs.f, fs.seq = f, sc.flowSeq
	sc.flowSeq++
	data := map[*dataVer]*datum{}
	get := func(v *dataVer) *datum {
		if d := data[v]; d != nil {
			return d
		}
		d := &datum{
			key: v.key, bytes: v.bytes, store: v.store, fl: fs,
			external:    v.writer == nil,
			final:       v.writer != nil && f.last[v.key] == v && (v.store != nil || len(v.readers) == 0),
			readersLeft: len(v.readers),
		}
		if d.external {
			d.hostValid = true
			d.staged = d.store == nil
			d.stage = &stageOnce{}
		}
		data[v] = d
		fs.data = append(fs.data, d)
		return d
	}
	fs.nodes = make([]*node, len(f.steps))
	for i, s := range f.steps {
		fs.nodes[i] = &node{step: s, fl: fs, pending: len(s.deps)}
	}
	for i, s := range f.steps {
		n := fs.nodes[i]
		for _, v := range s.reads {
			n.reads = append(n.reads, get(v))
		}
		for _, v := range s.writes {
			n.writes = append(n.writes, get(v))
		}
		for _, d := range s.deps {
			fs.nodes[d.index].succ = append(fs.nodes[d.index].succ, n)
		}
	}
	fs.left = len(fs.nodes)
	sc.active++
	sc.peakActive = max(sc.peakActive, sc.active)
	if fs.spawned {
		sc.flowsSpawned++
	}
	for _, n := range fs.nodes {
		if n.pending == 0 {
			sc.makeReady(n)
		}
	}
	sc.maybeComplete(fs)
}

func (sc *scheduler) makeReady(n *node) {
	n.state = nReady
	n.readySeq = sc.readySeq
	sc.readySeq++
	sc.ready = append(sc.ready, n)
}

func (sc *scheduler) unready(n *node) {
	if i := slices.Index(sc.ready, n); i >= 0 {
		sc.ready = slices.Delete(sc.ready, i, i+1)
	}
}

// eligible reports whether w can run n now: n has an implementation for
// w's kind and every input is in host memory or, for a GPU, in its memory.
func (sc *scheduler) eligible(w *worker, n *node) bool {
	if n.step.impl(w.kind) == nil {
		return false
	}
	for _, d := range n.reads {
		if d.external && !d.staged && sc.cfg.stagesAhead() {
			return false // being staged in the background
		}
		if d.hostValid || w.gpu >= 0 && d.gpus&w.bit() != 0 {
			continue
		}
		return false
	}
	return true
}

// estimate returns the speedup estimate the policy uses for n. An operation
// with only a CPU implementation ranks lowest, one with only a GPU
// implementation highest.
func (sc *scheduler) estimate(n *node) float64 {
	cpu := n.step.run[device.CPU] != nil
	gpu := n.step.run[device.GPU] != nil
	switch {
	case cpu && !gpu:
		return 0
	case gpu && !cpu:
		return math.Inf(1)
	}
	if sc.cfg.Learn {
		if s, ok := sc.stats.speedup(n.step.op); ok {
			return s
		}
	}
	if n.step.speedup > 0 {
		return n.step.speedup
	}
	return 1
}

// allGPUs returns the bits of every GPU (see worker.bit).
func (sc *scheduler) allGPUs() uint64 {
	return 1<<uint(sc.gpus) - 1
}

// mask returns the GPUs whose memory counts as on the device when w ranks
// operations by effective speedup: its own for a GPU; any GPU's for a CPU
// core, which ranks as the GPUs would.
func (w *worker) mask(sc *scheduler) uint64 {
	if w.gpu >= 0 {
		return w.bit()
	}
	return sc.allGPUs()
}

// rank returns the value PATS orders n by: its speedup estimate, or with
// TransferAware its effective speedup (C + S) / (G + X + S) (see
// Config.TransferAware), X counting the inputs held by none of the GPUs in
// gpus and every output. An operation with one implementation, or
// without estimated times, keeps its estimate.
func (sc *scheduler) rank(gpus uint64, n *node) float64 {
	s := sc.estimate(n)
	if !sc.cfg.TransferAware || !hasBoth(n) {
		return s
	}
	c, g, ok := sc.times(n)
	if !ok {
		return s
	}
	var b int64
	for _, d := range n.reads {
		if d.gpus&gpus == 0 {
			b += d.bytes
		}
	}
	for _, d := range n.writes {
		b += d.bytes
	}
	st := sc.stageTime(n)
	den := g + sc.transferTime(b) + st
	if den <= 0 {
		return s
	}
	return float64(c+st) / float64(den)
}

// before is the tie-break order: the oldest flow first when depth-first,
// then the order in which nodes became ready.
func (sc *scheduler) before(a, b *node) bool {
	if sc.cfg.DepthFirst && a.fl.seq != b.fl.seq {
		return a.fl.seq < b.fl.seq
	}
	return a.readySeq < b.readySeq
}

// better reports whether w should prefer a to b under the policy. With
// DepthFirst, work of flows already started comes before the first work of
// a new one.
func (sc *scheduler) better(w *worker, a, b *node) bool {
	if sc.cfg.DepthFirst && a.fl.started != b.fl.started {
		return a.fl.started
	}
	if sc.cfg.Policy == PATS {
		sa, sb := sc.rank(w.mask(sc), a), sc.rank(w.mask(sc), b)
		if sa != sb {
			if w.kind == device.GPU {
				return sa > sb
			}
			return sa < sb
		}
	}
	return sc.before(a, b)
}

// reuses reports whether n reads data held in GPU worker w's memory.
func (sc *scheduler) reuses(w *worker, n *node) bool {
	for _, d := range n.reads {
		if d.gpus&w.bit() != 0 {
			return true
		}
	}
	return false
}

func hasBoth(n *node) bool {
	return n.step.run[device.CPU] != nil && n.step.run[device.GPU] != nil
}

// pick chooses the ready node idle worker w runs next, or nil. In a
// round of picks by the cores (beginPicks), a core's choice is every
// core's until a take: it depends on the kind of worker, not on which
// core asks (but with a Chooser, which is told the device).
func (sc *scheduler) pick(w *worker) *node {
	if w.gpu >= 0 || !sc.inRound || sc.cfg.Chooser != nil {
		return sc.choose(w)
	}
	if !sc.coreValid {
		sc.corePick, sc.coreValid = sc.choose(w), true
	}
	return sc.corePick
}

// choose is pick's choice, made.
func (sc *scheduler) choose(w *worker) *node {
	if sc.cfg.Learn {
		if n := sc.pickUntimed(w); n != nil {
			n.explore = true
			return n
		}
	}
	if sc.cfg.Chooser != nil {
		return sc.pickChooser(w)
	}
	if w.gpu >= 0 && sc.cfg.Locality && len(w.resident) > 0 {
		return sc.pickLocal(w)
	}
	var q *gpuQueue
	if w.gpu < 0 && sc.cfg.FinishAware && sc.gpus > 0 {
		q = sc.gpuQueue()
	}
	var best *node
	for _, n := range sc.ready {
		if sc.eligible(w, n) && (best == nil || sc.better(w, n, best)) && !q.leave(sc, n) {
			best = n
		}
	}
	return best
}

// times returns the estimated compute times of n on a CPU core and on a
// GPU from the time statistics, the speedup estimate converting one into
// the other: anchored on the GPU mean when there is one, else on the CPU
// mean, else on the step's modelled CPU cost. ok is false if n's
// operation has not been timed yet and has no modelled cost.
func (sc *scheduler) times(n *node) (cpu, gpu time.Duration, ok bool) {
	s := sc.estimate(n)
	if s <= 0 || math.IsInf(s, 0) || math.IsNaN(s) {
		return 0, 0, false
	}
	if g, ok := sc.stats.mean(n.step.op, device.GPU); ok {
		return time.Duration(float64(g) * s), g, true
	}
	if c, ok := sc.stats.mean(n.step.op, device.CPU); ok {
		return c, time.Duration(float64(c) / s), true
	}
	if c := n.step.cost.CPU; c > 0 { // not timed yet: the modelled cost
		return c, time.Duration(float64(c) / s), true
	}
	return 0, 0, false
}

// transferTime estimates the time to move b bytes between host and GPU
// memory at the rate observed so far (0 before any transfer was timed).
func (sc *scheduler) transferTime(b int64) time.Duration {
	if sc.movedBytes <= 0 || sc.movedTime <= 0 {
		return 0
	}
	return time.Duration(float64(b) / float64(sc.movedBytes) * float64(sc.movedTime))
}

// stageTime estimates the time a worker spends staging the inputs of n
// that are still in storage, at the rate observed so far (0 with
// Prefetch or StageAhead, which stage them in the background).
func (sc *scheduler) stageTime(n *node) time.Duration {
	if sc.cfg.stagesAhead() || sc.stagedBytes <= 0 {
		return 0
	}
	var b int64
	for _, d := range n.reads {
		if d.external && !d.staged {
			b += d.bytes
		}
	}
	return time.Duration(float64(b) / float64(sc.stagedBytes) * float64(sc.stagedTime))
}

// stagedIn records that a worker staged b bytes of inputs in d.
func (sc *scheduler) stagedIn(b int64, d time.Duration) {
	if b > 0 && d > 0 {
		sc.stagedBytes += b
		sc.stagedTime += d
	}
}

// moved records a timed transfer of b bytes.
func (sc *scheduler) moved(b int64, d time.Duration) {
	if b > 0 && d > 0 {
		sc.movedBytes += b
		sc.movedTime += d
	}
}

// gpuQueue is the work ready for the GPUs, for FinishAware: the ready
// operations with a GPU implementation and known times, by decreasing
// speedup estimate (the order in which the GPUs take them), with the
// running total of their GPU times, transfers included.
type gpuQueue struct {
	est []float64       // decreasing
	sum []time.Duration // sum[i]: GPU time of entries 0..i, per GPU
}

func (sc *scheduler) gpuQueue() *gpuQueue {
	type entry struct {
		est float64
		t   time.Duration
	}
	var es []entry
	for _, n := range sc.ready {
		if n.step.run[device.GPU] == nil {
			continue
		}
		_, g, ok := sc.times(n)
		if !ok {
			continue
		}
		es = append(es, entry{sc.rank(sc.allGPUs(), n), g + sc.transferTime(sc.nodeBytes(n)) + sc.stageTime(n)})
	}
	slices.SortStableFunc(es, func(a, b entry) int {
		switch {
		case a.est > b.est:
			return -1
		case a.est < b.est:
			return 1
		}
		return 0
	})
	q := &gpuQueue{est: make([]float64, len(es)), sum: make([]time.Duration, len(es))}
	var total time.Duration
	for i, e := range es {
		total += e.t
		q.est[i], q.sum[i] = e.est, total/time.Duration(sc.gpus)
	}
	return q
}

// beginPicks starts a round of picks by the cores in which nothing but
// take changes the scheduling state; endPicks ends it.
func (sc *scheduler) beginPicks() { sc.inRound, sc.coreValid = !sc.cfg.noRoundCache, false }

func (sc *scheduler) endPicks() { sc.inRound, sc.coreValid, sc.corePick = false, false, nil }

// nodeBytes returns the bytes n would move to and from a GPU: its inputs
// held by no GPU, and its outputs.
func (sc *scheduler) nodeBytes(n *node) int64 {
	var b int64
	for _, d := range n.reads {
		if d.gpus == 0 {
			b += d.bytes
		}
	}
	for _, d := range n.writes {
		b += d.bytes
	}
	return b
}

// leave reports whether a CPU core should leave n to the GPUs: they would
// finish it, after the ready work they take before it, sooner than the
// core. A nil q leaves nothing.
func (q *gpuQueue) leave(sc *scheduler, n *node) bool {
	if q == nil || !hasBoth(n) {
		return false
	}
	if sc.cfg.Learn && !sc.stats.has(n.step.op, device.CPU) && sc.exploring[opKind{n.step.op, device.CPU}] > 0 {
		return true // its first CPU sample is being taken: wait for it
	}
	c, _, ok := sc.times(n)
	if !ok {
		return false
	}
	s := sc.rank(sc.allGPUs(), n)
	// The last entry whose estimate is >= s: the GPUs take it, and all
	// before it, no later than n.
	i, _ := slices.BinarySearchFunc(q.est, s, func(e, t float64) int {
		if e >= t {
			return -1
		}
		return 1
	})
	if i == 0 {
		return false
	}
	return q.sum[i-1] < c
}

// pickUntimed returns the oldest ready node w can run whose operation has
// no time sample yet on w's kind and none being taken, or nil. Time
// statistics need a first sample of every operation on every kind, taken
// one at a time per kind.
func (sc *scheduler) pickUntimed(w *worker) *node {
	var best *node
	for _, n := range sc.ready {
		if sc.untimed(w, n) && (best == nil || sc.before(n, best)) {
			best = n
		}
	}
	return best
}

// untimed reports whether w could run n to take the first time sample of
// its operation on w's kind.
func (sc *scheduler) untimed(w *worker, n *node) bool {
	return hasBoth(n) && sc.eligible(w, n) && !sc.stats.has(n.step.op, w.kind) &&
		sc.exploring[opKind{n.step.op, w.kind}] == 0
}

// pickLocal is pick for a GPU worker with data locality and data in its
// memory: it prefers the best node reusing that data; with PATS, only if
// its speedup Sd satisfies Sd >= Sq * (1 - TransferImpact), Sq being the
// speedup of the best other node.
func (sc *scheduler) pickLocal(w *worker) *node {
	var bd, bq *node // best reusing data in w's memory, best other
	for _, n := range sc.ready {
		if !sc.eligible(w, n) {
			continue
		}
		if sc.reuses(w, n) {
			if bd == nil || sc.better(w, n, bd) {
				bd = n
			}
		} else if bq == nil || sc.better(w, n, bq) {
			bq = n
		}
	}
	if bd == nil {
		return bq
	}
	if sc.cfg.Policy == FCFS || bq == nil {
		return bd
	}
	if sd, sq := sc.rank(w.bit(), bd), sc.rank(w.bit(), bq); sd >= sq*(1-sc.cfg.TransferImpact) {
		return bd
	}
	return bq
}

// take assigns n (returned by pick) to w and plans its transfers.
func (sc *scheduler) take(w *worker, n *node) action {
	sc.coreValid = false
	sc.unready(n)
	n.state = nRunning
	n.fl.running++
	n.fl.started = true
	w.inflight++
	if n.explore {
		sc.exploring[opKind{n.step.op, w.kind}]++
	}
	for _, d := range n.reads {
		if d.external {
			sc.addHost(d) // a lazy read materializes the input now
		}
	}
	a := action{n: n}
	if w.gpu < 0 {
		return a
	}
	// What the new node does not read and no node in flight holds: with
	// Locality the GPU keeps its copy for later readers and writes back
	// (as flush does) the outputs of the flow and the values a ready
	// node that a core can run reads, the oldest copies going when the
	// GPU's memory bound needs the room (keepRoom); without, it is
	// evicted.
	if sc.cfg.Locality {
		sc.keepRoom(w, n, &a.evict)
		var cpuReads map[*datum]bool // built on first need
		for _, d := range w.resident {
			if w.pins[d] != 0 || d.hostValid || d.transit || !sc.needed(d) || slices.Contains(n.reads, d) {
				continue
			}
			if !d.final {
				if cpuReads == nil {
					cpuReads = sc.cpuReadyReads()
				}
				if !cpuReads[d] {
					continue
				}
			}
			sc.writeBack(d, &a.evict)
		}
	} else {
		for _, d := range slices.Clone(w.resident) {
			if w.pins[d] == 0 && !slices.Contains(n.reads, d) {
				sc.evict(w, d, &a.evict)
			}
		}
	}
	for _, d := range n.reads {
		if d.gpus&w.bit() == 0 {
			a.upload = append(a.upload, d)
			sc.uploads++
			sc.upBytes += d.bytes
			sc.addResident(w, d)
		}
		w.pins[d]++
	}
	return a
}

// keepBound is the most bytes of data a GPU keeps for later readers with
// Locality: half its memory (the rest for the application's own buffers),
// no bound where the device reports no size.
func keepBound(w *worker) int64 { return w.dev.Memory() / 2 }

// keepRoom evicts the oldest copies in w's memory that n does not read and
// no node in flight holds until n's uploads and outputs fit within
// keepBound.
func (sc *scheduler) keepRoom(w *worker, n *node, downloads *[]*datum) {
	bound := keepBound(w)
	if bound <= 0 {
		return
	}
	var need, held int64
	for _, d := range n.reads {
		if d.gpus&w.bit() == 0 {
			need += d.bytes
		}
	}
	for _, d := range n.writes {
		need += d.bytes
	}
	for _, d := range w.resident {
		held += d.bytes
	}
	for _, d := range slices.Clone(w.resident) { // oldest first
		if held+need <= bound {
			return
		}
		if w.pins[d] == 0 && !slices.Contains(n.reads, d) {
			held -= d.bytes
			sc.evict(w, d, downloads)
		}
	}
}

// cpuReadyReads returns the data that ready nodes a CPU core can run
// read (none without cores).
func (sc *scheduler) cpuReadyReads() map[*datum]bool {
	m := map[*datum]bool{}
	if sc.gpus == len(sc.workers) {
		return m
	}
	for _, r := range sc.ready {
		if r.step.impl(device.CPU) != nil {
			for _, d := range r.reads {
				m[d] = true
			}
		}
	}
	return m
}

// writeBack starts downloading d, keeping its copy on the GPU, if the host
// lacks the value and someone needs it.
func (sc *scheduler) writeBack(d *datum, downloads *[]*datum) {
	if !d.hostValid && !d.transit && sc.needed(d) {
		d.transit = true
		*downloads = append(*downloads, d)
		sc.downloads++
		sc.downBytes += d.bytes
	}
}

// needed reports whether d's value must reach host memory: someone will
// read it, or it is an output of a flow that has not failed.
func (sc *scheduler) needed(d *datum) bool {
	return !d.freed && d.fl.err == nil && (d.readersLeft > 0 || d.final)
}

// evict removes d from w's memory, adding it to downloads if it holds the
// only copy of a value still needed.
func (sc *scheduler) evict(w *worker, d *datum, downloads *[]*datum) {
	if i := slices.Index(w.resident, d); i >= 0 {
		w.resident = slices.Delete(w.resident, i, i+1)
	}
	d.gpus &^= w.bit()
	sc.devLive -= d.bytes
	if !d.hostValid && !d.transit && sc.needed(d) {
		d.transit = true
		*downloads = append(*downloads, d)
		sc.downloads++
		sc.downBytes += d.bytes
	}
}

// flush starts downloading every needed value held only by idle GPU w,
// keeping the copies in its memory.
func (sc *scheduler) flush(w *worker) []*datum {
	var out []*datum
	for _, d := range w.resident {
		if w.pins[d] == 0 {
			sc.writeBack(d, &out)
		}
	}
	return out
}

func (sc *scheduler) addResident(w *worker, d *datum) {
	w.resident = append(w.resident, d)
	d.gpus |= w.bit()
	sc.devLive += d.bytes
	sc.peakDev = max(sc.peakDev, sc.devLive)
}

func (sc *scheduler) addHost(d *datum) {
	if !d.hostLive && !d.freed {
		d.hostLive = true
		sc.hostLive += d.bytes
		sc.peakHost = max(sc.peakHost, sc.hostLive)
	}
}

// free releases every copy of d.
func (sc *scheduler) free(d *datum) {
	if d.freed {
		return
	}
	d.freed = true
	if d.hostLive {
		d.hostLive = false
		sc.hostLive -= d.bytes
	}
	for _, w := range sc.workers {
		if w.gpu >= 0 && d.gpus&w.bit() != 0 {
			if i := slices.Index(w.resident, d); i >= 0 {
				w.resident = slices.Delete(w.resident, i, i+1)
			}
			sc.devLive -= d.bytes
		}
	}
	d.gpus = 0
}

// computed records that w finished n after dur (err: n failed, or its flow
// had failed and n was skipped). It returns the downloads w starts now:
// without data locality, a GPU downloads its outputs and forgets its inputs
// after every operation.
func (sc *scheduler) computed(w *worker, n *node, dur time.Duration, err error) []*datum {
	fl := n.fl
	sc.release(w, n)
	n.state = nDone
	fl.left--
	if err != nil && fl.err == nil {
		sc.failFlow(fl, err)
	}
	var downs []*datum
	if fl.err == nil {
		sc.record(w, n, dur)
		sc.settleData(w, n)
		for _, s := range n.succ {
			if s.pending--; s.pending == 0 && s.state == nPending {
				sc.makeReady(s)
			}
		}
		if w.gpu >= 0 && !sc.cfg.Locality {
			for _, d := range slices.Clone(w.resident) {
				if w.pins[d] == 0 {
					sc.evict(w, d, &downs)
				}
			}
		}
	}
	sc.maybeComplete(fl)
	return downs
}

// release undoes what take did for n on w: the counts of nodes in flight
// and exploring, and, on a GPU, the pins of n's inputs.
func (sc *scheduler) release(w *worker, n *node) {
	w.inflight--
	n.fl.running--
	if n.explore {
		sc.exploring[opKind{n.step.op, w.kind}]--
	}
	if w.gpu >= 0 {
		for _, d := range n.reads {
			if w.pins[d]--; w.pins[d] <= 0 {
				delete(w.pins, d)
			}
		}
	}
}

// record adds n's compute time dur on w to the time statistics and to the
// counts of the report.
func (sc *scheduler) record(w *worker, n *node, dur time.Duration) {
	sc.stats.add(n.step.op, w.kind, dur)
	oc := sc.ops[n.step.op]
	if oc == nil {
		oc = &opCount{given: n.step.speedup}
		sc.ops[n.step.op] = oc
		sc.opOrder = append(sc.opOrder, n.step.op)
	}
	k := kindIndex(w.kind)
	oc.count[k]++
	oc.time[k] += dur
	w.ops++
	w.busy += dur
}

// settleData places the outputs of n, computed on w, in w's memory (host
// memory for a CPU core), and frees the data nobody will read any more:
// inputs n was the last reader of, outputs overwritten before anyone read
// them.
func (sc *scheduler) settleData(w *worker, n *node) {
	for _, d := range n.writes {
		if w.gpu >= 0 {
			d.hostValid = false
			sc.addResident(w, d)
		} else {
			d.hostValid = true
			sc.addHost(d)
		}
		if d.readersLeft == 0 && !d.final {
			sc.free(d) // overwritten before anyone read it
		}
	}
	for _, d := range n.reads {
		if d.readersLeft--; d.readersLeft == 0 && !d.final {
			sc.free(d)
		}
	}
}

// downloaded records the end of d's download.
func (sc *scheduler) downloaded(d *datum, err error) {
	d.transit = false
	if d.freed || d.fl.done {
		return
	}
	if err != nil {
		sc.failFlow(d.fl, err)
		sc.maybeComplete(d.fl)
		return
	}
	d.hostValid = true
	sc.addHost(d)
	sc.maybeComplete(d.fl)
}

// failFlow marks fl failed and drops its nodes that have not started.
func (sc *scheduler) failFlow(fl *flowState, err error) {
	if fl.err != nil {
		return
	}
	fl.err = err
	for _, n := range fl.nodes {
		switch n.state {
		case nReady:
			sc.unready(n)
			fallthrough
		case nPending:
			n.state = nDropped
			fl.left--
		}
	}
}

// maybeComplete finishes fl once all its nodes are done and all its outputs
// have reached host memory.
func (sc *scheduler) maybeComplete(fl *flowState) {
	if fl.done || fl.left > 0 {
		return
	}
	if fl.err == nil {
		for _, d := range fl.data {
			if d.final && !d.hostValid {
				return
			}
		}
		sc.flowsDone++
	} else {
		sc.flowsFailed++
	}
	fl.done = true
	sc.active--
	for _, d := range fl.data {
		sc.free(d)
	}
	if sc.onDone != nil {
		sc.onDone(fl)
	}
}

func kindIndex(k device.Kind) int {
	if k == device.GPU {
		return 1
	}
	return 0
}

// timeStats keeps, per operation and device kind, the count and total of
// the compute times observed.
type timeStats map[string]*[2]struct {
	n   int
	sum time.Duration
}

func (t timeStats) add(op string, k device.Kind, d time.Duration) {
	e := t[op]
	if e == nil {
		e = new([2]struct {
			n   int
			sum time.Duration
		})
		t[op] = e
	}
	e[kindIndex(k)].n++
	e[kindIndex(k)].sum += d
}

func (t timeStats) has(op string, k device.Kind) bool {
	e := t[op]
	return e != nil && e[kindIndex(k)].n > 0
}

// mean returns the mean compute time of op on kind k.
func (t timeStats) mean(op string, k device.Kind) (time.Duration, bool) {
	e := t[op]
	if e == nil || e[kindIndex(k)].n == 0 {
		return 0, false
	}
	s := e[kindIndex(k)]
	return s.sum / time.Duration(s.n), true
}

// speedup returns mean CPU time / mean GPU time for op.
func (t timeStats) speedup(op string) (float64, bool) {
	cm, ok1 := t.mean(op, device.CPU)
	gm, ok2 := t.mean(op, device.GPU)
	if !ok1 || !ok2 {
		return 0, false
	}
	if gm <= 0 {
		return math.Inf(1), true
	}
	return float64(cm) / float64(gm), true
}
