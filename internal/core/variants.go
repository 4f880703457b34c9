package core

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/task"
)

// KindVariants is the kind of a task with several implementations, each
// bound to a device (VariantsSpec).
const KindVariants Kind = "variants"

// Variant is one implementation of a task with several: its device, its
// number of copies and their factory.
type Variant[In, Out any] struct {
	Device device.Device
	Copies int
	New    func() task.Task[In, Out]
}

// VariantsSpec returns the specification of a task named name with the
// implementations vs. Each implementation runs as a task of its own,
// named name/<device name>, with its copies bound to its device (in
// their task.Info); a chooser sends each input to an implementation and
// their outputs merge. Without opt.Chooser, the chooser's own policy
// sends each input to the implementation expected to finish it first,
// from the times its copies took so far (learnt per implementation, so
// per device); with it, opt.Chooser decides which held value each free
// implementation takes.
func VariantsSpec[In, Out any](name string, opt TaskOptions, vs []Variant[In, Out]) *Spec {
	vs = append([]Variant[In, Out](nil), vs...)
	copies := 0
	for _, v := range vs {
		copies += max(v.Copies, 1)
	}
	s := &Spec{Name: name, Kind: KindVariants, Copies: copies, Ports: []string{""}}
	s.Build = func(sc *Scope) (Instance, error) { return buildVariants(sc, name, opt, vs) }
	return s
}

// SpeedupTypeError is the error of a speedup function f that does not
// take the input type In of the task named name.
func SpeedupTypeError[In any](name string, f any) error {
	return fmt.Errorf("htgs: task %q: the speedup function is a %T, but the task's input is %v: give a func(%v) float64", name, f, reflect.TypeFor[In](), reflect.TypeFor[In]())
}

func buildVariants[In, Out any](sc *Scope, name string, opt TaskOptions, vs []Variant[In, Out]) (Instance, error) {
	full := sc.FullName(name)
	switch {
	case len(vs) == 0:
		return nil, fmt.Errorf("htgs: task %q: no implementations given", full)
	case opt.QueueCap != 0 || opt.Priority != nil:
		return nil, fmt.Errorf("htgs: task %q: a task with several implementations takes neither QueueCap nor Priority", full)
	}
	var speedup func(In) float64
	if opt.Speedup != nil {
		var ok bool
		if speedup, ok = opt.Speedup.(func(In) float64); !ok {
			return nil, SpeedupTypeError[In](full, opt.Speedup)
		}
	}
	r := sc.Run
	out := &Outlet[Out]{}
	out.init(r, label{kind: labelTaskOutput, s: full})
	ch := &chooser[In]{run: r, name: full, policy: opt.Chooser, speedup: speedup}
	r.register(ch)
	sub := sc.Child(name)
	r.AddTopoNode(TopoNode{ID: full + ":route", Label: fmt.Sprintf("%s: choose among %d", name, len(vs)), Kind: KindRoute, Path: sc.Path})
	r.AddTopoNode(TopoNode{ID: full + ":merge", Label: name + ": merge", Kind: KindMerge, Path: sc.Path})
	g := &Group{InPort: ch, OutPorts: []any{out}}
	used := map[string]bool{}
	for i, v := range vs {
		switch {
		case v.Device == nil:
			return nil, fmt.Errorf("htgs: task %q: implementation %d has no device", full, i)
		case v.New == nil:
			return nil, fmt.Errorf("htgs: task %q: implementation %d (%s) has a nil factory", full, i, v.Device.Name())
		case v.Copies < 0:
			return nil, fmt.Errorf("htgs: task %q: implementation %d (%s): %d copies", full, i, v.Device.Name(), v.Copies)
		}
		vname := v.Device.Name()
		if used[vname] {
			vname = fmt.Sprintf("%s#%d", vname, i)
		}
		used[vname] = true
		vsc := new(Scope)
		*vsc = *sub
		vsc.Parent, vsc.Device, vsc.Values = sub, v.Device, nil
		st := &variantStats{copies: max(v.Copies, 1)}
		st.live = st.copies
		copies, err := MakeCopies(vsc.FullName(vname), st.copies, v.New)
		if err != nil {
			return nil, err
		}
		k := 0
		factory := func() task.Task[In, Out] {
			t := &timedTask[In, Out]{t: copies[k], st: st, ch: ch}
			t.init, _ = t.t.(task.Initializer)
			t.term, _ = t.t.(task.Terminator)
			t.shut, _ = t.t.(task.Shutdowner)
			k++
			return t
		}
		ts := TaskSpec(vname, TaskOptions{Copies: st.copies}, factory)
		inst, err := ts.build(vsc)
		if err != nil {
			return nil, err
		}
		ti := inst.(*taskInst[In, Out])
		ti.out.Connect(out)
		ti.inbox.AddProducer() // the chooser
		ch.targets = append(ch.targets, &ti.inbox)
		ch.stats = append(ch.stats, st)
		ch.devs = append(ch.devs, v.Device)
		g.Members = append(g.Members, inst)
		id := vsc.FullName(vname)
		r.AddTopoEdge(TopoEdge{From: full + ":route", To: id})
		r.AddTopoEdge(TopoEdge{From: id, To: full + ":merge"})
	}
	return g, nil
}

// variantStats are what the chooser knows of one implementation.
type variantStats struct {
	copies      int
	live        int   // copies not yet shut down; chooser.mu
	outstanding int   // values given to it and not yet executed; chooser.mu
	samples     int64 // values executed; chooser.mu
	mean        int64 // moving average of the execution time, in ns; chooser.mu
	since       int   // values given to others since its last one; chooser.mu
}

// probeEvery is how many values in a row an idle implementation may see
// go to others before it is given one to measure it again, so that one
// unlucky time (the machine was busy) or a device that became faster is
// not held against it for ever.
const probeEvery = 16

// robustSamples is the number of first samples whose minimum is the
// estimate (times only grow with interference); the moving average takes
// over after them.
const robustSamples = 4

// offerMax is the most held values offered to a user's chooser at a
// time: the oldest ones. It bounds the work of each offer, and of taking
// a value from the middle of the line.
const offerMax = 64

// chooser is the input of a task with several implementations. It holds
// the values in a queue of its own and gives one to an implementation
// only when one of that implementation's copies is free and the policy
// says so: its own (pick: no other implementation would finish it
// sooner) or the user's (ask). This is late binding, as in HyperFlow: a
// device takes work when it is free to start it, so that what the
// chooser learnt by then decides. Values are given out when they arrive
// and when an implementation finishes one, on those goroutines: the
// chooser has none of its own.
type chooser[In any] struct {
	run     *Run
	name    string
	targets []*Inbox[In]
	stats   []*variantStats
	devs    []device.Device

	// policy, if not nil, replaces pick; speedup, if not nil, gives each
	// value's Candidate.Estimate.
	policy  device.Chooser
	speedup func(In) float64

	mu        sync.Mutex
	hold      []In      // values not given out yet, oldest first
	est       []float64 // with speedup: their estimates, beside hold
	head      int
	closed    bool // no producer left: targets close once hold is empty
	producers int
	color     uint8
	offer     []device.Candidate // ask's, reused
}

// pick returns the implementation the oldest held value should go to
// now, or -1 to keep it for later. Of the implementations with a free
// copy, an idle one not measured yet is tried first; else the fastest
// free one, f, takes the value unless some busy implementation j,
// measured, would finish the whole held line sooner than f finishes
// this one: ceil((outstanding_j + held) / copies_j) × mean_j < mean_f.
// c.mu is held.
func (c *chooser[In]) pick() int {
	f := -1
	for i, s := range c.stats {
		if s.outstanding >= s.copies || s.live == 0 {
			continue
		}
		if s.samples == 0 || s.since >= probeEvery {
			if s.outstanding == 0 {
				return i // to measure it (again)
			}
			if s.samples == 0 {
				continue // being measured
			}
		}
		if f < 0 || s.mean < c.stats[f].mean {
			f = i
		}
	}
	if f < 0 {
		return -1
	}
	held := int64(len(c.hold) - c.head)
	mf := c.stats[f].mean
	for j, s := range c.stats {
		if j == f || s.samples == 0 || s.live == 0 {
			continue
		}
		th := int64(s.copies)
		if (int64(s.outstanding)+held+th-1)/th*s.mean < mf {
			return -1
		}
	}
	return f
}

// next returns the implementation that takes a held value now and the
// value's offset among the held ones, or -1 to keep them all for now.
// c.mu is held.
func (c *chooser[In]) next() (int, int, error) {
	if c.policy == nil {
		return c.pick(), 0, nil
	}
	return c.ask()
}

// ask offers the oldest held values (at most offerMax) to the user's
// chooser for each implementation with a free copy, in their order, until
// one takes a value. c.mu is held.
func (c *chooser[In]) ask() (int, int, error) {
	n := min(len(c.hold)-c.head, offerMax)
	var cpu, gpu int64 // the fastest measured means per kind
	var hasCPU, hasGPU bool
	for j, s := range c.stats {
		if s.live == 0 {
			continue
		}
		m := &cpu
		if c.devs[j].Kind() == device.GPU {
			m, hasGPU = &gpu, true
		} else {
			hasCPU = true
		}
		if s.samples > 0 && (*m == 0 || s.mean < *m) {
			*m = max(s.mean, 1)
		}
	}
	est := 1.0 // without speedup, each value's
	switch {
	case !hasGPU:
		est = 0
	case !hasCPU:
		est = math.Inf(1)
	case c.speedup == nil && cpu > 0 && gpu > 0:
		est = float64(cpu) / float64(gpu)
	}
	for i, s := range c.stats {
		if s.outstanding >= s.copies || s.live == 0 {
			continue
		}
		offer := c.offer[:0]
		for j := range n {
			e := est
			if c.speedup != nil {
				e = c.est[c.head+j]
			}
			offer = append(offer, device.Candidate{Name: c.name, Estimate: e,
				CPUTime: time.Duration(cpu), GPUTime: time.Duration(gpu)})
		}
		c.offer = offer
		k, err := c.choose(device.Unit{Device: c.devs[i], Index: i}, offer)
		if err != nil {
			return -1, 0, err
		}
		if k >= 0 && k < n {
			return i, k, nil
		}
	}
	return -1, 0, nil
}

// choose calls the user's chooser, turning a panic into an error naming
// the task.
func (c *chooser[In]) choose(u device.Unit, offer []device.Candidate) (k int, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("htgs: task %q: chooser %T: %w", c.name, c.policy, &task.PanicError{Value: r, Stack: debug.Stack()})
		}
	}()
	return c.policy.Choose(u, offer), nil
}

// stalled reports, for a user's chooser, that it left every implementation
// idle with values held and none to come: nothing would ever give them
// out. c.mu is held.
func (c *chooser[In]) stalled() bool {
	if c.policy == nil || !c.closed || c.head == len(c.hold) {
		return false
	}
	for _, s := range c.stats {
		if s.live > 0 && s.outstanding > 0 {
			return false
		}
	}
	return !c.allGone()
}

// take removes the held value at offset k and returns it. c.mu is held.
func (c *chooser[In]) take(k int) In {
	var zero In
	h := c.head
	v := c.hold[h+k]
	if k > 0 { // the values before it move up one place
		copy(c.hold[h+1:h+k+1], c.hold[h:h+k])
		if c.est != nil {
			copy(c.est[h+1:h+k+1], c.est[h:h+k])
		}
	}
	c.hold[h] = zero
	c.head++
	return v
}

// dispatch gives out held values while the policy says so, and closes
// the targets once the producers are done and nothing is held. A user's
// chooser that panics, or leaves every implementation idle with values
// held and none to come, fails the run; it is not asked again once the
// run has stopped.
func (c *chooser[In]) dispatch() {
	c.mu.Lock()
	var fail error
	for c.head < len(c.hold) && (c.policy == nil || !c.run.Stopped()) {
		i, k, err := c.next()
		if err != nil {
			fail = err
			break
		}
		if i < 0 {
			if c.stalled() {
				fail = fmt.Errorf("htgs: task %q: chooser %T left every implementation idle with %d values waiting and none to come", c.name, c.policy, len(c.hold)-c.head)
			}
			break
		}
		v := c.take(k)
		for j, s := range c.stats {
			if j == i {
				s.since = 0
			} else {
				s.since++
			}
		}
		c.stats[i].outstanding++
		if err := c.targets[i].push(v, nil, nil, nil); err != nil {
			c.stats[i].outstanding--
		}
		c.run.Done(1) // the value is counted by the target's queue now
	}
	if c.head < len(c.hold) && c.allGone() {
		// Every implementation has stopped (Terminator): nobody will
		// take these values.
		n := len(c.hold) - c.head
		clear(c.hold)
		c.hold, c.head = c.hold[:0], 0
		c.run.Done(int64(n))
	}
	if c.head == len(c.hold) {
		c.hold, c.head = c.hold[:0], 0
	} else if c.head > 64 && c.head*2 > len(c.hold) {
		n := copy(c.hold, c.hold[c.head:])
		clear(c.hold[n:])
		c.hold = c.hold[:n]
		if c.est != nil {
			c.est = c.est[:copy(c.est, c.est[c.head:])]
		}
		c.head = 0
	}
	if c.est != nil {
		c.est = c.est[:len(c.hold)]
	}
	done := c.closed && c.head == len(c.hold)
	if done {
		c.closed = false // propagated once
	}
	c.mu.Unlock()
	if fail != nil {
		c.run.Fail(fail)
	}
	if done {
		for _, t := range c.targets {
			t.ProducerDone()
		}
	}
}

// allGone reports whether every implementation's copies have stopped;
// c.mu is held.
func (c *chooser[In]) allGone() bool {
	for _, s := range c.stats {
		if s.live > 0 {
			return false
		}
	}
	return true
}

// copyDone records that a copy of implementation s has stopped: once all
// have, the implementation is left out of the choice.
func (c *chooser[In]) copyDone(s *variantStats) {
	c.mu.Lock()
	s.live--
	c.mu.Unlock()
	c.dispatch()
}

// finished records that implementation s executed a value in d, and that
// the copy stops if stop is set; then it gives out what that allows.
func (c *chooser[In]) finished(s *variantStats, d time.Duration, stop bool) {
	c.mu.Lock()
	if stop {
		s.live--
	}
	s.outstanding--
	s.samples++
	switch {
	case s.samples == 1:
		s.mean = int64(d)
	case s.samples <= robustSamples:
		s.mean = min(s.mean, int64(d))
	default:
		s.mean += (int64(d) - s.mean) / 4
	}
	c.mu.Unlock()
	c.dispatch()
}

func (c *chooser[In]) Push(v In) error { return c.push(v, nil) }

func (c *chooser[In]) pushAbort(v In, abort *atomic.Bool) error { return c.push(v, abort) }

func (c *chooser[In]) push(v In, _ *atomic.Bool) error {
	if c.run.Stopped() {
		return c.run.StopErr()
	}
	var e float64
	if c.speedup != nil {
		var err error
		if e, err = c.estimate(v); err != nil {
			c.run.Fail(err)
			return err
		}
	}
	if c.run.counting {
		c.run.pending.Add(1) // held: the run is not quiescent
	}
	c.mu.Lock()
	c.hold = append(c.hold, v)
	if c.speedup != nil {
		c.est = append(c.est, e)
	}
	c.mu.Unlock()
	c.dispatch()
	return nil
}

// estimate calls the user's speedup function on v, turning a panic into
// an error naming the task.
func (c *chooser[In]) estimate(v In) (e float64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("htgs: task %q: speedup function: %w", c.name, &task.PanicError{Value: r, Stack: debug.Stack()})
		}
	}()
	return c.speedup(v), nil
}

func (c *chooser[In]) AddProducer() {
	c.mu.Lock()
	c.producers++
	c.mu.Unlock()
}

func (c *chooser[In]) ProducerDone() {
	c.mu.Lock()
	c.producers--
	if c.producers <= 0 {
		c.closed = true
	}
	c.mu.Unlock()
	c.dispatch()
}

// Producers returns the producers not yet done.
func (c *chooser[In]) Producers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.producers
}

func (c *chooser[In]) Targets() int            { return len(c.targets) }
func (c *chooser[In]) sinkName() string        { return fmt.Sprintf("input of task %q", c.name) }
func (c *chooser[In]) isCounted() bool         { return false }
func (c *chooser[In]) wake()                   {}
func (c *chooser[In]) forceClose()             {}
func (c *chooser[In]) nextN() int              { return len(c.targets) }
func (c *chooser[In]) nextAt(i int) registered { return c.targets[i] }
func (c *chooser[In]) mark() *uint8            { return &c.color }

// timedTask is a copy of an implementation: it times each Execute for
// the chooser, and passes the optional phases on.
type timedTask[In, Out any] struct {
	t  task.Task[In, Out]
	st *variantStats
	ch interface {
		finished(*variantStats, time.Duration, bool)
		copyDone(*variantStats)
	}
	init task.Initializer
	term task.Terminator
	shut task.Shutdowner
	// stopped is set when the copy said, after an Execute, that it stops.
	stopped bool
}

func (t *timedTask[In, Out]) Execute(ctx context.Context, in In, out task.Emitter[Out]) error {
	t0 := time.Now()
	defer func() {
		// A copy about to stop (Terminator) must not be given another
		// value: ask now, before the chooser gives out the next one.
		t.stopped = t.term != nil && t.term.CanTerminate()
		t.ch.finished(t.st, time.Since(t0), t.stopped)
	}()
	return t.t.Execute(ctx, in, out)
}

func (t *timedTask[In, Out]) Initialize(ctx context.Context, info task.Info) error {
	if t.init == nil {
		return nil
	}
	return t.init.Initialize(ctx, info)
}

func (t *timedTask[In, Out]) CanTerminate() bool { return t.term != nil && t.term.CanTerminate() }

// placer returns the implementation's copy if it runs its inputs elsewhere
// (see wrappedPlacer).
func (t *timedTask[In, Out]) placer() task.Placer {
	p, _ := t.t.(task.Placer)
	return p
}

func (t *timedTask[In, Out]) Shutdown(ctx context.Context) error {
	if !t.stopped {
		defer t.ch.copyDone(t.st)
	}
	if t.shut == nil {
		return nil
	}
	return t.shut.Shutdown(ctx)
}
