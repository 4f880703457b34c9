package core

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/gohtgs/htgs/task"
)

// Applier is the shape of a bookkeeper rule; bookkeeper.Rule satisfies it,
// and AddRule takes factories of any such type (no adapter).
type Applier[In, Out any] interface {
	Apply(ctx context.Context, in In, out task.Emitter[Out]) error
}

// ruleRT is one rule of a running bookkeeper.
type ruleRT[In any] interface {
	initialize(ctx context.Context, info task.Info) error
	apply(ctx context.Context, in In) error
	canTerminate() bool
	shutdown(ctx context.Context) error
	outlet() any
	pushed() int64
	close() // the rule produces no more: its edge loses a producer
}

type ruleMaker[In any] struct {
	name string
	make func(sc *Scope, bkName string, active *atomic.Bool) (ruleRT[In], error)
}

// BookkeeperSpec describes a bookkeeper: a single-threaded node that hands
// each input to every live rule in turn.
type BookkeeperSpec[In any] struct {
	Spec  *Spec
	rules []ruleMaker[In]
}

// RuleNames returns the names of the rules, in port order.
func (b *BookkeeperSpec[In]) RuleNames() []string {
	names := make([]string, len(b.rules))
	for i, r := range b.rules {
		names[i] = r.name
	}
	return names
}

// NewBookkeeperSpec returns an empty bookkeeper named name.
func NewBookkeeperSpec[In any](name string, queueCap int) *BookkeeperSpec[In] {
	b := &BookkeeperSpec[In]{}
	b.Spec = &Spec{Name: name, Kind: KindBookkeeper, Copies: 1, Extra: b}
	b.Spec.Build = func(sc *Scope) (Instance, error) {
		full := sc.FullName(name)
		if len(b.rules) == 0 {
			return nil, fmt.Errorf("htgs: bookkeeper %q has no rules", full)
		}
		bi := &bkInst[In]{}
		x := &bi.x
		for _, rm := range b.rules {
			rt, err := rm.make(sc, full, &x.active)
			if err != nil {
				return nil, err
			}
			x.rules = append(x.rules, rt)
			x.names = append(x.names, rm.name)
			x.live = append(x.live, true)
		}
		bi.node.init(sc, b.Spec, name, labelBookkeeper, queueCap, 1, bi)
		bi.copies[0].ex = x
		bi.inbox.succ = bi
		return bi, nil
	}
	return b
}

// AddRule appends a rule whose instances are made by factory (one per
// bookkeeper instance: each pipeline clone gets its own rule state) and
// returns the index of its output port.
func AddRule[In, Out any, R Applier[In, Out]](b *BookkeeperSpec[In], name string, factory func() R) int {
	idx := len(b.rules)
	b.Spec.Ports = append(b.Spec.Ports, name)
	if bp := b.Spec.BP; bp != nil {
		bp.version++ // a new port: the blueprint's shape changed
	}
	b.rules = append(b.rules, ruleMaker[In]{name: name, make: func(sc *Scope, bkName string, active *atomic.Bool) (ruleRT[In], error) {
		full := bkName + "." + name
		rs, err := MakeCopies(full, 1, factory)
		if err != nil {
			return nil, err
		}
		var r Applier[In, Out] = rs[0]
		out := NewOutletNamed[Out](sc.Run, "rule ", full, true)
		out.AddProducer()
		rt := &rule[In, Out]{r: r, out: out, name: full}
		rt.init, _ = any(r).(task.Initializer)
		rt.term, _ = any(r).(task.Terminator)
		rt.shut, _ = any(r).(task.Shutdowner)
		rt.em = emitter[Out]{out: out, active: active, rule: true, name: &rt.name}
		return rt, nil
	}})
	return idx
}

type rule[In, Out any] struct {
	r    Applier[In, Out]
	init task.Initializer
	term task.Terminator
	shut task.Shutdowner
	em   emitter[Out]
	out  *Outlet[Out]
	name string
}

func (r *rule[In, Out]) initialize(ctx context.Context, info task.Info) error {
	if r.init != nil {
		return r.init.Initialize(ctx, info)
	}
	return nil
}
func (r *rule[In, Out]) apply(ctx context.Context, in In) error { return r.r.Apply(ctx, in, &r.em) }
func (r *rule[In, Out]) canTerminate() bool                     { return r.term != nil && r.term.CanTerminate() }
func (r *rule[In, Out]) shutdown(ctx context.Context) error {
	if r.shut != nil {
		return r.shut.Shutdown(ctx)
	}
	return nil
}
func (r *rule[In, Out]) outlet() any   { return r.out }
func (r *rule[In, Out]) pushed() int64 { return r.out.Pushed() }
func (r *rule[In, Out]) close()        { r.out.ProducerDone() }

// bkExec is the single copy of a bookkeeper.
type bkExec[In any] struct {
	rules  []ruleRT[In]
	names  []string
	inited int
	live   []bool
	nlive  int
	active atomic.Bool
}

func (x *bkExec[In]) initialize(ctx context.Context, info task.Info) error {
	x.nlive = len(x.rules)
	for i, r := range x.rules {
		if err := r.initialize(ctx, info); err != nil {
			// Rules initialized so far still get their Shutdown.
			x.inited = i
			_ = x.shutdown(context.WithoutCancel(ctx))
			return fmt.Errorf("rule %q: %w", x.names[i], err)
		}
	}
	x.inited = len(x.rules)
	x.retire()
	return nil
}

func (x *bkExec[In]) execute(ctx context.Context, in In) error {
	for i, r := range x.rules {
		if !x.live[i] {
			continue
		}
		if err := r.apply(ctx, in); err != nil {
			return fmt.Errorf("rule %q: %w", x.names[i], err)
		}
	}
	x.retire()
	return nil
}

// retire stops the rules that can terminate, so their consumers can end.
func (x *bkExec[In]) retire() {
	for i, r := range x.rules {
		if x.live[i] && r.canTerminate() {
			x.live[i] = false
			x.nlive--
			r.close()
		}
	}
}

func (x *bkExec[In]) canTerminate() bool { return x.nlive == 0 }

func (x *bkExec[In]) shutdown(ctx context.Context) error {
	var first error
	for i, r := range x.rules[:x.inited] {
		if err := r.shutdown(ctx); err != nil && first == nil {
			first = fmt.Errorf("rule %q: %w", x.names[i], err)
		}
	}
	return first
}

func (x *bkExec[In]) setActive(b bool) { x.active.Store(b) }

func (x *bkExec[In]) hasShutdown() bool { return true }

func (x *bkExec[In]) hasInit() bool { return true }

func (x *bkExec[In]) closeAll() {
	for i, r := range x.rules {
		if x.live[i] {
			x.live[i] = false
			r.close()
		}
	}
}

type bkInst[In any] struct {
	node[In]
	x bkExec[In]
}

func (b *bkInst[In]) nodeExited()     { b.x.closeAll() }
func (b *bkInst[In]) rules() []string { return b.x.names }

func (b *bkInst[In]) nextN() int { return len(b.x.rules) }
func (b *bkInst[In]) nextAt(i int) registered {
	r, _ := b.x.rules[i].outlet().(registered)
	return r
}

func (b *bkInst[In]) emitted() int64 {
	var total int64
	for _, rt := range b.x.rules {
		total += rt.pushed()
	}
	return total
}

func (b *bkInst[In]) Out(i int) any {
	if i < 0 || i >= len(b.x.rules) {
		return nil
	}
	return b.x.rules[i].outlet()
}
