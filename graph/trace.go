package graph

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gohtgs/htgs/internal/core"
)

// ErrNoTrace is returned by WriteTrace for a run started without WithTrace.
var ErrNoTrace = errors.New("htgs: the run was not started WithTrace")

// WriteTrace writes the run's timeline in the Chrome trace-event JSON format
// (load it in Perfetto or chrome://tracing): one track per task copy, with a
// slice per Execute and per memory wait, and a counter of each task's queue
// length. The Executes of a remote task's copies (see [task.Placer]) are
// named "execute on <worker>", in category "remote", with the worker and
// its host in their args; their tracks' names end in "(remote)". Call it after Wait for a complete timeline.
func (e *Execution) WriteTrace(w io.Writer) error {
	tr := e.run.Trace
	if tr == nil {
		return ErrNoTrace
	}
	return writeTrace(w, e.run.Name, tr)
}

type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func writeTrace(w io.Writer, name string, tr *core.Trace) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	first := true
	emit := func(e traceEvent) error {
		if !first {
			bw.WriteString(",\n")
		}
		first = false
		// Encoder adds a newline; harmless inside the array.
		return enc.Encode(e)
	}
	bw.WriteString(`{"displayTimeUnit":"ms","traceEvents":[` + "\n")
	if err := emit(traceEvent{Name: "process_name", Ph: "M", Pid: 1, Args: map[string]any{"name": "graph " + name}}); err != nil {
		return err
	}
	for i, t := range tr.Tracks() {
		tid := i + 1
		tname := fmt.Sprintf("%s #%d", t.Task, t.Thread)
		if t.Remote {
			tname += " (remote)"
		}
		if err := emit(traceEvent{Name: "thread_name", Ph: "M", Pid: 1, Tid: tid,
			Args: map[string]any{"name": tname}}); err != nil {
			return err
		}
		if err := emit(traceEvent{Name: "thread_sort_index", Ph: "M", Pid: 1, Tid: tid, Args: map[string]any{"sort_index": tid}}); err != nil {
			return err
		}
		for _, s := range t.Slices() {
			e := traceEvent{Name: "execute", Cat: "task", Ph: "X", Ts: us(s.Start), Dur: us(s.Dur), Pid: 1, Tid: tid}
			switch {
			case s.Kind == core.SliceMemoryWait:
				e.Name, e.Cat, e.Args = "memory wait", "memory", map[string]any{"pool": s.Detail}
			case s.Place != nil:
				e.Name, e.Cat = "execute on "+s.Place.Worker, "remote"
				e.Args = map[string]any{"worker": s.Place.Worker, "host": s.Place.Host}
			}
			if err := emit(e); err != nil {
				return err
			}
		}
	}
	for _, q := range tr.Queues() {
		for _, s := range q.Samples() {
			if err := emit(traceEvent{Name: "queue " + q.Task, Ph: "C", Ts: us(s.At), Pid: 1,
				Args: map[string]any{"length": s.Len}}); err != nil {
				return err
			}
		}
	}
	bw.WriteString("]}\n")
	return bw.Flush()
}
