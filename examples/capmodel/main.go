// Command capmodel measures CAP's performance model on this machine
// (docs/cap.md), and the out-of-core mosaic's throughput against the
// disk's.
//
// Model mode (the default) measures the terms t_d, t_p, t_n and t_m of
// CAP's equation (1), T = t_d + ceil(T/P)·t_p + P·t_n + t_m, inside each
// construct (cap.MeasureTerms), for three constructs over a -width x -height image
// (a 3 x 3 median through Exchange, an inversion through Pipeline, a
// histogram through Gather) at each tile size; then, for each number of
// workers, the start-up t_s and the per-tile overhead t_o, u_o (the
// construct with nothing to compute, cap.MeasureOverhead) and the
// processors free c, and times the construct; all in -rounds interleaved
// rounds. It prints a markdown table of predicted (cap.Terms.PredictShared)
// against measured times; -svg FILE draws them, -raw FILE writes every
// run as CSV.
//
//	go run ./examples/capmodel -rounds 9 -svg docs/img/cap-model.svg
//
// Throughput mode (-mosaic 16x20) composes a grid of 1392 x 1040 tiles
// (linear blending) out of core into a pyramidal BigTIFF of 512 x 512
// tiles, once through a tile file (compose.ComposeTiled, then
// tiled.WriteBigTIFF) and once streamed (compose.ComposeBigTIFF), and
// times dd's sequential write of as many bytes into the same folder
// (-dd direct: oflag=direct; -dd fdatasync: conv=fdatasync), alternately,
// -rounds times; -paths picks the paths, -cpuprofile FILE profiles.
// -tile sets the files' tile size.
//
// With -paths model, throughput mode instead applies CAP's model to the
// streamed mosaic: for each tile size in -sizes and each number of
// processors in -workers (GOMAXPROCS), the pipeline's terms per band
// measured as it runs (compose.ComposeBigTIFFTerms) predict the time of a
// run timed alone; it prints the table in docs/cap.md:
//
//	go run ./examples/capmodel -mosaic 16x20 -paths model -sizes 256,512 -workers 1,2 -rounds 5 -dir /tmp
//
// Before any work it checks the command line (an option the mode would not
// use is refused), that -dir is an existing writable folder and that each
// output (-svg, -raw, -cpuprofile) is a file name in a writable folder,
// not a folder, not another output and not one of -dir's working files;
// it removes, and names on stderr, the temporary files that killed runs
// left beside the outputs. Outputs are renamed into place when complete.
// The exit status is 0 on success, 1 when the run fails and 2 for bad
// usage.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"image"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gohtgs/htgs/cap"
	"github.com/gohtgs/htgs/examples/internal/cli"
	"github.com/gohtgs/htgs/internal/cputime"
	"github.com/gohtgs/htgs/internal/outfile"
	"github.com/gohtgs/htgs/stitching/compose"
	"github.com/gohtgs/htgs/tiled"
)

func main() { os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr, 100_000_000)) }

// prog is the program's name in messages.
const prog = "capmodel"

// options are the command line's settings and what a run writes to.
type options struct {
	width, height  int
	sizes, workers []int
	rounds         int
	svg            string
	mosaic         string
	gx, gy         int   // -mosaic's grid
	mem            int64 // -mem in bytes
	tile           int
	dir            string
	paths          map[string]bool // tiled, stream, or model
	ddMode         string
	cpuprofile     string
	raw            string
	set            map[string]bool // flags given on the command line

	spinIters      int       // the length of parallelism's spin loop (0.1 s: 100_000_000)
	stdout, stderr io.Writer // where the tables and the notes go
	rawW           io.Writer // -raw's CSV, when set
}

// flags holds the flags' values as typed, before parse checks them.
type flags struct {
	sizes, workers, paths string
	mem                   int64
}

// flagSet declares the flags into o and f.
func flagSet(o *options, f *flags) *flag.FlagSet {
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	fs.IntVar(&o.width, "width", 4096, "model mode: image width in pixels")
	fs.IntVar(&o.height, "height", 4096, "model mode: image height in pixels")
	fs.StringVar(&f.sizes, "sizes", "128,256,512", "tile sizes (model mode, and throughput mode's -paths model)")
	fs.StringVar(&f.workers, "workers", "1,2,4", "numbers of process workers (model mode, and throughput mode's -paths model)")
	fs.IntVar(&o.rounds, "rounds", 5, "interleaved rounds (at least 1)")
	fs.StringVar(&o.svg, "svg", "", "model mode: write the model figure to this SVG `file`")
	fs.StringVar(&o.mosaic, "mosaic", "", "throughput mode: compose a `GXxGY` grid of 1392x1040 tiles (e.g. 16x20)")
	fs.Int64Var(&f.mem, "mem", 256, "throughput mode: tile-cache budget in MiB")
	fs.IntVar(&o.tile, "tile", 512, "throughput mode: the BigTIFF's (and tile file's) tile size")
	fs.StringVar(&o.dir, "dir", "", "existing `folder` for the working files (default a new temporary folder)")
	fs.StringVar(&f.paths, "paths", "tiled,stream", "throughput mode: which paths to time (tiled, stream), or model: CAP's model of the streamed mosaic for each of -sizes and -workers")
	fs.StringVar(&o.ddMode, "dd", "direct", "throughput mode: dd's write, direct (oflag=direct) or fdatasync (conv=fdatasync)")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile to this `file`")
	fs.StringVar(&o.raw, "raw", "", "model mode: also write every run's terms and time (ns) to this CSV `file`")
	return fs
}

// usage writes the synopsis and the flags to w.
func usage(w io.Writer) {
	fmt.Fprintf(w, `usage:
  %[1]s [-width W -height H -sizes S -workers P -rounds N -svg FILE -raw FILE]   model mode: CAP's terms against measured times
  %[1]s -mosaic GXxGY [-paths tiled,stream] [-dd direct|fdatasync] [-dir DIR]     throughput mode: the out-of-core mosaic against dd
  %[1]s -mosaic GXxGY -paths model [-sizes S -workers P]                          CAP's model of the streamed mosaic

flags:
`, prog)
	cli.PrintDefaults(w, flagSet(&options{}, &flags{}))
}

// realMain runs the program and returns its exit status; spinIters is the
// length of the spin loop that measures the processors free.
func realMain(args []string, stdout, stderr io.Writer, spinIters int) int {
	o, err := parse(args)
	if err == nil {
		o.spinIters, o.stdout, o.stderr = spinIters, stdout, stderr
		err = o.execute()
	}
	return cli.Exit(prog, err, stdout, stderr, usage)
}

// ints parses a comma-separated list of positive numbers for flag name.
func ints(name, s string) ([]int, error) {
	var r []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v <= 0 {
			return nil, cli.Usagef("-%s %q: bad number %q, want positive numbers separated by commas", name, s, f)
		}
		r = append(r, v)
	}
	return r, nil
}

// parse reads the command line and refuses what cannot work or would
// produce nothing (exit status 2).
func parse(args []string) (*options, error) {
	o, f := &options{}, &flags{}
	fs := flagSet(o, f)
	if err := cli.Parse(fs, args); err != nil {
		return nil, err
	}
	o.set = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { o.set[fl.Name] = true })
	var err error
	if o.sizes, err = ints("sizes", f.sizes); err != nil {
		return nil, err
	}
	if o.workers, err = ints("workers", f.workers); err != nil {
		return nil, err
	}
	if o.rounds <= 0 {
		return nil, cli.Usagef("-rounds %d: want at least one round", o.rounds)
	}
	if o.ddMode != "direct" && o.ddMode != "fdatasync" {
		return nil, cli.Usagef("-dd %q: want direct or fdatasync", o.ddMode)
	}
	if o.tile <= 0 {
		return nil, cli.Usagef("-tile %d: want a positive tile size", o.tile)
	}
	if f.mem <= 0 || f.mem > 1<<40 {
		return nil, cli.Usagef("-mem %d: want a positive number of MiB", f.mem)
	}
	o.mem = f.mem << 20
	if o.set["dir"] && o.dir == "" {
		return nil, cli.Usagef("-dir: empty folder name")
	}
	o.paths = map[string]bool{}
	for _, p := range strings.Split(f.paths, ",") {
		switch p = strings.TrimSpace(p); p {
		case "tiled", "stream", "model":
			o.paths[p] = true
		default:
			return nil, cli.Usagef("-paths %q: %q is none of tiled, stream and model", f.paths, p)
		}
	}
	if o.paths["model"] && len(o.paths) > 1 {
		return nil, cli.Usagef("-paths %q: model goes alone", f.paths)
	}
	if o.mosaic == "" {
		if o.width <= 0 || o.height <= 0 {
			return nil, cli.Usagef("-width %d -height %d: want a positive image size", o.width, o.height)
		}
		for _, name := range []string{"paths", "dd", "mem", "tile"} {
			if o.set[name] {
				return nil, cli.Usagef("-%s goes with throughput mode (-mosaic GXxGY)", name)
			}
		}
	} else {
		if _, err := fmt.Sscanf(o.mosaic, "%dx%d", &o.gx, &o.gy); err != nil || o.gx <= 0 || o.gy <= 0 || fmt.Sprintf("%dx%d", o.gx, o.gy) != o.mosaic {
			return nil, cli.Usagef("-mosaic %q: want GXxGY, two positive numbers such as 16x20", o.mosaic)
		}
		// Throughput mode writes no figure and no CSV: refuse them rather
		// than exit 0 having written nothing.
		for _, name := range []string{"svg", "raw", "width", "height"} {
			if o.set[name] {
				return nil, cli.Usagef("-%s goes with model mode (no -mosaic): throughput mode would not use it", name)
			}
		}
		if !o.paths["model"] {
			for _, name := range []string{"sizes", "workers"} {
				if o.set[name] {
					return nil, cli.Usagef("-%s goes with model mode or -paths model: -paths %s would not use it", name, f.paths)
				}
			}
		}
	}
	return o, o.checkNames()
}

// output is a file a run writes for the user.
type output struct {
	flag, path string
	example    string // a name to suggest
}

// outputs are the files a run writes for the user, by flag.
func (o *options) outputs() []output {
	var r []output
	for _, x := range []output{{"-svg", o.svg, "cap-model.svg"}, {"-raw", o.raw, "runs.csv"}, {"-cpuprofile", o.cpuprofile, "cpu.pprof"}} {
		if x.path != "" {
			r = append(r, x)
		}
	}
	return r
}

// workFiles are the names of the files a run creates and removes in its
// working folder (-dir).
func (o *options) workFiles() []string {
	names := []string{"dst.raw", "dd.bin", "mosaic.tif"}
	for _, s := range o.sizes {
		names = append(names, fmt.Sprintf("src-%d.raw", s))
	}
	return names
}

// checkNames refuses outputs that name a folder, the same file twice, or
// a working file of -dir (which the run would overwrite and remove).
func (o *options) checkNames() error {
	outs := o.outputs()
	for i, x := range outs {
		if st, err := os.Stat(x.path); err == nil && st.IsDir() {
			return cli.Usagef("%s %s is a folder: want a file name such as %s", x.flag, x.path, filepath.Join(x.path, x.example))
		}
		for _, y := range outs[:i] {
			same, err := outfile.SameFile(x.path, y.path)
			if err != nil {
				return err
			}
			if same || filepath.Clean(x.path) == filepath.Clean(y.path) {
				return cli.Usagef("%s %s and %s %s name the same file", y.flag, y.path, x.flag, x.path)
			}
		}
		if o.dir != "" {
			for _, w := range o.workFiles() {
				work := filepath.Join(o.dir, w)
				same, err := outfile.SameFile(x.path, work)
				if err != nil {
					return err
				}
				if same || filepath.Clean(x.path) == filepath.Clean(work) {
					return cli.Usagef("%s %s is a working file of -dir %s, which the run overwrites and removes", x.flag, x.path, o.dir)
				}
			}
		}
	}
	return nil
}

// prepare makes the checks that need no work (the -dir folder exists and
// can be written, each output's folder too) and removes, saying so on
// stderr, the temporary files that killed runs left beside the outputs.
func (o *options) prepare() error {
	if o.dir != "" {
		if err := outfile.Writable(o.dir); err != nil {
			return fmt.Errorf("-dir: %w", err)
		}
	}
	for _, x := range o.outputs() {
		if err := outfile.Writable(filepath.Dir(x.path)); err != nil {
			return fmt.Errorf("%s %s: %w", x.flag, x.path, err)
		}
		stale, err := outfile.RemoveStale(x.path)
		for _, s := range stale {
			fmt.Fprintf(o.stderr, "%s: %v\n", prog, s)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", x.flag, err)
		}
	}
	return nil
}

// openOutput reserves the temporary file of output path (of flag name)
// and opens it for writing; the caller closes the file and commits or
// aborts the output.
func openOutput(name, path string) (*outfile.Output, *os.File, error) {
	out, err := outfile.NewOutput(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	f, err := os.OpenFile(out.Temp, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		out.Abort()
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, f, nil
}

// execute runs the checked command line: the checks that need no work
// first, then the outputs' temporary files, then the run, then the
// outputs renamed into place.
func (o *options) execute() (err error) {
	if err := o.prepare(); err != nil {
		return err
	}
	if o.raw != "" {
		out, f, err := openOutput("-raw", o.raw)
		if err != nil {
			return err
		}
		defer out.Abort()
		defer f.Close()
		bw := bufio.NewWriter(f)
		o.rawW = bw
		fmt.Fprintln(bw, "op,tile,n,P,c,td,tp,tn,tm,ts,to,uo,T")
		defer func() {
			if err != nil {
				return
			}
			err = bw.Flush()
			if err == nil {
				err = f.Close()
			}
			if err == nil {
				err = out.Commit()
			}
			if err != nil {
				err = fmt.Errorf("-raw: %w", err)
			} else {
				fmt.Fprintf(o.stdout, "runs written to %s (CSV)\n", o.raw)
			}
		}()
	}
	if o.cpuprofile != "" {
		out, f, err := openOutput("-cpuprofile", o.cpuprofile)
		if err != nil {
			return err
		}
		defer out.Abort()
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("-cpuprofile: %w", err)
		}
		defer func() {
			pprof.StopCPUProfile()
			if err != nil {
				return
			}
			err = f.Close()
			if err == nil {
				err = out.Commit()
			}
			if err != nil {
				err = fmt.Errorf("-cpuprofile: %w", err)
			}
		}()
	}
	if o.dir == "" {
		d, err := os.MkdirTemp("", "capmodel-*")
		if err != nil {
			return fmt.Errorf("working folder: %w", err)
		}
		defer os.RemoveAll(d)
		o.dir = d
	}
	fmt.Fprintf(o.stdout, "GOMAXPROCS %d, load at start: %s\n", runtime.GOMAXPROCS(0), load())
	if o.mosaic != "" {
		return o.throughput()
	}
	return o.model()
}

// load is the first line of /proc/loadavg.
func load() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// op is one construct and operation to model.
type op struct {
	name   string
	halo   int
	f      cap.ProcessFunc
	gather bool // a histogram through Gather instead (f unused)
}

var ops = []op{
	{"median 3x3 (Exchange)", 1, cap.MedianFunc(1), false},
	{"invert (Pipeline)", 0, func(_ context.Context, t *cap.Tile, out []uint16) error {
		for y := 0; y < t.H; y++ {
			in := t.In[y*t.Stride : y*t.Stride+t.W]
			o := out[y*(t.Stride-2*t.Halo):]
			for x, v := range in {
				o[x] = ^v
			}
		}
		return nil
	}, false},
	{"histogram (Gather)", 0, nil, true},
}

// sample is one configuration's terms and times over the rounds.
type sample struct {
	op, size, workers int
	n                 int
	terms             []cap.Terms
	ceff              []float64
	times             []time.Duration
}

// modelRun is one -model run: its working files (one source image per
// tile size, one destination) and the samples measured so far.
type modelRun struct {
	o       *options
	samples []*sample
}

// srcPath is the source image of tile size s.
func (m *modelRun) srcPath(s int) string {
	return filepath.Join(m.o.dir, fmt.Sprintf("src-%d.raw", s))
}

// budget is the cache of a source of tile size s: three rows of tiles,
// as the halo exchange needs.
func (m *modelRun) budget(s int) int64 {
	return int64(3*((m.o.width+s-1)/s)+3) * int64(s*s*2)
}

// writeSources writes px as one source image per tile size.
func (m *modelRun) writeSources(px []uint16) error {
	w, h := m.o.width, m.o.height
	for _, s := range m.o.sizes {
		im, err := tiled.Create(m.srcPath(s), w, h, s, s, 64<<20)
		if err != nil {
			return err
		}
		if err := im.WriteRect(0, 0, w, h, px); err != nil {
			return err
		}
		if err := im.Close(); err != nil {
			return err
		}
	}
	return nil
}

// removeFiles removes the working files: -dir keeps only what was there.
func (m *modelRun) removeFiles() {
	for _, s := range m.o.sizes {
		os.Remove(m.srcPath(s))
	}
	os.Remove(filepath.Join(m.o.dir, "dst.raw"))
}

// open opens the source of tile size s and creates the destination.
func (m *modelRun) open(s int) (*tiled.Image, *tiled.Image, error) {
	w, h := m.o.width, m.o.height
	src, err := tiled.Open(m.srcPath(s), w, h, s, s, m.budget(s))
	if err != nil {
		return nil, nil, err
	}
	dst, err := tiled.Create(filepath.Join(m.o.dir, "dst.raw"), w, h, s, s, 4*int64(s*s*2))
	if err != nil {
		src.Close()
		return nil, nil, err
	}
	return src, dst, nil
}

// openSrc opens the source of tile size s alone, for a gather.
func (m *modelRun) openSrc(s int) (*tiled.Image, error) {
	src, dst, err := m.open(s)
	if err == nil {
		dst.Close()
	}
	return src, err
}

// sample returns the sample of operation oi, tile size s and p workers,
// adding it on first use.
func (m *modelRun) sample(oi, s, p int) *sample {
	for _, x := range m.samples {
		if x.op == oi && x.size == s && x.workers == p {
			return x
		}
	}
	x := &sample{op: oi, size: s, workers: p}
	m.samples = append(m.samples, x)
	return x
}

// terms measures the model's per-tile terms of op at tile size s.
func (m *modelRun) terms(ctx context.Context, op op, s int, merge func(*[65536]uint64) error) (cap.Terms, error) {
	if op.gather {
		return cap.MeasureGatherTerms(ctx, func() (*tiled.Image, error) { return m.openSrc(s) }, cap.HistogramTile, merge)
	}
	return cap.MeasureTerms(ctx, func() (*tiled.Image, *tiled.Image, error) { return m.open(s) }, op.halo, op.f)
}

// measure measures op at tile size s with p workers: the graph's
// overheads, then one timed run, and adds them to the sample with terms.
func (m *modelRun) measure(ctx context.Context, oi int, op op, s, p int, terms cap.Terms, merge func(*[65536]uint64) error) error {
	c := m.o.parallelism()
	opts := cap.Options{Copies: p}
	var ts, to, uo time.Duration
	var err error
	if op.gather {
		ts, to, uo, err = cap.MeasureGatherOverhead(ctx, func() (*tiled.Image, error) { return m.openSrc(s) }, opts)
	} else {
		ts, to, uo, err = cap.MeasureOverhead(ctx, func() (*tiled.Image, *tiled.Image, error) { return m.open(s) }, op.halo, opts)
	}
	if err != nil {
		return err
	}
	src, dst, err := m.open(s)
	if err != nil {
		return err
	}
	t0 := time.Now()
	switch {
	case op.gather:
		err = cap.Run(ctx, cap.Gather(src, opts, cap.HistogramTile, merge), src.Tiles())
	case op.halo > 0:
		err = cap.Run(ctx, cap.Exchange(src, dst, op.halo, opts, op.f), src.Tiles())
	default:
		err = cap.Run(ctx, cap.Process(src, dst, opts, op.f), src.Tiles())
	}
	if err == nil {
		err = dst.Flush()
	}
	d := time.Since(t0)
	src.Close()
	dst.Close()
	if err != nil {
		return err
	}
	x := m.sample(oi, s, p)
	x.n = len(src.Tiles())
	t := terms
	t.Ts, t.To, t.Uo, t.Gather = ts, to, uo, op.gather
	if m.o.rawW != nil {
		fmt.Fprintf(m.o.rawW, "%s,%d,%d,%d,%.3f,%d,%d,%d,%d,%d,%d,%d,%d\n", op.name, s, len(src.Tiles()), p, c,
			t.Td, t.Tp, t.Tn, t.Tm, t.Ts, t.To, t.Uo, d)
	}
	x.terms = append(x.terms, t)
	x.ceff = append(x.ceff, c)
	x.times = append(x.times, d)
	return nil
}

func (o *options) model() error {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	px := make([]uint16, o.width*o.height)
	for i := range px {
		px[i] = uint16(r.UintN(4096))
	}
	m := &modelRun{o: o}
	defer m.removeFiles()
	if err := m.writeSources(px); err != nil {
		return err
	}
	for round := range o.rounds {
		fmt.Fprintf(o.stdout, "round %d/%d, load %s\n", round+1, o.rounds, load())
		for oi, op := range ops {
			for _, s := range o.sizes {
				hist := make([]uint64, 65536)
				merge := func(part *[65536]uint64) error {
					cap.MergeHistogram(hist, part)
					return nil
				}
				terms, err := m.terms(ctx, op, s, merge)
				if err != nil {
					return err
				}
				for _, p := range o.workers {
					if err := m.measure(ctx, oi, op, s, p, terms, merge); err != nil {
						return err
					}
				}
			}
		}
	}
	fmt.Fprintf(o.stdout, "load at end: %s\n\n", load())
	report(o.stdout, m.samples)
	if o.svg != "" {
		err := outfile.WriteFile(o.svg, func(w io.Writer) error {
			_, err := io.WriteString(w, figure(m.samples, o.sizes, o.workers))
			return err
		})
		if err != nil {
			return fmt.Errorf("-svg: %w", err)
		}
		fmt.Fprintf(o.stdout, "figure written to %s\n", o.svg)
	}
	return nil
}

// parallelism measures how many processors this process gets now: the
// speedup of a fixed spin loop run in GOMAXPROCS goroutines at once over
// one goroutine (between 1 and GOMAXPROCS).
func (o *options) parallelism() float64 {
	spin := func() {
		x := uint64(1)
		for i := range o.spinIters {
			x = x*6364136223846793005 + uint64(i)
		}
		sink.Store(x)
	}
	t0 := time.Now()
	spin()
	one := time.Since(t0)
	n := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	t0 = time.Now()
	for range n {
		wg.Add(1)
		go func() { defer wg.Done(); spin() }()
	}
	wg.Wait()
	all := time.Since(t0)
	return min(float64(n), max(1, float64(n)*float64(one)/float64(all)))
}

var sink atomic.Uint64

func median[T int64 | float64](v []T) T {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/1e6) }

func us(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/1e3) }

// summary is one configuration's terms, times and predictions.
type summary struct {
	best       cap.Terms // each term's minimum over the rounds
	cmax       float64   // most processors measured free before a run
	min, med   time.Duration
	eq1        time.Duration // equation (1) as written: best terms, P processors
	bestPred   time.Duration // shared model, best terms, cmax processors
	typPred    time.Duration // median of each run's shared prediction (its round's terms and share)
	errBest    float64       // bestPred against the fastest run
	errTypical float64       // typPred against the median run
}

func summarize(x *sample) summary {
	f := func(g func(cap.Terms) time.Duration) time.Duration {
		v := make([]int64, len(x.terms))
		for i, t := range x.terms {
			v[i] = int64(g(t))
		}
		return time.Duration(slices.Min(v))
	}
	m := cap.Terms{Td: f(func(t cap.Terms) time.Duration { return t.Td }), Tp: f(func(t cap.Terms) time.Duration { return t.Tp }),
		Tn: f(func(t cap.Terms) time.Duration { return t.Tn }), Tm: f(func(t cap.Terms) time.Duration { return t.Tm }),
		Ts: f(func(t cap.Terms) time.Duration { return t.Ts }), To: f(func(t cap.Terms) time.Duration { return t.To }),
		Uo: f(func(t cap.Terms) time.Duration { return t.Uo }), Gather: x.terms[0].Gather}
	ts := make([]int64, len(x.times))
	for i, t := range x.times {
		ts[i] = int64(t)
	}
	s := summary{best: m, cmax: slices.Max(x.ceff), med: time.Duration(median(ts)), min: time.Duration(slices.Min(ts))}
	s.eq1 = m.Predict(x.n, float64(x.workers))
	s.bestPred = m.PredictShared(x.n, float64(x.workers), s.cmax)
	// Each run predicted from its own round's terms and the processor
	// share measured just before it.
	sh := make([]int64, len(x.times))
	for i, t := range x.terms {
		sh[i] = int64(t.PredictShared(x.n, float64(x.workers), x.ceff[i]))
	}
	s.typPred = time.Duration(median(sh))
	s.errBest = 100 * (float64(s.bestPred) - float64(s.min)) / float64(s.min)
	s.errTypical = 100 * (float64(s.typPred) - float64(s.med)) / float64(s.med)
	return s
}

func report(w io.Writer, samples []*sample) {
	fmt.Fprintln(w, "| operation | tile | N | t_d ms | t_p ms | t_n µs | t_m ms | t_s ms | t_o µs | u_o µs | P | eq. (1) s | c | model s | fastest s | err | typical model s | median s | err |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	var worstB, worstT float64
	for _, x := range samples {
		s := summarize(x)
		fmt.Fprintf(w, "| %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %d | %.3f | %.2f | %.3f | %.3f | %+.0f%% | %.3f | %.3f | %+.0f%% |\n",
			ops[x.op].name, x.size, x.n, ms(s.best.Td), ms(s.best.Tp), us(s.best.Tn), ms(s.best.Tm), ms(s.best.Ts), us(s.best.To), us(s.best.Uo), x.workers,
			s.eq1.Seconds(), s.cmax, s.bestPred.Seconds(), s.min.Seconds(), s.errBest, s.typPred.Seconds(), s.med.Seconds(), s.errTypical)
		worstB, worstT = max(worstB, math.Abs(s.errBest)), max(worstT, math.Abs(s.errTypical))
	}
	fmt.Fprintf(w, "\nworst |error|: fastest runs %.0f%%, median runs %.0f%%\n", worstB, worstT)
}

func color(i int) string {
	p := [...]string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1"}
	return p[i%len(p)]
}

// figure draws, for each operation, measured times (fastest run a dot,
// bars to the slowest) and predictions (solid: shared-processor model, dotted: equation
// (1) as written) against the number of workers, one colour per tile size.
func figure(samples []*sample, sizes, workers []int) string {
	const pw, ph, left, top, gap = 330.0, 260.0, 60.0, 50.0, 70.0
	W := left + float64(len(ops))*(pw+gap)
	H := top + ph + 90
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n", W, H, W, H)
	fmt.Fprintf(&b, `<rect width="%.0f" height="%.0f" fill="white"/>`+"\n", W, H)
	fmt.Fprintf(&b, `<text x="%.0f" y="20" text-anchor="middle" font-size="14">CAP model on this machine: predicted (lines) vs fastest run (dots; bars: fastest to slowest)</text>`+"\n", W/2)
	for oi, o := range ops {
		x0 := left + float64(oi)*(pw+gap)
		var ymax float64
		for _, x := range samples {
			if x.op != oi {
				continue
			}
			s := summarize(x)
			for _, t := range x.times {
				ymax = max(ymax, t.Seconds())
			}
			ymax = max(ymax, s.eq1.Seconds(), s.bestPred.Seconds())
		}
		ymax = niceMax(ymax)
		px := func(i int) float64 { return x0 + (float64(i)+0.5)*pw/float64(len(workers)) }
		py := func(v float64) float64 { return top + ph - v/ymax*ph }
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle" font-size="13">%s</text>`+"\n", x0+pw/2, top-12, o.name)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x0, top, x0, top+ph)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x0, top+ph, x0+pw, top+ph)
		for k := 0; k <= 4; k++ {
			v := ymax * float64(k) / 4
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x0, py(v), x0+pw, py(v))
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", x0-5, py(v)+4, strconv.FormatFloat(v, 'g', 3, 64))
		}
		for i, p := range workers {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", px(i), top+ph+16, p)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">workers P</text>`+"\n", x0+pw/2, top+ph+34)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" transform="rotate(-90 %.1f %.1f)">time (s)</text>`+"\n", x0-42, top+ph/2, x0-42, top+ph/2)
		for si, sz := range sizes {
			var shared, eq1 []string
			for i, p := range workers {
				for _, x := range samples {
					if x.op != oi || x.size != sz || x.workers != p {
						continue
					}
					s := summarize(x)
					off := float64(si-len(sizes)/2) * 6
					shared = append(shared, fmt.Sprintf("%.1f,%.1f", px(i), py(s.bestPred.Seconds())))
					eq1 = append(eq1, fmt.Sprintf("%.1f,%.1f", px(i), py(s.eq1.Seconds())))
					lo, hi := slices.Min(x.times), slices.Max(x.times)
					fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`+"\n", px(i)+off, py(lo.Seconds()), px(i)+off, py(hi.Seconds()), color(si))
					fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"><title>%d px tiles, P=%d: fastest %.3f s, predicted %.3f s, median %.3f s</title></circle>`+"\n",
						px(i)+off, py(s.min.Seconds()), color(si), sz, p, s.min.Seconds(), s.bestPred.Seconds(), s.med.Seconds())
				}
			}
			fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5"/>`+"\n", strings.Join(shared, " "), color(si))
			fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1" stroke-dasharray="2,3"/>`+"\n", strings.Join(eq1, " "), color(si))
		}
	}
	ly := top + ph + 60
	for si, sz := range sizes {
		lx := left + float64(si)*120
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"/><text x="%.1f" y="%.1f">%d x %d tiles</text>`+"\n", lx, ly, color(si), lx+8, ly+4, sz, sz)
	}
	lx := left + float64(len(sizes))*120
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black" stroke-width="1.5"/><text x="%.1f" y="%.1f">shared-processor model</text>`+"\n", lx, ly, lx+20, ly, lx+24, ly+4)
	lx += 170
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black" stroke-dasharray="2,3"/><text x="%.1f" y="%.1f">CAP eq. (1), P processors</text>`+"\n", lx, ly, lx+20, ly, lx+24, ly+4)
	b.WriteString("</svg>\n")
	return b.String()
}

// niceMax rounds v up to 1, 2 or 5 times a power of ten.
func niceMax(v float64) float64 {
	if v <= 0 {
		return 1
	}
	m := math.Pow(10, math.Floor(math.Log10(v)))
	for _, k := range []float64{1, 2, 5, 10} {
		if k*m >= v {
			return k * m
		}
	}
	return 10 * m
}

// throughput composes a gx x gy grid of 1392 x 1040 tiles out of core and
// writes its pyramidal BigTIFF, alternating with dd's direct write of as
// many bytes, rounds times.
func (o *options) throughput() error {
	gx, gy, rounds, mem, dir := o.gx, o.gy, o.rounds, o.mem, o.dir
	const tw, th = 1392, 1040
	r := rand.New(rand.NewPCG(3, 4))
	var distinct []*image.Gray16
	for range 8 {
		img := image.NewGray16(image.Rect(0, 0, tw, th))
		for i := range img.Pix {
			img.Pix[i] = byte(r.UintN(256))
		}
		distinct = append(distinct, img)
	}
	var slots []compose.Slot
	for y := range gy {
		for x := range gx {
			slots = append(slots, compose.Slot{X: x*tw*9/10 + int(r.UintN(9)), Y: y*th*9/10 + int(r.UintN(9)), Width: tw, Height: th})
		}
	}
	mw, mh, err := compose.MosaicSize(slots)
	if err != nil {
		return err
	}
	full := int64(2 * mw * mh)
	fmt.Fprintf(o.stdout, "mosaic %d x %d (%d MB of pixels), %d tiles, cache %d MiB\n", mw, mh, full/1e6, len(slots), mem>>20)
	loadTile := func(i int) (*image.Gray16, error) { return distinct[i%len(distinct)], nil }
	if o.paths["model"] {
		return o.mosaicModel(slots, loadTile, mw, mh)
	}
	for round := range rounds {
		ddRate, err := o.dd(full)
		if err != nil { // tmpfs refuses O_DIRECT, for one
			fmt.Fprintln(o.stdout, "dd:", err)
		}
		fmt.Fprintf(o.stdout, "round %d: load %s | dd %.0f MB/s\n", round+1, load(), ddRate/1e6)
		tif := filepath.Join(dir, "mosaic.tif")
		if o.paths["tiled"] {
			if err := o.viaTileFile(slots, loadTile, mw, mh, full, tif, ddRate); err != nil {
				return err
			}
		}
		if !o.paths["stream"] {
			continue
		}
		// The streamed path: ComposeBigTIFF, no tile file.
		c0, t0 := cputime.Process(), time.Now()
		out, err := tiled.CreateBigTIFF(tif, mw, mh, o.tile, o.tile, 0, dir, mem/4)
		if err != nil {
			return err
		}
		err = compose.ComposeBigTIFF(context.Background(), slots, loadTile, compose.Linear, out)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		tot, cpu := time.Since(t0).Seconds(), (cputime.Process() - c0).Seconds()
		size, tsync, err := syncRemove(tif)
		if err != nil {
			return err
		}
		fmt.Fprintf(o.stdout, "  stream: compose + BigTIFF %.2f s: %.0f MB/s of mosaic, %.0f MB/s of BigTIFF; with fsync %.2f s: %.0f MB/s | dd/mosaic %.1fx, dd/BigTIFF %.1fx | processor time %.2f s (%.2f of a core)\n",
			tot, float64(full)/tot/1e6, float64(size)/tot/1e6, tot+tsync.Seconds(), float64(full)/(tot+tsync.Seconds())/1e6, ddRate/(float64(full)/tot), ddRate/(float64(size)/tot), cpu, cpu/tot)
	}
	fmt.Fprintf(o.stdout, "peak RSS %s\n", vmHWM())
	return nil
}

// mosaicModel applies CAP's model to the streamed mosaic
// (compose.ComposeBigTIFF), for each BigTIFF tile size and each number of
// processors the Go runtime may use (GOMAXPROCS: the band's rows and its
// cutting into tiles each run on that many goroutines), in rounds
// interleaved: a run that measures the pipeline's terms per band
// (compose.ComposeBigTIFFTerms), the processors free c, then a run timed
// alone. It prints the terms, the prediction from the fastest terms
// against the fastest run, and from each round's against its run (medians).
func (o *options) mosaicModel(slots []compose.Slot, loadTile func(int) (*image.Gray16, error), mw, mh int) error {
	rounds, mem, dir, sizes, workers := o.rounds, o.mem, o.dir, o.sizes, o.workers
	type sample struct {
		terms compose.BandTerms
		c     float64
		run   time.Duration
	}
	type config struct{ size, p int }
	var configs []config
	for _, sz := range sizes {
		for _, p := range workers {
			configs = append(configs, config{sz, p})
		}
	}
	tif := filepath.Join(dir, "mosaic.tif")
	stream := func(sz int, measure bool) (compose.BandTerms, time.Duration, error) {
		t0 := time.Now()
		out, err := tiled.CreateBigTIFF(tif, mw, mh, sz, sz, 0, dir, mem/4)
		if err != nil {
			return compose.BandTerms{}, 0, err
		}
		var terms compose.BandTerms
		if measure {
			terms, err = compose.ComposeBigTIFFTerms(context.Background(), slots, loadTile, compose.Linear, out)
		} else {
			err = compose.ComposeBigTIFF(context.Background(), slots, loadTile, compose.Linear, out)
		}
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		d := time.Since(t0)
		if err == nil {
			err = os.Remove(tif)
		}
		return terms, d, err
	}
	procs := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(procs)
	samples := make(map[config][]sample)
	for round := range rounds {
		fmt.Fprintf(o.stdout, "round %d: load %s\n", round+1, load())
		for _, cf := range configs {
			runtime.GOMAXPROCS(cf.p)
			terms, _, err := stream(cf.size, true)
			if err != nil {
				return err
			}
			c := o.parallelism()
			_, d, err := stream(cf.size, false)
			if err != nil {
				return err
			}
			samples[cf] = append(samples[cf], sample{terms, c, d})
		}
	}
	runtime.GOMAXPROCS(procs)
	// Loading and composing a band run one after the other on the sweep's
	// goroutine, so they make one stage: t_p below is both; the write
	// stage (t_m) runs beside it. One band at a time in each stage: P = 1
	// in equation (1), the P processors working inside each band.
	predict := func(t compose.BandTerms, c float64) time.Duration {
		n := max(t.Bands, 1)
		m := cap.Terms{Tp: (t.Load + t.Compose) / time.Duration(n), Tm: t.Write / time.Duration(n)}
		return m.PredictShared(n, 1, c)
	}
	fmt.Fprintln(o.stdout)
	fmt.Fprintln(o.stdout, "| tile | P | bands | t_d ms | t_p ms | t_m ms | c | model s | fastest s | err | typical model s | median s | err |")
	fmt.Fprintln(o.stdout, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, cf := range configs {
		ss := samples[cf]
		best := ss[0].terms
		var c float64
		var runs, preds []float64
		for _, s := range ss {
			best.Load, best.Compose, best.Write = min(best.Load, s.terms.Load), min(best.Compose, s.terms.Compose), min(best.Write, s.terms.Write)
			c = max(c, s.c)
			runs = append(runs, s.run.Seconds())
			preds = append(preds, predict(s.terms, s.c).Seconds())
		}
		n := time.Duration(max(best.Bands, 1))
		ms := func(d time.Duration) float64 { return float64(d/n) / 1e6 }
		model, fastest := predict(best, c).Seconds(), slices.Min(runs)
		tm, med := median(preds), median(runs)
		fmt.Fprintf(o.stdout, "| %d | %d | %d | %.2f | %.2f | %.2f | %.2f | %.3f | %.3f | %+.0f%% | %.3f | %.3f | %+.0f%% |\n",
			cf.size, cf.p, best.Bands, ms(best.Load), ms(best.Compose), ms(best.Write), c,
			model, fastest, 100*(model/fastest-1), tm, med, 100*(tm/med-1))
	}
	return nil
}

// viaTileFile composes the mosaic into a tile file (ComposeTiled), writes
// the BigTIFF from it and reports the rates.
func (o *options) viaTileFile(slots []compose.Slot, loadTile func(int) (*image.Gray16, error), mw, mh int, full int64, tif string, ddRate float64) error {
	mem, dir := o.mem, o.dir
	dst, err := tiled.CreateTemp(dir, mw, mh, o.tile, o.tile, mem)
	if err != nil {
		return err
	}
	t0 := time.Now()
	err = compose.ComposeTiled(context.Background(), slots, loadTile, compose.Linear, dst)
	t1 := time.Now()
	if err == nil {
		err = tiled.WriteBigTIFF(tif, dst, 0, dir, mem/4)
	}
	t2 := time.Now()
	dst.Close()
	if err != nil {
		return err
	}
	size, tsync, err := syncRemove(tif)
	if err != nil {
		return err
	}
	tot := t2.Sub(t0).Seconds()
	fmt.Fprintf(o.stdout, "  tiled:  compose %.2f s + BigTIFF %.2f s = %.2f s: %.0f MB/s of mosaic, %.0f MB/s of BigTIFF (%d MB); with fsync %.2f s: %.0f MB/s | dd/mosaic %.1fx\n",
		t1.Sub(t0).Seconds(), t2.Sub(t1).Seconds(), tot, float64(full)/tot/1e6, float64(size)/tot/1e6, size/1e6,
		tot+tsync.Seconds(), float64(full)/(tot+tsync.Seconds())/1e6, ddRate/(float64(full)/tot))
	return nil
}

// syncRemove fsyncs the file at path, removes it and returns its size
// and the fsync's time.
func syncRemove(path string) (int64, time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	err = f.Sync()
	d := time.Since(t0)
	st, serr := f.Stat()
	f.Close()
	os.Remove(path)
	if err == nil {
		err = serr
	}
	if err != nil {
		return 0, 0, err
	}
	return st.Size(), d, nil
}

var ddRate = regexp.MustCompile(`copied, ([0-9.]+) s`)

// dd writes n bytes (rounded up to MiB) with dd's sequential write
// (oflag=direct, or conv=fdatasync with -dd fdatasync) into dir and returns its rate in bytes per second.
func (o *options) dd(n int64) (float64, error) {
	path := filepath.Join(o.dir, "dd.bin")
	defer os.Remove(path)
	mib := (n + 1<<20 - 1) >> 20
	how := "oflag=direct"
	if o.ddMode == "fdatasync" {
		how = "conv=fdatasync"
	}
	out, err := exec.Command("dd", "if=/dev/zero", "of="+path, "bs=1M", fmt.Sprint("count=", mib), how).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("dd: %v: %s", err, out)
	}
	m := ddRate.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("dd: no time in %q", out)
	}
	s, _ := strconv.ParseFloat(string(m[1]), 64)
	return float64(mib<<20) / s, nil
}

// vmHWM is the process's peak resident set size.
func vmHWM() string {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			return strings.TrimSpace(strings.TrimPrefix(l, "VmHWM:"))
		}
	}
	return "unknown"
}
