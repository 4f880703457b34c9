package core

import (
	"sort"
	"sync"
	"time"

	"github.com/gohtgs/htgs/task"
)

// Trace collects a timeline of a run: one track per task copy with a slice
// per Execute and per memory wait, and queue-length samples per task. It is
// only filled when a run is started with tracing on.
type Trace struct {
	mu     sync.Mutex
	tracks []*Track
	queues []*QueueTrack
}

// SliceKind tells what a timeline slice is.
type SliceKind uint8

// Slice kinds.
const (
	SliceExecute SliceKind = iota
	SliceMemoryWait
)

// Slice is one timed interval on a track (times since the run's epoch).
type Slice struct {
	Start, Dur time.Duration
	Kind       SliceKind
	Detail     string // the pool's name for a memory wait
	// Place is where the Execute's input ran, for a copy whose task is a
	// task.Placer (nil otherwise); slices of one worker share it.
	Place *task.Placement
}

// Track is the timeline of one task copy.
type Track struct {
	Task     string
	Thread   int
	Pipeline int
	Remote   bool // the copy's task is a task.Placer: its inputs run elsewhere
	mu       sync.Mutex
	slices   []Slice
}

// Add appends a slice.
func (t *Track) Add(s Slice) {
	t.mu.Lock()
	t.slices = append(t.slices, s)
	t.mu.Unlock()
}

// Slices returns a copy of the track's slices.
func (t *Track) Slices() []Slice {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Slice(nil), t.slices...)
}

// QueueTrack holds queue-length samples of one task.
type QueueTrack struct {
	Task    string
	mu      sync.Mutex
	samples []QueueSample
}

// QueueSample is a queue length at a time since the run's epoch.
type QueueSample struct {
	At  time.Duration
	Len int
}

// Add appends a sample.
func (q *QueueTrack) Add(at time.Duration, n int) {
	q.mu.Lock()
	q.samples = append(q.samples, QueueSample{at, n})
	q.mu.Unlock()
}

// Samples returns a copy of the samples.
func (q *QueueTrack) Samples() []QueueSample {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]QueueSample(nil), q.samples...)
}

func (tr *Trace) newTrack(task string, thread, pipeline int) *Track {
	t := &Track{Task: task, Thread: thread, Pipeline: pipeline}
	tr.mu.Lock()
	tr.tracks = append(tr.tracks, t)
	tr.mu.Unlock()
	return t
}

func (tr *Trace) newQueue(task string) *QueueTrack {
	q := &QueueTrack{Task: task}
	tr.mu.Lock()
	tr.queues = append(tr.queues, q)
	tr.mu.Unlock()
	return q
}

// Tracks returns every copy's track.
func (tr *Trace) Tracks() []*Track {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]*Track(nil), tr.tracks...)
}

// Queues returns every task's queue samples.
func (tr *Trace) Queues() []*QueueTrack {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]*QueueTrack(nil), tr.queues...)
}

// Recent returns the slices that end at or after from, at most limit of
// them (the latest), without copying the whole track: slices are appended
// as they end, so they are in order of their end.
func (t *Track) Recent(from time.Duration, limit int) []Slice {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.slices
	i := sort.Search(len(s), func(i int) bool { return s[i].Start+s[i].Dur >= from })
	if len(s)-i > limit {
		i = len(s) - limit
	}
	return append([]Slice(nil), s[i:]...)
}

// Recent returns the samples taken at or after from, at most limit of them
// (the latest), without copying the others:
// samples are appended in order of their time.
func (q *QueueTrack) Recent(from time.Duration, limit int) []QueueSample {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.samples
	i := sort.Search(len(s), func(i int) bool { return s[i].At >= from })
	if len(s)-i > limit {
		i = len(s) - limit
	}
	return append([]QueueSample(nil), s[i:]...)
}
