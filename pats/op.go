package pats

import (
	"context"
	"time"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/region"
)

// Impl is one implementation of an operation, for one kind of device. It
// runs on the worker that manages dev, with arg, the value the operation
// instance was created with (typically the stage instance's data: a tile and
// its region template).
type Impl[A any] func(ctx context.Context, dev device.Device, arg A) error

// Op is a hybrid operation: one logical operation with an implementation
// per device kind (a CPU one, a GPU one, or both) and an estimate of how
// much faster its GPU implementation is than its CPU one. Instances of an
// operation are added to flows with [Add]; one Op serves any number of
// flows and must not be modified once used.
//
// Operations are told apart by Name: the time statistics of two Ops with
// the same name are merged.
type Op[A any] struct {
	// Name identifies the operation in reports and time statistics.
	Name string
	// Impls holds the implementations by device kind. An operation with only
	// a CPU (or only a GPU) implementation runs only on that kind.
	Impls map[device.Kind]Impl[A]
	// Speedup is the estimated GPU-vs-CPU speedup: CPU time / GPU time.
	// PATS only needs the order of the estimates to be right. Zero means
	// unknown: it counts as 1, unless the manager learns speedups online
	// (Config.Learn).
	Speedup float64
}

// Cost is the modelled compute time of one operation instance: on one CPU
// core and on one GPU, transfers excluded. The discrete-event simulator
// ([Simulate]) uses it as the instance's execution time, and simulated
// units ([Sim]) sleep for it; real units ignore it. With
// Config.FinishAware the scheduler also uses the CPU cost as the
// operation's time until it has been timed.
type Cost struct {
	CPU time.Duration // on one CPU core
	GPU time.Duration // on one GPU, transfers excluded
}

// On returns the cost on a device of kind k.
func (c Cost) On(k device.Kind) time.Duration {
	if k == device.GPU {
		return c.GPU
	}
	return c.CPU
}

// Data is a datum an operation instance reads or writes, such as a data
// region: the unit of dependency tracking, of data locality and of
// host-device transfers.
type Data struct {
	// Key identifies the datum within its flow.
	Key string
	// Bytes is its size, which sets the cost of moving it to or from a GPU.
	Bytes int64
	// Store, if not nil, connects the datum to storage: an input the flow
	// does not produce itself is staged (read) before its first reader runs,
	// ahead of time when the manager prefetches; an output of the flow is
	// committed (written) when the flow completes.
	//
	// The outputs of a flow are the last values it writes to keys that have
	// a Store or that no step of the flow reads; they are brought back to
	// host memory before the flow completes. Other written data are
	// intermediate: dropped after their last reader, never downloaded if
	// they are produced and consumed on one GPU.
	Store Stager
}

// Stager moves a datum between storage and host memory. Data regions
// ([region.Region]) implement it.
type Stager interface {
	// Stage reads the datum into host memory; it must be idempotent.
	Stage(ctx context.Context) error
	// Commit writes the datum to its storage.
	Commit(ctx context.Context) error
}

// RegionData describes data region r as a Data: keyed by its identifier,
// sized by its ROI, and staged and committed through the region itself.
func RegionData(r region.Region) Data {
	return Data{Key: r.ID().String(), Bytes: r.Bytes(), Store: r}
}
