package graph

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/gohtgs/htgs/internal/core"
)

// Color selects what colours the task nodes of a DOT picture.
type Color int

// Colourings of WriteDOT.
const (
	ColorNone    Color = iota
	ColorCompute       // by total time inside Execute
	ColorWait          // by total time waiting for input
)

// DOTOptions adjust WriteDOT.
type DOTOptions struct {
	Color Color
	// Copies draws one line per task copy under each task (many copies
	// are otherwise summarised as min/avg/max).
	Copies bool
}

// WriteDOT draws the run's graph in Graphviz DOT: tasks with their counters
// (items in/out, compute, wait and memory-wait time, largest queue, the
// copies as min/avg/max), bookkeeper rules, memory pools and memory edges
// (dashed), nested graphs and execution-pipeline clones as clusters. A
// remote task (its copies are [task.Placer]s, a cluster.Remote's for one)
// is drawn dashed, with a line naming its workers and how many inputs each
// ran ("remote: node1@hostA ×3"). It may be called during the run or after
// Wait.
func (e *Execution) WriteDOT(w io.Writer, opt DOTOptions) error {
	return writeDOT(w, e.run, opt)
}

type cluster struct {
	name     string
	nodes    []core.TopoNode
	children map[string]*cluster
	order    []string
}

func (c *cluster) child(name string) *cluster {
	if c.children == nil {
		c.children = map[string]*cluster{}
	}
	k, ok := c.children[name]
	if !ok {
		k = &cluster{name: name}
		c.children[name] = k
		c.order = append(c.order, name)
	}
	return k
}

func writeDOT(w io.Writer, r *core.Run, opt DOTOptions) error {
	bw := bufio.NewWriter(w)
	nodes, edges := r.Topology()
	var maxT time.Duration
	for _, n := range nodes {
		if n.Stats != nil {
			maxT = max(maxT, colorValue(n.Stats, opt.Color))
		}
	}
	root := &cluster{}
	for _, n := range nodes {
		c := root
		for _, p := range n.Path {
			c = c.child(p)
		}
		c.nodes = append(c.nodes, n)
	}
	fmt.Fprintf(bw, "digraph %s {\n", quote(r.Name))
	fmt.Fprintf(bw, "  label=%s; labelloc=t; fontname=\"Helvetica\"; rankdir=LR; compound=true;\n",
		quote(fmt.Sprintf("%s — %v", r.Name, time.Since(r.Epoch).Round(time.Millisecond))))
	bw.WriteString("  node [fontname=\"Helvetica\", fontsize=10]; edge [fontname=\"Helvetica\", fontsize=9];\n")
	var id int
	var draw func(c *cluster, depth int)
	draw = func(c *cluster, depth int) {
		ind := strings.Repeat("  ", depth+1)
		for _, n := range c.nodes {
			drawNode(bw, ind, n, opt, maxT)
		}
		for _, name := range c.order {
			id++
			fmt.Fprintf(bw, "%ssubgraph cluster_%d {\n%s  label=%s; style=rounded; color=\"#4477aa\";\n", ind, id, ind, quote(name))
			draw(c.children[name], depth+1)
			fmt.Fprintf(bw, "%s}\n", ind)
		}
	}
	draw(root, 0)
	for _, e := range edges {
		if e.Memory {
			fmt.Fprintf(bw, "  %s -> %s [style=dashed, color=\"#bb8800\", label=\"memory\"];\n", quote(e.From), quote(e.To))
			continue
		}
		fmt.Fprintf(bw, "  %s -> %s [label=%s];\n", quote(e.From), quote(e.To), quote(e.Type))
	}
	bw.WriteString("}\n")
	return bw.Flush()
}

func colorValue(s *core.NodeStats, c Color) time.Duration {
	var t int64
	for _, cp := range s.Copies {
		switch c {
		case ColorCompute:
			t += cp.Compute.Load()
		case ColorWait:
			t += cp.Wait.Load()
		}
	}
	return time.Duration(t)
}

func drawNode(w io.Writer, ind string, n core.TopoNode, opt DOTOptions, maxT time.Duration) {
	switch n.Kind {
	case core.KindInput, core.KindOutput:
		fmt.Fprintf(w, "%s%s [label=%s, shape=cds, style=filled, fillcolor=\"#e8f0fe\"];\n", ind, quote(n.ID), quote(n.Label))
	case core.KindRoute, core.KindMerge:
		fmt.Fprintf(w, "%s%s [label=%s, shape=diamond, style=filled, fillcolor=\"#eeeeff\"];\n", ind, quote(n.ID), quote(n.Label))
	case core.KindMemory:
		label := n.Label
		if p := n.Pool; p != nil {
			label = fmt.Sprintf("pool %s\n%d buffers, peak %d out\n%d waits", n.Label, p.Capacity, p.Peak(), p.Waits())
		}
		fmt.Fprintf(w, "%s%s [label=%s, shape=cylinder, style=filled, fillcolor=\"#fdf3d8\"];\n", ind, quote(n.ID), quote(label))
	default:
		s := n.Stats
		label := nodeLabel(n, opt)
		fill := "#ffffff"
		if opt.Color != ColorNone && maxT > 0 {
			fill = heat(float64(colorValue(s, opt.Color)) / float64(maxT))
		}
		shape, style := "box", "rounded,filled"
		if n.Kind == core.KindBookkeeper {
			shape = "box3d"
		}
		if remote(s) {
			// Drawn apart: dashed, its copies' work done elsewhere.
			style += ",dashed"
			if opt.Color == ColorNone {
				fill = "#eef7ee"
			}
		}
		fmt.Fprintf(w, "%s%s [label=%s, shape=%s, style=%s, fillcolor=%s];\n", ind, quote(n.ID), quote(label), shape, quote(style), quote(fill))
		for _, rule := range s.Rules {
			rid := n.ID + "." + rule
			fmt.Fprintf(w, "%s%s [label=%s, shape=hexagon];\n", ind, quote(rid), quote("rule "+rule))
			fmt.Fprintf(w, "%s%s -> %s [style=dotted, arrowhead=none];\n", ind, quote(n.ID), quote(rid))
		}
	}
}

func nodeLabel(n core.TopoNode, opt DOTOptions) string {
	s := n.Stats
	var in, comp, wait, mem int64
	out := itemsOut(s)
	var per []time.Duration
	for _, c := range s.Copies {
		in += c.ItemsIn.Load()
		comp += c.Compute.Load()
		wait += c.Wait.Load()
		mem += c.MemWait.Load()
		per = append(per, time.Duration(c.Compute.Load()))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s", n.Label)
	if len(s.Copies) > 1 {
		fmt.Fprintf(&b, " ×%d", len(s.Copies))
	}
	fmt.Fprintf(&b, "\nin %d  out %d\ncompute %v  wait %v", in, out, short(time.Duration(comp)), short(time.Duration(wait)))
	if mem > 0 {
		fmt.Fprintf(&b, "\nmemory wait %v", short(time.Duration(mem)))
	}
	if s.QueueMax != nil {
		fmt.Fprintf(&b, "\nmax queue %d", s.QueueMax())
	}
	if remote(s) {
		writeWorkers(&b, s)
	}
	if len(per) > 1 {
		sort.Slice(per, func(i, j int) bool { return per[i] < per[j] })
		var sum time.Duration
		for _, d := range per {
			sum += d
		}
		fmt.Fprintf(&b, "\ncompute per copy min/avg/max %v/%v/%v", short(per[0]), short(sum/time.Duration(len(per))), short(per[len(per)-1]))
		if opt.Copies {
			for _, c := range s.Copies {
				fmt.Fprintf(&b, "\n#%d: in %d, %v", c.Thread, c.ItemsIn.Load(), short(time.Duration(c.Compute.Load())))
				if rs := c.Remote(); rs != nil {
					if p := rs.Placement(); p.Worker != "" {
						fmt.Fprintf(&b, ", on %s", p)
					}
				}
			}
		}
	}
	return b.String()
}

// dotWorkers is how many workers a remote task's label names at most.
const dotWorkers = 9

// remote reports whether the node's copies run their inputs elsewhere.
func remote(s *core.NodeStats) bool {
	return len(s.Copies) > 0 && s.Copies[0].Remote() != nil
}

// writeWorkers adds a remote task's workers to its label: a line
// "remote: worker@host ×items, ..." (the busiest first), or "remote" alone
// before any input ran.
func writeWorkers(b *strings.Builder, s *core.NodeStats) {
	var ts TaskStats
	for _, c := range s.Copies {
		if rs := c.Remote(); rs != nil {
			var cs CopyStats
			remoteCopy(&ts, &cs, rs)
		}
	}
	sortWorkers(ts.Workers)
	b.WriteString("\nremote")
	for i, w := range ts.Workers {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		if i == dotWorkers {
			fmt.Fprintf(b, ", %d more", len(ts.Workers)-i)
			break
		}
		if i%3 == 0 && i > 0 {
			sep = ",\n"
		}
		fmt.Fprintf(b, "%s%s ×%d", sep, workerName(w.Worker, w.Host), w.Items)
	}
}

func short(d time.Duration) time.Duration {
	switch {
	case d > time.Second:
		return d.Round(time.Millisecond)
	case d > time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// heat maps 0..1 to white..red.
func heat(f float64) string {
	f = min(max(f, 0), 1)
	g := int(255 - 180*f)
	return fmt.Sprintf("#ff%02x%02x", g, g)
}

func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}
