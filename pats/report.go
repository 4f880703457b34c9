package pats

import (
	"fmt"
	"strings"
	"time"

	"github.com/gohtgs/htgs/device"
)

// Report summarizes a run of the manager or of the simulator.
type Report struct {
	// Config describes the configuration (see Config.String).
	Config string
	// Makespan is the time from the start to the completion of the last
	// flow, its outputs committed: virtual time for the simulator, wall
	// time for the manager.
	Makespan time.Duration
	// Flows and Failed count the flows completed and failed, spawned ones
	// included.
	Flows, Failed int
	// Spawned counts the flows created at run time (see Flow.Spawn) and
	// admitted.
	Spawned int
	// PeakFlows is the most flows in progress at once; with a Window it is
	// at most the window.
	PeakFlows int
	// Ops holds one entry per operation, in order of first completion.
	Ops []OpReport
	// Units holds one entry per processing unit, in configuration order.
	Units []UnitReport
	// Uploads and Downloads count host-to-GPU and GPU-to-host transfers.
	Uploads, Downloads int
	// UploadBytes and DownloadBytes are the bytes they moved.
	UploadBytes, DownloadBytes int64
	// PeakHostBytes is the most data of flows in progress held in host
	// memory at once (inputs from their first use, intermediate results and
	// outputs until the flow completes); PeakDeviceBytes the same for the
	// memory of all GPUs together.
	PeakHostBytes, PeakDeviceBytes int64
}

// OpReport describes where the instances of one operation ran.
type OpReport struct {
	Name             string        // the operation's name
	CPU, GPU         int           // instances run on CPU cores and on GPUs
	CPUTime, GPUTime time.Duration // their total compute time
	Given            float64       // the speedup estimate of the Op
	Learned          float64       // mean CPU time / mean GPU time observed; 0 unless timed on both
}

// GPUShare returns the fraction of the instances that ran on a GPU.
func (o OpReport) GPUShare() float64 {
	if o.CPU+o.GPU == 0 {
		return 0
	}
	return float64(o.GPU) / float64(o.CPU+o.GPU)
}

// UnitReport describes the work of one processing unit.
type UnitReport struct {
	Name string        // the unit's device name
	Kind device.Kind   // CPU or GPU
	Ops  int           // operation instances computed
	Busy time.Duration // time spent computing (transfers excluded)

	// Woken counts, for the real-time manager, the times the unit's
	// worker, asleep for want of work, was woken with some; WakeDelay is
	// the time from those wake-ups to the worker running again (its
	// goroutine waiting for a thread, then for the manager's lock), and
	// LongestWake the longest. Work given to a worker that is not asleep
	// does not count. Zero for the simulator.
	Woken                  int
	WakeDelay, LongestWake time.Duration
}

// Op returns the entry of the named operation.
func (r *Report) Op(name string) (OpReport, bool) {
	for _, o := range r.Ops {
		if o.Name == name {
			return o, true
		}
	}
	return OpReport{}, false
}

// String formats the report as a small table.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d flows (%d failed", r.Config, r.Flows, r.Failed)
	if r.Spawned > 0 {
		fmt.Fprintf(&b, ", %d spawned", r.Spawned)
	}
	fmt.Fprintf(&b, ") in %v\n", r.Makespan)
	fmt.Fprintf(&b, "transfers: %d up (%.1f MiB), %d down (%.1f MiB); peak memory: host %.1f MiB, GPUs %.1f MiB\n",
		r.Uploads, float64(r.UploadBytes)/(1<<20), r.Downloads, float64(r.DownloadBytes)/(1<<20),
		float64(r.PeakHostBytes)/(1<<20), float64(r.PeakDeviceBytes)/(1<<20))
	fmt.Fprintf(&b, "%-18s %6s %6s %6s %8s %8s\n", "operation", "cpu", "gpu", "gpu%", "given", "learned")
	for _, o := range r.Ops {
		fmt.Fprintf(&b, "%-18s %6d %6d %5.0f%% %8.2f %8.2f\n", o.Name, o.CPU, o.GPU, 100*o.GPUShare(), o.Given, o.Learned)
	}
	return b.String()
}

// report builds a Report from the scheduler's counters.
func (sc *scheduler) report(makespan time.Duration) *Report {
	r := &Report{
		Config:          sc.cfg.String(),
		Makespan:        makespan,
		Flows:           sc.flowsDone,
		Failed:          sc.flowsFailed,
		Spawned:         sc.flowsSpawned,
		PeakFlows:       sc.peakActive,
		Uploads:         sc.uploads,
		Downloads:       sc.downloads,
		UploadBytes:     sc.upBytes,
		DownloadBytes:   sc.downBytes,
		PeakHostBytes:   sc.peakHost,
		PeakDeviceBytes: sc.peakDev,
	}
	for _, name := range sc.opOrder {
		oc := sc.ops[name]
		o := OpReport{Name: name, CPU: oc.count[0], GPU: oc.count[1], CPUTime: oc.time[0], GPUTime: oc.time[1], Given: oc.given}
		if s, ok := sc.stats.speedup(name); ok {
			o.Learned = s
		}
		r.Ops = append(r.Ops, o)
	}
	for _, w := range sc.workers {
		r.Units = append(r.Units, UnitReport{Name: w.dev.Name(), Kind: w.kind, Ops: w.ops, Busy: w.busy,
			Woken: w.woken, WakeDelay: w.wakeDelay, LongestWake: w.wakeMax})
	}
	return r
}
