package device

import "time"

// A Chooser is a scheduling policy for work that can run on more than one
// kind of device: when a processing unit is free, it chooses which of the
// ready candidates the unit takes. One interface serves both schedulers of
// the module: graph.Choose sets a Chooser for a task with an
// implementation per device (graph.AddVariants), whose units are the free
// copies of its implementations and whose candidates are the values
// waiting for it; pats.Config.Chooser sets one for a pats.Manager, whose
// units are its CPU cores and GPUs and whose candidates are the ready
// operations. Package pats provides the policies FCFS and PATS.
//
// A scheduler calls Choose with its lock held: it must be quick and must
// not call back into the scheduler. One scheduler — a pats.Manager, a
// simulation, one run of a graph — calls it from one goroutine at a time,
// so a Chooser used by one scheduler may keep state without locking of its
// own; one shared by several (the runs of a graph started twice at once,
// say) is called concurrently.
type Chooser interface {
	// Choose returns the index in ready of the candidate u takes next, or
	// -1 to leave u idle until the state changes (a unit finishes, work
	// arrives). ready is not empty, holds only work u can run now, oldest
	// first, and is valid only during the call. An index out of range
	// counts as -1.
	Choose(u Unit, ready []Candidate) int
}

// Unit is the free processing unit a [Chooser] chooses for.
type Unit struct {
	// Device is the unit's device: its Kind and Name.
	Device Device
	// Index is the unit's position: its implementation's in the list given
	// to graph.AddVariants, or its own among a pats.Manager's units.
	Index int
}

// Candidate is ready work offered to a [Chooser].
type Candidate struct {
	// Name is what the work runs: the task (a task with variants) or the
	// operation (pats).
	Name string
	// Group names what the work is part of, if anything: the flow of a pats
	// operation; empty for the values of a task with variants.
	Group string
	// Estimate is how much faster a GPU runs the work than a CPU core (CPU
	// time / GPU time), what the PATS policy ranks by: 0 for work with
	// only a CPU implementation, +Inf for work with only a GPU one.
	Estimate float64
	// CPUTime and GPUTime are the work's expected times on one CPU core and
	// on one GPU, transfers excluded, or 0 when unknown: the modelled cost
	// in pats, the measured means of the fastest CPU and GPU implementations
	// in a task with variants.
	CPUTime, GPUTime time.Duration
	// Local reports, for a GPU unit, that the work reads data already in
	// the unit's memory.
	Local bool
	// Bytes is what running the work on a GPU would move between host and
	// device memory, or 0 when unknown.
	Bytes int64
}
