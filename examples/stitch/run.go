package main

// The steps of a stitch run (stitch in main.go wires them): the tile
// pattern and the output folders checked, the options, the tiles opened,
// each time slice stitched or assembled, and the run's closing files.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gohtgs/htgs/examples/internal/cli"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/internal/outfile"
	"github.com/gohtgs/htgs/stitching"
	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/synth"
	"github.com/gohtgs/htgs/stitching/tileio"
)

// stitchRun is what a stitch run carries from step to step.
type stitchRun struct {
	c              *config
	start          time.Time
	log            bytes.Buffer
	stdout, stderr io.Writer // the run's, copied into log
	bars           *bars

	pat     tileio.Pattern
	opt     align.Options
	gopt    stitching.GraphOptions
	fftDesc string

	// -profile: the graph runs and every phase's time.
	plog     *phaseLog
	curSlice int
	runs     []observed

	srcs     []*tileio.TileSet   // each slice's tiles (of the reference channel)
	chanSrcs [][]*tileio.TileSet // each slice's channels' tiles
	given    [][]tileio.GlobalPosition

	outs      outfile.Batch
	stats     []sliceStats
	first     []tileio.GlobalPosition // -reuse-positions: the first slice's
	firstFF   *align.FlatField
	nWarnings int
}

// newStitchRun starts a run that prints to stdout and stderr, copied into
// its log; the progress bars go to stderr alone.
func newStitchRun(c *config, stdout, stderr io.Writer) *stitchRun {
	r := &stitchRun{c: c, start: time.Now(), bars: newBars(stderr, c.showProgress)}
	r.stdout, r.stderr = tee{stdout, &r.log}, tee{stderr, &r.log}
	r.plog = &phaseLog{start: r.start}
	return r
}

// tee copies what a run prints into its log.
type tee struct {
	w   io.Writer
	log *bytes.Buffer
}

func (t tee) Write(p []byte) (int, error) {
	t.log.Write(p)
	return t.w.Write(p)
}

// parsePattern parses -pattern with its layout and checks it against the
// time-slice flags.
func (r *stitchRun) parsePattern() error {
	c := r.c
	pat, err := tileio.ParsePattern(c.pattern, c.start)
	if err != nil {
		return cli.UsageError{Err: err}
	}
	num, _ := tileio.ParseNumbering(c.numbering) // checked by parseFlags
	org, _ := tileio.ParseOrigin(c.origin)
	pat.Layout = tileio.Layout{Numbering: num, Origin: org}
	switch {
	case pat.HasTime() && c.slices == nil:
		return cli.Usagef("-pattern %q has a time slice {t}: give -timeslices (such as 1-3,5)", c.pattern)
	case !pat.HasTime() && c.slices != nil:
		return cli.Usagef("-timeslices %s: -pattern %q has no time slice placeholder {t}", c.timeSlices, c.pattern)
	case c.reuse && c.slices == nil:
		return cli.Usagef("-reuse-positions applies to time slices (-timeslices)")
	case c.assemble && c.slices != nil && len(c.slices) > 1 && !hasTimePlaceholder(c.globalPositions):
		// MIST refuses this; here one positions file serves every slice.
		fmt.Fprintf(r.stdout, "assembling every time slice at the positions of %s (it has no {t})\n", c.globalPositions)
	}
	r.pat = pat
	return nil
}

// checkOutputDirs checks that the output folders are usable before any
// work is done, and removes the temporary files that an earlier run,
// killed while it wrote them, left in -out: only those of this run's
// outputs, and only when their writer is gone.
func (r *stitchRun) checkOutputDirs() error {
	c := r.c
	if err := outfile.CheckDir(c.out); err != nil {
		return fmt.Errorf("-out: %w", err)
	}
	var outPaths []string
	for _, n := range outputsOf(c) {
		outPaths = append(outPaths, filepath.Join(c.out, n))
	}
	if c.profile != "" {
		for _, n := range profileNames() {
			outPaths = append(outPaths, filepath.Join(c.profile, n))
		}
	}
	stale, err := outfile.RemoveStale(outPaths...)
	for _, st := range stale {
		fmt.Fprintln(r.stdout, st)
	}
	if err != nil {
		return fmt.Errorf("-out: %w", err)
	}
	if c.profile != "" {
		if err := outfile.CheckDir(c.profile); err != nil {
			return fmt.Errorf("-profile: %w", err)
		}
	}
	return nil
}

// options sets the algorithm's and the graphs' options: the progress
// bars, and the traces and observed runs of -profile and -http.
func (r *stitchRun) options() error {
	c := r.c
	fftKernel, _ := align.ParseFFTKernel(c.fft) // checked by parseFlags
	fftDesc, err := align.DescribeFFT(fftKernel)
	if err != nil {
		return fmt.Errorf("-fft %s: %w", c.fft, err)
	}
	r.fftDesc = fftDesc
	r.opt = align.Options{
		Overlap:            c.overlap,
		HorizontalOverlap:  nanZero(c.hOverlap),
		VerticalOverlap:    nanZero(c.vOverlap),
		OverlapUncertainty: nanZero(c.uncertainty),
		Repeatability:      c.repeatability,
		PeakCount:          c.peaks,
		SpanningTree:       c.spanningTree,
		FFT:                fftKernel,
		NoFlatField:        noFlatField(c),
	}
	if err := r.opt.Validate(); err != nil {
		return cli.UsageError{Err: err}
	}
	r.gopt = stitching.GraphOptions{
		Workers:  c.workers,
		GPU:      c.gpu,
		Progress: func(phase string, done, total int) { r.bars.set(phase, "pairs", done, total) },
	}
	if c.profile != "" || c.httpAddr != "" {
		r.gopt.Start = append(r.gopt.Start, graph.WithTrace())
	}
	if c.profile != "" {
		r.gopt.Observe = func(phase string, run *graph.Execution) {
			r.plog.graphEnded(r.curSlice, phase, run.Stats().Elapsed)
			r.runs = append(r.runs, observed{phase, run})
		}
	}
	return nil
}

// openTiles reads every slice's tile headers, and with -channels every
// channel's (the same grid, tile size and bit depth as the reference
// channel's), before any work; and the positions files to assemble from.
func (r *stitchRun) openTiles() error {
	c := r.c
	limit := c.maxTilePixels
	if limit == 0 {
		limit = -1 // no limit
	}
	runSlices := c.runSlices()
	r.srcs = make([]*tileio.TileSet, len(runSlices))
	for k, t := range runSlices {
		src, err := tileio.OpenTileSetLimit(c.dir, r.pat.AtTime(t), c.rows, c.cols, limit)
		if errors.Is(err, tileio.ErrTileTooLarge) {
			return fmt.Errorf("%w (if the file is right, raise -max-tile-pixels)", err)
		} else if err != nil {
			return err
		}
		if err := checkOverwrite(c, src); err != nil {
			return err
		}
		r.srcs[k] = src
	}
	r.chanSrcs = make([][]*tileio.TileSet, len(runSlices))
	for k, t := range runSlices {
		chans, err := r.openChannels(t, r.srcs[k], limit)
		if err != nil {
			return err
		}
		r.chanSrcs[k] = chans
	}
	if c.assemble {
		r.given = make([][]tileio.GlobalPosition, len(runSlices))
		for k, t := range runSlices {
			var err error
			if r.given[k], err = tileio.ReadPositionsFile(positionsPath(c.globalPositions, t), c.rows, c.cols); err != nil {
				return fmt.Errorf("-global-positions: %w", err)
			}
		}
	}
	return nil
}

// openChannels opens the tiles of slice t's channels, ref those of the
// reference channel: ref alone without -channels.
func (r *stitchRun) openChannels(t int, ref *tileio.TileSet, limit int64) ([]*tileio.TileSet, error) {
	c := r.c
	if len(c.format.channels) == 0 {
		return []*tileio.TileSet{ref}, nil
	}
	var chans []*tileio.TileSet
	refW, refH := ref.TileSize()
	for ch, p := range c.format.patterns {
		if ch == c.format.ref {
			chans = append(chans, ref)
			continue
		}
		cpat, err := tileio.ParsePattern(p, c.start)
		if err != nil {
			return nil, cli.UsageError{Err: err}
		}
		cpat.Layout = r.pat.Layout
		src, err := tileio.OpenTileSetLimit(c.dir, cpat.AtTime(t), c.rows, c.cols, limit)
		if err != nil {
			return nil, fmt.Errorf("channel %s: %w", c.format.channels[ch], err)
		}
		if w, h := src.TileSize(); w != refW || h != refH {
			return nil, fmt.Errorf("channel %s: tiles of %d x %d, the reference channel %s has %d x %d", c.format.channels[ch], w, h, c.format.channels[c.format.ref], refW, refH)
		}
		if err := checkOverwrite(c, src); err != nil {
			return nil, err
		}
		chans = append(chans, src)
	}
	return chans, nil
}

// slice stitches or assembles the k-th time slice, t, and puts its
// outputs in place, as MIST does.
func (r *stitchRun) slice(ctx context.Context, k, t int) error {
	c := r.c
	if c.slices != nil {
		fmt.Fprintf(r.stdout, "time slice %d (%d of %d)\n", t, k+1, len(c.runSlices()))
	}
	st := sliceStats{t: t}
	r.curSlice = t
	var err error
	if c.assemble || (c.reuse && k > 0) {
		err = r.assembleSlice(ctx, k, t, &st)
	} else {
		err = r.stitchOneSlice(ctx, k, t, &st)
	}
	if err != nil {
		return err
	}
	if err := r.outs.Commit(); err != nil {
		return err
	}
	r.stats = append(r.stats, st)
	return nil
}

// assembleSlice composes slice t at given positions: the first slice's
// (-reuse-positions) or a positions file's (-assemble-from-metadata).
func (r *stitchRun) assembleSlice(ctx context.Context, k, t int, st *sliceStats) error {
	c := r.c
	src, names := r.srcs[k], c.sliceNames(t)
	pos, from := r.first, "time slice "+strconv.Itoa(c.runSlices()[0])
	ff := r.firstFF
	if c.assemble {
		pos, from = r.given[k], positionsPath(c.globalPositions, t)
		// The same illumination correction a full run applies.
		switch {
		case c.givenFF != nil:
			ff = c.givenFF
		case c.flatField == flatNone:
			ff = nil
		default:
			var err error
			if ff, err = stitching.EstimateFlatField(ctx, src); err != nil {
				return err
			}
		}
	}
	st.positionsFrom = from
	t0 := time.Now()
	if c.reuse {
		// This slice's tiles at the first slice's positions.
		mine := slices.Clone(pos)
		for i := range mine {
			mine[i].Name = src.Name(mine[i].Row, mine[i].Col)
		}
		if err := r.outs.Add(filepath.Join(c.out, names.global), func(w io.Writer) error {
			return tileio.WriteGlobalPositions(w, mine)
		}); err != nil {
			return err
		}
	}
	if c.mosaic {
		fmt.Fprintf(r.stdout, "composing %d x %d tiles from %s at the positions of %s\n", c.rows, c.cols, c.dir, from)
		if err := writeMosaic(ctx, c, mosaicChannels(c, r.chanSrcs[k], ff), positionSlots(pos, src), names, &r.outs, r.bars, r.stdout); err != nil {
			return err
		}
	}
	st.output = time.Since(t0)
	r.plog.add(t, "outputs and mosaic", t0, time.Now(), false)
	return nil
}

// stitchOneSlice stitches slice t and writes its outputs.
func (r *stitchRun) stitchOneSlice(ctx context.Context, k, t int, st *sliceStats) error {
	c, src := r.c, r.srcs[k]
	w, h := src.TileSize()
	where := ""
	switch {
	case c.registeredOnGPU():
		where = ", FFT, PCIAM and CCF on the GPUs"
	case c.gpu:
		where = ", registered on the CPU as the tiles came (the GPUs take the pairs left when the cores fall behind)"
	}
	fmt.Fprintf(r.stdout, "stitching %d x %d tiles of %d x %d from %s with %d workers%s\n", c.rows, c.cols, w, h, c.dir, c.workers, where)
	if !c.registeredOnGPU() && k == 0 {
		fmt.Fprintf(r.stdout, "FFT: %s\n", r.fftDesc)
	}
	t0 := time.Now()
	restore := softMemoryLimit(src, c, r.opt, r.gopt)
	res, err := stitchSlice(ctx, c, src, t, r.opt, r.gopt, r.stdout)
	restore()
	if err != nil {
		return err
	}
	elapsed := time.Since(t0)
	r.plog.fillStitch(t, t0, t0.Add(elapsed))
	st.stitch, st.res = elapsed, res
	r.printStitched(src, res, elapsed, st)
	warnings := res.Warnings()
	for _, w := range warnings {
		warn(r.stderr, "%s", w)
	}
	r.nWarnings += len(warnings)
	if k == 0 {
		r.first, r.firstFF = res.GlobalPositions(), res.FlatField
	}
	t0 = time.Now()
	if err := writeOutputs(ctx, c, src, mosaicChannels(c, r.chanSrcs[k], res.FlatField), res, c.sliceNames(t), &r.outs, r.bars, r.stdout); err != nil {
		return err
	}
	st.output = time.Since(t0)
	r.plog.add(t, "outputs and mosaic", t0, time.Now(), false)
	if truth, err := synth.ReadTruth(filepath.Join(c.dir, synth.TruthFile)); err == nil {
		report(r.stdout, r.stderr, res, truth)
	} else if !errors.Is(err, os.ErrNotExist) {
		warn(r.stderr, "ignoring %s: %v", synth.TruthFile, err)
	}
	return nil
}

// printStitched says how a slice's stitch went: its time, the stage model,
// with -profile the steps after the registration, and the peak memory.
func (r *stitchRun) printStitched(src *tileio.TileSet, res *stitching.Result, elapsed time.Duration, st *sliceStats) {
	c, stdout := r.c, r.stdout
	if c.watched != nil && c.watched.res != nil {
		// Stitched as the tiles came: what took time after the last.
		st.stitch = c.watched.after
		fmt.Fprintf(stdout, "stitched live, %v after the last tile; overlap %s horizontal, %s vertical; repeatability %d px\n",
			c.watched.after.Round(time.Millisecond), overlapText(res.Model.West), overlapText(res.Model.North), res.Model.Repeatability)
	} else {
		fmt.Fprintf(stdout, "stitched in %v (%.1f tiles/s); overlap %s horizontal, %s vertical; repeatability %d px\n",
			elapsed.Round(time.Millisecond), float64(c.rows*c.cols)/elapsed.Seconds(),
			overlapText(res.Model.West), overlapText(res.Model.North), res.Model.Repeatability)
	}
	if c.profile != "" && len(res.Steps) > 0 {
		parts := make([]string, len(res.Steps))
		for i, s := range res.Steps {
			parts[i] = fmt.Sprintf("%s %v", s.Name, s.Elapsed.Round(time.Millisecond))
		}
		fmt.Fprintf(stdout, "steps after the registration: %s", strings.Join(parts, "; "))
		if res.HostRefined > 0 {
			fmt.Fprintf(stdout, "; %d pairs refined on the host, %d of them during the registration", res.HostRefined, res.RefinedAhead)
		}
		fmt.Fprintln(stdout)
	}
	if peak := cli.PeakMemory(); peak > 0 {
		w, h := src.TileSize()
		fmt.Fprintf(stdout, "peak memory so far %s (estimate for the stitching %s)\n", gib(peak),
			gib(stitching.MemoryEstimate(c.rows, c.cols, w, h, r.opt, r.gopt)))
	}
}

// finish writes what follows the slices: the flat field, the profiles,
// the statistics file and the log, and removes -watch's provisional
// files.
func (r *stitchRun) finish() error {
	c, stdout, stderr := r.c, r.stdout, r.stderr
	if err := saveFlatField(c, r.firstFF, stdout); err != nil {
		return err
	}
	if err := writeProfiles(c.profile, r.runs, stdout, stderr); err != nil {
		return err
	}
	if c.profile != "" {
		// Every phase's time, graphs or not, in one file.
		path := filepath.Join(c.profile, "phases.json")
		if err := outfile.WriteFile(path, r.plog.write); err != nil {
			return fmt.Errorf("-profile: %w", err)
		}
		fmt.Fprintf(stdout, "every phase's time (graphs and the rest) in %s\n", path)
	}
	if !c.demo || c.keep {
		fmt.Fprintf(stdout, "outputs in %s\n", c.out)
	}
	if r.nWarnings > 0 {
		warn(stderr, "%d quality warning(s) above: check the positions before using them (give -overlap PCT when the overlap is known)", r.nWarnings)
	}
	total := time.Since(r.start)
	if err := r.outs.Add(filepath.Join(c.out, statsName(c.prefix)), func(w io.Writer) error {
		return writeStatistics(w, c, r.fftDesc, total, r.stats)
	}); err != nil {
		return err
	}
	if c.watched != nil {
		fmt.Fprintf(stdout, "outputs written %v after the last tile arrived\n", time.Since(c.watched.last).Round(time.Millisecond))
	}
	logText := r.log.Bytes()
	if err := r.outs.Add(filepath.Join(c.out, logName(c.prefix)), func(w io.Writer) error {
		_, err := w.Write(logText)
		return err
	}); err != nil {
		return err
	}
	if err := r.outs.Commit(); err != nil {
		return err
	}
	removePartial(c, stderr)
	return nil
}

// overlapText formats the overlap of a direction, or says why there is none.
func overlapText(d align.DirectionModel) string {
	if d.Pairs == 0 && math.IsNaN(d.Overlap) {
		return "n/a (no pairs)"
	}
	return fmt.Sprintf("%.2f%%", d.Overlap)
}

// profileNames are the files -profile writes.
func profileNames() []string {
	names := []string{"phases.json"}
	for _, p := range phases {
		names = append(names, p+".dot", p+".svg", p+"-trace.json", p+"-stats.json")
	}
	return names
}

// checkOverwrite refuses outputs that would replace a tile: -out or
// -profile being the tiles' folder with an output named like a tile.
func checkOverwrite(c *config, src *tileio.TileSet) error {
	check := func(flagName, dir string, names []string) error {
		same, err := outfile.SameFile(c.dir, dir)
		if err != nil || !same {
			return err
		}
		out := map[string]bool{}
		for _, n := range names {
			out[n] = true
		}
		for r := range c.rows {
			for col := range c.cols {
				if n := src.Name(r, col); out[n] {
					return cli.Usagef("%s %s would overwrite tile %s", flagName, dir, n)
				}
			}
		}
		return nil
	}
	if err := check("-out", c.out, outputsOf(c)); err != nil {
		return err
	}
	if c.profile == "" {
		return nil
	}
	return check("-profile", c.profile, profileNames())
}

// writeProfiles writes each observed run into dir; a dot that is missing
// or fails is a warning (once), not an error.
func writeProfiles(dir string, runs []observed, stdout, stderr io.Writer) error {
	warned := map[string]bool{}
	for _, o := range runs {
		warning, err := cli.WriteProfile(dir, o.phase, o.run)
		if err != nil {
			return fmt.Errorf("-profile: %s: %w", o.phase, err)
		}
		fmt.Fprintf(stdout, "profile of the %s graph (DOT, SVG, trace, statistics) in %s\n", o.phase, filepath.Join(dir, o.phase+".*"))
		if warning != nil && !warned[warning.Error()] {
			warned[warning.Error()] = true
			warn(stderr, "-profile: %v (the DOT, trace and statistics files are written)", warning)
		}
	}
	return nil
}

// report prints the accuracy against truth.csv, or warns when it does not
// describe this grid.
func report(stdout, stderr io.Writer, res *stitching.Result, truth []synth.TruthEntry) {
	if len(truth) != res.Rows*res.Cols {
		warn(stderr, "no accuracy report: %s describes %d tiles, the grid has %d (%d x %d)", synth.TruthFile, len(truth), res.Rows*res.Cols, res.Rows, res.Cols)
		return
	}
	tx, ty := make([]int, len(truth)), make([]int, len(truth))
	for _, e := range truth {
		if e.Row < 0 || e.Row >= res.Rows || e.Col < 0 || e.Col >= res.Cols {
			warn(stderr, "no accuracy report: %s has tile (%d, %d) outside the %d x %d grid", synth.TruthFile, e.Row, e.Col, res.Rows, res.Cols)
			return
		}
		i := e.Row*res.Cols + e.Col
		if e.File != res.Names[i] {
			warn(stderr, "no accuracy report: %s names tile (%d, %d) %s, the grid's file is %s", synth.TruthFile, e.Row, e.Col, e.File, res.Names[i])
			return
		}
		tx[i], ty[i] = e.X, e.Y
	}
	a := stitching.Evaluate(res, tx, ty)
	fmt.Fprintf(stdout, "accuracy against %s: %d of %d pairs exact after optimization (%.1f%%; %.1f%% before), worst tile %d px off\n",
		synth.TruthFile, a.ExactOptimal, a.Pairs, 100*a.FracOptimal, 100*a.FracRelative, a.MaxTileError)
}
