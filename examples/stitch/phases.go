package main

import (
	"encoding/json"
	"io"
	"slices"
	"time"
)

// phaseLog records when each phase of a run ran, for -profile's
// phases.json: the graph phases (registration, refinement), whose DOT,
// trace and statistics files -profile writes too, and the phases between
// and after them that are not task graphs (flat field and set-up, stage
// model, global optimization, outputs and mosaic), so that the profile
// covers the whole run.
type phaseLog struct {
	start time.Time
	spans []phaseSpan
}

// phaseSpan is one phase of one time slice.
type phaseSpan struct {
	Slice   int     `json:"slice"`
	Phase   string  `json:"phase"`
	StartMS float64 `json:"start_ms"` // since the run started
	MS      float64 `json:"ms"`
	Graph   bool    `json:"graph"` // a task graph: PHASE.dot, PHASE-trace.json, PHASE-stats.json
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// add records phase of slice from from to to.
func (l *phaseLog) add(slice int, phase string, from, to time.Time, graph bool) {
	l.spans = append(l.spans, phaseSpan{Slice: slice, Phase: phase, StartMS: ms(from.Sub(l.start)), MS: ms(to.Sub(from)), Graph: graph})
}

// graphEnded records a graph phase of slice that has just ended after
// running for elapsed.
func (l *phaseLog) graphEnded(slice int, phase string, elapsed time.Duration) {
	now := time.Now()
	l.add(slice, phase, now.Add(-elapsed), now, true)
}

// fillStitch records the phases of slice's stitch, from from to to, that
// are not graphs: the gaps around its graph phases.
func (l *phaseLog) fillStitch(slice int, from, to time.Time) {
	var graphs []phaseSpan
	for _, s := range l.spans {
		if s.Slice == slice && s.Graph {
			graphs = append(graphs, s)
		}
	}
	slices.SortFunc(graphs, func(a, b phaseSpan) int {
		if a.StartMS < b.StartMS {
			return -1
		}
		return 1
	})
	at := func(msec float64) time.Time { return l.start.Add(time.Duration(msec * float64(time.Millisecond))) }
	prev, prevName := from, ""
	for _, g := range graphs {
		gs := at(g.StartMS)
		name := "flat field and set-up"
		switch {
		case prevName == "registration" && g.Phase == "refinement":
			name = "stage model and repair"
		case prevName != "":
			name = "between " + prevName + " and " + g.Phase
		}
		if gs.After(prev) {
			l.add(slice, name, prev, gs, false)
		}
		prev, prevName = at(g.StartMS+g.MS), g.Phase
	}
	if to.After(prev) {
		l.add(slice, "global optimization", prev, to, false)
	}
}

// write writes the phases in the order they started, as JSON.
func (l *phaseLog) write(w io.Writer) error {
	s := slices.Clone(l.spans)
	slices.SortStableFunc(s, func(a, b phaseSpan) int {
		if a.StartMS < b.StartMS {
			return -1
		} else if a.StartMS > b.StartMS {
			return 1
		}
		return 0
	})
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}
