package main

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// Hand-written SVG charts: grouped bar charts and line charts with axes,
// ticks, a legend and a title. Only what the experiment figures need.

// color returns the i-th colour of the charts' palette.
func color(i int) string {
	p := [...]string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f"}
	return p[i%len(p)]
}

type svgDoc struct {
	b    strings.Builder
	w, h int
}

func newSVG(w, h int) *svgDoc {
	d := &svgDoc{w: w, h: h}
	fmt.Fprintf(&d.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&d.b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	return d
}

func (d *svgDoc) text(x, y float64, anchor, s string, extra string) {
	fmt.Fprintf(&d.b, `<text x="%.1f" y="%.1f" text-anchor="%s" %s>%s</text>`+"\n", x, y, anchor, extra, html.EscapeString(s))
}

func (d *svgDoc) line(x1, y1, x2, y2 float64, style string) {
	fmt.Fprintf(&d.b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" %s/>`+"\n", x1, y1, x2, y2, style)
}

func (d *svgDoc) rect(x, y, w, h float64, fill, extra string) {
	fmt.Fprintf(&d.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" %s/>`+"\n", x, y, w, h, fill, extra)
}

// rectTitled draws a rectangle with a tooltip.
func (d *svgDoc) rectTitled(x, y, w, h float64, fill, title string) {
	fmt.Fprintf(&d.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s</title></rect>`+"\n", x, y, w, h, fill, html.EscapeString(title))
}

func (d *svgDoc) raw(s string) { d.b.WriteString(s) }

// String returns the finished document.
func (d *svgDoc) String() string { return d.b.String() + "</svg>\n" }

// niceTicks returns round tick values covering [0, max] (or [min, max]).
func niceTicks(lo, hi float64, n int) []float64 {
	if hi <= lo {
		hi = lo + 1
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var ticks []float64
	for v := math.Floor(lo/step) * step; v <= hi+step*1e-9; v += step {
		ticks = append(ticks, v)
	}
	if ticks[len(ticks)-1] < hi {
		ticks = append(ticks, ticks[len(ticks)-1]+step)
	}
	return ticks
}

func fmtTick(v float64) string {
	if math.Abs(v-math.Round(v)) < 1e-9 {
		return fmt.Sprintf("%.0f", v)
	}
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// chartFrame holds the plot area of a chart.
type chartFrame struct {
	d                      *svgDoc
	left, top, right, bott float64
	ylo, yhi               float64
}

func (f chartFrame) y(v float64) float64 {
	return f.bott - (v-f.ylo)/(f.yhi-f.ylo)*(f.bott-f.top)
}

// frame draws the title, the y axis with its ticks and grid, and the axis
// labels; it returns the plot area.
func frame(d *svgDoc, title, xlabel, ylabel string, ylo, yhi float64, legendRows int, bottom float64) chartFrame {
	ticks := niceTicks(ylo, yhi, 6)
	f := chartFrame{d: d, left: 70, top: 40 + 16*float64(legendRows), right: float64(d.w) - 20, bott: float64(d.h) - bottom, ylo: ticks[0], yhi: ticks[len(ticks)-1]}
	d.text(float64(d.w)/2, 22, "middle", title, `font-size="15" font-weight="bold"`)
	for _, t := range ticks {
		y := f.y(t)
		d.line(f.left, y, f.right, y, `stroke="#e0e0e0"`)
		d.text(f.left-6, y+4, "end", fmtTick(t), "")
	}
	d.line(f.left, f.top, f.left, f.bott, `stroke="black"`)
	d.line(f.left, f.bott, f.right, f.bott, `stroke="black"`)
	d.text(float64(d.w)/2, float64(d.h)-12, "middle", xlabel, "")
	d.raw(fmt.Sprintf(`<text transform="translate(16,%.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", (f.top+f.bott)/2, html.EscapeString(ylabel)))
	return f
}

// legend draws the series names in rows under the title.
func legend(d *svgDoc, names []string, dashed []bool) int {
	x, y := 70.0, 40.0
	rows := 1
	for i, n := range names {
		wdt := 30 + 7*float64(len(n))
		if x+wdt > float64(d.w)-20 {
			x = 70
			y += 16
			rows++
		}
		style := fmt.Sprintf(`stroke="%s" stroke-width="3"`, color(i))
		if i < len(dashed) && dashed[i] {
			style += ` stroke-dasharray="6,4"`
		}
		d.line(x, y-4, x+18, y-4, style)
		d.text(x+22, y, "start", n, "")
		x += wdt
	}
	return rows
}

type barSeries struct {
	name   string
	values []float64 // one per group
}

// barChart draws grouped bars: one group per label, one bar per series.
func barChart(title, xlabel, ylabel string, groups []string, series []barSeries, w, h int) string {
	d := newSVG(w, h)
	names := make([]string, len(series))
	hi := 0.0
	for i, s := range series {
		names[i] = s.name
		for _, v := range s.values {
			hi = max(hi, v)
		}
	}
	rows := legend(d, names, nil)
	bottom := 60.0
	if len(groups) > 6 {
		bottom = 110 // room for slanted labels
	}
	f := frame(d, title, xlabel, ylabel, 0, hi*1.05, rows, bottom)
	gw := (f.right - f.left) / float64(len(groups))
	bw := gw * 0.8 / float64(len(series))
	for gi, g := range groups {
		gx := f.left + float64(gi)*gw + gw*0.1
		for si, s := range series {
			if gi >= len(s.values) {
				continue
			}
			v := s.values[gi]
			y := f.y(v)
			d.rectTitled(gx+float64(si)*bw, y, bw*0.92, f.bott-y, color(si), fmt.Sprintf("%s, %s: %.3g", g, s.name, v))
		}
		lx := f.left + (float64(gi)+0.5)*gw
		if len(groups) > 6 {
			d.raw(fmt.Sprintf(`<text transform="translate(%.1f,%.1f) rotate(30)" text-anchor="start" font-size="11">%s</text>`+"\n", lx-14, f.bott+12, html.EscapeString(g)))
		} else {
			d.text(lx, f.bott+16, "middle", g, "")
		}
	}
	return d.String()
}

type lineSeries struct {
	name   string
	xs, ys []float64
	dashed bool
}

// lineChart draws series of points joined by lines, with markers.
func lineChart(title, xlabel, ylabel string, series []lineSeries, w, h int, yFromZero bool) string {
	d := newSVG(w, h)
	names := make([]string, len(series))
	dashed := make([]bool, len(series))
	xlo, xhi, ylo, yhi := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for i, s := range series {
		names[i], dashed[i] = s.name, s.dashed
		for j := range s.xs {
			xlo, xhi = min(xlo, s.xs[j]), max(xhi, s.xs[j])
			ylo, yhi = min(ylo, s.ys[j]), max(yhi, s.ys[j])
		}
	}
	if yFromZero {
		ylo = 0
	} else {
		ylo -= (yhi - ylo) * 0.05
	}
	rows := legend(d, names, dashed)
	f := frame(d, title, xlabel, ylabel, ylo, yhi*1.02, rows, 60)
	xt := niceTicks(xlo, xhi, 8)
	xlo, xhi = xt[0], xt[len(xt)-1]
	x := func(v float64) float64 { return f.left + (v-xlo)/(xhi-xlo)*(f.right-f.left) }
	for _, t := range xt {
		d.line(x(t), f.bott, x(t), f.bott+5, `stroke="black"`)
		d.text(x(t), f.bott+18, "middle", fmtTick(t), "")
	}
	for i, s := range series {
		col := color(i)
		var pts []string
		for j := range s.xs {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(s.xs[j]), f.y(s.ys[j])))
		}
		style := ""
		if s.dashed {
			style = ` stroke-dasharray="6,4"`
		}
		d.raw(fmt.Sprintf(`<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), col, style))
		for j := range s.xs {
			d.raw(fmt.Sprintf(`<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s: (%g, %.3g)</title></circle>`+"\n", x(s.xs[j]), f.y(s.ys[j]), col, html.EscapeString(s.name), s.xs[j], s.ys[j]))
		}
	}
	return d.String()
}

// archSVG draws the worker resource manager: stage instances arriving
// through the window, expanding into fine-grained operations, the ready
// queue sorted by speedup, CPU workers taking from the low end and GPU
// workers (upload / process / download) from the high end.
func archSVG() string {
	d := newSVG(860, 430)
	d.text(430, 24, "middle", "PATS worker resource manager (pats.Manager)", `font-size="16" font-weight="bold"`)
	box := func(x, y, w, h float64, fill, label string) {
		d.rect(x, y, w, h, fill, `stroke="#333" rx="6"`)
		for i, l := range strings.Split(label, "\n") {
			d.text(x+w/2, y+h/2+4+float64(i)*14-float64(strings.Count(label, "\n"))*7, "middle", l, "")
		}
	}
	arrow := func(x1, y1, x2, y2 float64) {
		d.line(x1, y1, x2, y2, `stroke="#333" stroke-width="1.5" marker-end="url(#arr)"`)
	}
	d.raw(`<defs><marker id="arr" markerWidth="10" markerHeight="8" refX="9" refY="4" orient="auto"><path d="M0,0 L10,4 L0,8 z" fill="#333"/></marker></defs>` + "\n")
	// Stage instances and window.
	box(20, 60, 150, 50, "#f4f4f4", "tiles (stage instances)\npats.Task / Submit")
	arrow(95, 110, 95, 140)
	box(20, 140, 150, 60, "#fff7e6", "window: at most W\nflows in progress")
	arrow(170, 170, 215, 170)
	// Flow expansion.
	d.rect(215, 60, 230, 200, "#eef5ff", `stroke="#333" rx="6"`)
	d.text(330, 78, "middle", "flows: fine-grained operations", "")
	nodes := [][3]float64{{250, 110, 0}, {330, 110, 0}, {290, 160, 1}, {250, 210, 1}, {330, 210, 1}, {410, 160, 2}}
	for _, n := range nodes {
		d.raw(fmt.Sprintf(`<circle cx="%.0f" cy="%.0f" r="14" fill="%s" stroke="#333"/>`+"\n", n[0], n[1], []string{"#c6dbef", "#9ecae1", "#6baed6"}[int(n[2])]))
	}
	for _, e := range [][4]float64{{250, 110, 290, 160}, {330, 110, 290, 160}, {290, 160, 250, 210}, {290, 160, 330, 210}, {330, 210, 410, 160}} {
		dx, dy := e[2]-e[0], e[3]-e[1]
		l := math.Hypot(dx, dy)
		ux, uy := dx/l*15, dy/l*15
		arrow(e[0]+ux, e[1]+uy, e[2]-ux, e[3]-uy)
	}
	d.text(330, 250, "middle", "dependencies from declared reads/writes", `font-size="11"`)
	arrow(445, 170, 480, 170)
	// Ready queue.
	d.text(600, 68, "middle", "ready queue, sorted by estimated speedup", "")
	for i := range 8 {
		shade := 235 - i*20
		d.rect(480+float64(i)*30, 80, 28, 40, fmt.Sprintf("rgb(%d,%d,255)", shade, shade), `stroke="#333"`)
		d.text(494+float64(i)*30, 104, "middle", fmt.Sprintf("%d", []int{1, 2, 2, 3, 7, 10, 14, 20}[i]), `font-size="11"`)
	}
	d.text(480, 136, "start", "lowest", `font-size="11"`)
	d.text(720, 136, "end", "highest", `font-size="11"`)
	// Workers.
	for i := range 3 {
		box(470+float64(i)*55, 300, 50, 40, "#e6f4ea", fmt.Sprintf("cpu%d", i))
		arrow(495, 122, 495+float64(i)*55, 298)
	}
	d.text(552, 362, "middle", "idle CPU core takes the lowest", `font-size="11"`)
	box(660, 290, 180, 80, "#fde8e8", "GPU worker\nupload | process | download\n(prefetch: pipelined)")
	arrow(705, 122, 750, 288)
	d.text(750, 388, "middle", "idle GPU takes the highest;", `font-size="11"`)
	d.text(750, 402, "middle", "locality: reuse data if Sd >= Sq(1-TI)", `font-size="11"`)
	// Stats and storage.
	box(215, 300, 230, 60, "#f4f4f4", "time statistics (Learn):\nmean time per op and device\n-> learned speedups")
	arrow(460, 320, 445, 330)
	box(20, 300, 150, 60, "#fff7e6", "region templates:\nstage inputs, commit\noutputs (storage)")
	arrow(170, 330, 215, 240)
	return d.String()
}
