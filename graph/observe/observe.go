// Package observe serves and exports what a run of a graph records: the
// live view over HTTP ([Handler]), the graph drawn by Graphviz, and the
// timeline in the Chrome trace-event format ([WriteTrace]).
//
// It is opt-in, as net/http/pprof is: package graph keeps to the standard
// library's core (its snapshots, [graph.Execution.Stats], its DOT text,
// [graph.Execution.WriteDOT], and its stall reports need nothing more), and
// only a program that imports this package links the HTTP server and runs
// the dot command. Everything here is built on graph's exported API.
package observe

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/gohtgs/htgs/graph"
)

// Handler serves the live profile of the run e over HTTP:
//
//	?format=json  (default) the Stats snapshot
//	?format=dot   the graph with its counters in DOT (add &color=compute or &color=wait)
//	?format=text  the Stats snapshot as text (Stats.String)
//	?format=trace the timeline (runs started WithTrace)
//	?format=ui    the live view: a page that shows the graph, its counters,
//	              the pools, the timeline and stall reports as the run goes
//	              (also what a browser gets without a format)
//	?format=live, ?format=topology, ?format=svg  what the page reads
//
// It is read-only: nothing it serves changes the run, and it answers only
// GET and HEAD. Mount it wherever suits, e.g.
// http.Handle("/debug/htgs", observe.Handler(rt.Execution)).
func Handler(e *graph.Execution) http.Handler {
	u := newUI(e)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "read-only: GET or HEAD", http.StatusMethodNotAllowed)
			return
		}
		format := req.URL.Query().Get("format")
		if format == "" && wantsHTML(req) {
			format = "ui"
		}
		switch format {
		case "ui":
			u.page(w)
		case "live":
			u.live(w)
		case "topology":
			u.topology(w)
		case "svg":
			u.svg(w, req)
		case "", "json":
			w.Header().Set("Content-Type", "application/json")
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			_ = enc.Encode(e.Stats())
		case "dot":
			w.Header().Set("Content-Type", "text/vnd.graphviz; charset=utf-8")
			opt := graph.DOTOptions{}
			switch req.URL.Query().Get("color") {
			case "compute":
				opt.Color = graph.ColorCompute
			case "wait":
				opt.Color = graph.ColorWait
			}
			_ = e.WriteDOT(w, opt)
		case "text":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = w.Write([]byte(e.Stats().String()))
		case "trace":
			tl, err := e.Timeline(0, 0)
			if err != nil {
				http.Error(w, err.Error(), http.StatusNotFound)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = writeTrace(w, tl)
		default:
			http.Error(w, "format must be json, dot, text, trace, ui, live, topology or svg", http.StatusBadRequest)
		}
	})
}

// wantsHTML reports whether req comes from a browser asking for a page.
func wantsHTML(req *http.Request) bool {
	return strings.Contains(req.Header.Get("Accept"), "text/html")
}
