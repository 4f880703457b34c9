package pats

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/gohtgs/htgs/device"
)

// Flow is the dataflow of fine-grained operation instances that one coarse
// stage instance (a tile going through segmentation, say) expands into.
// Steps are added in a valid sequential order with [Add]; the dependencies
// between them follow from the data they declare (a step reading a datum
// runs after the step that last wrote it; a step writing a datum runs after
// the earlier readers and writer of that datum) and from explicit [After]
// options. A flow is submitted once, to a [Manager] or to [Simulate].
//
// Construction mistakes (an operation without implementations, a step of
// another flow in After) are recorded and reported by Err and on submission.
type Flow struct {
	name  string
	steps []*Step
	last  map[string]*dataVer
	err   error
	used  bool
	spawn func(ctx context.Context) ([]*Flow, error)
}

// Step is one operation instance in a flow.
type Step struct {
	flow    *Flow
	index   int
	op      string
	speedup float64
	run     [2]func(context.Context, device.Device) error // by device.Kind: CPU, GPU
	cost    Cost
	reads   []*dataVer
	writes  []*dataVer
	deps    []*Step
}

// dataVer is one version of a datum of a flow: the value written by one
// step (or, for writer == nil, the flow's input).
type dataVer struct {
	key     string
	bytes   int64
	store   Stager
	writer  *Step
	readers []*Step
}

// NewFlow returns an empty flow; name identifies it in errors and logs.
func NewFlow(name string) *Flow {
	return &Flow{name: name, last: map[string]*dataVer{}}
}

// Name returns the flow's name.
func (f *Flow) Name() string { return f.name }

// Len returns the number of steps.
func (f *Flow) Len() int { return len(f.steps) }

// Err returns the first construction mistake, or nil.
func (f *Flow) Err() error { return f.err }

func (f *Flow) fail(err error) {
	if f.err == nil {
		f.err = fmt.Errorf("pats: flow %q: %w", f.name, err)
	}
}

// Spawn makes the flow a stage instance that creates further instances at
// run time, depending on its results: fn is called once the flow has
// completed (every step run, outputs in host memory and committed) and
// returns the flows to run next, none if there is nothing more to do (say,
// features are computed only for the tiles where segmentation found
// nuclei). The returned flows may call Spawn in turn.
//
// The flows spawned belong to the submitted flow's stage instance: its
// [Job] is done once they too have completed, fails if one of them or fn
// fails, and Cancel drops them. They count in Config.Window like submitted
// flows and are admitted before flows submitted later, so a stage instance
// is finished before new ones start; while fn runs, the flow keeps its
// place in the window.
//
// The manager calls fn on a goroutine of its own, with the manager's
// context; [Simulate] calls it at the flow's completion in virtual time,
// with no implementation having run, so there fn decides from the modelled
// workload. A later call of Spawn replaces fn; call it before submission.
func (f *Flow) Spawn(fn func(ctx context.Context) ([]*Flow, error)) {
	f.spawn = fn
}

// Op returns the name of the step's operation.
func (s *Step) Op() string { return s.op }

// Index returns the step's position in its flow (0-based).
func (s *Step) Index() int { return s.index }

// StepOption declares the data and dependencies of a step.
type StepOption interface{ applyStep(*stepConfig) }

// stepOption is a StepOption made of a function.
type stepOption func(*stepConfig)

func (f stepOption) applyStep(c *stepConfig) { f(c) }

type stepConfig struct {
	reads, writes []Data
	after         []*Step
	cost          Cost
}

// Reads declares data the step reads.
func Reads(d ...Data) StepOption {
	return stepOption(func(c *stepConfig) { c.reads = append(c.reads, d...) })
}

// Writes declares data the step writes.
func Writes(d ...Data) StepOption {
	return stepOption(func(c *stepConfig) { c.writes = append(c.writes, d...) })
}

// After makes the step depend on steps of the same flow, in addition to the
// dependencies its data imply.
func After(s ...*Step) StepOption {
	return stepOption(func(c *stepConfig) { c.after = append(c.after, s...) })
}

// WithCost sets the step's modelled compute time (see [Cost]).
func WithCost(c Cost) StepOption {
	return stepOption(func(sc *stepConfig) { sc.cost = c })
}

// Add appends an instance of op, bound to arg, to flow f and returns it.
func Add[A any](f *Flow, op *Op[A], arg A, opts ...StepOption) *Step {
	s := &Step{flow: f, index: len(f.steps)}
	f.steps = append(f.steps, s)
	var cfg stepConfig
	for _, o := range opts {
		o.applyStep(&cfg)
	}
	s.cost = cfg.cost
	if op == nil {
		f.fail(fmt.Errorf("step %d: nil operation", s.index))
		return s
	}
	s.op, s.speedup = op.Name, op.Speedup
	if err := s.checkOp(len(op.Impls)); err != nil {
		f.fail(err)
	}
	bindImpls(s, op, arg)
	s.addAfter(cfg.after)
	s.addReads(cfg.reads)
	s.addWrites(cfg.writes)
	return s
}

// checkOp returns the first mistake in the step's operation, which has
// impls implementations: no name, no implementation, a speedup estimate
// that is not a finite value >= 0, or a negative cost.
func (s *Step) checkOp(impls int) error {
	switch {
	case s.op == "":
		return fmt.Errorf("step %d: operation without a name", s.index)
	case impls == 0:
		return fmt.Errorf("step %d: operation %q has no implementation", s.index, s.op)
	case s.speedup < 0 || math.IsNaN(s.speedup) || math.IsInf(s.speedup, 0):
		return fmt.Errorf("step %d: operation %q has speedup estimate %v, want a finite value >= 0", s.index, s.op, s.speedup)
	case s.cost.CPU < 0 || s.cost.GPU < 0:
		return fmt.Errorf("step %d: operation %q has a negative cost", s.index, s.op)
	}
	return nil
}

// impl returns s's implementation for devices of kind k, nil if none.
func (s *Step) impl(k device.Kind) func(context.Context, device.Device) error {
	if k != device.CPU && k != device.GPU {
		return nil
	}
	return s.run[k]
}

// bindImpls gives s op's implementations, each bound to arg.
func bindImpls[A any](s *Step, op *Op[A], arg A) {
	for k, impl := range op.Impls {
		if impl == nil {
			s.flow.fail(fmt.Errorf("step %d: operation %q has a nil %v implementation", s.index, s.op, k))
			continue
		}
		if k != device.CPU && k != device.GPU {
			continue // no unit of another kind runs it
		}
		s.run[k] = func(ctx context.Context, dev device.Device) error { return impl(ctx, dev, arg) }
	}
}

// addAfter makes s depend on the steps of an After option, which must be
// steps of its flow.
func (s *Step) addAfter(steps []*Step) {
	for _, d := range steps {
		if d == nil || d.flow != s.flow {
			s.flow.fail(fmt.Errorf("step %d (%s): After names a step of another flow", s.index, s.op))
			continue
		}
		s.addDep(d)
	}
}

// addReads declares the data s reads: s reads the datum's current version
// (the flow's input if no step wrote it yet) and runs after its writer.
func (s *Step) addReads(data []Data) {
	f := s.flow
	for _, d := range data {
		if d.Key == "" {
			f.fail(fmt.Errorf("step %d (%s): datum with an empty key", s.index, s.op))
			continue
		}
		v := f.last[d.Key]
		if v == nil {
			v = &dataVer{key: d.Key, bytes: d.Bytes, store: d.Store}
			f.last[d.Key] = v
		}
		if slices.Contains(s.reads, v) {
			continue
		}
		if v.bytes == 0 {
			v.bytes = d.Bytes
		}
		if v.writer != nil {
			s.addDep(v.writer)
		}
		v.readers = append(v.readers, s)
		s.reads = append(s.reads, v)
	}
}

// addWrites declares the data s writes: each write makes a new version of
// the datum, and s runs after the writer and the readers of the previous
// one.
func (s *Step) addWrites(data []Data) {
	f := s.flow
	for _, d := range data {
		if d.Key == "" {
			f.fail(fmt.Errorf("step %d (%s): datum with an empty key", s.index, s.op))
			continue
		}
		if slices.ContainsFunc(s.writes, func(w *dataVer) bool { return w.key == d.Key }) {
			f.fail(fmt.Errorf("step %d (%s): datum %q written twice", s.index, s.op, d.Key))
			continue
		}
		if prev := f.last[d.Key]; prev != nil {
			s.afterVersion(prev)
		}
		v := &dataVer{key: d.Key, bytes: d.Bytes, store: d.Store, writer: s}
		f.last[d.Key] = v
		s.writes = append(s.writes, v)
	}
}

// afterVersion makes s depend on the writer and the other readers of v.
func (s *Step) afterVersion(v *dataVer) {
	if v.writer != nil {
		s.addDep(v.writer)
	}
	for _, r := range v.readers {
		if r != s {
			s.addDep(r)
		}
	}
}

func (s *Step) addDep(d *Step) {
	if d != s && !slices.Contains(s.deps, d) {
		s.deps = append(s.deps, d)
	}
}

// errFlowUsed reports a flow submitted twice.
var errFlowUsed = errors.New("flow already submitted")

// check validates f for execution on devices of the given kinds.
func (f *Flow) check(kinds []device.Kind) error {
	if f.err != nil {
		return f.err
	}
	if f.used {
		return fmt.Errorf("pats: flow %q: %w", f.name, errFlowUsed)
	}
	for _, s := range f.steps {
		ok := false
		for _, k := range kinds {
			if s.impl(k) != nil {
				ok = true
			}
		}
		if !ok {
			return fmt.Errorf("pats: flow %q: step %d (%s) has no implementation for the available devices %v", f.name, s.index, s.op, kinds)
		}
	}
	return nil
}
