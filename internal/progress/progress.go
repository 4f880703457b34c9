// Package progress draws a one-line progress bar on a terminal, for the
// example programs.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Bar is a progress bar. Its methods are safe for concurrent use. A Bar on
// a writer that is not a terminal draws nothing unless forced.
type Bar struct {
	mu      sync.Mutex
	w       io.Writer
	label   string
	unit    string
	total   int64
	done    int64
	start   time.Time
	last    time.Time
	enabled bool
	drawn   bool
	shown   int64 // done at the last draw
}

// New returns a bar counting to total on w. It draws only when w is a
// terminal, or when force is true.
func New(w io.Writer, label string, total int64, force bool) *Bar {
	return &Bar{w: w, label: label, total: total, start: time.Now(), enabled: force || IsTerminal(w)}
}

// WithUnit names what the bar counts ("pairs", "tiles"), shown after the
// count; it returns b.
func (b *Bar) WithUnit(unit string) *Bar {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.unit = unit
	return b
}

// IsTerminal reports whether w is a character device (a terminal).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Set records that n units are done and redraws at most 10 times a second.
func (b *Bar) Set(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done = n
	if !b.enabled || time.Since(b.last) < 100*time.Millisecond && n < b.total {
		return
	}
	b.last = time.Now()
	b.draw()
}

// Finish draws the final state (unless it is drawn already) and ends the
// line.
func (b *Bar) Finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.enabled {
		return
	}
	if !b.drawn || b.shown != b.done {
		b.draw()
	}
	fmt.Fprintln(b.w)
}

func (b *Bar) draw() {
	const width = 30
	frac := 0.0
	if b.total > 0 {
		frac = min(float64(b.done)/float64(b.total), 1)
	}
	full := int(frac * width)
	el := time.Since(b.start).Round(100 * time.Millisecond)
	unit := ""
	if b.unit != "" {
		unit = " " + b.unit
	}
	fmt.Fprintf(b.w, "\r%s [%s%s] %d/%d%s %3.0f%% %v ", b.label, strings.Repeat("=", full), strings.Repeat(" ", width-full),
		b.done, b.total, unit, 100*frac, el)
	b.drawn, b.shown = true, b.done
}
