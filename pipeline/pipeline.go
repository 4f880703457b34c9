// Package pipeline provides HTGS execution pipelines: a subgraph cloned once
// per device, with a decomposition rule that routes each input to one clone
// or to all of them ([New]), or to a set of them ([NewSubset]).
//
//	gpus := pipeline.New(g, "gpus", perDevice, devices, pipeline.ByKey(func(t *Tile) int { return t.Row }))
//	graph.Connect(read, gpus)
//	graph.Connect(gpus, write)
//
// Clone i runs in its own scope: its tasks see pipeline id i, the clone
// count and devices[i] in their task.Info, and its memory pools and
// bookkeeper rules are made afresh, so clones share no state unless the
// subgraph's factories hand out a shared value on purpose. The clones'
// outputs merge into the pipeline's output. Pipelines nest: a subgraph may
// itself contain a pipeline.
package pipeline

import (
	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/internal/core"
)

// All is the Route result that broadcasts a value to every clone.
const All = -1

// The runtime routes All to every clone: both constants must agree (a
// difference makes one of these conversions overflow at compile time).
const _ = uint(All-core.AllClones) + uint(core.AllClones-All)

// Route decomposes the input of a pipeline: it returns the clone (0..clones-1) that gets
// v, or All. It is called from the goroutine of the task that emitted v (or
// of the caller of Send, for a pipeline fed by the graph's input), so a rule
// must be safe for concurrent use if several tasks feed the pipeline. A rule
// that panics, or that returns a clone that does not exist, fails the run
// with an error naming the pipeline.
type Route[In any] func(v In, clones int) int

// Subset is a decomposition rule that routes v to a set of clones: it
// calls add once for each clone (0..clones-1) that gets v. A clone added
// twice gets v once, a value added to no clone is dropped, and add must
// not be kept after it returns. Like a Route it runs on the sender's
// goroutine and must be safe for concurrent use; a panic, or a clone that
// does not exist, fails the run with an error naming the pipeline. Use it
// with [NewSubset], where a value is needed by some clones but not all
// (the halo of a band of rows); routing allocates nothing per value.
type Subset[In any] func(v In, clones int, add func(clone int))

// ByKey routes v to clone key(v) mod clones; keys such as grid rows spread
// work evenly and keep related values on one device.
func ByKey[In any](key func(In) int) Route[In] {
	return func(v In, clones int) int {
		k := key(v) % clones
		if k < 0 {
			k += clones
		}
		return k
	}
}

// Broadcast sends every value to every clone.
func Broadcast[In any]() Route[In] { return func(In, int) int { return All } }

type handle = core.PortHandle

// Pipeline is an execution pipeline node: a consumer of In and a producer of
// Out, like a task.
type Pipeline[In, Out any] struct {
	handle
	name string
}

// Name returns the pipeline's name.
func (p *Pipeline[In, Out]) Name() string { return p.name }

// InPort returns the port of the pipeline's input.
func (p *Pipeline[In, Out]) InPort() graph.Port[In] {
	return core.MakePort[graph.Port[In]](core.RefOf(p))
}

// OutPort returns the port of the pipeline's output (the clones' outputs
// merged).
func (p *Pipeline[In, Out]) OutPort() graph.Port[Out] {
	return core.MakePort[graph.Port[Out]](core.RefOf(p))
}

// New adds to b a pipeline named name that runs one clone of inner per
// device. An empty device list, or a rule choosing a clone that does not
// exist, is reported as an error by Start (or at the emit, respectively).
func New[In, Out any](b graph.Builder, name string, inner *graph.Graph[In, Out], devices []device.Device, rule Route[In]) *Pipeline[In, Out] {
	return add[In, Out](b, name, core.PipelineSpec[In, Out](name, core.BlueprintOf(inner), devices, rule))
}

// NewSubset is [New] with a rule that routes each input to a set of clones
// rather than to one or all of them.
func NewSubset[In, Out any](b graph.Builder, name string, inner *graph.Graph[In, Out], devices []device.Device, rule Subset[In]) *Pipeline[In, Out] {
	return add[In, Out](b, name, core.PipelineSubsetSpec[In, Out](name, core.BlueprintOf(inner), devices, rule))
}

// add adds the pipeline spec s to b.
func add[In, Out any](b graph.Builder, name string, s *core.Spec) *Pipeline[In, Out] {
	bp := core.BlueprintOf(b)
	bp.Add(s)
	return &Pipeline[In, Out]{
		handle: core.NewPortHandle(core.PortRef{BP: bp, Spec: s}),
		name:   name,
	}
}
