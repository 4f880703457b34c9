package observe

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/internal/tracefmt"
)

// WriteTrace writes the timeline of the run e in the Chrome trace-event
// JSON format (load it in Perfetto or chrome://tracing): one track per task
// copy, with a slice per Execute and per memory wait, and a counter of each
// task's queue length. The Executes of a remote task's copies (see
// [task.Placer]) are named "execute on <worker>", in category "remote",
// with the worker and its host in their args; their tracks' names end in
// "(remote)". The run must have been started with [graph.WithTrace]
// (WriteTrace returns [graph.ErrNoTrace] otherwise); call it after Wait for
// a complete timeline.
//
// [task.Placer]: https://pkg.go.dev/github.com/gohtgs/htgs/task#Placer
func WriteTrace(w io.Writer, e *graph.Execution) error {
	tl, err := e.Timeline(0, 0)
	if err != nil {
		return err
	}
	return writeTrace(w, tl)
}

func writeTrace(w io.Writer, tl graph.Timeline) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	first := true
	emit := func(e tracefmt.Event) error {
		if !first {
			bw.WriteString(",\n")
		}
		first = false
		// Encoder adds a newline; harmless inside the array.
		return enc.Encode(e)
	}
	bw.WriteString(`{"displayTimeUnit":"ms","traceEvents":[` + "\n")
	if err := emit(tracefmt.Event{Name: "process_name", Ph: "M", Pid: 1, Args: map[string]any{"name": "graph " + tl.Graph}}); err != nil {
		return err
	}
	for i, t := range tl.Tracks {
		tid := i + 1
		tname := fmt.Sprintf("%s #%d", t.Task, t.Copy)
		if t.Remote {
			tname += " (remote)"
		}
		if err := emit(tracefmt.Event{Name: "thread_name", Ph: "M", Pid: 1, Tid: tid,
			Args: map[string]any{"name": tname}}); err != nil {
			return err
		}
		if err := emit(tracefmt.Event{Name: "thread_sort_index", Ph: "M", Pid: 1, Tid: tid, Args: map[string]any{"sort_index": tid}}); err != nil {
			return err
		}
		for _, s := range t.Slices {
			e := tracefmt.Event{Name: "execute", Cat: "task", Ph: "X", Ts: tracefmt.Micros(s.Start), Dur: tracefmt.Micros(s.Dur), Pid: 1, Tid: tid}
			switch {
			case s.MemoryWait:
				e.Name, e.Cat, e.Args = "memory wait", "memory", map[string]any{"pool": s.Pool}
			case s.Worker != "":
				e.Name, e.Cat = "execute on "+s.Worker, "remote"
				e.Args = map[string]any{"worker": s.Worker, "host": s.Host}
			}
			if err := emit(e); err != nil {
				return err
			}
		}
	}
	for _, q := range tl.Queues {
		if err := emit(tracefmt.Event{Name: "queue " + q.Task, Ph: "C", Ts: tracefmt.Micros(q.At), Pid: 1,
			Args: map[string]any{"length": q.Len}}); err != nil {
			return err
		}
	}
	bw.WriteString("]}\n")
	return bw.Flush()
}
