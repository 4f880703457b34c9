package graph

import (
	"errors"
	"math"
	"time"

	"github.com/gohtgs/htgs/internal/core"
)

// ErrNoTrace is returned by [Execution.Timeline] for a run started without
// [WithTrace].
var ErrNoTrace = errors.New("htgs: the run was not started WithTrace")

// Timeline is what a run started [WithTrace] recorded: a track per task
// copy with a slice per Execute and per wait for pool memory, and the
// lengths of the tasks' queues. Times are measured from the start of the
// run, as [Stats.Elapsed] is. graph/observe writes it in the Chrome
// trace-event format and draws it in the live view.
type Timeline struct {
	Graph  string // the graph's name
	Tracks []Track
	Queues []QueueSample // by task, in order of time within a task
}

// Track is the timeline of one task copy.
type Track struct {
	Task string // the task's full name, as in [TaskStats.Name]
	Copy int    // the copy, as in [CopyStats.Copy]
	// Remote tells a copy whose inputs run on worker processes (see
	// [task.Placer]).
	Remote bool
	Slices []Slice // in order of their end
}

// Slice is one interval of a [Track]: an Execute, or a wait for a buffer
// of a memory pool.
type Slice struct {
	Start, Dur time.Duration
	MemoryWait bool   // a wait for memory rather than an Execute
	Pool       string // the pool waited on, for a memory wait
	// Worker and Host tell where the input of a remote copy's Execute ran.
	Worker, Host string
}

// QueueSample is the length of a task's queue at a time of the run; one
// is taken whenever a copy takes values from the queue.
type QueueSample struct {
	Task string
	At   time.Duration
	Len  int
}

// Timeline returns the run's timeline, or [ErrNoTrace] if the run was not
// started [WithTrace]. It may be called during the run or after Wait (for
// a complete timeline). Slices that end before from and queue samples
// taken before it are left out, and of the others only the last limit of
// each track or task are kept when limit > 0: Timeline(0, 0) is the whole
// timeline, Timeline(elapsed-5*time.Second, 400) a window for a live view.
func (e *Execution) Timeline(from time.Duration, limit int) (Timeline, error) {
	tr := e.run.Trace
	if tr == nil {
		return Timeline{}, ErrNoTrace
	}
	if limit <= 0 {
		limit = math.MaxInt
	}
	t := Timeline{Graph: e.run.Name}
	for _, k := range tr.Tracks() {
		ss := k.Recent(from, limit)
		track := Track{Task: k.Task, Copy: k.Thread, Remote: k.Remote, Slices: make([]Slice, len(ss))}
		for i, s := range ss {
			sl := Slice{Start: s.Start, Dur: s.Dur}
			if s.Kind == core.SliceMemoryWait {
				sl.MemoryWait, sl.Pool = true, s.Detail
			}
			if s.Place != nil {
				sl.Worker, sl.Host = s.Place.Worker, s.Place.Host
			}
			track.Slices[i] = sl
		}
		t.Tracks = append(t.Tracks, track)
	}
	for _, q := range tr.Queues() {
		for _, s := range q.Recent(from, limit) {
			t.Queues = append(t.Queues, QueueSample{Task: q.Task, At: s.At, Len: s.Len})
		}
	}
	return t, nil
}
