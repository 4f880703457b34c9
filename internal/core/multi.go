package core

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/gohtgs/htgs/task"
)

// A multi-input task (Hedgehog's tasks of several input types) has one
// queue of multiItems, each the value of one input and that input's index,
// and one set of copies: each input's sink (multiSink) boxes its value into
// the shared queue, so an edge to an input costs no goroutine and no queue
// of its own. A copy's state S is shared by the execute functions of all
// inputs.

// multiItem is a value queued for input port of a multi-input task.
type multiItem struct {
	port int
	v    any
}

// multiCaller executes a value of one input on a copy's state.
type multiCaller[S, Out any] interface {
	call(s S, ctx context.Context, v any, out task.Emitter[Out]) error
}

// multiPort is input In of a multi-input task: its execute function.
type multiPort[S, In, Out any] struct {
	exec func(s S, ctx context.Context, in In, out task.Emitter[Out]) error
}

func (p multiPort[S, In, Out]) call(s S, ctx context.Context, v any, out task.Emitter[Out]) error {
	return p.exec(s, ctx, v.(In), out)
}

// MultiSpec is the specification of a multi-input task.
type MultiSpec[S, Out any] struct {
	Spec    *Spec
	opt     TaskOptions
	factory func() S
	ports   []multiCaller[S, Out]
	sinks   []func(q *Inbox[multiItem], port int) any // make input i's sink
}

// NewMultiSpec returns the specification of a multi-input task whose
// copies' states are made by factory; AddMultiInput adds its inputs.
func NewMultiSpec[S, Out any](name string, opt TaskOptions, factory func() S) *MultiSpec[S, Out] {
	m := &MultiSpec[S, Out]{opt: opt, factory: factory}
	m.Spec = &Spec{Name: name, Kind: KindTask, Copies: opt.Copies, Ports: []string{""}, multiIn: true}
	m.Spec.builder = m
	return m
}

// AddMultiInput adds an input of type In to m, whose values exec executes
// on the copy's state, and returns its index.
func AddMultiInput[S, In, Out any](m *MultiSpec[S, Out], exec func(s S, ctx context.Context, in In, out task.Emitter[Out]) error) int {
	m.ports = append(m.ports, multiPort[S, In, Out]{exec: exec})
	m.sinks = append(m.sinks, func(q *Inbox[multiItem], port int) any { return &multiSink[In]{q: q, port: port} })
	if m.Spec.BP != nil {
		m.Spec.BP.version++
	}
	return len(m.ports) - 1
}

// multiSink is the Sink of one input of a multi-input task: it queues its
// values, with the input's index, in the task's queue, and forwards the
// rest to that queue (producers, cycle detection).
type multiSink[In any] struct {
	q    *Inbox[multiItem]
	port int
}

func (s *multiSink[In]) Push(v In) error { return s.q.push(multiItem{s.port, v}, nil, nil, nil) }
func (s *multiSink[In]) pushAbort(v In, abort *atomic.Bool) error {
	return s.q.push(multiItem{s.port, v}, nil, abort, nil)
}
func (s *multiSink[In]) AddProducer()            { s.q.AddProducer() }
func (s *multiSink[In]) ProducerDone()           { s.q.ProducerDone() }
func (s *multiSink[In]) sinkName() string        { return s.q.sinkName() }
func (s *multiSink[In]) isCounted() bool         { return s.q.isCounted() }
func (s *multiSink[In]) wake()                   { s.q.wake() }
func (s *multiSink[In]) forceClose()             { s.q.forceClose() }
func (s *multiSink[In]) nextN() int              { return s.q.nextN() }
func (s *multiSink[In]) nextAt(i int) registered { return s.q.nextAt(i) }
func (s *multiSink[In]) mark() *uint8            { return s.q.mark() }

// multiExec runs one copy of a multi-input task.
type multiExec[S, Out any] struct {
	s      S
	ports  []multiCaller[S, Out]
	term   task.Terminator
	em     emitter[Out]
	active atomic.Bool
}

func (x *multiExec[S, Out]) initialize(ctx context.Context, info task.Info) error {
	if init, ok := any(x.s).(task.Initializer); ok {
		return init.Initialize(ctx, info)
	}
	return nil
}

func (x *multiExec[S, Out]) execute(ctx context.Context, it multiItem) error {
	return x.ports[it.port].call(x.s, ctx, it.v, &x.em)
}

func (x *multiExec[S, Out]) canTerminate() bool { return x.term != nil && x.term.CanTerminate() }

func (x *multiExec[S, Out]) shutdown(ctx context.Context) error {
	if shut, ok := any(x.s).(task.Shutdowner); ok {
		return shut.Shutdown(ctx)
	}
	return nil
}

func (x *multiExec[S, Out]) hasInit() bool {
	_, ok := any(x.s).(task.Initializer)
	return ok
}

func (x *multiExec[S, Out]) hasShutdown() bool {
	_, ok := any(x.s).(task.Shutdowner)
	return ok
}

func (x *multiExec[S, Out]) setActive(b bool) { x.active.Store(b) }

// multiInst is a running multi-input task.
type multiInst[S, Out any] struct {
	node[multiItem]
	out   Outlet[Out]
	sinks []any
}

func (t *multiInst[S, Out]) In() any { return nil }
func (t *multiInst[S, Out]) InAt(i int) any {
	if i < 0 || i >= len(t.sinks) {
		return nil
	}
	return t.sinks[i]
}
func (t *multiInst[S, Out]) Out(i int) any {
	if i != 0 {
		return nil
	}
	return &t.out
}
func (t *multiInst[S, Out]) nodeExited()           { t.out.ProducerDone() }
func (t *multiInst[S, Out]) nextN() int            { return 1 }
func (t *multiInst[S, Out]) nextAt(int) registered { return &t.out }
func (t *multiInst[S, Out]) emitted() int64        { return t.out.Pushed() }
func (t *multiInst[S, Out]) rules() []string       { return nil }

func (m *MultiSpec[S, Out]) build(sc *Scope) (Instance, error) {
	name, opt := m.Spec.Name, m.opt
	full := sc.FullName(name)
	switch {
	case opt.Copies < 1:
		return nil, fmt.Errorf("htgs: task %q: %d copies, want at least 1", full, opt.Copies)
	case m.factory == nil:
		return nil, fmt.Errorf("htgs: task %q: nil state factory", full)
	case len(m.ports) == 0:
		return nil, fmt.Errorf("htgs: task %q has no inputs; add them with graph.AddInput", full)
	case opt.Priority != nil:
		return nil, fmt.Errorf("htgs: task %q: a task with several inputs cannot have a priority queue", full)
	case opt.Chooser != nil:
		return nil, chooserOnlyForVariants(full)
	}
	states, err := MakeCopies(full, opt.Copies, m.factory)
	if err != nil {
		return nil, err
	}
	t := &multiInst[S, Out]{}
	t.out.init(sc.Run, label{kind: labelTaskOutput, s: full})
	t.out.AddProducer() // the node itself
	t.node.init(sc, m.Spec, name, labelTask, opt.QueueCap, len(states), t)
	t.inbox.succ = t
	ports := append([]multiCaller[S, Out](nil), m.ports...)
	for i, mk := range m.sinks {
		t.sinks = append(t.sinks, mk(&t.inbox, i))
	}
	execs := make([]multiExec[S, Out], len(states))
	for i, s := range states {
		x := &execs[i]
		x.s, x.ports = s, ports
		x.term, _ = any(s).(task.Terminator)
		x.em = emitter[Out]{out: &t.out, active: &x.active, name: &t.inbox.name.s, stats: &t.copies[i].stats}
		t.copies[i].ex = x
	}
	return t, nil
}
