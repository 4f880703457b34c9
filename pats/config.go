package pats

import (
	"fmt"
	"log/slog"
	"math"
	"strings"

	"github.com/gohtgs/htgs/device"
)

// Policy chooses which ready operation instance an idle worker runs.
type Policy int

// Scheduling policies.
const (
	// FCFS runs ready operations in the order they became ready, whatever
	// the device.
	FCFS Policy = iota
	// PATS (performance-aware task scheduling) keeps the ready operations
	// ordered by estimated GPU-vs-CPU speedup: an idle CPU core takes the
	// one with the lowest estimate, an idle GPU the one with the highest.
	PATS
)

// String returns "fcfs" or "pats".
func (p Policy) String() string {
	switch p {
	case FCFS:
		return "fcfs"
	case PATS:
		return "pats"
	}
	return fmt.Sprintf("policy(%d)", int(p))
}

// ParsePolicy parses "fcfs" or "pats" (case-insensitive).
func ParsePolicy(s string) (Policy, error) {
	switch strings.ToLower(s) {
	case "fcfs":
		return FCFS, nil
	case "pats":
		return PATS, nil
	}
	return 0, fmt.Errorf("pats: unknown policy %q (want fcfs or pats)", s)
}

// Config selects the scheduling policy and its optimizations. The zero
// value is plain FCFS with an unlimited window.
type Config struct {
	// Policy is FCFS or PATS.
	Policy Policy
	// Chooser, if not nil, replaces Policy: a scheduling policy choosing
	// among the ready operations an idle unit can run (see
	// [device.Chooser]; FCFS and PATS are ones too). Learn still has each operation timed once per kind
	// first, FinishAware still withholds from a CPU core what the GPUs
	// would finish sooner, DepthFirst orders the candidates, and Locality
	// keeps data on a GPU between operations, marking the candidates that
	// reuse it (device.Candidate.Local) instead of applying its rule.
	Chooser device.Chooser
	// Window bounds the number of flows (stage instances) in progress at a
	// time; further submissions wait. 0 means no bound. A larger window
	// gives PATS more operations to choose from.
	Window int
	// Locality enables data-locality-conscious assignment: after an
	// operation on a GPU, the GPU prefers a ready operation that reads data
	// already in its memory. With FCFS such an operation is always
	// preferred; with PATS the best reusing one (speedup Sd) is taken if
	// Sd >= Sq * (1 - TransferImpact), Sq being the best speedup among the
	// others. The GPU keeps the copies in its memory for their later
	// readers, within half of its memory (device.Device.Memory; no bound
	// where it reports 0), the oldest going first when it needs the room;
	// it writes back the flow's outputs, and the values that a ready
	// operation a CPU core can run reads, when it takes another operation
	// (the copies stay), and everything the host still needs when it is
	// idle. Without Locality every GPU operation uploads its inputs and
	// downloads its outputs.
	Locality bool
	// TransferImpact is the fraction of an operation's GPU time spent in
	// data transfers, in [0, 1], used by the locality rule.
	TransferImpact float64
	// Prefetch pipelines each GPU's work through three phases, upload,
	// process and download, so that the inputs of the next operation and the
	// outputs of the previous one move while the current one computes; it
	// also stages the storage inputs of a flow in the background as soon as
	// the flow is admitted, instead of when its first reader runs. A GPU
	// unit that queues its uploads ([Queuer]) is driven by one goroutine,
	// others by an upload goroutine beside a compute goroutine.
	Prefetch bool
	// StorageOnCores has the CPU workers stage the flows' storage inputs
	// in the background (with Prefetch or StageAhead) and commit the
	// completed flows' outputs, as work they take before operations,
	// instead of goroutines of their own beside the workers: then no more
	// goroutines are runnable than there are workers, and a GPU worker
	// that polls its device never waits for a thread behind a copy to or
	// from storage. CoreCommits workers at most commit at once. The
	// simulator models the same (the next idle core stages or commits).
	// Without CPU units it has no effect.
	StorageOnCores bool
	// CoreCommits is, with StorageOnCores, how many CPU workers may
	// commit flows' outputs at once (0 means 1): one for a storage that
	// writes one flow's outputs at a time, as a disk does (another core
	// would only wait for it); a storage that writes disjoint boxes at the
	// same time, as region.Memory does, can take as many as there are
	// cores.
	CoreCommits int
	// StageAhead stages the storage inputs of a flow in the background as
	// soon as the flow is admitted (as Prefetch does), without Prefetch's
	// pipelining of the GPUs: the stage instance reads its inputs when it
	// is instantiated, as seed 001's Workers do, and no worker (a GPU's
	// included) spends its time reading storage for its first reader.
	StageAhead bool
	// Learn makes the manager learn each operation's mean compute time per
	// device kind online (HyperFlow's time statistics) and use the ratio of
	// the means as the speedup estimate, so that Op.Speedup may be zero.
	// Until an operation has been timed on both kinds, idle workers try it
	// first (one at a time per kind) to obtain a first sample.
	Learn bool
	// FinishAware makes a CPU core leave an operation to the GPUs when they
	// would finish it sooner than the core: the core's time for it is
	// compared with the GPU time, transfers included, of the ready
	// operations the GPUs would take before it (higher estimates), itself
	// included, shared among the GPUs. With speedups in the hundreds, plain
	// PATS lets an idle core take an operation that a GPU would clear in
	// milliseconds, and the tile waits seconds for it. Times come from the
	// time statistics (the mean compute time of each operation on each
	// kind, and the rate of the transfers so far); the speedup estimate
	// converts a time on one kind into one on the other, so estimates still
	// matter. Before an operation has been timed, its modelled CPU cost
	// ([WithCost]) stands in for the mean; without one it is never left.
	// With Learn, an operation whose first CPU sample is being taken is
	// left to the GPUs until the sample is in.
	FinishAware bool
	// TransferAware makes PATS rank the ready operations by an effective
	// speedup that includes the data movement a GPU placement causes,
	// instead of the compute-only estimate: (C + S) / (G + X + S), C and G
	// being the operation's estimated compute times on a CPU core and on a
	// GPU (as FinishAware estimates them: time statistics, else the
	// modelled CPU cost, converted by the speedup estimate), X the time to
	// upload its inputs not in the GPU's memory and download its outputs,
	// and S the time to stage its inputs still in storage, at the rates
	// observed so far. Staging counts on both sides: whichever unit runs
	// the first reader of an input stages it. The ratio is the CPU time a
	// GPU placement saves per unit of GPU time it takes, which is what the
	// single GPU worker should maximize when transfers and staging, not
	// computation, occupy it. Before an operation has a time (and before a
	// transfer or staging has been timed) the terms missing are zero, so
	// the ranking starts as plain PATS's. It requires Policy PATS and no
	// Chooser.
	TransferAware bool
	// DepthFirst breaks ties between equally ranked operations in favour of
	// the oldest flow, pushing each stage instance through before starting
	// the next (HyperFlow's depth-first preference), which reduces the
	// memory held by partially processed instances. Without it ties go to
	// the operation that became ready first (breadth-first).
	DepthFirst bool
	// Logger receives debug messages about scheduling decisions (default:
	// discarded).
	Logger *slog.Logger

	// noRoundCache makes every pick by a core compute its choice afresh,
	// as before the round cache (scheduler.beginPicks): the reference
	// TestRoundCacheChangesNothing compares with.
	noRoundCache bool
}

// validate checks c and fills defaults.
func (c Config) validate() (Config, error) {
	if c.Policy != FCFS && c.Policy != PATS {
		return c, fmt.Errorf("pats: unknown policy %d", int(c.Policy))
	}
	if c.TransferAware && (c.Policy != PATS || c.Chooser != nil) {
		return c, fmt.Errorf("pats: TransferAware needs Policy PATS and no Chooser")
	}
	if c.Window < 0 {
		return c, fmt.Errorf("pats: negative window %d", c.Window)
	}
	if c.CoreCommits < 0 {
		return c, fmt.Errorf("pats: negative CoreCommits %d", c.CoreCommits)
	}
	if c.TransferImpact < 0 || c.TransferImpact > 1 || math.IsNaN(c.TransferImpact) {
		return c, fmt.Errorf("pats: transfer impact %v outside [0, 1]", c.TransferImpact)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// String summarizes the configuration, as "pats+dl+prefetch w=16". A
// Chooser is named by its String method if it has one, else "custom".
func (c Config) String() string {
	var b strings.Builder
	switch ch := c.Chooser.(type) {
	case nil:
		b.WriteString(c.Policy.String())
	case fmt.Stringer:
		b.WriteString(ch.String())
	default:
		b.WriteString("custom")
	}
	if c.Learn {
		b.WriteString("+learn")
	}
	if c.FinishAware {
		b.WriteString("+finish")
	}
	if c.TransferAware {
		b.WriteString("+xfer")
	}
	if c.Locality {
		fmt.Fprintf(&b, "+dl(%.2g)", c.TransferImpact)
	}
	if c.Prefetch {
		b.WriteString("+prefetch")
	} else if c.StageAhead {
		b.WriteString("+ahead")
	}
	if c.DepthFirst {
		b.WriteString("+df")
	}
	if c.StorageOnCores {
		b.WriteString("+storecores")
	}
	if c.Window > 0 {
		fmt.Fprintf(&b, " w=%d", c.Window)
	}
	return b.String()
}

// stagesAhead reports whether flows' storage inputs are staged in the
// background from admission (Prefetch or StageAhead).
func (c Config) stagesAhead() bool { return c.Prefetch || c.StageAhead }
