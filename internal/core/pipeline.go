package core

import (
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/task"
)

// AllClones is the router result that sends a value to every clone
// (pipeline.All has the same value).
const AllClones = -1

// PipelineSpec returns the specification of an execution pipeline: inner is
// instantiated once per device, clone i in a scope with pipeline id i and
// device devices[i]; route picks the clone of each input (or AllClones), and
// the clones' outputs merge into the pipeline's output.
func PipelineSpec[In, Out any](name string, inner *Blueprint, devices []device.Device, route func(v In, clones int) int) *Spec {
	return pipelineSpec[In, Out](name, inner, devices, route, nil)
}

// PipelineSubsetSpec is PipelineSpec with a rule that routes each input to
// a set of clones: it calls add once per clone that gets v (a clone added
// twice gets v once; a clone out of range fails the run).
func PipelineSubsetSpec[In, Out any](name string, inner *Blueprint, devices []device.Device, route func(v In, clones int, add func(clone int))) *Spec {
	return pipelineSpec[In, Out](name, inner, devices, nil, route)
}

func pipelineSpec[In, Out any](name string, inner *Blueprint, devices []device.Device, route func(v In, clones int) int, subset func(v In, clones int, add func(int))) *Spec {
	devs := append([]device.Device(nil), devices...)
	s := &Spec{Name: name, Kind: KindPipeline, Copies: len(devs), Inner: inner, Ports: []string{""}}
	s.Build = func(sc *Scope) (Instance, error) {
		full := sc.FullName(name)
		n := len(devs)
		if n == 0 {
			return nil, fmt.Errorf("htgs: pipeline %q: no devices given; a pipeline needs at least one clone", full)
		}
		if route == nil && subset == nil {
			return nil, fmt.Errorf("htgs: pipeline %q: nil decomposition rule", full)
		}
		out := NewOutletNamed[Out](sc.Run, "output of pipeline ", full, true)
		rs := &routerSink[In]{run: sc.Run, name: full, route: route, subset: subset}
		recordPipeline(sc, name, n)
		sc.Run.register(rs)
		g := &Group{InPort: rs, OutPorts: []any{out}}
		for i, dev := range devs {
			if dev == nil {
				return nil, fmt.Errorf("htgs: pipeline %q: device %d is nil", full, i)
			}
			csc := sc.Child(fmt.Sprintf("%s[%d]", name, i))
			csc.Pipeline, csc.Pipelines, csc.Device = i, n, dev
			in := NewOutlet[In](sc.Run, fmt.Sprintf("input of pipeline clone %q[%d]", full, i))
			insts, err := Instantiate(inner, csc, in, out)
			if err != nil {
				return nil, fmt.Errorf("pipeline %q clone %d: %w", full, i, err)
			}
			rs.clones = append(rs.clones, in)
			g.Members = append(g.Members, insts...)
		}
		return g, nil
	}
	return s
}

// routerSink is the input of a pipeline: it applies the decomposition rule.
type routerSink[In any] struct {
	run       *Run
	name      string
	route     func(In, int) int
	subset    func(In, int, func(int))
	calls     sync.Pool // of *subsetCall[In], for subset rules
	clones    []*Outlet[In]
	producers int
	color     uint8
}

func (r *routerSink[In]) Push(v In) error { return r.push(v, nil) }

func (r *routerSink[In]) pushAbort(v In, abort *atomic.Bool) error { return r.push(v, abort) }

func (r *routerSink[In]) push(v In, abort *atomic.Bool) error {
	if r.subset != nil {
		return r.pushSubset(v, abort)
	}
	i, err := r.pick(v)
	if err != nil {
		return err
	}
	switch {
	case i == AllClones:
		for _, c := range r.clones {
			if err := c.push(v, abort, nil); err != nil {
				return err
			}
		}
		return nil
	case i < 0 || i >= len(r.clones):
		// Fail the run as well: the value cannot go anywhere, whoever sent it.
		err := fmt.Errorf("htgs: pipeline %q: decomposition rule chose clone %d of %d", r.name, i, len(r.clones))
		r.run.Fail(err)
		return err
	}
	return r.clones[i].push(v, abort, nil)
}

// pick applies the decomposition rule. It runs on the goroutine of whoever
// sends v: a task's Emit, or Runtime.Send for a pipeline fed by the graph's
// input, so a panic is turned into an error here, and fails the run, rather
// than left to the caller.
func (r *routerSink[In]) pick(v In) (i int, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("htgs: pipeline %q: decomposition rule: %w", r.name, &task.PanicError{Value: p, Stack: debug.Stack()})
			r.run.Fail(err)
		}
	}()
	return r.route(v, len(r.clones)), nil
}

// subsetCall is the state of one subset routing: the value, the clones it
// went to, and the first error. Calls are pooled, and add is bound once per
// call object, so routing a value allocates nothing in the steady state.
type subsetCall[In any] struct {
	r     *routerSink[In]
	v     In
	abort *atomic.Bool
	sent  []bool
	err   error
	add   func(int)
}

// send pushes the value to clone i, once.
func (c *subsetCall[In]) send(i int) {
	r := c.r
	switch {
	case c.err != nil:
	case i < 0 || i >= len(r.clones):
		c.err = fmt.Errorf("htgs: pipeline %q: decomposition rule chose clone %d of %d", r.name, i, len(r.clones))
		r.run.Fail(c.err)
	case !c.sent[i]:
		c.sent[i] = true
		c.err = r.clones[i].push(c.v, c.abort, nil)
	}
}

// pushSubset applies a subset rule; a panic in it fails the run, as in
// pick.
func (r *routerSink[In]) pushSubset(v In, abort *atomic.Bool) (err error) {
	c, _ := r.calls.Get().(*subsetCall[In])
	if c == nil {
		c = &subsetCall[In]{r: r, sent: make([]bool, len(r.clones))}
		c.add = c.send
	}
	c.v, c.abort = v, abort
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("htgs: pipeline %q: decomposition rule: %w", r.name, &task.PanicError{Value: p, Stack: debug.Stack()})
			r.run.Fail(err)
		}
		var zero In
		c.v, c.abort, c.err = zero, nil, nil
		clear(c.sent)
		r.calls.Put(c)
	}()
	r.subset(v, len(r.clones), c.add)
	return c.err
}

func (r *routerSink[In]) AddProducer() {
	r.producers++
	for _, c := range r.clones {
		c.AddProducer()
	}
}

func (r *routerSink[In]) ProducerDone() {
	for _, c := range r.clones {
		c.ProducerDone()
	}
}

func (r *routerSink[In]) Producers() int { return r.producers }
func (r *routerSink[In]) Targets() int   { return len(r.clones) }
func (r *routerSink[In]) sinkName() string {
	return fmt.Sprintf("input of pipeline %q", r.name)
}
func (r *routerSink[In]) isCounted() bool         { return false }
func (r *routerSink[In]) wake()                   {}
func (r *routerSink[In]) forceClose()             {}
func (r *routerSink[In]) nextN() int              { return len(r.clones) }
func (r *routerSink[In]) nextAt(i int) registered { return r.clones[i] }
func (r *routerSink[In]) mark() *uint8            { return &r.color }
