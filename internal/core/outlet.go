package core

import "sync/atomic"

// abortSink is implemented by this package's sinks: pushAbort is Push that
// gives up with ErrClosed, instead of waiting for room in a full queue,
// once *abort is set.
type abortSink[T any] interface {
	pushAbort(v T, abort *atomic.Bool) error
}

// Sink receives the values of one or more producers.
type Sink[T any] interface {
	Push(v T) error
	AddProducer()
	ProducerDone()
}

// Outlet fans values out to every connected sink (broadcast). It is also a
// Sink itself, so the input and output ports of nested graphs and pipelines
// forward values without an extra queue or goroutine.
type Outlet[T any] struct {
	name      label
	targets   []Sink[T]
	target1   [1]Sink[T] // the room of targets while there is one
	producers atomic.Int32
	color     uint8

	// Values sent: counted under the first target's lock when that is an
	// inbox (no extra atomic operation per value), else atomically.
	first  *Inbox[T]
	pushed int64 // guarded by first.mu; atomic when first is nil
	// wiredProducers is the producer count of the wiring (kept in a
	// Frame).
	wiredProducers int32
}

func (o *Outlet[T]) wired() { o.wiredProducers = o.producers.Load() }

// reset makes o ready for another run, with its producers as wired.
func (o *Outlet[T]) reset(*Run) {
	// Nothing runs on o: the run that used it is over.
	o.producers.Store(o.wiredProducers)
	o.pushed = 0
	o.color = white
}

// NewOutlet returns an outlet registered with r for validation.
func NewOutlet[T any](r *Run, name string) *Outlet[T] {
	return NewOutletNamed[T](r, name, "", false)
}

// NewOutletNamed is NewOutlet for an outlet named pre followed by quoted
// in quotes when quote is set: the name is only formatted when a message
// needs it.
func NewOutletNamed[T any](r *Run, pre, quoted string, quote bool) *Outlet[T] {
	o := &Outlet[T]{}
	o.init(r, labelOf(pre, quoted, quote))
	return o
}

// InitNamed prepares the zero outlet o as NewOutletNamed does; o must not
// move afterwards.
func (o *Outlet[T]) InitNamed(r *Run, pre, quoted string, quote bool) {
	o.init(r, labelOf(pre, quoted, quote))
}

// init prepares the zero outlet o, which must not move afterwards.
func (o *Outlet[T]) init(r *Run, name label) {
	o.name = name
	r.register(o)
}

// Connect adds s as a target; called while wiring.
func (o *Outlet[T]) Connect(s Sink[T]) {
	if len(o.targets) == 0 {
		o.first, _ = s.(*Inbox[T])
		o.targets = o.target1[:0]
	}
	o.targets = append(o.targets, s)
	s.AddProducer()
}

// Push sends v to every target.
func (o *Outlet[T]) Push(v T) error { return o.push(v, nil, nil) }

// PushAbort is Push that gives up with ErrClosed, instead of waiting for
// room in a full queue, once *abort is set; whoever sets it must then call
// Run.WakeAll. v may then have reached some targets and not others.
func (o *Outlet[T]) PushAbort(v T, abort *atomic.Bool) error { return o.push(v, abort, nil) }

func (o *Outlet[T]) pushAbort(v T, abort *atomic.Bool) error { return o.push(v, abort, nil) }

// push sends v; cs, when not nil, is the stats of the emitting copy, marked
// while it waits for room in its first consumer's full queue.
func (o *Outlet[T]) push(v T, abort *atomic.Bool, cs *CopyStats) error {
	if o.first != nil && len(o.targets) == 1 {
		return o.first.push(v, &o.pushed, abort, cs)
	}
	return o.pushAll(v, abort, cs)
}

// pushAll is push to several targets, or to one that is not an inbox.
func (o *Outlet[T]) pushAll(v T, abort *atomic.Bool, cs *CopyStats) error {
	if o.first == nil {
		atomic.AddInt64(&o.pushed, 1)
	}
	for i, t := range o.targets {
		var err error
		switch {
		case i == 0 && o.first != nil:
			err = o.first.push(v, &o.pushed, abort, cs)
		case cs != nil && abort == nil:
			// An inbox is told the emitting copy (see Inbox.push).
			if q, ok := t.(*Inbox[T]); ok {
				err = q.push(v, nil, nil, cs)
			} else {
				err = t.Push(v)
			}
		case abort != nil:
			if a, ok := t.(abortSink[T]); ok {
				err = a.pushAbort(v, abort)
			} else {
				err = t.Push(v)
			}
		default:
			err = t.Push(v)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Pushed returns how many values were sent through the outlet.
func (o *Outlet[T]) Pushed() int64 {
	if o.first == nil {
		return atomic.LoadInt64(&o.pushed)
	}
	o.first.mu.Lock()
	defer o.first.mu.Unlock()
	return o.pushed
}

// AddProducer declares one more producer feeding this outlet.
func (o *Outlet[T]) AddProducer() { o.producers.Add(1) }

// ProducerDone is called by each producer once; after the last one the
// outlet tells its targets it is done.
func (o *Outlet[T]) ProducerDone() {
	if o.producers.Add(-1) == 0 {
		for _, t := range o.targets {
			t.ProducerDone()
		}
	}
}

// Producers returns the number of producers not yet done.
func (o *Outlet[T]) Producers() int { return int(o.producers.Load()) }

// Targets returns the number of connected sinks.
func (o *Outlet[T]) Targets() int { return len(o.targets) }

func (o *Outlet[T]) sinkName() string { return o.name.String() }

func (o *Outlet[T]) nextN() int { return len(o.targets) }
func (o *Outlet[T]) nextAt(i int) registered {
	r, _ := o.targets[i].(registered)
	return r
}
func (o *Outlet[T]) mark() *uint8 { return &o.color }

func (o *Outlet[T]) isCounted() bool { return false }

func (o *Outlet[T]) wake()       {}
func (o *Outlet[T]) forceClose() {}
