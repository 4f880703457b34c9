package core

import (
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/gohtgs/htgs/task"
)

// ErrClosed is returned by a push from the graph's input that was waiting
// for room in a full queue when the input was closed.
var ErrClosed = errors.New("htgs: graph input is closed")

// Inbox is the FIFO input queue of a task: many producers, many consumers
// (the task's copies). It is unbounded unless a capacity is set, so a cycle
// can never deadlock on a full buffer.
//
// Producers are counted: the inbox closes when its last producer is done,
// and a consumer then drains what is left. A mutex-protected ring buffer with
// condition variables measured faster here than channels plus an overflow
// list, and it lets a single consumer take items in batches.
type Inbox[T any] struct {
	run     *Run
	name    label
	counted bool // items count towards the run's quiescence counter
	color   uint8
	closed  bool // no producer is left (or the run is quiescent)
	gone    bool // no consumer is left: pushes are dropped

	mu        sync.Mutex
	notEmpty  sync.Cond
	notFull   *sync.Cond // nil when unbounded
	buf       []T
	buf1      [1]T // the ring's room until a second value is queued
	head, n   int
	limit     int32 // 0: unbounded
	producers int32
	waiting   int32 // consumers blocked in Pop
	pwaiting  int32 // producers blocked in Push
	maxLen    int32
	pushed    int64
	dropped   int64
	succ      successors // the outlets of the consuming node
	// pri, when set, makes the inbox a priority queue (see SetPriority).
	pri *priority[T]
	// Kept in a Frame: gen counts the runs (the consumer's parked copies
	// wait for it to change), ended tells them to end, wiredProducers is
	// the producer count of the wiring.
	gen            uint64
	ended          bool
	wiredProducers int32
	// discard is set when nobody reads the values: they are counted as
	// pushed and dropped (see Discard).
	discard bool
	// Hand-off (see handOff), for the queue of a single-copy node kept in
	// a Frame whose copy has neither Initialize nor Shutdown (claimable,
	// set by the node for each run; consumer is the node): parked tells
	// that the copy's goroutine is parked between runs and has not started
	// this run; deferred that a value was queued while it was, by a copy
	// in its last batch, without waking it (the producer's goroutine then
	// wakes it, or runs it, when its copy's run is over).
	// claimedGen is one more than the generation (gen) of the run that was
	// claimed, 0 if none: it stays set until the next run's Launch moves
	// gen on, so that the parked goroutine cannot start before.
	// cheap tells that the consumer's last run executed briefly (see
	// cheapExecute): a producer that is not its output's first may defer
	// it too, and run it after its first.
	// A push reads these fields but writes them only in a run of a Frame
	// (g.Start never): they may share a cache line with the consumer's
	// copy (node.copies and its executor follow the inbox), and a store
	// at each value would take that line from the other core (streaming
	// through a tree of 15 was about 7% slower with one; see pushed1).
	claimable, parked, deferred, cheap bool
	claimedGen                         uint64
	consumer                           handoff
}

// handoff is a node whose single copy's run another goroutine may run: a
// goroutine whose own copy's run is over, instead of waking the copy's
// goroutine and parking.
type handoff interface {
	// claim claims the run of the copy for the calling goroutine if its
	// wake-up is still deferred (nothing woke it meanwhile).
	claim() bool
	// runClaimed runs the claimed run of the copy on the calling goroutine
	// and returns the first node to run after it, if any (see handOff).
	runClaimed() handoff
	// sibling returns the node to run after this one and its own
	// (another consumer of the same producer), if any, and forgets it.
	sibling() handoff
	// setSibling records the node to run after this one and its own.
	setSibling(h handoff)
}

// successors lists where values go from a sink, for cycle detection.
type successors interface {
	nextN() int
	nextAt(i int) registered
}

// succList is the successors given to SetNext.
type succList []registered

func (l succList) nextN() int              { return len(l) }
func (l succList) nextAt(i int) registered { return l[i] }

// NewInbox returns an inbox registered with r. counted inboxes feed tasks and
// take part in quiescence detection; the graph's result queue is not counted.
func NewInbox[T any](r *Run, name string, limit int, counted bool) *Inbox[T] {
	return NewInboxNamed[T](r, name, "", false, limit, counted)
}

// NewInboxNamed is NewInbox for an inbox named pre followed by quoted in
// quotes when quote is set: the name is only formatted when a message
// needs it.
func NewInboxNamed[T any](r *Run, pre, quoted string, quote bool, limit int, counted bool) *Inbox[T] {
	q := &Inbox[T]{}
	q.init(r, labelOf(pre, quoted, quote), limit, counted)
	return q
}

// InitNamed prepares the zero inbox q as NewInboxNamed does; q must not
// move afterwards.
func (q *Inbox[T]) InitNamed(r *Run, pre, quoted string, quote bool, limit int, counted bool) {
	q.init(r, labelOf(pre, quoted, quote), limit, counted)
}

// init prepares the zero inbox q, which must not move afterwards.
func (q *Inbox[T]) init(r *Run, name label, limit int, counted bool) {
	q.run, q.name, q.counted, q.limit = r, name, counted, int32(min(limit, math.MaxInt32))
	q.buf = q.buf1[:]
	q.notEmpty.L = &q.mu
	if limit > 0 {
		q.notFull = sync.NewCond(&q.mu)
		r.bounded.Add(1)
	}
	r.register(q)
}

func (q *Inbox[T]) wired() { q.wiredProducers = q.producers }

// reset empties q for run r, with its producers as wired; the consumer's
// parked copies start when the node is launched (node.wakeRun).
func (q *Inbox[T]) reset(r *Run) {
	q.mu.Lock()
	q.run = r
	q.closed, q.gone, q.discard = false, false, false
	clear(q.buf)
	if q.pri != nil {
		q.pri.seq, q.pri.next = q.pri.seq[:0], 0
	}
	q.head, q.n = 0, 0
	q.producers = q.wiredProducers
	q.maxLen, q.pushed, q.dropped = 0, 0, 0
	q.color = white
	q.parked, q.deferred = q.claimable, false
	if q.limit > 0 {
		r.bounded.Add(1)
	}
	q.mu.Unlock()
}

// label is the name of a sink in messages, formatted only when needed:
// one of labelPrefixes followed by s in quotes, or s itself (labelRaw).
type label struct {
	kind labelKind
	s    string
}

type labelKind uint8

// Label kinds: a prefix each.
const (
	labelRaw labelKind = iota
	labelTask
	labelBookkeeper
	labelTaskOutput
	labelGraphInput
	labelGraphOutput
	labelPipelineOutput
	labelRule
)

var labelPrefixes = [...]string{"", "task ", "bookkeeper ", "output of task ", "input of graph ",
	"output of graph ", "output of pipeline ", "rule "}

// labelOf is the label pre followed by quoted in quotes if quote is set,
// else pre.
func labelOf(pre, quoted string, quote bool) label {
	if !quote {
		return label{s: pre}
	}
	for k, p := range labelPrefixes {
		if k > 0 && p == pre {
			return label{kind: labelKind(k), s: quoted}
		}
	}
	return label{s: pre + strconv.Quote(quoted)}
}

func (l label) String() string {
	if l.kind == labelRaw {
		return l.s
	}
	return labelPrefixes[l.kind] + strconv.Quote(l.s)
}

// AddProducer declares one more producer; called while wiring, before the run starts.
func (q *Inbox[T]) AddProducer() {
	q.mu.Lock()
	q.producers++
	q.mu.Unlock()
}

// ProducerDone is called once by each producer when it will push no more.
func (q *Inbox[T]) ProducerDone() {
	q.mu.Lock()
	q.producers--
	if q.producers <= 0 && !q.closed {
		q.closed = true
		if !q.deferred {
			// A deferred consumer is woken, or run, by the producer
			// that deferred it (handOff).
			q.notEmpty.Broadcast()
		}
	}
	q.mu.Unlock()
}

// undefer wakes q's consumer if its wake-up was deferred (see handOff).
func (q *Inbox[T]) undefer() {
	q.mu.Lock()
	if q.deferred {
		q.deferred = false
		q.notEmpty.Broadcast()
	}
	q.mu.Unlock()
}

// handOff is called by the producer whose copy deferred the wake-up of q's
// consumer (see push), once its copy's run is over: when claim is set and
// q is closed (its run cannot wait for input), the consumer is returned
// for the caller to claim (handoff.claim) and run on its goroutine, its
// wake-up still deferred until then (so that the stall watcher, or the
// run's stop, can still wake it); otherwise the consumer is woken. It
// returns nil when nothing was deferred.
func (q *Inbox[T]) handOff(claim bool) handoff {
	q.mu.Lock()
	if !q.deferred {
		q.mu.Unlock()
		return nil
	}
	if claim && q.parked && q.closed {
		q.mu.Unlock()
		return q.consumer
	}
	q.deferred = false
	if q.waiting > 0 {
		q.notEmpty.Broadcast()
	}
	q.mu.Unlock()
	return nil
}

// claim claims the run of q's consumer (see handOff) if its wake-up is
// still deferred: its own goroutine then stays parked for this run.
func (q *Inbox[T]) claim() bool {
	q.mu.Lock()
	ok := q.deferred && q.parked
	if ok {
		q.deferred, q.parked, q.claimedGen = false, false, q.gen+1
	}
	q.mu.Unlock()
	return ok
}

// Push appends v. It blocks only when the inbox is bounded and full. A value
// pushed to an inbox whose consumers have all stopped is dropped.
func (q *Inbox[T]) Push(v T) error { return q.push(v, nil, nil, nil) }

func (q *Inbox[T]) pushAbort(v T, abort *atomic.Bool) error { return q.push(v, nil, abort, nil) }

// push is Push that also increments *count, under the inbox's lock, when v
// is accepted: an outlet counts its values this way for free. A push that
// would wait for room gives up with ErrClosed once *abort is set (abort may
// be nil); whoever sets it then calls Run.WakeAll. cs, when not nil, is
// the emitting copy's: it is marked as waiting while the queue is full.
func (q *Inbox[T]) push(v T, count *int64, abort *atomic.Bool, cs *CopyStats) error {
	q.mu.Lock()
	if q.limit > 0 && q.n >= int(q.limit) {
		if err := q.waitRoom(abort, cs); err != nil {
			return err
		}
	}
	if q.run.Stopped() {
		q.mu.Unlock()
		return q.run.StopErr()
	}
	if q.gone || (q.closed && q.counted) {
		// Consumers stopped early (CanTerminate), or the run is already
		// quiescent: nobody will ever pop this value.
		q.dropped++
		q.mu.Unlock()
		if q.closed && !q.gone {
			return ErrTerminated
		}
		return nil
	}
	if q.discard {
		q.pushed++
		if count != nil {
			*count++
		}
		q.mu.Unlock()
		return nil
	}
	if q.counted && q.run.counting {
		q.run.pending.Add(1)
	}
	if q.pri != nil {
		return q.pushPriority(v, count)
	}
	if q.n == len(q.buf) {
		q.grow()
	}
	i := q.head + q.n
	if i >= len(q.buf) {
		i -= len(q.buf)
	}
	q.buf[i] = v
	q.n++
	if q.parked && cs != nil && !q.deferred && q.limit == 0 && (count != nil || q.cheap) && cs.last.Load() {
		// The emitting copy is in its last batch, and the consumer's
		// goroutine is parked between runs: the producer's goroutine
		// wakes it, or runs it, when its copy's run is over (handOff),
		// rather than now. A second value wakes it at once. Only the
		// first consumer of an outlet (counting its values), and others
		// whose last run was brief, are deferred: the producer runs one
		// after the other, so the others lose their parallelism.
		q.deferred = true
		cs.deferred.Store(true)
		if r := q.run; r.nudge != nil && r.nudgeArmed.CompareAndSwap(false, true) {
			r.nudge()
		}
		q.pushed++
		if count != nil {
			*count++
		}
		if q.n > int(q.maxLen) {
			q.maxLen = int32(min(q.n, math.MaxInt32))
		}
		q.mu.Unlock()
		return nil
	}
	q.pushed1(count)
	return nil
}

// waitRoom waits, q.mu held, until the bounded queue has room, the run
// stops or the consumers are gone; it returns ErrClosed, with q.mu
// released, once *abort is set.
func (q *Inbox[T]) waitRoom(abort *atomic.Bool, cs *CopyStats) error {
	var prev int32
	if cs != nil {
		prev = cs.beginEmitWait(&q.name)
		defer cs.endEmitWait(prev)
	}
	for q.limit > 0 && q.n >= int(q.limit) && !q.gone && !q.run.Stopped() {
		if abort != nil && abort.Load() {
			q.mu.Unlock()
			return ErrClosed
		}
		q.pwaiting++
		q.notFull.Wait()
		q.pwaiting--
	}
	return nil
}

// pushed1 counts an item just queued (in count too, when not nil), wakes a
// waiting consumer and releases q.mu.
func (q *Inbox[T]) pushed1(count *int64) {
	q.pushed++
	if count != nil {
		*count++
	}
	if q.n > int(q.maxLen) {
		q.maxLen = int32(min(q.n, math.MaxInt32))
	}
	if q.waiting > 0 {
		q.notEmpty.Signal()
	}
	if q.deferred {
		// Written only when set: a store at each value would take the
		// cache line from the consumer's copy, which shares it.
		q.deferred = false
	}
	q.mu.Unlock()
}

// pushPriority is the end of push for a priority queue: q.mu is held, and
// released.
func (q *Inbox[T]) pushPriority(v T, count *int64) error {
	if err := q.pri.push(q, v); err != nil {
		q.mu.Unlock()
		q.run.Fail(err)
		return err
	}
	q.pushed1(count)
	return nil
}

func (q *Inbox[T]) grow() {
	size := 2 * len(q.buf)
	if size < 16 {
		size = 16
	}
	nb := make([]T, size)
	k := copy(nb, q.buf[q.head:])
	copy(nb[k:], q.buf[:q.head])
	q.buf = nb
	q.head = 0
}

// Pop appends up to max values to dst, blocking while the inbox is empty and
// open. ok is false when the inbox is closed and empty or the run stopped.
// blocked tells whether the call had to wait.
func (q *Inbox[T]) Pop(dst []T, max int) (out []T, blocked, ok bool) {
	out, blocked, ok, _ = q.pop(dst, max, nil)
	return out, blocked, ok
}

// pop is Pop for a task copy whose counters are cs (nil for others): cs
// is marked as waiting for input when the call blocks, and drained tells,
// when ok is false, that the inbox is closed and empty for good (closed
// by its producers, all done: nothing can be pushed any more).
func (q *Inbox[T]) pop(dst []T, max int, cs *CopyStats) (out []T, blocked, ok, drained bool) {
	q.mu.Lock()
	for q.n == 0 {
		if q.closed || q.run.Stopped() {
			drained = q.closed && q.producers <= 0
			q.mu.Unlock()
			return dst, blocked, false, drained
		}
		if !blocked && cs != nil {
			cs.SetState(StateWaiting)
		}
		blocked = true
		q.waiting++
		q.notEmpty.Wait()
		q.waiting--
	}
	if q.counted && q.run.Stopped() {
		q.mu.Unlock()
		return dst, blocked, false, false
	}
	if q.pri != nil {
		out, ok = q.popPriority(dst)
		return out, blocked, ok, false
	}
	k := min(q.n, max)
	last := k == q.n && q.closed && q.producers <= 0
	if cap(dst)-len(dst) < k {
		// Grow once to the largest batch rather than step by step.
		dst = slices.Grow(dst, max)
	}
	var zero T
	for range k {
		dst = append(dst, q.buf[q.head])
		q.buf[q.head] = zero
		q.head++
		if q.head == len(q.buf) {
			q.head = 0
		}
	}
	q.n -= k
	if q.pwaiting > 0 && q.notFull != nil {
		q.notFull.Broadcast()
	}
	q.mu.Unlock()
	return dst, blocked, true, last
}

// popPriority is the end of Pop for a priority queue, which is not empty:
// it takes one value. q.mu is held, and released.
func (q *Inbox[T]) popPriority(dst []T) ([]T, bool) {
	v, err := q.pri.pop(q)
	if err != nil {
		q.mu.Unlock()
		q.run.Fail(err)
		return dst, false
	}
	dst = append(dst, v)
	if q.pwaiting > 0 && q.notFull != nil {
		q.notFull.Broadcast()
	}
	q.mu.Unlock()
	return dst, true
}

// Abandon is called when every consumer has stopped: queued values are
// dropped and later pushes are ignored.
func (q *Inbox[T]) Abandon() {
	q.mu.Lock()
	if q.gone {
		q.mu.Unlock()
		return
	}
	q.gone = true
	k := q.n
	clear(q.buf)
	if q.pri != nil {
		q.pri.seq = q.pri.seq[:0]
	}
	q.n, q.head = 0, 0
	q.dropped += int64(k)
	if q.notFull != nil {
		q.notFull.Broadcast()
	}
	q.mu.Unlock()
	if q.counted && k > 0 {
		q.run.Done(int64(k))
	}
}

// Len returns the number of queued values.
func (q *Inbox[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// MaxLen returns the largest number of values ever queued at once.
func (q *Inbox[T]) MaxLen() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return int(q.maxLen)
}

// Pushed returns how many values were ever queued.
func (q *Inbox[T]) Pushed() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.pushed
}

// Dropped returns how many values were dropped because no consumer was left.
func (q *Inbox[T]) Dropped() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dropped
}

// Producers returns the number of producers not yet done.
func (q *Inbox[T]) Producers() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return int(q.producers)
}

func (q *Inbox[T]) sinkName() string { return q.name.String() }

// SetNext records where the consuming node sends values, for cycle detection.
func (q *Inbox[T]) SetNext(outs ...any) {
	var l succList
	if q.succ != nil {
		for i := range q.succ.nextN() {
			l = append(l, q.succ.nextAt(i))
		}
	}
	for _, o := range outs {
		if r, ok := o.(registered); ok {
			l = append(l, r)
		}
	}
	q.succ = l
}

func (q *Inbox[T]) nextN() int {
	if q.succ == nil {
		return 0
	}
	return q.succ.nextN()
}
func (q *Inbox[T]) nextAt(i int) registered { return q.succ.nextAt(i) }
func (q *Inbox[T]) mark() *uint8            { return &q.color }

func (q *Inbox[T]) isCounted() bool { return q.counted }

// wake wakes every blocked producer and consumer so they can see that the run
// stopped.
func (q *Inbox[T]) wake() {
	q.mu.Lock()
	q.notEmpty.Broadcast()
	if q.notFull != nil {
		q.notFull.Broadcast()
	}
	q.mu.Unlock()
}

// Discard tells q that nobody will read its values: from now on they are
// counted as pushed (Pushed) and dropped at once. The graph's result queue
// of a Run given no yield is one.
func (q *Inbox[T]) Discard() {
	q.mu.Lock()
	q.discard = true
	q.mu.Unlock()
}

// Close closes the inbox now, whatever its producers.
func (q *Inbox[T]) Close() { q.forceClose() }

// forceClose closes the inbox whatever its producers; used once the run is
// quiescent.
func (q *Inbox[T]) forceClose() {
	q.mu.Lock()
	q.closed = true
	q.notEmpty.Broadcast()
	if q.notFull != nil {
		q.notFull.Broadcast()
	}
	q.mu.Unlock()
}

// priority is the state of an inbox that is a priority queue: a binary
// heap in the inbox's buf[0:n], with the arrival number of each value in
// seq, so that values equal in priority keep their order.
type priority[T any] struct {
	first func(a, b T) bool
	seq   []uint64
	next  uint64
	node  string // the consuming node, for errors
}

// SetPriority makes q, before any value is pushed, a priority queue: Pop
// returns the value v for which first(v, w) holds against every other
// queued w, one value per Pop, and values equal in priority (neither
// first of the other) in their order of arrival. A panic in first fails
// the run with an error naming node.
func (q *Inbox[T]) SetPriority(first func(a, b T) bool, node string) {
	q.pri = &priority[T]{first: first, node: node}
}

// before reports whether the value at i leaves the heap before the one
// at j.
func (p *priority[T]) before(q *Inbox[T], i, j int) bool {
	if p.first(q.buf[i], q.buf[j]) {
		return true
	}
	if p.first(q.buf[j], q.buf[i]) {
		return false
	}
	return p.seq[i] < p.seq[j]
}

func (p *priority[T]) swap(q *Inbox[T], i, j int) {
	q.buf[i], q.buf[j] = q.buf[j], q.buf[i]
	p.seq[i], p.seq[j] = p.seq[j], p.seq[i]
}

// push adds v to the heap; q.mu is held.
func (p *priority[T]) push(q *Inbox[T], v T) (err error) {
	defer p.recover(q, &err)
	if q.n == len(q.buf) {
		nb := make([]T, max(16, 2*len(q.buf)))
		copy(nb, q.buf[:q.n])
		q.buf = nb
	}
	q.buf[q.n] = v
	p.seq = append(p.seq[:q.n], p.next)
	p.next++
	q.n++
	for i := q.n - 1; i > 0; {
		up := (i - 1) / 2
		if !p.before(q, i, up) {
			break
		}
		p.swap(q, i, up)
		i = up
	}
	return nil
}

// pop removes the first value of the heap, which is not empty; q.mu is
// held.
func (p *priority[T]) pop(q *Inbox[T]) (v T, err error) {
	defer p.recover(q, &err)
	v = q.buf[0]
	last := q.n - 1
	p.swap(q, 0, last)
	var zero T
	q.buf[last] = zero
	p.seq = p.seq[:last]
	q.n = last
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < q.n && p.before(q, l, m) {
			m = l
		}
		if r := l + 1; r < q.n && p.before(q, r, m) {
			m = r
		}
		if m == i {
			break
		}
		p.swap(q, i, m)
		i = m
	}
	return v, nil
}

// recover turns a panic of the priority function into an error naming
// the node; the caller fails the run with it once q.mu is released.
func (p *priority[T]) recover(q *Inbox[T], err *error) {
	if r := recover(); r != nil {
		*err = &task.Error{Task: p.node, Phase: task.PhaseExecute,
			Err: fmt.Errorf("priority function: %w", &task.PanicError{Value: r, Stack: debug.Stack()})}
	}
}
