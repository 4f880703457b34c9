// Command stitch stitches a grid of overlapping microscope tiles with the
// task-graph implementation of NIST MIST's algorithm.
//
// With no arguments it runs a demo: it generates a realistic synthetic grid
// (8 x 10 tiles of 512 x 384) in a temporary folder, stitches it, prints the
// accuracy against the generator's ground truth and where the outputs are.
//
//	stitch -dir DIR -pattern 'img_r{rrr}_c{ccc}.tif' -rows R -cols C [-start 1] -out OUT
//	       [-overlap PCT] [-blend overlay|average|linear] [-workers N] [-profile]
//	stitch -generate DIR [-rows R -cols C -tile 512x384 -level realistic -seed 1]
//
// OUT receives global-positions.txt (MIST's format), relative-positions.txt
// (after optimization) and relative-positions-no-optimization.txt, mosaic.tif
// (16-bit), mosaic-preview.png and, with -profile, each phase's graph
// (DOT, and SVG when Graphviz is installed) and timeline (Chrome trace JSON).
// When DIR holds a truth.csv written by the generator, the accuracy against
// it is printed too.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"image"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/internal/progress"
	"github.com/gohtgs/htgs/stitching"
	"github.com/gohtgs/htgs/stitching/compose"
	"github.com/gohtgs/htgs/stitching/synth"
)

type config struct {
	dir, pattern, out     string
	rows, cols, start     int
	overlap               float64
	blend                 compose.Blend
	workers               int
	profile, showProgress bool
	mosaic                bool
	gpu                   bool

	generate string
	tile     string
	level    string
	seed     uint64
}

// usageError is a mistake in the command line (exit status 2).
type usageError struct{ error }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	var ue usageError
	switch {
	case err == nil:
	case errors.As(err, &ue), errors.Is(err, flag.ErrHelp):
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "stitch:", err)
		}
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "stitch:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	c := &config{blend: compose.Linear}
	fs := flag.NewFlagSet("stitch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.dir, "dir", "", "folder holding the tiles")
	fs.StringVar(&c.pattern, "pattern", "img_r{rrr}_c{ccc}.tif", "tile file names: {r} {rr} {rrr} row, {c} {cc} {ccc} column, {i} {iii} row-major index")
	fs.IntVar(&c.rows, "rows", 0, "grid rows")
	fs.IntVar(&c.cols, "cols", 0, "grid columns")
	fs.IntVar(&c.start, "start", 1, "number of the first row/column in file names (0 or 1)")
	fs.StringVar(&c.out, "out", "", "output folder (created if needed)")
	fs.Float64Var(&c.overlap, "overlap", 0, "expected overlap between tiles in percent (0: estimate it)")
	fs.TextVar(&c.blend, "blend", compose.Linear, "mosaic blending: overlay, average or linear")
	fs.IntVar(&c.workers, "workers", runtime.GOMAXPROCS(0), "copies of each compute task")
	fs.BoolVar(&c.profile, "profile", false, "write each phase's graph (DOT/SVG) and timeline (trace JSON) to -out")
	fs.BoolVar(&c.showProgress, "progress", false, "draw the progress bar even when stderr is not a terminal")
	fs.BoolVar(&c.mosaic, "mosaic", true, "compose mosaic.tif and mosaic-preview.png")
	fs.BoolVar(&c.gpu, "gpu", false, "run FFT and PCIAM on the GPUs, CCF on the CPU (needs a build with -tags cuda)")
	fs.StringVar(&c.generate, "generate", "", "generate a synthetic grid into this folder instead of stitching")
	fs.StringVar(&c.tile, "tile", "512x384", "tile size for -generate, WxH")
	fs.StringVar(&c.level, "level", "realistic", "difficulty for -generate: easy, realistic or hard")
	fs.Uint64Var(&c.seed, "seed", 1, "random seed for -generate")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage:\n  stitch                      (demo on a generated grid)\n  stitch -dir DIR -rows R -cols C -out OUT [flags]\n  stitch -generate DIR [-rows R -cols C -tile WxH -level L -seed S]\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usageError{err}
	}
	if fs.NArg() > 0 {
		return nil, usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	if c.start != 0 && c.start != 1 {
		return nil, usageError{fmt.Errorf("-start %d: must be 0 or 1", c.start)}
	}
	if c.workers < 1 {
		return nil, usageError{fmt.Errorf("-workers %d: must be at least 1", c.workers)}
	}
	if c.overlap < 0 || c.overlap >= 100 || math.IsNaN(c.overlap) {
		return nil, usageError{fmt.Errorf("-overlap %v: must be a percentage in [0, 100)", c.overlap)}
	}
	return c, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if c.gpu {
		if err := stitching.CheckGPU(); err != nil {
			return fmt.Errorf("-gpu: %w", err)
		}
	}
	switch {
	case c.generate != "":
		return generate(ctx, c, stdout)
	case c.dir == "":
		if c.rows != 0 || c.cols != 0 || c.out != "" {
			return usageError{errors.New("-dir is required to stitch (run without flags for the demo)")}
		}
		return demo(ctx, c, stdout, stderr)
	}
	if c.rows < 1 || c.cols < 1 {
		return usageError{fmt.Errorf("-rows and -cols must be at least 1 (got %d x %d)", c.rows, c.cols)}
	}
	if c.out == "" {
		return usageError{errors.New("-out is required")}
	}
	return stitch(ctx, c, stdout, stderr)
}

func gridConfig(c *config) (synth.Config, error) {
	cfg := synth.DefaultConfig()
	lvl, err := synth.ParseLevel(c.level)
	if err != nil {
		return cfg, usageError{err}
	}
	cfg = synth.ConfigFor(lvl)
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
		return cfg, usageError{fmt.Errorf("-tile %q: want WIDTHxHEIGHT such as 512x384", c.tile)}
	}
	cfg.TileWidth, cfg.TileHeight, cfg.Seed = tw, th, c.seed
	if err := cfg.Validate(); err != nil {
		return cfg, usageError{err}
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
	fmt.Fprintf(stdout, "stitch with: go run ./examples/stitch -dir %s -rows %d -cols %d -out OUT\n", c.generate, cfg.Rows, cfg.Cols)
	return nil
}

func demo(ctx context.Context, c *config, stdout, stderr io.Writer) error {
	tmp, err := os.MkdirTemp("", "htgs-stitch-demo-")
	if err != nil {
		return err
	}
	c.generate = filepath.Join(tmp, "tiles")
	fmt.Fprintln(stdout, "demo: no -dir given, so stitching a generated grid")
	if err := generate(ctx, c, stdout); err != nil {
		return err
	}
	cfg, _ := gridConfig(c)
	c.dir, c.rows, c.cols, c.out = c.generate, cfg.Rows, cfg.Cols, filepath.Join(tmp, "out")
	return stitch(ctx, c, stdout, stderr)
}

func stitch(ctx context.Context, c *config, stdout, stderr io.Writer) error {
	pat, err := stitching.ParsePattern(c.pattern, c.start)
	if err != nil {
		return usageError{err}
	}
	src, err := stitching.OpenTileSet(c.dir, pat, c.rows, c.cols)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	w, h := src.TileSize()
	where := ""
	if c.gpu {
		where = ", FFT and PCIAM on the GPUs"
	}
	fmt.Fprintf(stdout, "stitching %d x %d tiles of %d x %d from %s with %d workers%s\n", c.rows, c.cols, w, h, c.dir, c.workers, where)

	pairs := int64(len(stitching.Pairs(c.rows, c.cols)))
	bars := map[string]*progress.Bar{}
	gopt := stitching.GraphOptions{
		Workers: c.workers,
		GPU:     c.gpu,
		Progress: func(phase string, done, total int) {
			b := bars[phase]
			if b == nil {
				b = progress.New(stderr, fmt.Sprintf("%-12s", phase), pairs, c.showProgress)
				bars[phase] = b
			}
			b.Set(int64(done))
			if done == total {
				b.Finish()
			}
		},
	}
	if c.profile {
		gopt.Start = append(gopt.Start, graph.WithTrace())
		gopt.Observe = func(phase string, r stitching.Run) {
			if err := writeProfile(c.out, phase, r); err != nil {
				fmt.Fprintln(stderr, "stitch: profile:", err)
			}
		}
	}
	opt := stitching.Options{Overlap: c.overlap}
	t0 := time.Now()
	res, err := stitching.Stitch(ctx, src, opt, gopt)
	if err != nil {
		return err
	}
	elapsed := time.Since(t0)
	fmt.Fprintf(stdout, "stitched in %v (%.1f tiles/s); overlap %.2f%% horizontal, %.2f%% vertical; repeatability %d px\n",
		elapsed.Round(time.Millisecond), float64(c.rows*c.cols)/elapsed.Seconds(),
		res.Model.West.Overlap, res.Model.North.Overlap, res.Model.Repeatability)

	if err := writeOutputs(ctx, c, src, res, stdout); err != nil {
		return err
	}
	if truth, err := synth.ReadTruth(filepath.Join(c.dir, synth.TruthFile)); err == nil {
		if err := report(stdout, res, truth); err != nil {
			return err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintln(stderr, "stitch: ignoring truth.csv:", err)
	}
	fmt.Fprintf(stdout, "outputs in %s\n", c.out)
	return nil
}

func writeFile(path string, write func(io.Writer) error) error {
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

func writeOutputs(ctx context.Context, c *config, src *stitching.TileSet, res *stitching.Result, stdout io.Writer) error {
	if err := writeFile(filepath.Join(c.out, "global-positions.txt"), func(w io.Writer) error {
		return stitching.WriteGlobalPositions(w, res.GlobalPositions())
	}); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(c.out, "relative-positions.txt"), func(w io.Writer) error {
		return stitching.WriteRelativePositions(w, res.RelativePositions(true))
	}); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(c.out, "relative-positions-no-optimization.txt"), func(w io.Writer) error {
		return stitching.WriteRelativePositions(w, res.RelativePositions(false))
	}); err != nil {
		return err
	}
	if !c.mosaic {
		return nil
	}
	w, h := src.TileSize()
	slots := make([]compose.Slot, len(res.Positions))
	for i, p := range res.Positions {
		slots[i] = compose.Slot{X: p.X, Y: p.Y, Width: w, Height: h}
	}
	t0 := time.Now()
	mosaic, err := compose.ComposeFunc(ctx, slots, func(i int) (*image.Gray16, error) {
		t, err := src.Load(i/c.cols, i%c.cols)
		if err != nil {
			return nil, err
		}
		if ff := res.FlatField; ff != nil && !ff.Identity() {
			t = ff.Apply(t) // the same illumination correction the registration used
		}
		return t, nil
	}, c.blend)
	if err != nil {
		return fmt.Errorf("composing the mosaic: %w", err)
	}
	if err := compose.WriteTIFF(filepath.Join(c.out, "mosaic.tif"), mosaic); err != nil {
		return err
	}
	if err := compose.WritePNG(filepath.Join(c.out, "mosaic-preview.png"), compose.Preview(mosaic, 2000)); err != nil {
		return err
	}
	b := mosaic.Bounds()
	fmt.Fprintf(stdout, "mosaic %d x %d (%s blending) in %v\n", b.Dx(), b.Dy(), c.blend, time.Since(t0).Round(time.Millisecond))
	return nil
}

func report(stdout io.Writer, res *stitching.Result, truth []synth.TruthEntry) error {
	if len(truth) != res.Rows*res.Cols {
		return fmt.Errorf("truth.csv has %d tiles, the grid %d", len(truth), res.Rows*res.Cols)
	}
	tx, ty := make([]int, len(truth)), make([]int, len(truth))
	for _, e := range truth {
		if e.Row < 0 || e.Row >= res.Rows || e.Col < 0 || e.Col >= res.Cols {
			return fmt.Errorf("truth.csv: tile (%d, %d) outside the grid", e.Row, e.Col)
		}
		tx[e.Row*res.Cols+e.Col], ty[e.Row*res.Cols+e.Col] = e.X, e.Y
	}
	a := stitching.Evaluate(res, tx, ty)
	fmt.Fprintf(stdout, "accuracy against truth.csv: %d of %d pairs exact after optimization (%.1f%%; %.1f%% before), worst tile %d px off\n",
		a.ExactOptimal, a.Pairs, 100*a.FracOptimal, 100*a.FracRelative, a.MaxTileError)
	return nil
}

func writeProfile(dir, phase string, r stitching.Run) error {
	var dot bytes.Buffer
	if err := r.WriteDOT(&dot, graph.DOTOptions{Color: graph.ColorCompute}); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, phase+".dot"), dot.Bytes(), 0o644); err != nil {
		return err
	}
	if path, err := exec.LookPath("dot"); err == nil {
		cmd := exec.Command(path, "-Tsvg", "-o", filepath.Join(dir, phase+".svg"))
		cmd.Stdin = &dot
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("dot -Tsvg: %v: %s", err, out)
		}
	}
	return writeFile(filepath.Join(dir, phase+"-trace.json"), r.WriteTrace)
}
