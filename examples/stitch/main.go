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
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/png"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gohtgs/htgs/examples/internal/cli"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/internal/outfile"
	"github.com/gohtgs/htgs/internal/progress"
	"github.com/gohtgs/htgs/internal/units"
	"github.com/gohtgs/htgs/stitching"
	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/compose"
	"github.com/gohtgs/htgs/stitching/synth"
	"github.com/gohtgs/htgs/stitching/tileio"
	"github.com/gohtgs/htgs/tiled"
)

// prog is the program's name in messages and hints.
const prog = "stitch"

// previewSide is the longer side of the mosaic's preview.
const previewSide = 2000

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
	fs.StringVar(&c.numbering, "numbering", "HORIZONTALCOMBING", "order of a sequential ({p}) pattern's index: HORIZONTALCOMBING, VERTICALCOMBING, HORIZONTALCONTINUOUS or VERTICALCONTINUOUS")
	fs.StringVar(&c.origin, "origin", "UL", "grid corner where a sequential numbering starts: UL, UR, LL or LR")
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
		s, err := parseTimeSlices(c.timeSlices)
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

// tee copies what a run prints into its log.
type tee struct {
	w   io.Writer
	log *bytes.Buffer
}

func (t tee) Write(p []byte) (int, error) {
	t.log.Write(p)
	return t.w.Write(p)
}

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
	tStart := time.Now()
	var logBuf bytes.Buffer
	barsOut := stderr
	stdout, stderr = tee{stdout, &logBuf}, tee{stderr, &logBuf}
	for _, n := range c.notes {
		fmt.Fprintln(stderr, n)
	}

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
		fmt.Fprintf(stdout, "assembling every time slice at the positions of %s (it has no {t})\n", c.globalPositions)
	}
	// The output folders must be usable before any work is done.
	if err := outfile.CheckDir(c.out); err != nil {
		return fmt.Errorf("-out: %w", err)
	}
	// Temporary files that an earlier run, killed while it wrote them,
	// left in -out are removed: only those of this run's outputs, and
	// only when their writer is gone.
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
		fmt.Fprintln(stdout, st)
	}
	if err != nil {
		return fmt.Errorf("-out: %w", err)
	}
	if c.profile != "" {
		if err := outfile.CheckDir(c.profile); err != nil {
			return fmt.Errorf("-profile: %w", err)
		}
	}
	fftKernel, _ := align.ParseFFTKernel(c.fft) // checked by parseFlags
	fftDesc, err := align.DescribeFFT(fftKernel)
	if err != nil {
		return fmt.Errorf("-fft %s: %w", c.fft, err)
	}
	opt := align.Options{
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
	if err := opt.Validate(); err != nil {
		return cli.UsageError{Err: err}
	}
	bars := newBars(barsOut, c.showProgress)
	var runs []observed
	gopt := stitching.GraphOptions{
		Workers:  c.workers,
		GPU:      c.gpu,
		Progress: func(phase string, done, total int) { bars.set(phase, "pairs", done, total) },
	}
	if c.profile != "" || c.httpAddr != "" {
		gopt.Start = append(gopt.Start, graph.WithTrace())
	}
	plog := &phaseLog{start: tStart}
	curSlice := 0
	if c.profile != "" {
		gopt.Observe = func(phase string, r *graph.Execution) {
			plog.graphEnded(curSlice, phase, r.Stats().Elapsed)
			runs = append(runs, observed{phase, r})
		}
	}
	// -http: the live view shows each phase's graph from its start.
	live, err := cli.ServeLive(prog, c.httpAddr, stdout)
	if err != nil {
		return err
	}
	defer live.Close(ctx, c.httpWait, stdout)
	if live != nil {
		gopt.Start = append(gopt.Start, graph.WithStarted(live.Observe))
	}
	// -watch: the tiles are stitched as the acquisition writes them; once
	// every tile is in, the run goes on as on a finished folder.
	if c.watch {
		if err := watchGrid(ctx, c, pat, opt, gopt, live, stdout, stderr); err != nil {
			return err
		}
	}
	limit := c.maxTilePixels
	if limit == 0 {
		limit = -1 // no limit
	}
	// Every slice's tile headers are read before any work.
	runSlices := c.runSlices()
	srcs := make([]*tileio.TileSet, len(runSlices))
	for k, t := range runSlices {
		src, err := tileio.OpenTileSetLimit(c.dir, pat.AtTime(t), c.rows, c.cols, limit)
		if errors.Is(err, tileio.ErrTileTooLarge) {
			return fmt.Errorf("%w (if the file is right, raise -max-tile-pixels)", err)
		} else if err != nil {
			return err
		}
		if err := checkOverwrite(c, src); err != nil {
			return err
		}
		srcs[k] = src
	}
	// With -channels, every channel's tiles: the same grid, tile size and
	// bit depth as the reference channel's, checked before any work.
	chanSrcs := make([][]*tileio.TileSet, len(runSlices))
	for k, t := range runSlices {
		if len(c.format.channels) == 0 {
			chanSrcs[k] = []*tileio.TileSet{srcs[k]}
			continue
		}
		refW, refH := srcs[k].TileSize()
		for ch, p := range c.format.patterns {
			if ch == c.format.ref {
				chanSrcs[k] = append(chanSrcs[k], srcs[k])
				continue
			}
			cpat, err := tileio.ParsePattern(p, c.start)
			if err != nil {
				return cli.UsageError{Err: err}
			}
			cpat.Layout = pat.Layout
			src, err := tileio.OpenTileSetLimit(c.dir, cpat.AtTime(t), c.rows, c.cols, limit)
			if err != nil {
				return fmt.Errorf("channel %s: %w", c.format.channels[ch], err)
			}
			if w, h := src.TileSize(); w != refW || h != refH {
				return fmt.Errorf("channel %s: tiles of %d x %d, the reference channel %s has %d x %d", c.format.channels[ch], w, h, c.format.channels[c.format.ref], refW, refH)
			}
			if err := checkOverwrite(c, src); err != nil {
				return err
			}
			chanSrcs[k] = append(chanSrcs[k], src)
		}
	}
	// Positions files to assemble from are read before any work too.
	var given [][]tileio.GlobalPosition
	if c.assemble {
		given = make([][]tileio.GlobalPosition, len(runSlices))
		for k, t := range runSlices {
			if given[k], err = readPositionsFile(positionsPath(c.globalPositions, t), c.rows, c.cols); err != nil {
				return fmt.Errorf("-global-positions: %w", err)
			}
		}
	}
	if err := checkMemory(c, srcs[0], opt, gopt); err != nil {
		return err
	}

	var outs outfile.Batch
	defer outs.Abort()
	var stats []sliceStats
	var first []tileio.GlobalPosition // -reuse-positions: the first slice's
	var firstFF *align.FlatField
	nWarnings := 0
	for k, t := range runSlices {
		src := srcs[k]
		names := c.sliceNames(t)
		if c.slices != nil {
			fmt.Fprintf(stdout, "time slice %d (%d of %d)\n", t, k+1, len(runSlices))
		}
		st := sliceStats{t: t}
		curSlice = t
		if c.assemble || (c.reuse && k > 0) {
			pos, from := first, "time slice "+strconv.Itoa(runSlices[0])
			ff := firstFF
			if c.assemble {
				pos, from = given[k], positionsPath(c.globalPositions, t)
				// The same illumination correction a full run applies.
				switch {
				case c.givenFF != nil:
					ff = c.givenFF
				case c.flatField == flatNone:
					ff = nil
				default:
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
				if err := outs.Add(filepath.Join(c.out, names.global), func(w io.Writer) error {
					return tileio.WriteGlobalPositions(w, mine)
				}); err != nil {
					return err
				}
			}
			if c.mosaic {
				fmt.Fprintf(stdout, "composing %d x %d tiles from %s at the positions of %s\n", c.rows, c.cols, c.dir, from)
				if err := writeMosaic(ctx, c, mosaicChannels(c, chanSrcs[k], ff), positionSlots(pos, src), names, &outs, bars, stdout); err != nil {
					return err
				}
			}
			st.output = time.Since(t0)
			plog.add(t, "outputs and mosaic", t0, time.Now(), false)
		} else {
			w, h := src.TileSize()
			where := ""
			if c.gpu {
				where = ", FFT, PCIAM and CCF on the GPUs"
			}
			fmt.Fprintf(stdout, "stitching %d x %d tiles of %d x %d from %s with %d workers%s\n", c.rows, c.cols, w, h, c.dir, c.workers, where)
			if !c.gpu && k == 0 {
				fmt.Fprintf(stdout, "FFT: %s\n", fftDesc)
			}
			t0 := time.Now()
			restore := softMemoryLimit(src, c, opt, gopt)
			res, err := stitchSlice(ctx, c, src, t, opt, gopt, stdout)
			restore()
			if err != nil {
				return err
			}
			elapsed := time.Since(t0)
			plog.fillStitch(t, t0, t0.Add(elapsed))
			st.stitch, st.res = elapsed, res
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
					gib(stitching.MemoryEstimate(c.rows, c.cols, w, h, opt, gopt)))
			}
			warnings := res.Warnings()
			for _, w := range warnings {
				warn(stderr, "%s", w)
			}
			nWarnings += len(warnings)
			if k == 0 {
				first, firstFF = res.GlobalPositions(), res.FlatField
			}
			t0 = time.Now()
			if err := writeOutputs(ctx, c, src, mosaicChannels(c, chanSrcs[k], res.FlatField), res, names, &outs, bars, stdout); err != nil {
				return err
			}
			st.output = time.Since(t0)
			plog.add(t, "outputs and mosaic", t0, time.Now(), false)
			if truth, err := synth.ReadTruth(filepath.Join(c.dir, synth.TruthFile)); err == nil {
				report(stdout, stderr, res, truth)
			} else if !errors.Is(err, os.ErrNotExist) {
				warn(stderr, "ignoring %s: %v", synth.TruthFile, err)
			}
		}
		// Each slice's outputs are in place once it is done, as with MIST.
		if err := outs.Commit(); err != nil {
			return err
		}
		stats = append(stats, st)
	}
	if err := saveFlatField(c, firstFF, stdout); err != nil {
		return err
	}
	if err := writeProfiles(c.profile, runs, stdout, stderr); err != nil {
		return err
	}
	if c.profile != "" {
		// Every phase's time, graphs or not, in one file.
		path := filepath.Join(c.profile, "phases.json")
		if err := outfile.WriteFile(path, plog.write); err != nil {
			return fmt.Errorf("-profile: %w", err)
		}
		fmt.Fprintf(stdout, "every phase's time (graphs and the rest) in %s\n", path)
	}
	if !c.demo || c.keep {
		fmt.Fprintf(stdout, "outputs in %s\n", c.out)
	}
	if nWarnings > 0 {
		warn(stderr, "%d quality warning(s) above: check the positions before using them (give -overlap PCT when the overlap is known)", nWarnings)
	}
	total := time.Since(tStart)
	if err := outs.Add(filepath.Join(c.out, statsName(c.prefix)), func(w io.Writer) error {
		return writeStatistics(w, c, fftDesc, total, stats)
	}); err != nil {
		return err
	}
	if c.watched != nil {
		fmt.Fprintf(stdout, "outputs written %v after the last tile arrived\n", time.Since(c.watched.last).Round(time.Millisecond))
	}
	logText := logBuf.Bytes()
	if err := outs.Add(filepath.Join(c.out, logName(c.prefix)), func(w io.Writer) error {
		_, err := w.Write(logText)
		return err
	}); err != nil {
		return err
	}
	if err := outs.Commit(); err != nil {
		return err
	}
	removePartial(c, stderr)
	return nil
}

// positionSlots places the tiles of src at pos (row-major).
func positionSlots(pos []tileio.GlobalPosition, src tileio.TileSource) []compose.Slot {
	w, h := src.TileSize()
	slots := make([]compose.Slot, len(pos))
	for i, p := range pos {
		slots[i] = compose.Slot{X: p.X, Y: p.Y, Width: w, Height: h}
	}
	return slots
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

// gib formats a byte count.
func gib(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	default:
		return fmt.Sprintf("%.0f MiB", math.Ceil(float64(b)/(1<<20)))
	}
}

// nominalSlots places the tiles of a rows x cols grid on a regular grid
// with the given overlap fraction.
func nominalSlots(rows, cols, w, h int, overlap float64) []compose.Slot {
	sx := max(1, int(math.Round(float64(w)*(1-overlap))))
	sy := max(1, int(math.Round(float64(h)*(1-overlap))))
	slots := make([]compose.Slot, 0, rows*cols)
	for r := range rows {
		for c := range cols {
			slots = append(slots, compose.Slot{X: c * sx, Y: r * sy, Width: w, Height: h})
		}
	}
	return slots
}

// prefetchMemory is what the tiles loaded ahead of the composing hold
// (compose.Prefetch with par loads at once): par tiles, each decoded and
// flat-field corrected, two images.
func prefetchMemory(slots []compose.Slot, par int) int64 {
	var most int64
	for _, s := range slots {
		most = max(most, 2*int64(s.Width)*int64(s.Height))
	}
	return int64(par) * 2 * most
}

// mosaicMemory is what composing and writing a mosaic of slots needs, on
// top of the flat field: the composition and the preview's reduction.
func mosaicMemory(slots []compose.Slot, blend compose.Blend) int64 {
	need := compose.MemoryEstimate(slots, blend)
	// The preview box-reduces to at most 2.5 times its side, in float64.
	side := 2.5 * previewSide
	return need + int64(8*side*side)
}

// checkMemory refuses a run that cannot fit in the memory the machine has
// available (when it can tell): stitching (tile slots, spectra, scratch)
// and, with -mosaic, the mosaic at its smallest (the overlap given, or 50%).
// softMemoryLimit sets the Go runtime's soft memory limit for the
// stitching to 1.5 times its estimate plus 300 MB, so that the garbage
// collector keeps the heap near what the pools hold instead of letting it
// double (GOGC's default) on a large grid. (With 1.25 times the estimate
// plus 256 MiB the paper-size grid on 16 cores ran 20% slower: the
// collector ran nearly all the time.) The estimate taken is the steady
// one, without the scratch spaces of noise-limited pairs
// (GraphOptions.WeakPairs): those exist only on data with such pairs, and
// are kept and reused, not garbage, so the heap has room for them under the
// limit (live memory at most the full estimate) and the collector paces
// itself by the pools as before. It leaves a limit the user set
// (GOMEMLIMIT) alone, and returns the function that puts the previous limit
// back (the mosaic has a budget of its own).
func softMemoryLimit(src *tileio.TileSet, c *config, opt align.Options, gopt stitching.GraphOptions) (restore func()) {
	w, h := src.TileSize()
	return heapLimit(softLimitBytes(c.rows, c.cols, w, h, opt, gopt))
}

// softLimitBytes is the soft memory limit of softMemoryLimit: 1.5 times
// the steady estimate plus 300 MB, and never less than the whole estimate
// plus 300 MB (many scratch spaces asked for with GraphOptions.WeakPairs).
func softLimitBytes(rows, cols, w, h int, opt align.Options, gopt stitching.GraphOptions) int64 {
	one := gopt
	one.WeakPairs = 1
	steady := stitching.MemoryEstimate(rows, cols, w, h, opt, one) - align.DenoiseScratch(w, h)
	full := stitching.MemoryEstimate(rows, cols, w, h, opt, gopt)
	return max(steady+steady/2, full) + 300e6
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

func checkMemory(c *config, src *tileio.TileSet, opt align.Options, gopt stitching.GraphOptions) error {
	avail := availableMemory()
	if c.memBudget == 0 {
		c.memBudget = defaultMem(avail)
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
		m := planMosaic(nominalSlots(c.rows, c.cols, w, h, ov), c.blend, min(c.memBudget, avail), c.workers, c.format.tileSize).need + 4*int64(w)*int64(h)
		if m > need {
			need, what = m, fmt.Sprintf("at least %s for the mosaic (-mosaic=false skips it)", gib(m))
		}
	}
	if need > avail {
		return fmt.Errorf("not enough memory: the run needs %s, but %s is available", what, gib(avail))
	}
	return nil
}

func writeOutputs(ctx context.Context, c *config, src *tileio.TileSet, chans []mosaicChannel, res *stitching.Result, names outNames, outs *outfile.Batch, bars *bars, stdout io.Writer) error {
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

// mosaicTile is the tile side of the out-of-core mosaic's temporary
// bands and of the OME-TIFF by default (-tile-size).
const mosaicTile = 512

// streamMemory is what the OME-TIFF writer holds for a w-pixel-wide
// mosaic in tile x tile tiles: three runs of up to 4 MiB (twice that
// compressed) and a row of tiles of each reduced level (about one
// full-resolution row of tiles in all).
func streamMemory(w, tile int) int64 {
	run := min(int64(4<<20), 2*int64(tile)*int64(tile)*int64((w+tile-1)/tile))
	return 6*run + 2*int64(w)*int64(tile)
}

// defaultMem is -mem's default: a quarter of the available memory, or
// 1 GiB when unknown.
func defaultMem(avail int64) int64 {
	if avail <= 0 {
		return 1 << 30
	}
	return max(avail/4, 1)
}

// mosaicPlanned is how a mosaic is composed.
type mosaicPlanned struct {
	w, h     int
	inMemory int64 // what composing in memory and the preview need
	tiled    bool  // out of core, into a tiled BigTIFF
	need     int64 // what the chosen path needs (tiled: with the smallest cache)
	cache    int64 // tiled: the tile caches' budget, all together
}

// inMemoryRows is the tallest mosaic composed in memory: a taller one is
// streamed band by band whatever -mem allows, since the streamed writer
// overlaps composing, reducing and writing and is the faster path
// (measured, 16 cores: the paper grid's 74089 x 39440 mosaic in 8.3 s
// streamed, 26.2 s in memory; 10169 x 5730 in 5.6-6.5 s against
// 6.9-7.6 s on 2 cores; a mosaic of one band costs the same either way).
const inMemoryRows = 2 * mosaicTile

// planMosaic chooses the in-memory path when the mosaic, with the
// OME-TIFF writer's buffers for tile x tile tiles, fits in mem bytes and
// is at most inMemoryRows tall, else the tiled path, whose tile caches
// get what mem leaves after its fixed needs (at least 4 tiles, at most
// what composing in memory needs). par tiles are loaded ahead of the
// composing (see prefetchMemory). Both write the same OME-TIFF (a BigTIFF, so no
// side or size limit of classic TIFF applies).
func planMosaic(slots []compose.Slot, blend compose.Blend, mem int64, par, tile int) mosaicPlanned {
	b := mosaicBounds(slots)
	p := mosaicPlanned{w: b.Max.X, h: b.Max.Y}
	p.inMemory = mosaicMemory(slots, blend) + prefetchMemory(slots, par) + streamMemory(p.w, tile)
	pixels := 2 * int64(p.w) * int64(p.h)
	p.need = p.inMemory
	if p.inMemory <= mem && p.h <= inMemoryRows {
		return p
	}
	p.tiled = true
	// Two bands (ComposeTiled's bytes and values; ComposeBigTIFF composes
	// one while it writes the other), the tiles meeting a band
	// (MemoryEstimate's share beyond the mosaic, doubled for the taller
	// band), the preview's level and reduction, the BigTIFF writer's tiles.
	tileBytes := int64(2 * mosaicTile * mosaicTile)
	band := int64(mosaicTile)
	est := compose.MemoryEstimate(slots, blend)
	level := int64(2 * (2 * previewSide) * (2 * previewSide)) // longer side < 2*previewSide
	fixed := 6*int64(p.w)*band + 2*max(0, est-pixels) + (p.inMemory - est) + level + 8*tileBytes + streamMemory(p.w, tile)
	p.cache = max(min(mem-fixed, p.inMemory), 4*tileBytes)
	p.need = fixed + 4*tileBytes
	return p
}

// mosaicChannel is one channel of the mosaic: its tiles and their
// illumination correction (nil or the identity: none), or estimate to
// have it estimated from the channel's own tiles when it is composed.
type mosaicChannel struct {
	src      *tileio.TileSet
	ff       *align.FlatField
	estimate bool
}

// mosaicChannels are the channels of one slice's mosaic, srcs in the
// mosaic's order: the reference channel (the only one without -channels)
// corrected with ff, the correction its registration used; every other
// channel with a correction estimated from its own tiles, as an assembly
// run estimates it, unless the registration used none (ff nil).
func mosaicChannels(c *config, srcs []*tileio.TileSet, ff *align.FlatField) []mosaicChannel {
	chans := make([]mosaicChannel, len(srcs))
	for ch, src := range srcs {
		chans[ch].src = src
		if ch == c.format.ref || len(srcs) == 1 {
			chans[ch].ff = ff
		} else {
			chans[ch].estimate = ff != nil
		}
	}
	return chans
}

// writeMosaic composes the tiles of each channel at slots, corrected with
// its flat field, and adds the mosaic and its preview (of the first
// channel) to outs: in memory, one channel at a time, when it fits in
// -mem, else out of core (see planMosaic).
func writeMosaic(ctx context.Context, c *config, chans []mosaicChannel, slots []compose.Slot, names outNames, outs *outfile.Batch, bars *bars, stdout io.Writer) error {
	mem := c.memBudget // set by checkMemory
	avail := availableMemory()
	limit := mem
	if avail > 0 {
		limit = min(limit, avail)
	}
	plan := planMosaic(slots, c.blend, limit, c.workers, c.format.tileSize)
	if avail > 0 && plan.need > avail {
		if err := outs.Commit(); err != nil {
			return err
		}
		return fmt.Errorf("not enough memory for the %d x %d mosaic: it needs about %s, but %s is available; the positions are written to %s (-mosaic=false skips the mosaic)",
			plan.w, plan.h, gib(plan.need), gib(avail), c.out)
	}
	t0 := time.Now()
	loaded, total := 0, len(slots)*len(chans)
	// channel returns the loader of channel ch's tiles: decoded and
	// corrected ahead of the sweep, -workers at a time, progress counted
	// as the sweep takes them; stop ends its prefetching.
	channel := func(ch int) (load func(int) (*image.Gray16, error), stop func(), err error) {
		src, ff := chans[ch].src, chans[ch].ff
		if chans[ch].estimate {
			if ff, err = stitching.EstimateFlatField(ctx, src); err != nil {
				return nil, nil, err
			}
		}
		fetch, stop := compose.Prefetch(ctx, slots, func(i int) (*image.Gray16, error) {
			t, err := src.Load(i/c.cols, i%c.cols)
			if err != nil {
				return nil, err
			}
			if ff != nil && !ff.Identity() {
				t = ff.Apply(t) // the same illumination correction the registration used
			}
			return t, nil
		}, c.workers)
		return func(i int) (*image.Gray16, error) {
			t, err := fetch(i)
			if err != nil {
				return nil, err
			}
			loaded++
			bars.set("mosaic", "tiles", loaded, total)
			return t, nil
		}, stop, nil
	}
	if c.format.kind == formatOMEZarr04 {
		// NGFF 0.4's writer builds its levels from a tiled image: the
		// mosaic is composed out of core into one, whatever its size.
		if !plan.tiled {
			plan.cache = plan.inMemory // it fits in -mem: the tiles may stay cached
		}
		fmt.Fprintf(stdout, "mosaic %d x %d: out of core into an %s (-mem %s; tile cache %s)\n",
			plan.w, plan.h, c.format.describe(), gib(mem), gib(plan.cache))
		restore := heapLimit(mem)
		err := writeZarr04(ctx, c, slots, channel, plan, names, outs)
		restore()
		if err != nil {
			return err
		}
	} else if plan.tiled {
		fmt.Fprintf(stdout, "mosaic %d x %d: out of core into a %s (in memory it needs about %s; -mem %s; tile cache %s)\n",
			plan.w, plan.h, c.format.describe(), gib(plan.inMemory), gib(mem), gib(plan.cache))
		// Keep the heap within -mem: without a limit the garbage
		// collector lets it grow to twice what is live.
		restore := heapLimit(mem)
		err := writeTiledMosaic(ctx, c, slots, len(chans), channel, plan, names, outs)
		restore()
		if err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "mosaic %d x %d: in memory (about %s; -mem %s) into a %s\n", plan.w, plan.h, gib(plan.inMemory), gib(mem), c.format.describe())
		// Each channel is composed, then streams through the same writer
		// as the out-of-core path's bands: the same file, byte for byte.
		var preview *image.Gray
		if err := c.format.stage(outs, filepath.Join(c.out, names.mosaic), func(temp string) error {
			return c.format.stream(temp, plan.w, plan.h, names.mosaic, len(chans), func(ch int, out *tiled.BigTIFFStream) error {
				load, stop, err := channel(ch)
				if err != nil {
					return err
				}
				mosaic, err := compose.ComposeFunc(ctx, slots, load, c.blend)
				stop()
				if err != nil {
					return fmt.Errorf("composing the mosaic: %w", err)
				}
				if err := out.WriteRowsBE(0, plan.h, mosaic.Pix, mosaic.Stride); err != nil {
					return fmt.Errorf("writing the mosaic: %w", err)
				}
				if ch == 0 {
					preview = compose.Preview(mosaic, previewSide)
				}
				return nil
			})
		}); err != nil {
			return err
		}
		if err := outs.Add(filepath.Join(c.out, names.preview), func(w io.Writer) error {
			return encodePreview(w, preview)
		}); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "mosaic %d x %d (%s blending) in %v\n", plan.w, plan.h, c.blend, time.Since(t0).Round(time.Millisecond))
	return nil
}

// writeTiledMosaic composes the mosaic band by band (ComposeBigTIFF)
// straight into its tiled pyramidal OME-TIFF, staged through outs (only
// two bands and the reduced levels' pending rows are in memory), and the
// preview from a pyramid level.
func writeTiledMosaic(ctx context.Context, c *config, slots []compose.Slot, nch int,
	channel func(int) (func(int) (*image.Gray16, error), func(), error), plan mosaicPlanned, names outNames, outs *outfile.Batch) error {
	var staged string
	if err := c.format.stage(outs, filepath.Join(c.out, names.mosaic), func(temp string) error {
		staged = temp
		return c.format.stream(temp, plan.w, plan.h, names.mosaic, nch, func(ch int, out *tiled.BigTIFFStream) error {
			load, stop, err := channel(ch)
			if err != nil {
				return err
			}
			defer stop()
			if err := compose.ComposeBigTIFF(ctx, slots, load, c.blend, out); err != nil {
				return fmt.Errorf("composing the mosaic: %w", err)
			}
			return nil
		})
	}); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	prev, err := mosaicPreview(staged, c.format.kind)
	if err != nil {
		return fmt.Errorf("mosaic preview: %w", err)
	}
	return outs.Add(filepath.Join(c.out, names.preview), func(w io.Writer) error { return encodePreview(w, prev) })
}

// writeZarr04 composes the (one-channel) mosaic band by band into a
// temporary tiled image in a folder inside -out (removed on return),
// writes it as an OME-Zarr NGFF 0.4 folder staged through outs, and the
// preview from one of its levels.
func writeZarr04(ctx context.Context, c *config, slots []compose.Slot,
	channel func(int) (func(int) (*image.Gray16, error), func(), error), plan mosaicPlanned, names outNames, outs *outfile.Batch) error {
	tmp, err := os.MkdirTemp(c.out, ".stitch-mosaic-")
	if err != nil {
		return fmt.Errorf("mosaic: %w", err)
	}
	defer os.RemoveAll(tmp)
	tile := c.format.tileSize
	cache := max(plan.cache/2, int64(8*tile*tile))
	im, err := tiled.CreateTemp(tmp, plan.w, plan.h, tile, tile, cache)
	if err != nil {
		return fmt.Errorf("mosaic: %w", err)
	}
	defer im.Close()
	load, stop, err := channel(0)
	if err != nil {
		return err
	}
	err = compose.ComposeTiled(ctx, slots, load, c.blend, im)
	stop()
	if err != nil {
		return fmt.Errorf("composing the mosaic: %w", err)
	}
	var staged string
	if err := outs.AddDir(filepath.Join(c.out, names.mosaic), func(temp string) error {
		staged = temp
		return tiled.WriteOMEZarr(temp, names.mosaic, im, 0, tmp, cache)
	}); err != nil {
		return err
	}
	prev, err := mosaicPreview(staged, formatOMEZarr04)
	if err != nil {
		return fmt.Errorf("mosaic preview: %w", err)
	}
	return outs.Add(filepath.Join(c.out, names.preview), func(w io.Writer) error { return encodePreview(w, prev) })
}

// encodePreview writes a preview as PNG without compression: the
// preview is a quick look beside a mosaic hundreds of times larger, and
// PNG's filtering and deflate took about 0.17 s of every stitch's end for
// a 2000 px preview (a third more bytes than compressed, 2 ms to write).
func encodePreview(w io.Writer, img image.Image) error {
	return (&png.Encoder{CompressionLevel: png.NoCompression}).Encode(w, img)
}

// mosaicPreview makes the preview from the smallest pyramid level of the
// mosaic at path (an OME-TIFF, or an OME-Zarr folder for formatOMEZarr)
// whose longer side is still at least previewSide (the full resolution
// when the mosaic is smaller).
func mosaicPreview(path, kind string) (*image.Gray, error) {
	type level struct{ w, h, tw, th int }
	var (
		levels []level
		read   func(l, tx, ty int, dst []uint16) error
	)
	if kind == formatOMEZarr || kind == formatOMEZarr04 {
		z, err := tiled.OpenOMEZarr(path)
		if err != nil {
			return nil, err
		}
		for _, lv := range z.Levels {
			levels = append(levels, level{lv.W, lv.H, lv.TW, lv.TH})
		}
		read = func(l, tx, ty int, dst []uint16) error {
			px, err := z.ReadChunk(l, tx, ty)
			copy(dst, px)
			return err
		}
	} else {
		t, err := tiled.OpenBigTIFF(path)
		if err != nil {
			return nil, err
		}
		defer t.Close()
		for _, lv := range t.Levels {
			levels = append(levels, level{lv.W, lv.H, lv.TW, lv.TH})
		}
		read = func(l, tx, ty int, dst []uint16) error { return t.ReadTile(l, tiled.Coord{X: tx, Y: ty}, dst) }
	}
	l := 0
	for i, lv := range levels {
		if max(lv.w, lv.h) >= previewSide {
			l = i
		}
	}
	lv := levels[l]
	img := image.NewGray16(image.Rect(0, 0, lv.w, lv.h))
	buf := make([]uint16, lv.tw*lv.th)
	for ty := 0; ty*lv.th < lv.h; ty++ {
		for tx := 0; tx*lv.tw < lv.w; tx++ {
			if err := read(l, tx, ty, buf); err != nil {
				return nil, err
			}
			for y := ty * lv.th; y < min(lv.h, (ty+1)*lv.th); y++ {
				for x := tx * lv.tw; x < min(lv.w, (tx+1)*lv.tw); x++ {
					v := buf[(y-ty*lv.th)*lv.tw+x-tx*lv.tw]
					img.Pix[y*img.Stride+2*x], img.Pix[y*img.Stride+2*x+1] = byte(v>>8), byte(v)
				}
			}
		}
	}
	return compose.Preview(img, previewSide), nil
}

func mosaicBounds(slots []compose.Slot) image.Rectangle {
	var r image.Rectangle
	for _, s := range slots {
		r = r.Union(image.Rect(s.X, s.Y, s.X+s.Width, s.Y+s.Height))
	}
	return r
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
