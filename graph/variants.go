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
// bound to a device, as HyperFlow's function variants are; the runtime
// chooses the implementation of each value from their time statistics.
//
// Each implementation runs as a task of its own, named name/<device name>
// (with #i added to a device name that comes twice), with its own queue
// and copies, whose task.Info names its device. The outputs of all
// implementations merge into the node's output.
//
// Values wait in the node's own queue, FIFO and unbounded, until an
// implementation should take one: when one of its copies is free and no
// busy implementation would finish the values waiting sooner. Each
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
// The options of [AddTask], [QueueCap] and [Priority], are refused by Start, as are an empty list and an
// implementation without device or factory, naming the task.
func AddVariants[In, Out any](b Builder, name string, variants []Variant[In, Out], opts ...Option) *Node[In, Out] {
	o := core.TaskOptions{}
	for _, f := range opts {
		f.applyNode(&o)
	}
	bp := core.BlueprintOf(b)
	vs := make([]core.Variant[In, Out], len(variants))
	for i, v := range variants {
		vs[i] = core.Variant[In, Out]{Device: v.Device, Copies: v.Copies, New: v.New}
	}
	return newNode[In, Out](bp, core.VariantsSpec(name, o, vs))
}
