package pats

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gohtgs/htgs/device"
)

// Unit is a processing unit the manager drives with one worker: a CPU core
// or a GPU. It is a device.Device that can run operation implementations
// and, for a GPU, move data between host memory and its own.
//
// A unit for a real GPU binds the GPU in Run (on a worker goroutine that
// only ever runs that unit) and copies data in Move; [CPUUnit] and [Sim] are the
// implementations of this package.
type Unit interface {
	device.Device
	// Run executes impl, the implementation of one operation instance for
	// this unit's kind; cost is the instance's modelled cost.
	Run(ctx context.Context, impl func(context.Context) error, cost Cost) error
	// Move copies d from host memory to the unit (toDevice) or back. CPU
	// units are never asked to move data.
	Move(ctx context.Context, d Data, toDevice bool) error
}

// CPUUnit is the unit of a CPU core of this machine: it runs
// implementations as they are, in host memory.
type CPUUnit struct{ device.Host }

// Run calls impl.
func (CPUUnit) Run(ctx context.Context, impl func(context.Context) error, _ Cost) error {
	return impl(ctx)
}

// Move does nothing: host memory is the core's memory.
func (CPUUnit) Move(context.Context, Data, bool) error { return nil }

// CPUUnits returns n CPU core units with indices 0..n-1.
func CPUUnits(n int) []Unit {
	us := make([]Unit, n)
	for i := range us {
		us[i] = CPUUnit{device.Host{Index: i}}
	}
	return us
}

// Sim is a simulated processing unit for machines without the devices to
// schedule: a CPU core or a "GPU" that runs the implementation for its kind
// on the host and then waits until the instance's modelled time has passed.
// Moves wait for the modelled transfer time. All times are multiplied by
// Scale, so that a workload modelled in seconds can run in milliseconds.
//
// A simulated unit takes at least the real time of the implementation: use
// implementations that are fast compared with the modelled costs. Timers
// overshoot (by up to a millisecond on some systems); units made by
// Machine.Units remember the overshoot of each engine (compute, upload,
// download) and shorten the next waits by it, so that over many operations
// a unit's time follows the model. The manager records a simulated
// unit's modelled times (or the implementation's, if longer) in the time
// statistics that FinishAware and Learn read, not the waits'.
type Sim struct {
	Type      device.Kind   // CPU or GPU
	Index     int           // index among the units of its kind
	Speed     float64       // divides the modelled compute time (0 means 1)
	Bandwidth float64       // bytes per second for Move (0: moves are free)
	Latency   time.Duration // fixed cost per Move (only with a Bandwidth)
	Scale     float64       // multiplies every modelled time (0 means 1)

	clock *simClock // overshoot carried between waits; nil: none
}

// simClock carries, per engine, the time a unit has overslept, and when
// each copy engine is free of the transfers queued on it so far.
type simClock struct {
	mu   sync.Mutex
	debt [3]time.Duration
	free [3]time.Time // by engine; the upload and download ones only
}

// Engines of a simulated unit, for the overshoot accounting.
const (
	engCompute = iota
	engUpload
	engDownload
)

// wait sleeps until start+d, less the overshoot owed by engine, and records
// the new overshoot.
func (s Sim) wait(ctx context.Context, engine int, start time.Time, d time.Duration) error {
	return s.waitServing(ctx, engine, start, d, nil)
}

// ID returns the unit's index.
func (s Sim) ID() int { return s.Index }

// Kind returns the simulated kind.
func (s Sim) Kind() device.Kind { return s.Type }

// Name returns "cpu" or "gpu" followed by the index.
func (s Sim) Name() string { return fmt.Sprintf("%v%d", s.Type, s.Index) }

// Memory returns 0: unknown.
func (s Sim) Memory() int64 { return 0 }

func (s Sim) scale(d time.Duration) time.Duration {
	if s.Scale > 0 {
		d = time.Duration(float64(d) * s.Scale)
	}
	return d
}

// compute returns the modelled compute time for cost, unscaled.
func (s Sim) compute(c Cost) time.Duration {
	d := c.On(s.Type)
	if s.Speed > 0 {
		d = time.Duration(float64(d) / s.Speed)
	}
	return d
}

// transfer returns the modelled time to move b bytes, unscaled.
func (s Sim) transfer(b int64) time.Duration {
	if s.Bandwidth <= 0 {
		return 0
	}
	return s.Latency + time.Duration(float64(b)/s.Bandwidth*float64(time.Second))
}

// modelTimed is a unit whose operations and moves take the times of a
// model ([Sim]): the manager records those times in its statistics (the
// means PATS's FinishAware and Learn read), not the wall clock's. A
// simulated unit makes up a timer's overshoot by shortening its next
// waits, so that its time follows the model over many operations; an
// operation after a late one could take a few microseconds where the
// model says 0.2 ms, and be timed so.
type modelTimed interface {
	computeTime(c Cost) time.Duration // scaled, as a wall-clock time
	moveTime(bytes int64) time.Duration
}

func (s Sim) computeTime(c Cost) time.Duration { return s.scale(s.compute(c)) }

func (s Sim) moveTime(bytes int64) time.Duration { return s.scale(s.transfer(bytes)) }

// Run runs impl, then waits until the scaled modelled time has passed since
// the start.
func (s Sim) Run(ctx context.Context, impl func(context.Context) error, c Cost) error {
	start := time.Now()
	if err := impl(ctx); err != nil {
		return err
	}
	d := s.scale(s.compute(c))
	return s.waitServing(ctx, engCompute, start, d, serveOf(ctx))
}

// serveEvery is how often a simulated GPU computing for a queued worker
// calls its WhileComputing function.
const serveEvery = 200 * time.Microsecond

// waitServing is wait calling serve, if not nil, at least every
// serveEvery, as a GPU unit calls WhileComputing while it waits.
func (s Sim) waitServing(ctx context.Context, engine int, start time.Time, d time.Duration, serve func()) error {
	if s.clock == nil {
		return sleepUntil(ctx, start.Add(d))
	}
	s.clock.mu.Lock()
	pay := min(s.clock.debt[engine], d)
	s.clock.debt[engine] -= pay
	s.clock.mu.Unlock()
	target := start.Add(d - pay)
	for serve != nil {
		serve()
		now := time.Now()
		if !now.Before(target) {
			break
		}
		if err := sleepUntil(ctx, now.Add(min(target.Sub(now), serveEvery))); err != nil {
			return err
		}
	}
	if err := sleepUntil(ctx, target); err != nil {
		return err
	}
	if over := time.Since(target); over > 0 {
		s.clock.mu.Lock()
		s.clock.debt[engine] += over
		s.clock.mu.Unlock()
	}
	return nil
}

// Move waits for the scaled modelled transfer time of d.
func (s Sim) Move(ctx context.Context, d Data, toDevice bool) error {
	eng := engDownload
	if toDevice {
		eng = engUpload
	}
	return s.wait(ctx, eng, time.Now(), s.scale(s.transfer(d.Bytes)))
}

// Queues reports whether s queues its transfers ([Queuer]): the GPUs made
// by Machine.Units do.
func (s Sim) Queues() bool { return s.Type == device.GPU && s.clock != nil }

// Queue queues d on the unit's upload or download engine, which copies
// one datum after another, each in its scaled modelled time; the
// Pending's Wait sleeps until the copy's modelled end. A unit that does
// not queue (Queues) moves d at once, as Move does.
func (s Sim) Queue(ctx context.Context, d Data, toDevice bool) (Pending, error) {
	if !s.Queues() {
		return Completed(s.Move(ctx, d, toDevice)), nil
	}
	eng := engDownload
	if toDevice {
		eng = engUpload
	}
	now := time.Now()
	took := s.scale(s.transfer(d.Bytes))
	s.clock.mu.Lock()
	start := s.clock.free[eng]
	if start.Before(now) {
		start = now
	}
	end := start.Add(took)
	s.clock.free[eng] = end
	s.clock.mu.Unlock()
	return simPending{end: end, took: took}, nil
}

// simPending is a simulated transfer, complete at end.
type simPending struct {
	end  time.Time
	took time.Duration
}

func (p simPending) Done() bool { return !time.Now().Before(p.end) }

func (p simPending) Wait(ctx context.Context) (time.Duration, error) {
	if err := sleepUntil(ctx, p.end); err != nil {
		return 0, err
	}
	return p.took, nil
}

func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Machine describes a simulated node: CPU cores, GPUs, and the link between
// host and GPU memory. The discrete-event simulator runs on it, and Units
// builds matching simulated units for the real-time manager.
type Machine struct {
	CPUs, GPUs int           // number of CPU cores and of GPUs
	GPUSpeed   float64       // divides the modelled GPU compute times (0 means 1)
	Bandwidth  float64       // bytes per second between host and a GPU (0: free)
	Latency    time.Duration // fixed cost per transfer (only with a Bandwidth)
	// StageBandwidth is the rate, in bytes per second, at which a flow's
	// input with a Store is staged from storage into host memory (0:
	// instantly). Only the simulator uses it: without Prefetch or
	// StageAhead the worker that takes the first reader stages the input
	// before computing (a GPU before uploading); with either, each flow's
	// inputs are staged in the background from its admission.
	StageBandwidth float64
	// CommitBandwidth is the rate, in bytes per second, at which a
	// completed flow's outputs with a Store are committed to storage (0:
	// instantly). Only the simulator uses it: as the Manager does, a flow
	// keeps its place in the window until its commits are done (they run
	// beside the workers, on no unit), so the next flow is admitted only
	// then, and the makespan ends with the last commit. How many flows'
	// commits the storage writes at once is CommitStreams.
	CommitBandwidth float64
	// CommitStreams is how many writes the storage makes at once, each
	// at CommitBandwidth (0 means 1). A flow writes its outputs one after
	// another, queueing each behind the writes waiting already. With one
	// stream, as a disk does or a storage under one lock, the outputs of
	// flows that complete together interleave, and each flow holds its
	// place in the window until its last output is written;
	// region.Memory writes the disjoint boxes of completed tiles at the
	// same time, which a count of at least the window models. Commits on
	// the cores (Config.StorageOnCores) run Config.CoreCommits flows at a
	// time whatever the count.
	CommitStreams int
	// StageOnCores makes the simulator charge the background staging of
	// Prefetch and StageAhead to the CPU cores: staging is memory copying, which the
	// Manager's staging goroutines do beside the workers, on the same
	// cores. Each staging is queued at its flow's admission and the next
	// idle core runs it, before any operation, for the time
	// StageBandwidth gives. Without it (or without CPU cores) background
	// staging takes no unit's time, the optimistic bound.
	StageOnCores bool
}

// Units returns the machine's units for the real-time manager, CPUs first,
// with every modelled time multiplied by scale (0 means 1). Its GPUs queue
// their transfers ([Queuer]) on an upload and a download engine, as the
// simulator's GPUs do.
func (m Machine) Units(scale float64) []Unit {
	var us []Unit
	for _, s := range m.sims() {
		s.Scale = scale
		s.clock = &simClock{}
		us = append(us, s)
	}
	return us
}

func (m Machine) sims() []Sim {
	var ss []Sim
	for i := range m.CPUs {
		ss = append(ss, Sim{Type: device.CPU, Index: i})
	}
	for i := range m.GPUs {
		ss = append(ss, Sim{Type: device.GPU, Index: i, Speed: m.GPUSpeed, Bandwidth: m.Bandwidth, Latency: m.Latency})
	}
	return ss
}

func (m Machine) validate() error {
	if m.CPUs < 0 || m.GPUs < 0 || m.CPUs+m.GPUs == 0 {
		return fmt.Errorf("pats: machine needs at least one unit, has %d CPUs and %d GPUs", m.CPUs, m.GPUs)
	}
	if m.GPUs > 64 {
		return fmt.Errorf("pats: at most 64 GPUs, have %d", m.GPUs)
	}
	if m.GPUSpeed < 0 || m.Bandwidth < 0 || m.Latency < 0 || m.StageBandwidth < 0 || m.CommitBandwidth < 0 || m.CommitStreams < 0 {
		return fmt.Errorf("pats: negative machine parameter in %+v", m)
	}
	return nil
}
