package main

// The run's memory and its mosaic: the memory check before any work, the
// soft memory limits, and the mosaic's plan, messages and staging (the
// composing and writing are package mosaic's).

import (
	"context"
	"fmt"
	"image"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/gohtgs/htgs/internal/outfile"
	"github.com/gohtgs/htgs/stitching"
	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/compose"
	"github.com/gohtgs/htgs/stitching/mosaic"
	"github.com/gohtgs/htgs/stitching/tileio"
)

// mosaicOptions are package mosaic's options of this run, within mem
// bytes.
func mosaicOptions(c *config, mem int64) mosaic.Options {
	return mosaic.Options{Format: c.format.lib(), Blend: c.blend, Workers: c.workers, Memory: mem}
}

// mosaicChannels are the channels of one slice's mosaic, srcs in the
// mosaic's order: the reference channel (the only one without -channels)
// corrected with ff, the correction its registration used; every other
// channel with a correction estimated from its own tiles, as an assembly
// run estimates it, unless the registration used none (ff nil).
func mosaicChannels(c *config, srcs []*tileio.TileSet, ff *align.FlatField) []mosaic.Channel {
	chans := make([]mosaic.Channel, len(srcs))
	for ch, src := range srcs {
		chans[ch].Tiles = src
		if ch == c.format.ref || len(srcs) == 1 {
			chans[ch].FlatField = ff
		} else {
			chans[ch].EstimateFlatField = ff != nil
		}
	}
	return chans
}

// writeMosaic composes the tiles of each channel at slots, corrected with
// its flat field, and adds the mosaic and its preview (of the first
// channel) to outs: in memory, one channel at a time, when it fits in
// -mem, else out of core (see mosaic.NewPlan).
func writeMosaic(ctx context.Context, c *config, chans []mosaic.Channel, slots []compose.Slot, names outNames, outs *outfile.Batch, bars *bars, stdout io.Writer) error {
	mem := c.memBudget // set by checkMemory
	avail := availableMemory()
	limit := mem
	if avail > 0 {
		limit = min(limit, avail)
	}
	opt := mosaicOptions(c, limit)
	plan := mosaic.NewPlan(slots, opt)
	var kept *keptTiles
	if c.watched != nil && c.watched.res != nil && c.watched.kept != nil && len(chans) == 1 {
		kept = c.watched.kept
		defer kept.drop()
		// The mosaic plans within what the kept tiles leave of the
		// budget, unless that changes how it is composed (in memory or
		// out of core: the preview is made from another level), which
		// the file and the preview must not show: then the tiles go.
		held := kept.held()
		kopt := mosaicOptions(c, limit-held)
		if kplan := mosaic.NewPlan(slots, kopt); held < limit && kplan.OutOfCore == plan.OutOfCore {
			opt, plan = kopt, kplan
		} else {
			kept.drop()
		}
		chans = []mosaic.Channel{{Tiles: &keptSource{TileSource: chans[0].Tiles, kept: kept, ff: chans[0].FlatField}}}
	}
	if avail > 0 && plan.Need > avail {
		if err := outs.Commit(); err != nil {
			return err
		}
		return fmt.Errorf("not enough memory for the %d x %d mosaic: it needs about %s, but %s is available; the positions are written to %s (-mosaic=false skips the mosaic)",
			plan.Width, plan.Height, gib(plan.Need), gib(avail), c.out)
	}
	t0 := time.Now()
	opt.Progress = func(done, total int) { bars.set("mosaic", "tiles", done, total) }
	outOfCore := true
	switch {
	case c.format.kind == formatOMEZarr04:
		// NGFF 0.4's writer builds its levels from a tiled image: the
		// mosaic is composed out of core into one, whatever its size.
		fmt.Fprintf(stdout, "mosaic %d x %d: out of core into an %s (-mem %s; tile cache %s)\n",
			plan.Width, plan.Height, c.format.describe(), gib(mem), gib(plan.Cache))
	case plan.OutOfCore:
		fmt.Fprintf(stdout, "mosaic %d x %d: out of core into a %s (in memory it needs about %s; -mem %s; tile cache %s)\n",
			plan.Width, plan.Height, c.format.describe(), gib(plan.InMemory), gib(mem), gib(plan.Cache))
	default:
		outOfCore = false
		fmt.Fprintf(stdout, "mosaic %d x %d: in memory (about %s; -mem %s) into a %s\n", plan.Width, plan.Height, gib(plan.InMemory), gib(mem), c.format.describe())
	}
	restore := func() {}
	if outOfCore {
		// Keep the heap within -mem: without a limit the garbage
		// collector lets it grow to twice what is live.
		restore = heapLimit(mem)
	}
	var preview *image.Gray
	err := c.format.stage(outs, filepath.Join(c.out, names.mosaic), func(temp string) (err error) {
		preview, err = mosaic.Write(ctx, temp, names.mosaic, slots, chans, plan, opt)
		return err
	})
	restore()
	if err != nil {
		return err
	}
	if err := outs.Add(filepath.Join(c.out, names.preview), func(w io.Writer) error {
		return mosaic.EncodePreview(w, preview)
	}); err != nil {
		return err
	}
	from := ""
	if kept != nil {
		from = fmt.Sprintf("; %d of %d tiles as the live registration corrected them", kept.drop(), len(slots))
	}
	fmt.Fprintf(stdout, "mosaic %d x %d (%s blending) in %v%s\n", plan.Width, plan.Height, c.blend, time.Since(t0).Round(time.Millisecond), from)
	return nil
}

// writeOutputs adds a stitched slice's positions files, and with -mosaic
// its mosaic and preview, to outs.
func writeOutputs(ctx context.Context, c *config, src *tileio.TileSet, chans []mosaic.Channel, res *stitching.Result, names outNames, outs *outfile.Batch, bars *bars, stdout io.Writer) error {
	pos := res.GlobalPositions()
	if err := outs.Add(filepath.Join(c.out, names.global), func(w io.Writer) error {
		return tileio.WriteGlobalPositions(w, pos)
	}); err != nil {
		return err
	}
	if err := outs.Add(filepath.Join(c.out, names.relative), func(w io.Writer) error {
		return tileio.WriteRelativePositions(w, res.RelativePositions(true))
	}); err != nil {
		return err
	}
	if err := outs.Add(filepath.Join(c.out, names.noOpt), func(w io.Writer) error {
		return tileio.WriteRelativePositions(w, res.RelativePositions(false))
	}); err != nil {
		return err
	}
	if !c.mosaic {
		return nil
	}
	return writeMosaic(ctx, c, chans, positionSlots(pos, src), names, outs, bars, stdout)
}

// positionSlots places the tiles of src at pos (row-major).
func positionSlots(pos []tileio.GlobalPosition, src tileio.TileSource) []compose.Slot {
	w, h := src.TileSize()
	return mosaic.Slots(pos, w, h)
}

// checkMemory refuses a run that cannot fit in the memory the machine has
// available (when it can tell): stitching (tile slots, spectra, scratch)
// and, with -mosaic, the mosaic at its smallest (the overlap given, or
// 50%) with the flat field. It sets -mem's default.
func checkMemory(c *config, src *tileio.TileSet, opt align.Options, gopt stitching.GraphOptions) error {
	avail := availableMemory()
	if c.memBudget == 0 {
		c.memBudget = mosaic.DefaultMemory(avail)
	}
	if avail <= 0 {
		return nil
	}
	w, h := src.TileSize()
	reg := stitching.MemoryEstimate(c.rows, c.cols, w, h, opt, gopt)
	need, what := reg, fmt.Sprintf("about %s to stitch %d x %d tiles of %d x %d with %d workers", gib(reg), c.rows, c.cols, w, h, c.workers)
	if c.mosaic {
		ov := 0.5
		if c.overlap > 0 {
			ov = c.overlap / 100
		}
		m := mosaic.NewPlan(mosaic.GridSlots(c.rows, c.cols, w, h, ov), mosaicOptions(c, min(c.memBudget, avail))).Need + 4*int64(w)*int64(h)
		if m > need {
			need, what = m, fmt.Sprintf("at least %s for the mosaic (-mosaic=false skips it)", gib(m))
		}
	}
	if need > avail {
		return fmt.Errorf("not enough memory: the run needs %s, but %s is available", what, gib(avail))
	}
	return nil
}

// softMemoryLimit sets the Go runtime's soft memory limit for the
// stitching of src's grid (stitching.SoftMemoryLimit), unless the user
// set one (GOMEMLIMIT), and returns the function that puts the previous
// limit back (the mosaic has a budget of its own).
func softMemoryLimit(src *tileio.TileSet, c *config, opt align.Options, gopt stitching.GraphOptions) (restore func()) {
	w, h := src.TileSize()
	return heapLimit(stitching.SoftMemoryLimit(c.rows, c.cols, w, h, opt, gopt))
}

// heapLimit sets the Go runtime's soft memory limit to bytes, unless the
// user set one (GOMEMLIMIT), and returns the function that puts the
// previous limit back.
func heapLimit(bytes int64) (restore func()) {
	if os.Getenv("GOMEMLIMIT") != "" || bytes <= 0 {
		return func() {}
	}
	prev := debug.SetMemoryLimit(bytes)
	return func() { debug.SetMemoryLimit(prev) }
}

// gib formats a byte count.
func gib(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	default:
		return fmt.Sprintf("%.0f MiB", math.Ceil(float64(b)/(1<<20)))
	}
}
