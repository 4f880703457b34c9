// Package device describes the compute devices that tasks and execution
// pipelines run on.
//
// A [Device] is deliberately small: an identity, a kind and a memory size.
// The CPU implementation lets pipeline-per-device graphs run and be tested on
// machines without accelerators; the cuda package implements it for GPUs.
//
// A [Chooser] is a scheduling policy for work with implementations on
// several kinds of device: given a free unit and the ready work, it says
// which the unit takes. A task with an implementation per device
// (graph.AddVariants) and the pats manager both take one.
package device

import (
	"fmt"
	"runtime"
)

// Kind is the class of a compute device.
type Kind int

// Device kinds.
const (
	CPU Kind = iota // a host processor (or a share of one)
	GPU             // a graphics processor with its own memory
)

// String returns "cpu" or "gpu".
func (k Kind) String() string {
	switch k {
	case CPU:
		return "cpu"
	case GPU:
		return "gpu"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Device is a compute device a task copy may be bound to.
type Device interface {
	// ID is the device's index among the devices of its kind (0-based).
	ID() int
	// Kind tells whether this is a CPU or a GPU.
	Kind() Kind
	// Name is a human-readable name, such as "cpu0" or "NVIDIA H100".
	Name() string
	// Memory is the device's memory in bytes, or 0 when unknown.
	Memory() int64
}

// Host is a CPU device. The zero value is device 0 with unknown memory.
type Host struct {
	Index int   // device index reported by ID
	Bytes int64 // memory reported by Memory
}

// ID returns h.Index.
func (h Host) ID() int { return h.Index }

// Kind returns CPU.
func (h Host) Kind() Kind { return CPU }

// Name returns "cpu" followed by the index.
func (h Host) Name() string { return fmt.Sprintf("cpu%d", h.Index) }

// Memory returns h.Bytes.
func (h Host) Memory() int64 { return h.Bytes }

// String returns the device's name, as Name does, so that a Host prints
// as "cpu0" rather than as a struct.
func (h Host) String() string { return h.Name() }

// Hosts returns n CPU devices with indices 0..n-1, for execution pipelines
// that should run n clones on the host. n <= 0 means one per logical CPU.
func Hosts(n int) []Device {
	if n <= 0 {
		n = runtime.NumCPU()
	}
	ds := make([]Device, n)
	for i := range ds {
		ds[i] = Host{Index: i}
	}
	return ds
}
