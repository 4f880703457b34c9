package graph

import (
	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/internal/core"
	"github.com/gohtgs/htgs/task"
)

// Variant is one implementation of a task with several (see
// [AddVariants]): a CPU one, a GPU one, one per device.
type Variant[In, Out any] struct {
	// Device is the device the implementation's copies run on: their
	// task.Info.Device, which an Initialize binds to.
	Device device.Device
	// Copies is the number of copies of the implementation (0 means 1).
	Copies int
	// New makes one copy.
	New func() task.Task[In, Out]
}

// AddVariants adds a task named name with several implementations, each
// bound to a device, as HyperFlow's function variants are; a chooser
// gives each value to one of them.
//
// Each implementation runs as a task of its own, named name/<device name>
// (with #i added to a device name that comes twice), with its own queue
// and copies, whose task.Info names its device. The outputs of all
// implementations merge into the node's output.
//
// Values wait in the node's own queue, FIFO and unbounded, until an
// implementation with a free copy should take one (late binding: a
// device takes work when it is free to start it). Who decides is the
// [device.Chooser] given with [Choose], if any; else the runtime's own
// policy, which learns the time of each implementation: each
// implementation not yet measured is tried once; then the fastest free
// one takes the oldest value, unless a faster busy one would reach it
// first. An idle implementation that saw 16 values in a row go to others
// is given the next one, to measure it again. The times (the minimum of
// the first four, then a moving average of the whole Execute, waits for
// memory included) are learnt per implementation, that is per device, not
// per kind of device: of two GPUs the slower one gets only the values that
// it finishes sooner than the faster one would. The chooser runs on the
// goroutines that send values and that finish executions: it has none of
// its own. An implementation whose copies all stop ([task.Terminator]) is
// left out of the choice.
//
// [Choose] is an option of this task alone; the options of [AddTask],
// [QueueCap] and [Priority], are refused by Start, as are an empty list
// and an implementation without device or factory, naming the task.
func AddVariants[In, Out any](b Builder, name string, variants []Variant[In, Out], opts ...Option) *Node[In, Out] {
	o := core.TaskOptions{}
	for _, f := range opts {
		f.applyNode(&o)
	}
	bp := core.BlueprintOf(b)
	if o.Speedup != nil {
		if _, ok := o.Speedup.(func(In) float64); !ok {
			bp.Errorf("%w", core.SpeedupTypeError[In](name, o.Speedup))
		}
	}
	vs := make([]core.Variant[In, Out], len(variants))
	for i, v := range variants {
		vs[i] = core.Variant[In, Out]{Device: v.Device, Copies: v.Copies, New: v.New}
	}
	return newNode[In, Out](bp, core.VariantsSpec(name, o, vs))
}

// Choose makes c decide which of the values waiting for a task with
// several implementations ([AddVariants]) each free implementation takes,
// instead of the runtime's own policy: whenever an implementation has a
// free copy and values wait, c is offered the oldest of them (at most 64)
// for the unit of that implementation (its device, and its index in the
// list of implementations), in the order of the list, until one takes a
// value. The policies of package pats, pats.FCFS and pats.PATS, are
// Choosers: with PATS a GPU implementation takes the waiting value with
// the highest estimated speedup, a CPU one the lowest. A nil c keeps the
// runtime's own policy.
//
// speedup, if not nil, gives each value's estimate ([device.Candidate]
// Estimate), the speedup
// of a GPU over a CPU core on it; it is called once per value, as the
// value arrives. Without it every value has the same estimate: 0 if the
// implementations are all on CPUs, +Inf if all on GPUs, else the ratio of
// the measured times of the fastest CPU and GPU implementations, 1 until
// both are measured. Every Candidate also carries those measured times
// (CPUTime, GPUTime). T must be the task's input type, or Start fails
// with an error naming the task.
//
// c serves every run of the graph: runs at the same time call it
// concurrently (each run one call at a time), so a chooser with state must
// guard it or be used by one run at a time. A panic in c or in speedup
// fails the run with an error naming the task,
// as does a chooser that leaves every implementation idle while values
// wait and no more can arrive. Start refuses Choose on a task with one
// implementation.
func Choose[T any](c device.Chooser, speedup func(T) float64) Option {
	return nodeOption(func(o *core.TaskOptions) {
		o.Chooser, o.Speedup = c, nil
		if speedup != nil {
			o.Speedup = speedup
		}
	})
}
