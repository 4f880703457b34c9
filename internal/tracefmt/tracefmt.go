// Package tracefmt holds the event of the Trace Event Format, the JSON that
// Perfetto (ui.perfetto.dev) and chrome://tracing open, for the traces
// this module writes: the graph's (graph/observe) and matmul's device
// trace.
package tracefmt

import "time"

// Event is one trace event. Ph is its phase: "X" a complete event (Ts and
// Dur), "M" metadata ("process_name", "thread_name" with Args["name"]).
// Times are in microseconds; Pid and Tid are numbers, named by metadata
// events.
type Event struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// Micros is d in microseconds, the format's unit.
func Micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
