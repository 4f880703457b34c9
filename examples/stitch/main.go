// Command stitch stitches a grid of overlapping microscope tiles with the
// task-graph implementation of NIST MIST's algorithm.
//
// With no arguments it runs a demo: it generates a realistic synthetic grid
// (8 x 10 tiles of 512 x 384) in a temporary folder, stitches it and prints
// the accuracy against the generator's ground truth. The folder is removed
// at exit unless -keep is given.
//
//	stitch -dir DIR -rows R -cols C -out OUT [-pattern 'img_r{rrr}_c{ccc}.tif'] [-start 1]
//	       [-overlap PCT] [-blend overlay|average|linear] [-workers N] [-profile PDIR]
//	       [-max-tile-pixels N] [-mosaic=false] [-mem SIZE] [-progress] [-fft auto|fftw|gonum]
//	stitch -generate DIR [-rows R -cols C -tile 512x384 -level realistic -seed 1]
//	stitch [-keep] [-profile PDIR]
//	stitch -cluster N | -nats URL  [-band-rows H] ... (as above)
//	stitch -worker [-nats URL] [-name NAME] [-workers N] [-gpu]
//
// With -nats URL the registration (FFT, PCIAM and CCF of every west and
// north pair) is split into bands of rows, each registered by a worker
// process (stitch -worker) that reads the tiles from DIR itself: DIR must
// be readable at the same path on every worker. The client estimates the
// flat field once and sends it with each band, merges the bands' pairs and
// runs the rest as a single process does, so the outputs are the same;
// it prints a line per band naming the worker and its host. The token
// comes from $HTGS_NATS_TOKEN (or nats://TOKEN@HOST:PORT). -cluster N
// runs a NATS server (the nats-server executable of -nats-server, found in
// $PATH by default) and N local workers (this program with -worker, the
// server's URL and token in their environment) and stops them when the
// run ends.
//
// OUT receives MIST's files under MIST's names (PREFIX is -prefix, default
// img-; T the time slice, 1 without time slices): PREFIXglobal-positions-T.txt,
// PREFIXrelative-positions-T.txt (after optimization),
// PREFIXrelative-positions-no-optimization-T.txt, PREFIXstitched-T.ome.tif
// (16-bit), PREFIXstitched-T-preview.png, PREFIXstatistics.txt and
// PREFIXlog.txt. MIST's headless option names (--gridWidth, --imageDir,
// --timeSlices, --assembleFromMetadata, ...) are accepted as they are; see
// docs/mist.md. -profile PDIR writes each phase's graph
// (PHASE.dot, and PHASE.svg when Graphviz's dot works), timeline
// (PHASE-trace.json, Chrome trace JSON) and statistics (PHASE-stats.json).
// When DIR holds a truth.csv written by the generator, the accuracy against
// it is printed too.
//
// The mosaic is a tiled pyramidal OME-TIFF (a BigTIFF): the OME-XML in the
// first IFD (size, -pixel-size or MIST's --unitX/--unitY), tiles of
// -tile-size (512), uncompressed or compressed (-compression none,
// deflate or zstd), and its 2x2-mean reduced levels, down to one tile, in
// SubIFDs. It is composed out of core, band by band, streamed into the
// file as the bands are composed (memory within -mem, default: a quarter
// of the memory available, 1 GiB when unknown); only a mosaic of at most
// 1024 rows that fits in -mem is composed in memory. The streamed path
// makes the preview from a pyramid level; both paths write the same file.
// The run prints which path it took.
//
// Every output is written to a temporary file next to it and renamed into
// place when the run (each time slice) succeeds, so a failed or interrupted run leaves the
// files of an earlier run as they were. The one exception is a mosaic that
// turns out, once the positions are known, to need more memory than the
// machine has even out of core: the positions files are then written and
// the run fails.
//
// Before any work the output folders are checked (created, writable), the
// tile headers are read (sizes above -max-tile-pixels are refused, and a
// corrupt file is named) and the memory the run needs is estimated against
// what the machine has available. After stitching, the program warns on
// stderr (lines starting "stitch: WARNING:") when its own quality measures
// are poor: tiles that hardly correlate, an implausible overlap estimate, a
// stage model built from too few translations (grids such as 2 x 2 or
// 1 x 3 are too small to estimate the overlap; give -overlap).
//
// Exit status: 0 on success (warnings included), 2 for a mistake on the
// command line, 1 for any other error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gohtgs/htgs/examples/internal/cli"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/internal/progress"
	"github.com/gohtgs/htgs/internal/units"
	"github.com/gohtgs/htgs/stitching"
	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/compose"
	"github.com/gohtgs/htgs/stitching/synth"
	"github.com/gohtgs/htgs/stitching/tileio"
)

// prog is the program's name in messages and hints.
const prog = "stitch"

// phases are the graph runs -profile writes.
var phases = []string{"registration", "refinement"}

// availableMemory is cli.AvailableMemory, replaced in tests.
var availableMemory = cli.AvailableMemory

type config struct {
	dir, pattern, out     string
	rows, cols, start     int
	overlap               float64
	blend                 compose.Blend
	workers               int
	profile               string
	showProgress          bool
	httpAddr              string
	httpWait              bool
	mosaic                bool
	gpu                   bool
	fft                   string
	maxTilePixels         int64
	spanningTree          bool         // -spanning-tree: MIST's placement
	mem                   string       // -mem as given
	memBudget             int64        // -mem parsed, or the default once checkMemory ran
	format                mosaicFormat // the mosaic file's tiles, compression, pixel size (see output.go)
	keep                  bool
	demo                  bool // set by the demo, not a flag
	generate, tile, level string
	seed                  uint64

	// MIST's parameters (see mist.go).
	prefix                          string
	timeSlices                      string
	slices                          []int // parsed timeSlices; nil: no time slices
	reuse                           bool
	assemble                        bool
	globalPositions                 string
	repeatability                   int
	hOverlap, vOverlap, uncertainty float64
	peaks                           int
	numbering, origin               string
	mist                            mistConfig
	notes                           []string // printed when the run starts

	// -watch (see watch.go).
	watch                   bool
	watchTimeout, watchPoll time.Duration
	watched                 *watchedRun // the live stitch's outcome

	// -flat-field and -save-flat-field (see flatfield.go).
	flatField, saveFlatField string
	givenFF                  *align.FlatField // read from -flat-field FILE

	// The distributed registration (see cluster.go).
	cl   clusterConfig
	dist *distributed // set while a -nats or -cluster run is connected
}

// runSlices are the time slices the run stitches: [1] without time slices,
// as MIST counts.
func (c *config) runSlices() []int {
	if len(c.slices) == 0 {
		return []int{1}
	}
	return c.slices
}

// maxSlice is the largest slice number, which sets the width of the slice
// number in output names.
func (c *config) maxSlice() int { return slices.Max(c.runSlices()) }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	// After the first Ctrl-C the run stops what it is doing and writes
	// nothing more; a second one ends the program at once, and if the
	// run has not returned within stopGrace it says what it waits for.
	done := make(chan struct{})
	context.AfterFunc(ctx, func() {
		stop()
		select {
		case <-done:
		case <-time.After(stopGrace):
			fmt.Fprintf(os.Stderr, "%s: interrupted %v ago, still waiting for the running tasks to return (a read from a slow or hung file system cannot be interrupted); press Ctrl-C again to quit now\n", prog, stopGrace)
		}
	})
	code := runMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
	close(done)
	stop()
	os.Exit(code)
}

// stopGrace is how long after Ctrl-C the program says what it still waits
// for.
const stopGrace = 5 * time.Second

// runMain runs the program and returns its exit status (see cli.Exit).
func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cli.Exit(prog, run(ctx, args, stdout, stderr), stdout, stderr, usage)
}

func newFlags(c *config) *flag.FlagSet {
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	fs.StringVar(&c.dir, "dir", "", "folder holding the tiles")
	fs.StringVar(&c.pattern, "pattern", "img_r{rrr}_c{ccc}.tif", "tile file names: {r} {rr} {rrr} row, {c} {cc} {ccc} column, {i} {iii} row-major index")
	fs.IntVar(&c.rows, "rows", 0, "grid rows")
	fs.IntVar(&c.cols, "cols", 0, "grid columns")
	fs.IntVar(&c.start, "start", 1, "number of the first row/column in file names (0 or 1)")
	fs.StringVar(&c.out, "out", "", "output folder (created if needed)")
	fs.Float64Var(&c.overlap, "overlap", 0, "expected overlap between tiles in percent (0: estimate it)")
	fs.TextVar(&c.blend, "blend", compose.Linear, "mosaic blending: overlay, average or linear")
	fs.IntVar(&c.workers, "workers", runtime.GOMAXPROCS(0), "copies of each compute task")
	fs.StringVar(&c.profile, "profile", "", "write each phase's graph (DOT, SVG), timeline (trace JSON) and statistics to this folder")
	fs.StringVar(&c.httpAddr, "http", "", cli.HTTPUsage)
	fs.BoolVar(&c.httpWait, "http-wait", false, cli.HTTPWaitUsage)
	fs.BoolVar(&c.showProgress, "progress", false, "draw the progress bars even when stderr is not a terminal")
	fs.BoolVar(&c.mosaic, "mosaic", true, "compose the mosaic (PREFIXstitched-T.ome.tif) and its preview")
	fs.StringVar(&c.mem, "mem", "", "memory `size` for the mosaic, such as 512MiB, which is composed out of core, band by band, within it (default: 1/4 of the available memory, 1GiB when unknown)")
	fs.BoolVar(&c.gpu, "gpu", false, "run the registration (FFT, PCIAM, CCF) and the refinement's NCC searches on the GPUs, the same positions as the CPU's; pairs of low correlation are checked for noise on the CPU (needs a build with -tags cuda)")
	fs.BoolVar(&c.spanningTree, "spanning-tree", false, "place the tiles as MIST does, along a maximum spanning tree of correlations, instead of the global loop-consistent solve over every pair (docs/mist.md)")
	fs.StringVar(&c.fft, "fft", "auto", "FFT `kernel`: auto (FFTW when libfftw3.so.3 is installed, else gonum), fftw or gonum")
	fs.Int64Var(&c.maxTilePixels, "max-tile-pixels", tileio.DefaultMaxTilePixels, "refuse tiles whose header claims more pixels (0: no limit)")
	fs.BoolVar(&c.keep, "keep", false, "demo only: keep the generated tiles and the outputs, and print where they are")
	fs.StringVar(&c.generate, "generate", "", "generate a synthetic grid into this folder instead of stitching")
	fs.StringVar(&c.tile, "tile", "512x384", "tile size for -generate and the demo, WxH")
	fs.StringVar(&c.level, "level", "realistic", "difficulty for -generate and the demo: easy, realistic or hard")
	fs.Uint64Var(&c.seed, "seed", 1, "random seed for -generate and the demo")
	fs.StringVar(&c.prefix, "prefix", defaultPrefix, "prefix of the output file names (MIST's outFilePrefix)")
	fs.StringVar(&c.numbering, "numbering", "HORIZONTALCOMBING", "order in which the tiles are acquired, and a sequential ({p}) pattern's index runs: HORIZONTALCOMBING, VERTICALCOMBING, HORIZONTALCONTINUOUS or VERTICALCONTINUOUS")
	fs.StringVar(&c.origin, "origin", "UL", "grid corner where the acquisition and a sequential numbering start: UL, UR, LL or LR")
	fs.StringVar(&c.timeSlices, "timeslices", "", "time slices to stitch, such as 1-3,5, for a pattern with {t}: one output set per slice")
	fs.BoolVar(&c.reuse, "reuse-positions", false, "with -timeslices: stitch the first slice only and compose the later ones at its positions")
	fs.BoolVar(&c.assemble, "assemble-from-metadata", false, "compose the mosaic at the positions of -global-positions instead of stitching")
	fs.StringVar(&c.globalPositions, "global-positions", "", "global-positions `file` (MIST's or ours) for -assemble-from-metadata; {t} is the time slice")
	fs.IntVar(&c.repeatability, "repeatability", 0, "stage repeatability in pixels (0: estimate it)")
	fs.Float64Var(&c.hOverlap, "horizontal-overlap", 0, "overlap of west-east neighbours in percent of the tile width (0: -overlap, or estimate it)")
	fs.Float64Var(&c.vOverlap, "vertical-overlap", 0, "overlap of north-south neighbours in percent of the tile height (0: -overlap, or estimate it)")
	fs.Float64Var(&c.uncertainty, "overlap-uncertainty", 0, "half-width of the valid overlap window in percent (0: 5; MIST uses 3)")
	addMosaicFlags(fs, c)
	addWatchFlags(fs, c)
	addFlatFieldFlags(fs, c)
	addMISTFlags(fs, c)
	addClusterFlags(fs, c)
	return fs
}

// usage writes the synopsis and the flags.
func usage(w io.Writer) {
	fmt.Fprintf(w, `Usage:
  %[1]s                                   demo: generate a grid, stitch it, report the accuracy
  %[1]s -dir DIR -rows R -cols C -out OUT  stitch the tiles of DIR
  %[1]s -watch -dir DIR -rows R -cols C -out OUT [-watch-timeout D]
                                         the same while the acquisition writes the tiles into DIR
  %[1]s -generate DIR [-rows R -cols C -tile WxH -level L -seed S]
  %[1]s -cluster N -dir DIR -rows R -cols C -out OUT
                                         the same, registering by bands of rows on N local worker processes
  %[1]s -nats URL -dir DIR ...            the same on the workers of a NATS server, which read DIR too
  %[1]s -worker -nats URL                 serve as such a worker (token: $HTGS_NATS_TOKEN)

  %[1]s --gridWidth C --gridHeight R --imageDir DIR --filenamePattern P --outputPath OUT ...
                                         the same with MIST's headless option names

Outputs in OUT, named as MIST names them (PREFIX is -prefix, T the time
slice, 1 without time slices): PREFIXglobal-positions-T.txt,
PREFIXrelative-positions-T.txt, PREFIXrelative-positions-no-optimization-T.txt,
PREFIXstitched-T.ome.tif, PREFIXstitched-T-preview.png, PREFIXstatistics.txt and
PREFIXlog.txt.
Warnings about the quality of the result go to stderr and start "%[1]s: WARNING:".

Flags:
`, prog)
	// The program's own flags first, then MIST's names in their own
	// section (their usage texts start with "MIST").
	all := newFlags(&config{})
	native := flag.NewFlagSet(prog, flag.ContinueOnError)
	mist := flag.NewFlagSet(prog, flag.ContinueOnError)
	all.VisitAll(func(f *flag.Flag) {
		to := native
		if strings.HasPrefix(f.Usage, "MIST") {
			to = mist
		}
		to.Var(f.Value, f.Name, f.Usage)
	})
	cli.PrintDefaults(w, native)
	fmt.Fprintf(w, "\nMIST's headless option names (--name value or -name value; docs/mist.md):\n")
	cli.PrintDefaults(w, mist)
}

func parseFlags(args []string) (*config, error) {
	c := &config{blend: compose.Linear}
	fs := newFlags(c)
	if err := cli.Parse(fs, args); err != nil {
		return nil, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := checkChannels(c, set); err != nil {
		return nil, err
	}
	if err := checkMIST(c, set); err != nil {
		return nil, err
	}
	if err := checkMosaicFlags(c, set); err != nil {
		return nil, err
	}
	if set["start"] && c.start != 0 && c.start != 1 {
		return nil, cli.Usagef("-start %d: must be 0 or 1", c.start)
	}
	if c.workers < 1 {
		return nil, cli.Usagef("-workers %d: must be at least 1", c.workers)
	}
	if c.overlap < 0 || c.overlap >= 100 || math.IsNaN(c.overlap) {
		return nil, cli.Usagef("-overlap %v: must be a percentage in [0, 100)", c.overlap)
	}
	if _, err := align.ParseFFTKernel(c.fft); err != nil {
		return nil, cli.Usagef("-fft %s: must be auto, fftw or gonum", c.fft)
	}
	if c.mem != "" {
		n, err := units.ParseBytes(c.mem)
		if err != nil {
			return nil, cli.Usagef("-mem %s: %v", c.mem, err)
		}
		if n <= 0 {
			return nil, cli.Usagef("-mem %s: must be more than 0", c.mem)
		}
		c.memBudget = n
	}
	if c.maxTilePixels < 0 {
		return nil, cli.Usagef("-max-tile-pixels %d: must be at least 0 (0: no limit)", c.maxTilePixels)
	}
	if set["profile"] && c.profile == "" {
		return nil, cli.Usagef("-profile needs a folder")
	}
	if err := cli.CheckHTTP(c.httpAddr, c.httpWait); err != nil {
		return nil, err
	}
	if c.start < 0 {
		return nil, cli.Usagef("first tile number %d: must be at least 0", c.start)
	}
	if err := checkStage(c); err != nil {
		return nil, err
	}
	if err := checkCluster(c, set); err != nil {
		return nil, err
	}
	if err := checkWatch(c, set); err != nil {
		return nil, err
	}
	if err := checkFlatField(c); err != nil {
		return nil, err
	}
	if c.keep && (c.dir != "" || c.generate != "") {
		return nil, cli.Usagef("-keep applies only to the demo (no -dir or -generate)")
	}
	return c, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := parseFlags(args)
	if err != nil {
		return err
	}
	if c.gpu {
		if err := stitching.CheckGPU(); err != nil {
			return fmt.Errorf("-gpu: %w", err)
		}
	}
	if k, _ := align.ParseFFTKernel(c.fft); k == align.FFTFFTW && !c.gpu {
		if _, err := align.DescribeFFT(k); err != nil {
			return fmt.Errorf("-fft fftw: %w", err)
		}
	}
	switch {
	case c.cl.worker:
		return serveWorker(ctx, c, stdout, stderr)
	case c.cl.distributed():
		return runDistributed(ctx, c, stdout, stderr)
	}
	return runJob(ctx, c, stdout, stderr)
}

// runJob generates, runs the demo or stitches, as the flags say.
func runJob(ctx context.Context, c *config, stdout, stderr io.Writer) error {
	switch {
	case c.generate != "":
		for _, n := range c.notes {
			fmt.Fprintln(stderr, n)
		}
		return generate(ctx, c, stdout)
	case c.dir == "":
		// The demo's stitch prints the notes (into its log too).
		if c.rows != 0 || c.cols != 0 || c.out != "" {
			return cli.Usagef("-dir is required to stitch (run without flags for the demo)")
		}
		return demo(ctx, c, stdout, stderr)
	}
	if c.rows < 1 || c.cols < 1 {
		return cli.Usagef("-rows and -cols must be at least 1 (got %d x %d)", c.rows, c.cols)
	}
	if c.out == "" {
		return cli.Usagef("-out is required")
	}
	return stitch(ctx, c, stdout, stderr)
}

func gridConfig(c *config) (synth.Config, error) {
	lvl, err := synth.ParseLevel(c.level)
	if err != nil {
		return synth.Config{}, cli.UsageError{Err: err}
	}
	cfg := synth.ConfigFor(lvl)
	if c.rows > 0 {
		cfg.Rows = c.rows
	}
	if c.cols > 0 {
		cfg.Cols = c.cols
	}
	w, h, ok := strings.Cut(c.tile, "x")
	tw, err1 := strconv.Atoi(w)
	th, err2 := strconv.Atoi(h)
	if !ok || err1 != nil || err2 != nil {
		return cfg, cli.Usagef("-tile %q: want WIDTHxHEIGHT such as 512x384", c.tile)
	}
	cfg.TileWidth, cfg.TileHeight, cfg.Seed = tw, th, c.seed
	if err := cfg.Validate(); err != nil {
		return cfg, cli.UsageError{Err: err}
	}
	return cfg, nil
}

func generate(ctx context.Context, c *config, stdout io.Writer) error {
	cfg, err := gridConfig(c)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := synth.GenerateToDir(ctx, cfg, c.generate, synth.DefaultName); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "generated %d x %d tiles of %d x %d (%s) in %s in %v\n", cfg.Rows, cfg.Cols, cfg.TileWidth, cfg.TileHeight,
		cfg.Level, c.generate, time.Since(t0).Round(time.Millisecond))
	if !c.demo {
		fmt.Fprintf(stdout, "stitch with: %s -dir %s -rows %d -cols %d -out OUT\n", prog, c.generate, cfg.Rows, cfg.Cols)
	}
	return nil
}

// demo generates a grid into a temporary folder and stitches it; the
// folder is removed at the end unless -keep.
func demo(ctx context.Context, c *config, stdout, stderr io.Writer) (err error) {
	tmp, err := os.MkdirTemp("", "htgs-stitch-demo-")
	if err != nil {
		return err
	}
	defer func() {
		if c.keep {
			fmt.Fprintf(stdout, "kept the demo's tiles in %s and its outputs in %s\n", filepath.Join(tmp, "tiles"), filepath.Join(tmp, "out"))
			fmt.Fprintf(stdout, "stitch them again with: %s -dir %s -rows %d -cols %d -out OUT\n", prog, filepath.Join(tmp, "tiles"), c.rows, c.cols)
			return
		}
		if rerr := os.RemoveAll(tmp); rerr != nil && err == nil {
			err = fmt.Errorf("removing the demo's folder: %w", rerr)
		}
	}()
	c.demo = true
	c.generate = filepath.Join(tmp, "tiles")
	fmt.Fprintln(stdout, "demo: no -dir given, so stitching a generated grid (-keep keeps it)")
	if err := generate(ctx, c, stdout); err != nil {
		return err
	}
	cfg, _ := gridConfig(c)
	c.dir, c.rows, c.cols, c.out = c.generate, cfg.Rows, cfg.Cols, filepath.Join(tmp, "out")
	return stitch(ctx, c, stdout, stderr)
}

// warn prints a warning line on stderr.
func warn(stderr io.Writer, format string, args ...any) {
	fmt.Fprintf(stderr, "%s: WARNING: %s\n", prog, fmt.Sprintf(format, args...))
}

// observed is a finished graph run kept for -profile.
type observed struct {
	phase string
	run   *graph.Execution
}

// checkStage checks the stage, layout, time-slice and assembly parameters.
func checkStage(c *config) error {
	if c.repeatability < 0 {
		return cli.Usagef("-repeatability %d: must be at least 0", c.repeatability)
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"-horizontal-overlap", c.hOverlap}, {"-vertical-overlap", c.vOverlap}, {"-overlap-uncertainty", c.uncertainty}} {
		if math.IsNaN(p.v) {
			continue // MIST's "not given"
		}
		if p.v < 0 || p.v >= 100 {
			return cli.Usagef("%s %v: must be a percentage in [0, 100)", p.name, p.v)
		}
	}
	if _, err := tileio.ParseNumbering(c.numbering); err != nil {
		return cli.UsageError{Err: err}
	}
	if _, err := tileio.ParseOrigin(c.origin); err != nil {
		return cli.UsageError{Err: err}
	}
	if c.prefix != filepath.Base(c.prefix) || strings.ContainsAny(c.prefix, `/\`) {
		return cli.Usagef("-prefix %q: must be a file-name prefix, without a folder", c.prefix)
	}
	if c.timeSlices != "" {
		s, err := tileio.ParseTimeSlices(c.timeSlices)
		if err != nil {
			return cli.UsageError{Err: err}
		}
		c.slices = s
	}
	if c.reuse && c.assemble {
		return cli.Usagef("-reuse-positions and -assemble-from-metadata exclude each other")
	}
	if c.assemble && c.globalPositions == "" {
		return cli.Usagef("-assemble-from-metadata needs -global-positions FILE")
	}
	if c.assemble && !c.mosaic {
		return cli.Usagef("-assemble-from-metadata composes the mosaic: it cannot go with -mosaic=false")
	}
	return nil
}

// nanZero is v, or 0 for NaN (MIST's "not given").
func nanZero(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return v
}

// stitch stitches (or assembles) the grid of -dir, each time slice, and
// writes the outputs; see stitchRun for its steps.
func stitch(ctx context.Context, c *config, stdout, stderr io.Writer) (err error) {
	// A folder this run creates (-out, -profile) is removed again if the
	// run fails having written nothing into it.
	for _, dir := range []string{c.out, c.profile} {
		if _, serr := os.Stat(dir); dir != "" && errors.Is(serr, os.ErrNotExist) {
			defer func() {
				if err != nil {
					os.Remove(dir) // only if empty
				}
			}()
		}
	}
	r := newStitchRun(c, stdout, stderr)
	for _, n := range c.notes {
		fmt.Fprintln(r.stderr, n)
	}
	if err := r.parsePattern(); err != nil {
		return err
	}
	if err := r.checkOutputDirs(); err != nil {
		return err
	}
	if err := r.options(); err != nil {
		return err
	}
	// -http: the live view shows each phase's graph from its start.
	live, err := cli.ServeLive(prog, c.httpAddr, r.stdout)
	if err != nil {
		return err
	}
	defer live.Close(ctx, c.httpWait, r.stdout)
	if live != nil {
		r.gopt.Start = append(r.gopt.Start, graph.WithStarted(live.Observe))
	}
	// -watch: the tiles are stitched as the acquisition writes them; once
	// every tile is in, the run goes on as on a finished folder.
	if c.watch {
		if err := watchGrid(ctx, c, r.pat, r.opt, r.gopt, live, r.stdout, r.stderr); err != nil {
			return err
		}
	}
	if err := r.openTiles(); err != nil {
		return err
	}
	if err := checkMemory(c, r.srcs[0], r.opt, r.gopt); err != nil {
		return err
	}
	defer r.outs.Abort()
	for k, t := range c.runSlices() {
		if err := r.slice(ctx, k, t); err != nil {
			return err
		}
	}
	return r.finish()
}

// bars are the progress bars of the phases, created as each phase starts.
type bars struct {
	w     io.Writer
	force bool
	m     map[string]*progress.Bar
}

func newBars(w io.Writer, force bool) *bars {
	return &bars{w: w, force: force, m: map[string]*progress.Bar{}}
}

// set records done of total units in phase.
func (b *bars) set(phase, unit string, done, total int) {
	bar := b.m[phase]
	if bar == nil {
		bar = progress.New(b.w, fmt.Sprintf("%-12s", phase), int64(total), b.force).WithUnit(unit)
		b.m[phase] = bar
	}
	bar.Set(int64(done))
	if done == total {
		bar.Finish()
	}
}
