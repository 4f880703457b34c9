// Command pathology runs a synthetic whole-slide-image analysis pipeline in
// the spirit of Teodoro et al.'s brain-tumour pipeline: each tile of a slide
// goes through segmentation (red-blood-cell detection, morphological
// opening, reconstruction, area threshold, hole filling, pre-watershed,
// watershed, labelling) and feature computation (intensity, gradient,
// morphometry) — eleven hybrid operations with very different GPU speedups,
// scheduled on simulated CPU cores and GPUs by a pats.Manager. The
// pipeline, its operations, their CUDA kernels and the experiment on real
// hardware are package github.com/gohtgs/htgs/pathology; this program is
// their flags, the experiments of docs/pats and the cluster wiring.
//
// Usage:
//
//	pathology [flags]                           real run (the default)
//	pathology -sim [flags]                      discrete-event simulation
//	pathology -experiment [-quick] [-out DIR]   every experiment of docs/pats
//	pathology -hardware [-out DIR]              the experiment on this machine's cores and GPUs
//	pathology -cpu-ops [-tile-size N]           each operation timed on one core
//	pathology -cluster N [flags]                real run on N local worker processes
//	pathology -worker -nats URL [node flags]    a worker joining a -cluster run's server
//
// By default it runs the pipeline for real: tiles are generated into a
// region storage (in memory or on disk), each tile is a stage instance of a
// task graph whose pats.Task expands it into its operations, the operations
// run real (small) image kernels on the tile's data regions, and simulated
// units emulate the modelled times of 4K tiles on CPU cores and GPUs. With
// -profile DIR the real run also writes the task graph's profile into DIR
// (pathology.dot, pathology.svg when Graphviz is installed,
// pathology-trace.json and pathology-stats.json), as the other programs do.
// With -dynamic the features are a stage created at run time: a tile's flow
// spawns its features flow only if segmentation found nuclei
// (pats.Flow.Spawn).
//
// After a tile's flow, two graph stages take its result: one traces each
// nucleus's outer boundary from the label image into the slide's polygon
// set slide::Nuclei (a region.PolygonSet, the tile its partition,
// committed to the output storage), the other reads the nuclei's feature
// rows; a bookkeeper's keyed join (bookkeeper.NewJoinN, by tile) puts the
// two parts of a tile together. -nuclei FILE writes the nuclei, polygons
// with their features, as GeoJSON; -roi x0,y0,x1,y1 asks the stored set
// which nuclei intersect a box (a ROI query).
//
// With -cluster N the real run's stage instances run on worker processes
// (package cluster): it runs a NATS server on 127.0.0.1 (the nats-server
// executable of -nats-server, found in $PATH by default) and N
// copies of itself with -worker, each a node with the -cpus and -gpus
// simulated units and the scheduling flags of the run, running -window
// tiles at a time on its own pats.Manager. The slide is written into the
// cluster's region storage (cluster.Regions); a worker reads its tile's
// ROI from it and writes the labels, feature rows and nuclei polygons back,
// and the run reads them from there. It prints each worker's progress and
// work, and the same nuclei, ROI answer and GeoJSON as a run in one
// process. The server's token reaches the workers through the environment
// ($HTGS_NATS_TOKEN), never their command line. A worker process that dies
// is reported (name, pid, exit status) and restarted (-restart), and the
// tiles it held go to the others after 5 s; the run fails only when no
// worker has served for -worker-timeout. The workers are stopped (their
// standard input closed, then SIGKILL) when the run ends, fails or is
// interrupted. With
// -worker -nats URL the program is such a worker, joining the server at
// URL (the token from $HTGS_NATS_TOKEN or the URL) until SIGINT or SIGTERM,
// or until the server has been unreachable for about five seconds.
//
// With -sim it runs the same configuration in the discrete-event simulator
// instead. With -experiment it runs every experiment and writes results.md
// and the SVG figures into the folder -out names; with no -out, into a new
// temporary folder, whose path it prints. It never writes into the source
// tree unless told to: the committed results in docs/pats were made with
// an explicit -out:
//
//	go run ./examples/pathology -policy pats -window 16 -gpus 3 -cpus 9
//	go run ./examples/pathology -sim -policy fcfs -locality
//	go run ./examples/pathology -experiment -out docs/pats
//
// With -hardware (in a build with -tags cuda, on a machine with CUDA GPUs)
// it runs the experiment on real hardware: 4K x 4K tiles, one CPU core
// unit per core left after one per GPU, and a pats.DeviceUnit per GPU
// running the CUDA kernels of pathology/kernels/pathology.cu for the
// eleven operations (each kernel computes the CPU's definition), on 96
// tiles unless -tiles says otherwise. It first times every operation on
// one core and one GPU, checking each GPU output against the CPU's, and on
// every core at once
// (the CPU costs under load, fitted per operation as a line in each
// tile's dark-pixel share, so that each tile gets its own predicted cost;
// see package pathology), then runs FCFS, PATS (FinishAware), PATS with
// locality and prefetch, with learned speedups, with 50%-wrong estimates,
// and PATS by speedup order only (-order-only=false skips it), and prints
// tiles/s, the share of each operation run on the GPU, the simulator's
// prediction from the predicted costs and its replay of each run's own op
// times, and each run's CPU time against the prediction (-out DIR also
// writes them to DIR/hardware.md). -host-gpus N poses host memory as N
// GPUs instead, running Go mirrors of the kernels, for machines without
// one.
//
// With -cpu-ops it times each operation on one core (GOMAXPROCS 1, a
// locked thread) on a generated tile of -tile-size pixels (4096 unless
// given): a warm-up run, then the median of 3, one line per operation,
// exactly "op NAME: MS ms" (-cpu-time: the thread's CPU time instead of
// the wall clock, for a loaded machine). With -out DIR it also writes the tile and the
// operations' inputs as .npy files, for pathology/testdata/opencv_ops.py, which does
// the same operations with OpenCV on one thread.
//
// Elsewhere the CPU cores and GPUs are simulated, so the transfer counts and volumes
// and the peak host and GPU memory it reports are modelled (from the sizes
// of 4K tiles and a modelled host-GPU link), not measured. Speedups that
// are not known, such as a learned speedup of an operation timed on one
// kind of unit only, print as n/a.
//
// Every output (-nuclei, the -profile files, -out's files) is checked
// before the work starts: a file name, not a folder, in a folder that can
// be written; the temporary files that killed runs left beside them are
// removed first, each named on stderr.
//
// The exit status is 0 on success, 1 when the run fails and 2 for bad
// usage.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gohtgs/htgs/examples/internal/cli"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/internal/natsconn"
	"github.com/gohtgs/htgs/internal/outfile"
	"github.com/gohtgs/htgs/pathology"
	"github.com/gohtgs/htgs/pats"
	"github.com/gohtgs/htgs/region"
)

// prog is the program's name in messages.
const prog = "pathology"

// options are the command-line settings.
type options struct {
	experiment bool
	out        string
	profile    string
	httpAddr   string
	httpWait   bool
	sim        bool
	policy     string
	window     int
	cpus, gpus int
	locality   bool
	ti         float64
	prefetch   bool
	learn      bool
	depthFirst bool
	dynamic    bool
	tiles      int
	tileSize   int
	scale      float64
	storage    string
	dir        string
	seed       uint64
	quick      bool
	hardware   bool
	cpuOps     bool
	cpuTime    bool
	hostGPUs   int
	orderOnly  bool
	goMemory   bool
	firstUse   bool
	syncUp     bool
	storeCores bool
	serialOut  bool
	hwConfigs  string
	nucleiOut  string
	roi        string
	roiBox     region.Box
	clusterN   int
	worker     bool
	natsURL    string
	workerName string
	cl         clusterFlags    // -restart, -worker-timeout (cluster.go)
	set        map[string]bool // flags given on the command line
}

// flagSet declares the flags into o.
func flagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	fs.BoolVar(&o.experiment, "experiment", false, "run every experiment and write results.md and SVG figures into -out")
	fs.StringVar(&o.out, "out", "", "with -experiment: output `folder` (default: a new temporary folder, printed)")
	fs.BoolVar(&o.quick, "quick", false, "with -experiment: one small image and no real-time check (for a fast look)")
	fs.StringVar(&o.profile, "profile", "", "real run: write the task graph's DOT, SVG, trace and statistics into `DIR`")
	fs.StringVar(&o.httpAddr, "http", "", "real run: "+cli.HTTPUsage)
	fs.BoolVar(&o.httpWait, "http-wait", false, cli.HTTPWaitUsage)
	fs.BoolVar(&o.sim, "sim", false, "run the configuration in the discrete-event simulator (4K tiles, virtual time)")
	fs.StringVar(&o.policy, "policy", "pats", "scheduling `policy`: fcfs or pats")
	fs.IntVar(&o.window, "window", 16, "stage instances (tiles) in progress at a time; 0 = all")
	fs.IntVar(&o.cpus, "cpus", 9, "simulated CPU cores (with -hardware: real ones, default all but one per GPU)")
	fs.IntVar(&o.gpus, "gpus", 3, "simulated GPUs (with -hardware: at most this many CUDA GPUs, default all)")
	fs.BoolVar(&o.locality, "locality", false, "data-locality-conscious assignment")
	fs.Float64Var(&o.ti, "ti", 0.16, "transfer impact for -locality, in [0,1]")
	fs.BoolVar(&o.prefetch, "prefetch", false, "pipeline GPU transfers and stage inputs ahead")
	fs.BoolVar(&o.learn, "learn", false, "learn speedups online (time statistics) instead of using the given estimates")
	fs.BoolVar(&o.depthFirst, "depthfirst", false, "prefer finishing started tiles (depth-first)")
	fs.BoolVar(&o.dynamic, "dynamic", false, "features as a stage created at run time: a flow spawned only for tiles where segmentation found nuclei")
	fs.IntVar(&o.tiles, "tiles", 48, "number of tiles")
	fs.IntVar(&o.tileSize, "tile-size", 128, "tile edge in `pixels` for the real run's kernels (with -hardware: default 4096)")
	fs.Float64Var(&o.scale, "scale", 0.05, "real run: wall time per modelled time (0.05: a modelled second takes 50 ms)")
	fs.StringVar(&o.storage, "storage", "memory", "real run: region `storage`, memory or disk")
	fs.StringVar(&o.dir, "dir", "", "real run: `folder` of the disk storage (default: a temporary folder)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the synthetic tiles")
	fs.StringVar(&o.nucleiOut, "nuclei", "", "real run: write the nuclei (polygons and features) as GeoJSON into `FILE`")
	fs.StringVar(&o.roi, "roi", "", "real run: report the nuclei whose polygons intersect the box `x0,y0,x1,y1` (slide pixels, a ROI query)")
	fs.BoolVar(&o.hardware, "hardware", false, "run the experiment on this machine's CPU cores and CUDA GPUs (4K tiles; needs a -tags cuda build)")
	fs.BoolVar(&o.cpuOps, "cpu-ops", false, "time each operation on one core on a generated tile of -tile-size pixels (default 4096) and print 'op NAME: MS ms' lines; -out DIR also writes the tile and the operations' inputs as .npy files")
	fs.BoolVar(&o.cpuTime, "cpu-time", false, "with -cpu-ops: time by the thread's CPU time instead of the wall clock (Linux)")
	fs.IntVar(&o.clusterN, "cluster", 0, "real run on `N` worker processes: run a NATS server (-nats-server) and N copies of this program with -worker, which run the tiles' stage instances")
	fs.BoolVar(&o.worker, "worker", false, "serve tiles to -cluster runs: join the server -nats names (token in $"+natsconn.EnvToken+" or the URL) until SIGINT, SIGTERM or the server's end")
	fs.StringVar(&o.natsURL, "nats", "", "with -worker: the NATS server's `URL`")
	fs.StringVar(&o.workerName, "name", "", "with -worker: the worker's `name` (default: host-pid)")
	addClusterFlags(fs, o)
	fs.BoolVar(&o.orderOnly, "order-only", true, "with -hardware: also run PATS by speedup order only (false: skip it, a shorter run)")
	fs.StringVar(&o.hwConfigs, "hw-configs", "", "with -hardware: the configurations to run, in order, repeats allowed (comma-separated from "+strings.Join(pathology.HardwareConfigs(), ", ")+"; default fcfs to wrong50, and order with -order-only; dl,wrong25,wrong50,wrong75,wrong100 is the sensitivity sweep)")
	fs.BoolVar(&o.firstUse, "stage-on-first-use", false, "with -hardware: a tile's RGB is staged from storage by the worker of its first reader (a GPU's too) instead of in the background from the tile's admission (prefetch configurations stage from admission either way)")
	fs.BoolVar(&o.syncUp, "sync-uploads", false, "with -hardware: run a prefetching GPU worker as an upload, a compute and a download goroutine, each waiting for its copies or kernels (the earlier worker, for comparison), instead of one goroutine that queues its copies on the GPU's streams")
	fs.BoolVar(&o.serialOut, "serial-commits", false, "with -hardware: the output storage writes one tile's outputs at a time (as before the eleventh session), and the simulator models it, instead of writing the completed tiles' disjoint boxes at the same time")
	fs.BoolVar(&o.storeCores, "storage-on-cores", false, "with -hardware: the CPU workers stage the tiles and commit their outputs, as work taken before operations, instead of goroutines beside the workers (the simulator models it too)")
	fs.BoolVar(&o.goMemory, "go-memory", false, "with -hardware: keep the tiles' image regions in Go memory instead of the GPU's page-locked host memory (whose transfers need no staging copy)")
	fs.IntVar(&o.hostGPUs, "host-gpus", 0, "with -hardware: pose host memory as this many GPUs instead of using CUDA (for tests)")
	return fs
}

// unknownConfig returns a usage error naming the first unknown name in the
// -hw-configs list, or nil.
func unknownConfig(list string) error {
	for _, n := range strings.Split(list, ",") {
		if !slices.Contains(pathology.HardwareConfigs(), n) {
			return cli.Usagef("-hw-configs: unknown configuration %q (want one of %s)", n, strings.Join(pathology.HardwareConfigs(), ", "))
		}
	}
	return nil
}

// usage writes the synopsis and the flags to w.
func usage(w io.Writer) {
	fmt.Fprintf(w, `usage:
  %[1]s [flags]                           real run: kernels on synthetic tiles, simulated units
  %[1]s -sim [flags]                      discrete-event simulation of 4K tiles
  %[1]s -experiment [-quick] [-out DIR]   every experiment: results.md and SVG figures
  %[1]s -hardware [-out DIR]              the experiment on this machine's cores and CUDA GPUs
  %[1]s -cpu-ops [-tile-size N] [-out DIR] each operation timed on one core: "op NAME: MS ms"
  %[1]s -cluster N [flags]                real run on N local worker processes (runs nats-server)
  %[1]s -worker -nats URL [node flags]    a worker process joining a -cluster run's server

The CPU cores and GPUs are simulated: transfer and memory figures are
modelled from the sizes of 4K tiles, not measured. Unknown speedups
(learned ones without samples on both kinds of unit) print as n/a.
-experiment writes only into -out, or a new temporary folder it prints.

flags:
`, prog)
	cli.PrintDefaults(w, flagSet(&options{}))
}

func parseFlags(args []string) (*options, error) {
	o := &options{}
	fs := flagSet(o)
	if err := cli.Parse(fs, args); err != nil {
		return nil, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	o.set = set
	if err := cli.CheckHTTP(o.httpAddr, o.httpWait); err != nil {
		return nil, err
	}
	if _, err := pats.ParsePolicy(o.policy); err != nil {
		return nil, cli.Usagef("-policy %q: want fcfs or pats", o.policy)
	}
	switch {
	case o.experiment && o.sim:
		return nil, cli.Usagef("-experiment and -sim do not go together")
	case o.cpuOps && (o.experiment || o.sim || o.hardware || o.dynamic || o.profile != "" || o.httpAddr != "" || o.nucleiOut != "" || o.roi != "" || o.clusterN > 0 || o.worker || set["dir"]):
		return nil, cli.Usagef("-cpu-ops goes with -tile-size, -seed and -out only")
	case o.cpuTime && !o.cpuOps:
		return nil, cli.Usagef("-cpu-time goes with -cpu-ops")
	case o.hardware && (o.experiment || o.sim || o.profile != "" || o.httpAddr != "" || set["quick"]):
		return nil, cli.Usagef("-hardware goes with none of -experiment, -sim, -quick, -profile and -http")
	case o.dynamic && (o.experiment || o.hardware):
		return nil, cli.Usagef("-dynamic goes with a real run or -sim, not -experiment or -hardware")
	case set["order-only"] && !o.hardware:
		return nil, cli.Usagef("-order-only goes with -hardware")
	case set["serial-commits"] && !o.hardware:
		return nil, cli.Usagef("-serial-commits goes with -hardware")
	case set["storage-on-cores"] && !o.hardware:
		return nil, cli.Usagef("-storage-on-cores goes with -hardware")
	case set["sync-uploads"] && !o.hardware:
		return nil, cli.Usagef("-sync-uploads goes with -hardware")
	case set["go-memory"] && !o.hardware:
		return nil, cli.Usagef("-go-memory goes with -hardware")
	case set["stage-on-first-use"] && !o.hardware:
		return nil, cli.Usagef("-stage-on-first-use goes with -hardware")
	case set["hw-configs"] && !o.hardware:
		return nil, cli.Usagef("-hw-configs goes with -hardware")
	case set["hw-configs"] && unknownConfig(o.hwConfigs) != nil:
		return nil, unknownConfig(o.hwConfigs)
	case o.hostGPUs < 0 || o.hostGPUs > 0 && !o.hardware:
		return nil, cli.Usagef("-host-gpus %d: want a positive count, with -hardware", o.hostGPUs)
	case !o.experiment && !o.hardware && !o.cpuOps && set["out"]:
		return nil, cli.Usagef("-out goes with -experiment, -hardware or -cpu-ops")
	case !o.experiment && set["quick"]:
		return nil, cli.Usagef("-quick goes with -experiment")
	case set["out"] && o.out == "":
		return nil, cli.Usagef("-out: empty folder name")
	case o.profile != "" && (o.experiment || o.sim):
		return nil, cli.Usagef("-profile needs a real run (no -sim or -experiment): only it runs a task graph")
	case o.httpAddr != "" && (o.experiment || o.sim):
		return nil, cli.Usagef("-http needs a real run (no -sim or -experiment): only it runs a task graph")
	case o.storage != "memory" && o.storage != "disk":
		return nil, cli.Usagef("-storage %q: want memory or disk", o.storage)
	case o.tiles <= 0:
		return nil, cli.Usagef("-tiles %d: want at least one tile", o.tiles)
	case o.tileSize <= 0:
		return nil, cli.Usagef("-tile-size %d: want a positive edge", o.tileSize)
	case o.cpus < 0 || o.gpus < 0 || o.cpus+o.gpus == 0:
		return nil, cli.Usagef("-cpus %d -gpus %d: want at least one unit and no negative count", o.cpus, o.gpus)
	case o.window < 0:
		return nil, cli.Usagef("-window %d: want 0 (all) or more", o.window)
	case !(o.scale > 0) || math.IsInf(o.scale, 0):
		return nil, cli.Usagef("-scale %v: want a positive factor", o.scale)
	case !(o.ti >= 0 && o.ti <= 1):
		return nil, cli.Usagef("-ti %v: want a value in [0,1]", o.ti)
	case (o.nucleiOut != "" || o.roi != "") && (o.experiment || o.sim || o.hardware):
		return nil, cli.Usagef("-nuclei and -roi need a real run (no -sim, -experiment or -hardware)")
	case set["nuclei"] && o.nucleiOut == "":
		return nil, cli.Usagef("-nuclei: empty file name")
	case set["dir"] && (o.storage != "disk" || o.experiment || o.sim || o.hardware):
		return nil, cli.Usagef("-dir goes with a real run's -storage disk: nothing else would use the folder")
	case set["dir"] && o.dir == "":
		return nil, cli.Usagef("-dir: empty folder name")
	}
	if err := o.checkCluster(); err != nil {
		return nil, err
	}
	if o.roi != "" {
		var x0, y0, x1, y1 int
		if n, err := fmt.Sscanf(o.roi, "%d,%d,%d,%d", &x0, &y0, &x1, &y1); n != 4 || err != nil || x0 < 0 || y0 < 0 || x1 <= x0 || y1 <= y0 {
			return nil, cli.Usagef("-roi %q: want x0,y0,x1,y1 with 0 <= x0 < x1 and 0 <= y0 < y1", o.roi)
		}
		o.roiBox = region.Rect(x0, y0, x1, y1)
	}
	return o, nil
}

func (o *options) config() pats.Config {
	p, _ := pats.ParsePolicy(o.policy) // checked by parseFlags
	return pats.Config{Policy: p, Window: o.window, Locality: o.locality, TransferImpact: o.ti,
		Prefetch: o.prefetch, Learn: o.learn, DepthFirst: o.depthFirst}
}

func (o *options) machine() pats.Machine {
	m := pathology.ReferenceMachine()
	m.CPUs, m.GPUs = o.cpus, o.gpus
	return m
}

func main() { os.Exit(processMain()) }

// processMain runs the program on the process's arguments until it is
// done or interrupted (SIGINT, SIGTERM) and returns its exit status.
func processMain() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return realMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
}

// realMain runs the program and returns its exit status.
func realMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cli.Exit(prog, run(ctx, args, stdout, stderr), stdout, stderr, usage)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	if !o.worker {
		if err := o.prepareOutputs(stderr); err != nil {
			return err
		}
	}
	if o.experiment {
		return runExperiments(ctx, o, stdout, stderr)
	}
	if o.hardware {
		return runHardware(ctx, o, stdout, stderr)
	}
	if o.cpuOps {
		return runCPUOps(o, stdout)
	}
	if o.worker {
		return runWorker(ctx, o, stdout, stderr)
	}
	if o.clusterN > 0 {
		return runCluster(ctx, o, stdout, stderr)
	}
	cfg := o.config()
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	w := pathology.NewWorkload(o.tiles, o.seed)
	est := w.GivenSpeedups()
	if o.learn {
		est = nil
	}
	if o.sim {
		r, err := pats.Simulate(cfg, o.machine(), o.simFlows(w, est))
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "simulated %d 4K tiles on %d CPU cores + %d GPUs: %.2f tiles/s\n", o.tiles, o.cpus, o.gpus, tilesPerSecond(o.tiles, r))
		writeReport(stdout, r, "virtual time")
		return nil
	}
	return realRun(ctx, o, cfg, w, est, stdout, stderr)
}

// simFlows returns the flows the simulator runs for the workload: with
// -dynamic, segmentation flows that spawn the features.
func (o *options) simFlows(w *pathology.Workload, est map[string]float64) []*pats.Flow {
	if o.dynamic {
		return w.DynamicFlows(est)
	}
	return w.Flows(est)
}

// runExperiments runs every experiment and writes the results into -out,
// or into a new temporary folder when -out is not given.
func runExperiments(ctx context.Context, o *options, stdout, stderr io.Writer) (err error) {
	out, command := o.out, "go run ./examples/pathology -experiment"
	if o.quick {
		command += " -quick"
	}
	if out == "" {
		if out, err = os.MkdirTemp("", "pathology-experiment-"); err != nil {
			return fmt.Errorf("experiment output: %w", err)
		}
		defer func() {
			if err != nil {
				os.Remove(out) // only if still empty
			}
		}()
		fmt.Fprintf(stdout, "writing results and figures to %s (a new temporary folder; -out DIR chooses another)\n", out)
	} else {
		if err := outfile.CheckDir(out); err != nil {
			return err
		}
		command += " -out " + out
	}
	e := &experiments{images: defaultImages(), machine: o.machine(), window: 24, realTiles: 60, realScale: 0.05,
		robustImages: 10, robustTiles: 120, out: out, command: command, log: stderr}
	if o.quick {
		e.images, e.realTiles = []image{{"quick", 60, 1}}, 0
	}
	res, err := e.run(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "PATS over FCFS: %s; sensitivity loss at 50%%/60%%: %+.1f%%/%+.1f%%; FCFS+DL gain %.3fx, PATS+DL %.3fx, +prefetch %.3fx (simulated)\n",
		fmtRatios(res.patsOverFCFS), 100*res.lossAt[50], 100*res.lossAt[60], res.fcfsDLGain, res.patsDLGain, res.patsDLPFGain)
	fmt.Fprintf(stdout, "results and figures written to %s\n", out)
	return nil
}

func realRun(ctx context.Context, o *options, cfg pats.Config, w *pathology.Workload, est map[string]float64, stdout, stderr io.Writer) error {
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
	}
	s, err := pathology.NewSlide(ctx, o.tiles, o.tileSize, o.seed, in, out)
	if err != nil {
		return err
	}
	opts, live, err := o.startOptions(stdout)
	if err != nil {
		return err
	}
	defer live.Close(ctx, o.httpWait, stdout)
	start := time.Now()
	res, err := pathology.Run(ctx, s, w, pathology.RunOptions{Config: cfg, Units: o.machine().Units(o.scale), Speedups: est, Dynamic: o.dynamic, Start: opts})
	if err != nil {
		return err
	}
	wall := time.Since(start)
	rep := res.Report
	nuclei := 0
	for _, r := range res.Tiles {
		nuclei += r.Nuclei()
	}
	fmt.Fprintf(stdout, "processed %d tiles (%dx%d px, %s storage) on %d simulated CPU cores + %d simulated GPUs in %v: %d nuclei\n",
		o.tiles, o.tileSize, o.tileSize, o.storage, o.cpus, o.gpus, wall.Round(time.Millisecond), nuclei)
	if o.dynamic {
		fmt.Fprintf(stdout, "features computed for %d of %d tiles (flows spawned at run time)\n", rep.Spawned, o.tiles)
	}
	simRep, err := pats.Simulate(cfg, o.machine(), o.simFlows(w, est))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "modelled time %.2fs (x%g = %v); the simulator predicts %.2fs (x%g = %v)\n",
		rep.Makespan.Seconds()/o.scale, o.scale, rep.Makespan.Round(time.Millisecond),
		simRep.Makespan.Seconds(), o.scale, time.Duration(float64(simRep.Makespan)*o.scale).Round(time.Millisecond))
	writeReport(stdout, rep, "wall time")
	if err := o.writeNuclei(ctx, s, res.Tiles, stdout); err != nil {
		return err
	}
	return o.writeProfile(res.Execution, stdout, stderr)
}

// profileFiles are the files -profile writes into its folder.
func profileFiles() []string {
	return []string{prog + ".dot", prog + ".svg", prog + "-trace.json", prog + "-stats.json"}
}

// prepareOutputs makes the checks on the outputs that need no work, so that
// a run refuses them before it starts rather than fail when it renames its
// result into place: -nuclei is a file name (not a folder, not a -profile
// file) in an existing writable folder; the -profile and -out folders can
// be written (they are created if missing). Then it removes, naming each on
// stderr, the temporary files that killed runs left beside the outputs.
func (o *options) prepareOutputs(stderr io.Writer) error {
	var outputs []string
	if o.profile != "" {
		if err := outfile.CheckDir(o.profile); err != nil {
			return fmt.Errorf("-profile: %w", err)
		}
		for _, f := range profileFiles() {
			outputs = append(outputs, filepath.Join(o.profile, f))
		}
	}
	if o.nucleiOut != "" {
		if st, err := os.Stat(o.nucleiOut); err == nil && st.IsDir() {
			return cli.Usagef("-nuclei %s is a folder: want a file name such as %s", o.nucleiOut, filepath.Join(o.nucleiOut, "nuclei.geojson"))
		}
		for _, p := range outputs {
			same, err := outfile.SameFile(o.nucleiOut, p)
			if err != nil {
				return fmt.Errorf("-nuclei: %w", err)
			}
			if same || filepath.Clean(o.nucleiOut) == filepath.Clean(p) {
				return cli.Usagef("-nuclei %s is a file of -profile %s: the profile would overwrite it", o.nucleiOut, o.profile)
			}
		}
		if err := outfile.Writable(filepath.Dir(o.nucleiOut)); err != nil {
			return fmt.Errorf("-nuclei %s: %w", o.nucleiOut, err)
		}
		outputs = append(outputs, o.nucleiOut)
	}
	if o.out != "" {
		if err := outfile.CheckDir(o.out); err != nil {
			return fmt.Errorf("-out: %w", err)
		}
		var names []string
		switch {
		case o.experiment:
			names = experimentFiles()
		case o.hardware:
			names = []string{"hardware.md"}
		}
		for _, f := range names {
			outputs = append(outputs, filepath.Join(o.out, f))
		}
	}
	stale, err := outfile.RemoveStale(outputs...)
	for _, s := range stale {
		fmt.Fprintf(stderr, "%s: %v\n", prog, s)
	}
	return err
}

// writeProfile writes the run's profile into -profile's folder, if set.
func (o *options) writeProfile(run *graph.Execution, stdout, stderr io.Writer) error {
	if o.profile == "" {
		return nil
	}
	warn, err := cli.WriteProfile(o.profile, prog, run)
	if err != nil {
		return err
	}
	if warn != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, warn)
	}
	fmt.Fprintf(stdout, "profile written to %s\n", o.profile)
	return nil
}

// writeNuclei answers -roi with a ROI query on the committed polygon set
// and writes the -nuclei GeoJSON file.
func (o *options) writeNuclei(ctx context.Context, s *pathology.Slide, results []pathology.TileResult, stdout io.Writer) error {
	if o.roi != "" {
		polys, err := s.NucleiInBox(ctx, o.roiBox)
		if err != nil {
			return fmt.Errorf("-roi: %w", err)
		}
		var area float64
		for _, p := range polys {
			area += pathology.PolygonArea(p)
		}
		mean := 0.0
		if len(polys) > 0 {
			mean = area / float64(len(polys))
		}
		fmt.Fprintf(stdout, "ROI %v: %d nuclei intersect it (mean polygon area %.1f px)\n", o.roiBox, len(polys), mean)
	}
	if o.nucleiOut != "" {
		err := outfile.WriteFile(o.nucleiOut, func(w io.Writer) error { return pathology.WriteNucleiGeoJSON(ctx, w, results) })
		if err != nil {
			return fmt.Errorf("-nuclei: %w", err)
		}
		fmt.Fprintf(stdout, "nuclei written to %s (GeoJSON)\n", o.nucleiOut)
	}
	return nil
}

// writeReport writes a pats report as a table, saying which figures are
// modelled and printing n/a for the speedups nobody knows: a given
// estimate of 0 (none was given) or a learned one of 0 (the operation was
// not timed on both kinds of unit). clock says what the makespan measures.
func writeReport(w io.Writer, r *pats.Report, clock string) {
	fmt.Fprintf(w, "%s: %d flows (%d failed) in %v (%s)\n", r.Config, r.Flows, r.Failed, r.Makespan.Round(time.Microsecond), clock)
	fmt.Fprintf(w, "modelled, not measured: transfers %d up (%.1f MiB), %d down (%.1f MiB); peak memory: host %.1f MiB, GPUs %.1f MiB (4K-tile sizes)\n",
		r.Uploads, float64(r.UploadBytes)/(1<<20), r.Downloads, float64(r.DownloadBytes)/(1<<20),
		float64(r.PeakHostBytes)/(1<<20), float64(r.PeakDeviceBytes)/(1<<20))
	fmt.Fprintf(w, "%-18s %6s %6s %6s %8s %8s\n", "operation", "cpu", "gpu", "gpu%", "given", "learned")
	for _, o := range r.Ops {
		share := "n/a"
		if o.CPU+o.GPU > 0 {
			share = fmt.Sprintf("%.0f%%", 100*o.GPUShare())
		}
		fmt.Fprintf(w, "%-18s %6d %6d %6s %8s %8s\n", o.Name, o.CPU, o.GPU, share, fmtSpeedup(o.Given), fmtSpeedup(o.Learned))
	}
}

// fmtSpeedup formats a speedup with two decimals, or "n/a" when it is not
// known: pats reports an unknown speedup as 0.
func fmtSpeedup(v float64) string {
	if !(v > 0) || math.IsInf(v, 0) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", v)
}

// startOptions returns the real run's graph options: a trace for -profile
// and -http, and the live view of -http (nil without it), which the caller
// closes.
func (o *options) startOptions(stdout io.Writer) ([]graph.StartOption, *cli.Live, error) {
	var opts []graph.StartOption
	if o.profile != "" || o.httpAddr != "" {
		opts = append(opts, graph.WithTrace())
	}
	live, err := cli.ServeLive(prog, o.httpAddr, stdout)
	if err != nil {
		return nil, nil, err
	}
	if live != nil {
		opts = append(opts, graph.WithStarted(live.Observe))
	}
	return opts, live, nil
}
