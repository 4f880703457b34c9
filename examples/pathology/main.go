// Command pathology runs a synthetic whole-slide-image analysis pipeline in
// the spirit of Teodoro et al.'s brain-tumour pipeline: each tile of a slide
// goes through segmentation (red-blood-cell detection, morphological
// opening, reconstruction, area threshold, hole filling, pre-watershed,
// watershed, labelling) and feature computation (intensity, gradient,
// morphometry) — eleven hybrid operations with very different GPU speedups,
// scheduled on CPU cores and (simulated) GPUs by a pats.Manager.
//
// By default it runs the pipeline for real: tiles are generated into a
// region storage (in memory or on disk), each tile is a stage instance of a
// task graph whose pats.Task expands it into its operations, the operations
// run real (small) image kernels on the tile's data regions, and simulated
// units emulate the modelled times of 4K tiles on CPU cores and GPUs. With
// -sim it runs the same configuration in the discrete-event simulator
// instead, and with -experiment it runs every experiment of docs/pats and
// writes the results and figures there:
//
//	go run ./examples/pathology -policy pats -window 16 -gpus 3 -cpus 9
//	go run ./examples/pathology -sim -policy fcfs -locality
//	go run ./examples/pathology -experiment -out docs/pats
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"time"

	"github.com/gohtgs/htgs/pats"
	"github.com/gohtgs/htgs/region"
)

// options are the command-line settings.
type options struct {
	experiment bool
	out        string
	sim        bool
	policy     string
	window     int
	cpus, gpus int
	locality   bool
	ti         float64
	prefetch   bool
	learn      bool
	depthFirst bool
	tiles      int
	tileSize   int
	scale      float64
	storage    string
	dir        string
	seed       uint64
	quick      bool
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("pathology", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&o.experiment, "experiment", false, "run every experiment and write results.md and SVG figures to -out")
	fs.StringVar(&o.out, "out", "docs/pats", "output directory of -experiment")
	fs.BoolVar(&o.quick, "quick", false, "with -experiment: one small image and no real-time check (for a fast look)")
	fs.BoolVar(&o.sim, "sim", false, "run the configuration in the discrete-event simulator (4K tiles, virtual time)")
	fs.StringVar(&o.policy, "policy", "pats", "scheduling policy: fcfs or pats")
	fs.IntVar(&o.window, "window", 16, "stage instances (tiles) in progress at a time; 0 = all")
	fs.IntVar(&o.cpus, "cpus", 9, "simulated CPU cores")
	fs.IntVar(&o.gpus, "gpus", 3, "simulated GPUs")
	fs.BoolVar(&o.locality, "locality", false, "data-locality-conscious assignment")
	fs.Float64Var(&o.ti, "ti", 0.16, "transfer impact for -locality, in [0,1]")
	fs.BoolVar(&o.prefetch, "prefetch", false, "pipeline GPU transfers and stage inputs ahead")
	fs.BoolVar(&o.learn, "learn", false, "learn speedups online (time statistics) instead of using the given estimates")
	fs.BoolVar(&o.depthFirst, "depthfirst", false, "prefer finishing started tiles (depth-first)")
	fs.IntVar(&o.tiles, "tiles", 48, "number of tiles")
	fs.IntVar(&o.tileSize, "tile-size", 128, "tile edge in pixels for the real run's kernels")
	fs.Float64Var(&o.scale, "scale", 0.05, "real run: wall time per modelled time (0.05: a modelled second takes 50 ms)")
	fs.StringVar(&o.storage, "storage", "memory", "real run: region storage, memory or disk")
	fs.StringVar(&o.dir, "dir", "", "real run: directory of the disk storage (default: a temporary directory)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the synthetic tiles")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	return o, nil
}

func (o *options) config() (pats.Config, error) {
	p, err := pats.ParsePolicy(o.policy)
	if err != nil {
		return pats.Config{}, err
	}
	return pats.Config{Policy: p, Window: o.window, Locality: o.locality, TransferImpact: o.ti,
		Prefetch: o.prefetch, Learn: o.learn, DepthFirst: o.depthFirst}, nil
}

func (o *options) machine() pats.Machine {
	m := referenceMachine()
	m.CPUs, m.GPUs = o.cpus, o.gpus
	return m
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "pathology:", err)
		}
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if o.experiment {
		e := &experiments{images: defaultImages(), machine: o.machine(), window: 24, realTiles: 60, realScale: 0.05, robustImages: 10, robustTiles: 120, out: o.out, log: stderr}
		if o.quick {
			e.images, e.realTiles = []image{{"quick", 60, 1}}, 0
		}
		res, err := e.run(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "PATS over FCFS: %s; sensitivity loss at 50%%/60%%: %+.1f%%/%+.1f%%; FCFS+DL gain %.3fx, PATS+DL %.3fx, +prefetch %.3fx\n",
			fmtRatios(res.patsOverFCFS), 100*res.lossAt[50], 100*res.lossAt[60], res.fcfsDLGain, res.patsDLGain, res.patsDLPFGain)
		if o.out != "" {
			fmt.Fprintf(stdout, "results and figures written to %s\n", o.out)
		}
		return nil
	}
	cfg, err := o.config()
	if err != nil {
		return err
	}
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	w := newWorkload(o.tiles, o.seed)
	est := w.givenSpeedups()
	if o.learn {
		est = nil
	}
	if o.sim {
		r, err := pats.Simulate(cfg, o.machine(), w.flows(est))
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "simulated %d 4K tiles on %d CPU cores + %d GPUs: %.2f tiles/s\n%s", o.tiles, o.cpus, o.gpus, tilesPerSecond(o.tiles, r), r)
		return nil
	}
	return realRun(ctx, o, cfg, w, est, stdout)
}

func realRun(ctx context.Context, o *options, cfg pats.Config, w *workload, est map[string]float64, stdout io.Writer) error {
	var in, out region.Storage
	switch o.storage {
	case "memory":
		in, out = region.NewMemory(), region.NewMemory()
	case "disk":
		dir := o.dir
		if dir == "" {
			d, err := os.MkdirTemp("", "pathology-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(d)
			dir = d
		}
		d, err := region.NewDisk(dir)
		if err != nil {
			return err
		}
		in, out = d, d
	default:
		return fmt.Errorf("unknown storage %q (want memory or disk)", o.storage)
	}
	s, err := newSlide(ctx, o.tiles, o.tileSize, o.seed, in, out)
	if err != nil {
		return err
	}
	start := time.Now()
	results, rep, err := runReal(ctx, s, w, cfg, o.machine().Units(o.scale), est)
	if err != nil {
		return err
	}
	wall := time.Since(start)
	nuclei := 0
	for _, r := range results {
		nuclei += r.nuclei
	}
	fmt.Fprintf(stdout, "processed %d tiles (%dx%d px, %s storage) on %d CPU cores + %d simulated GPUs in %v: %d nuclei\n",
		o.tiles, o.tileSize, o.tileSize, o.storage, o.cpus, o.gpus, wall.Round(time.Millisecond), nuclei)
	simRep, err := pats.Simulate(cfg, o.machine(), w.flows(est))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "modelled time %.2fs (x%g = %v); the simulator predicts %.2fs (x%g = %v)\n%s",
		rep.Makespan.Seconds()/o.scale, o.scale, rep.Makespan.Round(time.Millisecond),
		simRep.Makespan.Seconds(), o.scale, time.Duration(float64(simRep.Makespan)*o.scale).Round(time.Millisecond), rep)
	return nil
}
