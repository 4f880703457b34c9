// Command matmul multiplies matrices on the HTGS block task graph of
// package matmul, in memory or out of core.
//
// Usage:
//
//	matmul -a A.npy -b B.npy -o C.npy [flags]   multiply .npy files ('<f8', C order, 2-D)
//	matmul -n N [-o C.npy] [-verify] [flags]    multiply random N x N matrices
//
// Flags:
//
//	-block B      block size (default 512; with -kernel cuda 2048, or 4096 for
//	              matrices of 8192 and more; with OpenBLAS in memory and no
//	              -threads or -blas-threads, about half the largest side)
//	-threads T    copies of the multiply task (default: the number of CPUs;
//	              with OpenBLAS in memory and no -block or -blas-threads, one
//	              copy whose library calls use every CPU)
//	-blas-threads N  OpenBLAS threads of each block product (default 1, or
//	              every CPU with the in-memory default above)
//	-mem SIZE     RAM budget for matrix blocks, such as 64MiB or 2GiB; when the
//	              matrices (A, B and C) do not fit in it, or in the memory the
//	              machine has available, the product runs out of core: blocks
//	              are read from and written to .npy files on demand. A budget
//	              above the available memory is lowered to it.
//	-kernel K     block kernel: auto (default: openblas when libopenblas.so.0
//	              is installed, else gonum), gonum, openblas (loaded at run
//	              time, no build tag), cuda (build with -tags cuda)
//	-verify       compare the result with one multithreaded gonum Dgemm call
//	              (needs A, B, C and the reference in memory); exit status 1
//	              if it differs. NaN and infinities are compared by position.
//	-profile DIR  write the run's profile into DIR: matmul.dot (the graph),
//	              matmul.svg (when Graphviz's dot is installed),
//	              matmul-trace.json (Chrome trace), matmul-stats.json (task
//	              statistics) and matmul-report.json (plan, kernel, GFLOP/s,
//	              bytes moved)
//	-progress     draw the progress bars even when stderr is not a terminal
//	-op OP        mul (default) or hadamard (element-wise product)
//	-seed S       seed of the random matrices (A uses S, B uses S+1)
//	-tmp DIR      directory for the temporary files of an out-of-core -n run
//	-pin          with -kernel cuda in memory: page-lock A, B and C before the
//	              timed product (matmul.PinHost), so that blocks go straight
//	              between them and the GPUs by DMA, without staging copies
//	-host-copy S  with -kernel cuda: how blocks of ordinary memory reach the
//	              GPUs: staging (packed into pinned buffers by parallel
//	              copies), register (A, B and C page-locked in chunks before
//	              the product, counted in its time) or pipelined (chunks
//	              page-locked while the product runs; blocks not yet locked
//	              go through staging). Default: the package's choice (the
//	              environment variable HTGS_MATMUL_HOSTCOPY, which this sets).
//	-compare-xt   with -kernel cuda in memory (build with -tags cuda): after
//	              the product, run in the same process cuBLASXt on the same
//	              ordinary memory (as it is, then with cuBLASXt's pinning
//	              mode, which page-locks the operands within the call),
//	              then the graph and cuBLASXt on A, B and C
//	              page-locked (PinHost), then one cuBLAS DGEMM on operands
//	              already on the GPU, and print the rates side by side
//	-xt-block N   cuBLASXt's tile side for -compare-xt (default 4096)
//
// C is written to a temporary file next to -o and renamed onto it only when
// the whole run succeeds (including -verify and -profile): a failed run
// leaves an existing file as it was. -o may not name an input. Before any
// work, matmul checks that the product fits in the machine's memory (or,
// out of core, in -mem) and its files on the disk, and refuses with the
// size needed otherwise.
//
// The exit status is 0 on success, 1 when the product fails or -verify finds
// a wrong result, and 2 for bad usage.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gohtgs/htgs/examples/internal/cli"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/internal/outfile"
	"github.com/gohtgs/htgs/internal/progress"
	"github.com/gohtgs/htgs/internal/units"
	"github.com/gohtgs/htgs/matmul"
	"github.com/gohtgs/htgs/matmul/npy"
)

const prog = "matmul"

func main() {
	// SIGTERM too, so that a killed run still removes its temporary files.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// options are the parsed command line.
type options struct {
	a, b, o    string
	n          int
	seed       uint64
	verify     bool
	block      int
	threads    int
	blasThr    int
	mem        int64
	gpuMem     int64
	kernel     matmul.Kernel
	profile    string
	progress   bool
	hadamard   bool
	pin        bool
	hostCopy   string
	compareXt  bool
	xtBlock    int
	httpAddr   string
	httpWait   bool
	live       *cli.Live // serving -http
	tmp        string
	stderrIsTT bool
}

// rawFlags are the flags parsed as strings before checking.
type rawFlags struct{ mem, gpuMem, kernel, op string }

func flagSet(o *options, raw *rawFlags) *flag.FlagSet {
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	fs.StringVar(&o.a, "a", "", "`A.npy`: the left operand")
	fs.StringVar(&o.b, "b", "", "`B.npy`: the right operand")
	fs.StringVar(&o.o, "o", "", "`C.npy`: where to write the product (replaced only when the run succeeds)")
	fs.IntVar(&o.n, "n", 0, "multiply random `N` x N matrices")
	fs.Uint64Var(&o.seed, "seed", 1, "`seed` of the random matrices")
	fs.BoolVar(&o.verify, "verify", false, "check the result against one gonum Dgemm call")
	fs.IntVar(&o.block, "block", 0, fmt.Sprintf("block `size` (default %d; with -kernel cuda %d, or %d for matrices of %d and more without -gpumem; with OpenBLAS in memory and no -threads or -blas-threads, about half the largest side)", matmul.DefaultBlockSize, matmul.DefaultDeviceBlockSize, matmul.LargeDeviceBlockSize, 2*matmul.LargeDeviceBlockSize))
	fs.IntVar(&o.threads, "threads", 0, "multiply-task `copies` (0: one per CPU; with OpenBLAS in memory and no -block or -blas-threads, one)")
	fs.IntVar(&o.blasThr, "blas-threads", 0, "OpenBLAS `threads` of each block product (0: 1, or every CPU with OpenBLAS in memory and no -block or -threads)")
	fs.StringVar(&raw.mem, "mem", "", "RAM `budget` for blocks, e.g. 64MiB; out of core when A, B and C do not fit (default: no limit)")
	fs.StringVar(&raw.gpuMem, "gpumem", "", "GPU memory `budget` per device for blocks with -kernel cuda (default: 3/4 of the free memory)")
	fs.StringVar(&raw.kernel, "kernel", "auto", "block `kernel`: "+strings.Join(matmul.KernelNames(), ", "))
	fs.StringVar(&o.profile, "profile", "", "write the graph (DOT, SVG), trace, statistics and report into `DIR`")
	fs.StringVar(&o.httpAddr, "http", "", cli.HTTPUsage)
	fs.BoolVar(&o.httpWait, "http-wait", false, cli.HTTPWaitUsage)
	fs.BoolVar(&o.progress, "progress", false, "draw the progress bars even if stderr is not a terminal")
	fs.StringVar(&raw.op, "op", "mul", "`operation`: mul or hadamard")
	fs.BoolVar(&o.pin, "pin", false, "with -kernel cuda in memory: page-lock A, B and C before the timed product (not counted in its time), so that blocks are copied straight between them and the GPUs")
	fs.StringVar(&o.hostCopy, "host-copy", "", "with -kernel cuda: how blocks of ordinary memory reach the GPUs: staging, register or pipelined (default: the package's)")
	fs.BoolVar(&o.compareXt, "compare-xt", false, "with -kernel cuda in memory: also run cuBLASXt, the graph and cuBLASXt on page-locked memory, and resident cuBLAS, and print the rates side by side")
	fs.IntVar(&o.xtBlock, "xt-block", 4096, "cuBLASXt tile `side` for -compare-xt")
	fs.StringVar(&o.tmp, "tmp", "", "`directory` for temporary files of out-of-core -n runs (default: the system's)")
	return fs
}

// usage writes the synopsis and the flags.
func usage(w io.Writer) {
	fmt.Fprintf(w, `usage:
  %[1]s -a A.npy -b B.npy -o C.npy [flags]   multiply .npy files ('<f8', C order, 2-D)
  %[1]s -n N [-o C.npy] [-verify] [flags]    multiply random N x N matrices

Without -mem the matrices are multiplied in memory; with -mem SIZE, out of
core through .npy files when A, B and C do not fit in SIZE.

flags:
`, prog)
	cli.PrintDefaults(w, flagSet(&options{}, &rawFlags{}))
}

func parse(args []string) (*options, error) {
	o, raw := &options{}, &rawFlags{}
	fs := flagSet(o, raw)
	if err := cli.Parse(fs, args); err != nil {
		return nil, err
	}
	if err := cli.CheckHTTP(o.httpAddr, o.httpWait); err != nil {
		return nil, err
	}
	files := o.a != "" || o.b != ""
	blockSet := false // -block 0 is refused; left out, the kernel's default
	fs.Visit(func(f *flag.Flag) { blockSet = blockSet || f.Name == "block" })
	switch {
	case files && o.n != 0:
		return nil, cli.Usagef("give either -a/-b files or -n, not both")
	case !files && o.n == 0:
		return nil, cli.Usagef("nothing to multiply: give -a A.npy -b B.npy -o C.npy, or -n N")
	case files && (o.a == "" || o.b == ""):
		return nil, cli.Usagef("-a and -b go together")
	case files && o.o == "":
		return nil, cli.Usagef("-o C.npy is required with -a and -b")
	case o.n < 0:
		return nil, cli.Usagef("-n %d: want a positive size", o.n)
	case o.block < 0 || blockSet && o.block == 0:
		return nil, cli.Usagef("-block %d: want a positive block size", o.block)
	case o.threads < 0:
		return nil, cli.Usagef("-threads %d: want a positive count (or 0 for one per CPU)", o.threads)
	case o.blasThr < 0:
		return nil, cli.Usagef("-blas-threads %d: want a positive count (or 0 for the default)", o.blasThr)
	case o.xtBlock < 1:
		return nil, cli.Usagef("-xt-block %d: want a positive tile side", o.xtBlock)
	}
	switch o.hostCopy {
	case "", "staging", "register", "pipelined":
	default:
		return nil, cli.Usagef("-host-copy %q: want staging, register or pipelined", o.hostCopy)
	}
	switch raw.op {
	case "mul":
	case "hadamard":
		o.hadamard = true
	default:
		return nil, cli.Usagef("-op %q: want mul or hadamard", raw.op)
	}
	if raw.mem != "" {
		v, err := units.ParseBytes(raw.mem)
		if err != nil {
			return nil, cli.Usagef("-mem: %v", err)
		}
		if v == 0 {
			return nil, cli.Usagef("-mem %s: want a positive size", raw.mem)
		}
		o.mem = v
	}
	if raw.gpuMem != "" {
		v, err := units.ParseBytes(raw.gpuMem)
		if err != nil {
			return nil, cli.Usagef("-gpumem: %v", err)
		}
		if v == 0 {
			return nil, cli.Usagef("-gpumem %s: want a positive size", raw.gpuMem)
		}
		o.gpuMem = v
	}
	k, err := matmul.LookupKernel(raw.kernel)
	if err != nil {
		return nil, cli.Usagef("-kernel %s: %s", raw.kernel, strings.TrimPrefix(err.Error(), "matmul: "))
	}
	o.kernel = k
	if (o.hostCopy != "" || o.compareXt) && k.Name() != "cuda" {
		return nil, cli.Usagef("-host-copy and -compare-xt need -kernel cuda")
	}
	if o.compareXt && (o.hadamard || o.mem != 0) {
		return nil, cli.Usagef("-compare-xt compares products in memory: not with -op hadamard or -mem")
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := func() error {
		o, err := parse(args)
		if err != nil {
			return err
		}
		o.stderrIsTT = progress.IsTerminal(stderr)
		return o.execute(ctx, stdout, stderr)
	}()
	if err != nil {
		err = trimmed{err}
	}
	return cli.Exit(prog, err, stdout, stderr, usage)
}

// trimmed drops the "matmul: " prefix of the matmul package's errors, which
// cli.Exit adds back as the program's name.
type trimmed struct{ error }

func (t trimmed) Error() string { return strings.TrimPrefix(t.error.Error(), "matmul: ") }
func (t trimmed) Unwrap() error { return t.error }

// errVerify marks a wrong result found by -verify.
var errVerify = errors.New("verification failed")

// showProgress reports whether progress bars and phase lines are drawn.
func (o *options) showProgress() bool { return o.progress || o.stderrIsTT }

// phase prints a line naming a phase that takes time, when progress is
// shown.
func (o *options) phase(stderr io.Writer, format string, args ...any) {
	if o.showProgress() {
		fmt.Fprintf(stderr, format+"\n", args...)
	}
}

// newBar returns a progress bar counting unit, or nil when progress is not
// shown.
func (o *options) newBar(stderr io.Writer, unit string) *progressBar {
	if !o.showProgress() {
		return nil
	}
	return &progressBar{w: stderr, unit: unit}
}

// observer keeps the runtime of the product's graph for -profile.
type observer struct{ rt *graph.Execution }

func (o *options) config(stderr io.Writer, budget int64) (matmul.Config, *progressBar, *observer) {
	cfg := matmul.Config{BlockSize: o.block, Copies: o.threads, BLASThreads: o.blasThr, Kernel: o.kernel, MemoryBudget: budget, DeviceMemory: o.gpuMem}
	bar := o.newBar(stderr, "blocks of C")
	if bar != nil {
		cfg.Progress = bar.update
	}
	obs := &observer{}
	if o.profile != "" || o.live != nil {
		cfg.StartOptions = []graph.StartOption{graph.WithTrace()}
		cfg.Observe = func(run *graph.Execution) { obs.rt = run; o.live.Observe(run) }
	}
	return cfg, bar, obs
}

func (o *options) execute(ctx context.Context, stdout, stderr io.Writer) error {
	if o.hostCopy != "" {
		// The knob that package matmul reads for each product.
		if err := os.Setenv("HTGS_MATMUL_HOSTCOPY", o.hostCopy); err != nil {
			return err
		}
	}
	live, err := cli.ServeLive(prog, o.httpAddr, stdout)
	if err != nil {
		return err
	}
	defer live.Close(ctx, o.httpWait, stdout)
	o.live = live
	if o.n > 0 {
		return o.random(ctx, stdout, stderr)
	}
	return o.files(ctx, stdout, stderr)
}

// multiply runs the chosen operation.
func (o *options) multiply(ctx context.Context, a, b matmul.Source, c matmul.Sink, cfg matmul.Config) (*matmul.Report, error) {
	if o.hadamard {
		return matmul.Hadamard(ctx, a, b, c, cfg)
	}
	return matmul.Multiply(ctx, a, b, c, cfg)
}

func (o *options) outShape(a, b matmul.Source) (int, int, error) {
	if o.hadamard {
		if a.Rows() != b.Rows() || a.Cols() != b.Cols() {
			return 0, 0, fmt.Errorf("hadamard product needs equal shapes: A is %dx%d, B is %dx%d", a.Rows(), a.Cols(), b.Rows(), b.Cols())
		}
		return a.Rows(), a.Cols(), nil
	}
	if a.Cols() != b.Rows() {
		return 0, 0, fmt.Errorf("inner dimensions differ: A is %dx%d, B is %dx%d", a.Rows(), a.Cols(), b.Rows(), b.Cols())
	}
	return a.Rows(), b.Cols(), nil
}

// checkNotInput refuses an -o that is -a or -b, or a link to either:
// writing C would destroy an operand before it is read.
func (o *options) checkNotInput() error {
	for _, in := range []struct{ flag, path string }{{"-a", o.a}, {"-b", o.b}} {
		same, err := outfile.SameFile(o.o, in.path)
		if err != nil {
			return err
		}
		if same {
			return cli.Usagef("-o %s is the same file as %s %s: writing C would destroy an input", o.o, in.flag, in.path)
		}
	}
	return nil
}

// outputPath is the file that -o names, through a symbolic link: the link's
// target is replaced, not the link.
func (o *options) outputPath() string {
	if t, err := filepath.EvalSymlinks(o.o); err == nil {
		return t
	}
	return o.o
}

// prepare makes the checks that need no work: the disk space of the files
// the run writes and the -profile folder; then it reserves the temporary
// file of -o (nil without -o), after removing (and telling stderr) the
// temporary files of -o that killed runs left. The caller must Commit or
// Abort it.
func (o *options) prepare(stderr io.Writer, writes ...diskWrite) (*outfile.Output, error) {
	if err := checkDisk(writes...); err != nil {
		return nil, err
	}
	if o.profile != "" {
		if err := outfile.CheckDir(o.profile); err != nil {
			return nil, fmt.Errorf("-profile: %w", err)
		}
	}
	if o.o == "" {
		return nil, nil
	}
	if st, err := os.Stat(o.o); err == nil && st.IsDir() {
		return nil, cli.Usagef("-o %s is a directory: want a file name such as %s", o.o, filepath.Join(o.o, "C.npy"))
	}
	// A temporary file that an earlier run, killed while it wrote -o,
	// left beside it is removed (only when its writer is gone).
	stale, err := outfile.RemoveStale(o.outputPath())
	for _, st := range stale {
		fmt.Fprintln(stderr, st)
	}
	if err != nil {
		return nil, fmt.Errorf("-o: %w", err)
	}
	out, err := outfile.NewOutput(o.outputPath())
	if err != nil {
		return nil, fmt.Errorf("C: %w", err)
	}
	return out, nil
}

// abort removes out's temporary file unless it was committed; out may be
// nil (no -o).
func abort(out *outfile.Output) {
	if out != nil {
		out.Abort()
	}
}

// outputDir is the folder where C's temporary file goes.
func (o *options) outputDir() string { return filepath.Dir(o.outputPath()) }

// files multiplies -a by -b into -o: in memory when the three matrices fit
// in the budget and the machine's memory, else out of core.
func (o *options) files(ctx context.Context, stdout, stderr io.Writer) error {
	if err := o.checkNotInput(); err != nil {
		return err
	}
	fa, err := npy.Open(o.a)
	if err != nil {
		return fmt.Errorf("A: %w", err)
	}
	defer fa.Close()
	fb, err := npy.Open(o.b)
	if err != nil {
		return fmt.Errorf("B: %w", err)
	}
	defer fb.Close()
	m, n, err := o.outShape(fa, fb)
	if err != nil {
		return fmt.Errorf("%s and %s: %w", o.a, o.b, err)
	}
	ec := elements(m, n)
	inMemory, budget, err := o.placement(stderr, elements(fa.Rows(), fa.Cols()), elements(fb.Rows(), fb.Cols()), ec)
	if err != nil {
		return err
	}
	out, err := o.prepare(stderr, diskWrite{o.outputDir(), fileBytes(ec)})
	if err != nil {
		return err
	}
	defer abort(out)
	return o.product(ctx, stdout, stderr, fa, fb, m, n, inMemory, budget, out, "")
}

// random multiplies random N x N matrices: in memory when they fit in the
// budget and the machine's memory, else through temporary .npy files.
func (o *options) random(ctx context.Context, stdout, stderr io.Writer) error {
	e := elements(o.n, o.n)
	inMemory, budget, err := o.placement(stderr, e, e, e)
	if err != nil {
		return err
	}
	size := fileBytes(e)
	if inMemory {
		var writes []diskWrite
		if o.o != "" {
			writes = append(writes, diskWrite{o.outputDir(), size})
		}
		out, err := o.prepare(stderr, writes...)
		if err != nil {
			return err
		}
		defer abort(out)
		o.phase(stderr, "generating random A and B (%s each)", units.FormatBytes(8*int64(e)))
		a, b := matmul.Random(o.n, o.n, o.seed), matmul.Random(o.n, o.n, o.seed+1)
		return o.product(ctx, stdout, stderr, a, b, o.n, o.n, true, budget, out, "")
	}
	tmp := o.tmp
	if tmp == "" {
		tmp = os.TempDir()
	}
	writes := []diskWrite{{tmp, size}, {tmp, size}}
	if o.o != "" {
		writes = append(writes, diskWrite{o.outputDir(), size})
	} else {
		writes = append(writes, diskWrite{tmp, size})
	}
	out, err := o.prepare(stderr, writes...)
	if err != nil {
		return err
	}
	defer abort(out)
	dir, err := os.MkdirTemp(o.tmp, "matmul-")
	if err != nil {
		return fmt.Errorf("temporary directory: %w", err)
	}
	defer os.RemoveAll(dir)
	ap, bp := filepath.Join(dir, "a.npy"), filepath.Join(dir, "b.npy")
	fmt.Fprintf(stderr, "out of core: writing random A and B (%s each) to %s\n", units.FormatBytes(8*int64(e)), dir)
	if err := writeRandom(ctx, ap, o.n, o.seed, o.newBar(stderr, "rows of random A")); err != nil {
		return err
	}
	if err := writeRandom(ctx, bp, o.n, o.seed+1, o.newBar(stderr, "rows of random B")); err != nil {
		return err
	}
	fa, err := npy.Open(ap)
	if err != nil {
		return fmt.Errorf("A: %w", err)
	}
	defer fa.Close()
	fb, err := npy.Open(bp)
	if err != nil {
		return fmt.Errorf("B: %w", err)
	}
	defer fb.Close()
	return o.product(ctx, stdout, stderr, fa, fb, o.n, o.n, false, budget, out, filepath.Join(dir, "c.npy"))
}

// product computes C (m x n) from a and b, in memory or out of core; checks
// it with -verify, writes the -profile and commits out (C's file, nil when
// C is not kept). Out of core without out, C goes to scratch.
func (o *options) product(ctx context.Context, stdout, stderr io.Writer, a, b matmul.Source, m, n int,
	inMemory bool, budget int64, out *outfile.Output, scratch string) error {
	cfg, bar, obs := o.config(stderr, budget)
	var (
		cDense *matmul.Dense
		cPath  string // C's file out of core
		rep    *matmul.Report
		err    error
	)
	if inMemory {
		if a, err = o.load(stderr, a, "A"); err != nil {
			return err
		}
		if b, err = o.load(stderr, b, "B"); err != nil {
			return err
		}
		cDense = matmul.NewDense(m, n)
		if err := o.warmUp(ctx, stdout, cfg, m, a.Cols(), n, cDense); err != nil {
			return err
		}
		if o.pin && !o.hadamard {
			t0 := time.Now()
			unpin, err := matmul.PinHost(cfg.Kernel, asDense(a), asDense(b), cDense)
			if err != nil {
				return fmt.Errorf("-pin: %w", err)
			}
			defer unpin()
			fmt.Fprintf(stdout, "page-locked A, B and C in %.3f s, not in the product's time\n", time.Since(t0).Seconds())
		}
		rep, err = o.multiply(ctx, a, b, cDense, cfg)
		bar.finish()
		if err != nil {
			return err
		}
		if out != nil {
			if err := npy.Write(out.Temp, m, n, cDense.Data); err != nil {
				return fmt.Errorf("C: %w", err)
			}
		}
	} else {
		cPath = scratch
		if out != nil {
			cPath = out.Temp
		}
		fc, err := npy.Create(cPath, m, n)
		if err != nil {
			return fmt.Errorf("C: %w", err)
		}
		if err = o.warmUp(ctx, stdout, cfg, m, a.Cols(), n, nil); err == nil {
			rep, err = o.multiply(ctx, a, b, fc, cfg)
		}
		bar.finish()
		if cerr := fc.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("C: closing %s: %w", cPath, cerr)
		}
		if err != nil {
			return err
		}
	}
	o.summary(stdout, rep)
	if o.compareXt {
		if err := compareXt(ctx, stdout, o, asDense(a), asDense(b), cDense, cfg, rep); err != nil {
			return fmt.Errorf("-compare-xt: %w", err)
		}
	}
	if o.verify {
		da, db, dc := asDense(a), asDense(b), cDense
		if !inMemory {
			o.phase(stderr, "verify: reading A, B and C into memory")
			if da, err = readDense(a); err != nil {
				return err
			}
			if db, err = readDense(b); err != nil {
				return err
			}
			if dc, err = readFile(cPath); err != nil {
				return err
			}
		}
		if err := o.check(stdout, stderr, da, db, dc); err != nil {
			if errors.Is(err, errVerify) && out != nil {
				return fmt.Errorf("%w: %s left as it was", err, o.o)
			}
			return err
		}
	}
	if o.profile != "" {
		if err := o.writeProfile(stdout, stderr, rep, obs.rt); err != nil {
			return err
		}
	}
	if out != nil {
		if err := out.Commit(); err != nil {
			return fmt.Errorf("C: %w", err)
		}
	}
	return nil
}

// load returns s in memory: s itself if it is a *matmul.Dense, else its
// contents read whole.
func (o *options) load(stderr io.Writer, s matmul.Source, what string) (*matmul.Dense, error) {
	if d := asDense(s); d != nil {
		return d, nil
	}
	o.phase(stderr, "reading %s into memory", what)
	return readDense(s)
}

func asDense(s matmul.Source) *matmul.Dense {
	d, _ := s.(*matmul.Dense)
	return d
}

// readDense reads a *npy.File (or returns a *matmul.Dense) whole.
func readDense(s matmul.Source) (*matmul.Dense, error) {
	if d := asDense(s); d != nil {
		return d, nil
	}
	f := s.(*npy.File)
	data, err := f.ReadAll()
	if err != nil {
		return nil, err
	}
	return &matmul.Dense{R: f.Rows(), C: f.Cols(), Stride: f.Cols(), Data: data}, nil
}

func readFile(name string) (*matmul.Dense, error) {
	r, c, data, err := npy.Read(name)
	if err != nil {
		return nil, err
	}
	return &matmul.Dense{R: r, C: c, Stride: c, Data: data}, nil
}

// writeRandom writes matmul.Random(n, n, seed) to name a few rows at a time.
func writeRandom(ctx context.Context, name string, n int, seed uint64, bar *progressBar) error {
	w, err := npy.Create(name, n, n)
	if err != nil {
		return err
	}
	rs := matmul.NewRandomStream(seed)
	rows := max(1, (1<<20)/max(1, n)) // about 8 MiB per chunk
	buf := make([]float64, min(rows, n)*n)
	for r := 0; r < n && err == nil; r += rows {
		if err = ctx.Err(); err != nil {
			break
		}
		k := min(rows, n-r)
		rs.Fill(buf[:k*n])
		err = w.WriteBlock(r, 0, k, n, buf[:k*n])
		bar.update(r+k, n)
	}
	bar.finish()
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return err
}

// warmUp readies the cuda kernel before the timed product, as benchmarks
// do: one product of 2x2 blocks of the m x k by k x n product's size (the
// smaller of its block size and its sides) creates the CUDA
// context, loads cuBLAS and allocates the pinned staging buffers and some
// device blocks (which the kernel keeps for the product: pinning a buffer
// of 128 MiB takes tens of milliseconds), and the pages of c, when given,
// are touched so that the first writes of C do not fault them in during
// the product. It prints how long that took; the product's time does not
// include it. Other kernels need no warm-up.
func (o *options) warmUp(ctx context.Context, stdout io.Writer, cfg matmul.Config, m, k, n int, c *matmul.Dense) error {
	if o.hadamard || o.kernel.Name() != "cuda" {
		return nil
	}
	start := time.Now()
	bs := max(1, min(cfg.BlockSizeFor(m, k, n), m, k, n))
	x := matmul.Random(2*bs, 2*bs, 1)
	warm := matmul.Config{BlockSize: bs, Kernel: cfg.Kernel, DeviceMemory: cfg.DeviceMemory}
	if _, _, err := matmul.MultiplyDense(ctx, x, x, warm); err != nil {
		return fmt.Errorf("GPU warm-up: %w", err)
	}
	if c != nil {
		touchPages(c.Data)
	}
	fmt.Fprintf(stdout, "GPU warm-up (CUDA context, cuBLAS, pinned staging, pages of C): %.3f s, not in the product's time\n", time.Since(start).Seconds())
	return nil
}

// touchPages writes a zero into every 4 KiB page of d (already zero), a
// band of pages per CPU.
func touchPages(d []float64) {
	const page = 512 // float64s
	workers := runtime.GOMAXPROCS(0)
	per := (len(d)/workers/page + 1) * page
	var wg sync.WaitGroup
	for lo := 0; lo < len(d); lo += per {
		wg.Add(1)
		go func(band []float64) {
			defer wg.Done()
			for i := 0; i < len(band); i += page {
				band[i] = 0
			}
		}(d[lo:min(len(d), lo+per)])
	}
	wg.Wait()
}

// summary prints the plan, the kernel and the rates.
func (o *options) summary(stdout io.Writer, rep *matmul.Report) {
	p := rep.Plan
	what := "C = A·B"
	if o.hadamard {
		what = "C = A∘B"
	}
	fmt.Fprintf(stdout, "%s: %v\n", what, p)
	fmt.Fprintf(stdout, "kernel: %s\n", rep.Kernel)
	fmt.Fprintln(stdout, matmul.BLASLine(o.kernel))
	fmt.Fprintf(stdout, "time: %.3f s, %.2f GFLOP/s", rep.Elapsed.Seconds(), rep.GFLOPS())
	if rep.BytesRead > 0 || !p.InMemory {
		fmt.Fprintf(stdout, ", read %s, wrote %s", units.FormatBytes(rep.BytesRead), units.FormatBytes(rep.BytesWritten))
	}
	fmt.Fprintln(stdout)
	if rep.UploadBytes > 0 || len(rep.DeviceBusy) > 0 {
		fmt.Fprintln(stdout, gpuLine(rep))
	}
}

// gpuLine reports a device run: its rate in TFLOP/s, the bytes each way
// against the least any plan moves (|A| + |B| + |C|), the rate from disk
// when the operands were read, and the fraction of the time each GPU had
// work queued.
func gpuLine(rep *matmul.Report) string {
	sec := max(rep.Elapsed.Seconds(), 1e-9)
	moved, least := rep.Plan.BusBytes()
	s := fmt.Sprintf("GPUs: %.2f TFLOP/s; to GPUs %s, from GPUs %s (%.1f GB/s together); bus %.2fx the minimum %s",
		rep.GFLOPS()/1e3, units.FormatBytes(rep.UploadBytes), units.FormatBytes(rep.DownloadBytes),
		float64(rep.UploadBytes+rep.DownloadBytes)/sec/1e9, float64(moved)/float64(max(1, least)), units.FormatBytes(least))
	if rep.BytesRead > 0 {
		s += fmt.Sprintf("; disk %.2f GB/s read", float64(rep.BytesRead)/sec/1e9)
	}
	if rep.HostCopy != "" {
		s += "; host copy " + rep.HostCopy
		if rep.PinnedBytes > 0 {
			s += fmt.Sprintf(" (page-locked %s)", units.FormatBytes(rep.PinnedBytes))
		}
		if all := rep.UploadBytes + rep.DownloadBytes; all > 0 {
			s += fmt.Sprintf(", %.0f%% of the bytes straight from/to host memory", 100*float64(rep.DirectBytes)/float64(all))
		}
	}
	if rep.HostPin > 0 {
		s += fmt.Sprintf("; page-locking %.3f s of the time", rep.HostPin.Seconds())
	}
	for i, f := range rep.DeviceBusy {
		sep := ", "
		if i == 0 {
			sep = "; busy: "
		}
		s += fmt.Sprintf("%sGPU %d %.0f%%", sep, i, 100*f)
	}
	return s
}

func (o *options) check(stdout, stderr io.Writer, a, b, c *matmul.Dense) error {
	if o.hadamard {
		o.phase(stderr, "verify: checking every element")
		bad := 0
		for i := range c.R {
			for j := range c.C {
				got, want := c.At(i, j), a.At(i, j)*b.At(i, j)
				if got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
					bad++
				}
			}
		}
		if bad > 0 {
			fmt.Fprintf(stdout, "verify: %d elements differ from a·b: FAIL\n", bad)
			return errVerify
		}
		fmt.Fprintln(stdout, "verify: every element equals a_ij·b_ij: PASS")
		return nil
	}
	o.phase(stderr, "verify: computing the reference with one gonum Dgemm call")
	ref := matmul.NewDense(c.R, c.C)
	start := time.Now()
	if err := matmul.Gonum().(matmul.Gemmer).Gemm(0, a, b, ref); err != nil {
		return err
	}
	refTime := time.Since(start)
	cmp, err := matmul.Compare(a, b, c, ref)
	if err != nil {
		return err
	}
	verdict := "PASS"
	if !cmp.OK {
		verdict = "FAIL"
	}
	mismatches := ""
	if cmp.Mismatches > 0 {
		mismatches = fmt.Sprintf("; %d elements differ from the reference in NaN or infinity", cmp.Mismatches)
	}
	fmt.Fprintf(stdout, "verify: one gonum Dgemm call took %.3f s; max abs error %.3g, relative to ‖A‖∞·max|B| %.3g (bound 2·γ_k = %.3g)%s: %s\n",
		refTime.Seconds(), cmp.MaxAbsErr, cmp.RelErr, cmp.Bound, mismatches, verdict)
	if !cmp.OK {
		return errVerify
	}
	return nil
}

// report is what -profile writes to DIR/matmul-report.json, beside the
// graph's statistics.
type report struct {
	Operation     string
	Plan          matmul.Plan
	Kernel        string
	ElapsedSec    float64
	GFLOPS        float64
	BytesRead     int64
	BytesWritten  int64
	Products      int64
	UploadBytes   int64
	DownloadBytes int64
	DeviceBusy    []float64 `json:",omitempty"`
}

// writeProfile writes the profile of the run into o.profile: what
// cli.WriteProfile writes for every program (when the graph ran) and the
// matmul report. A picture that Graphviz could not draw is a warning.
func (o *options) writeProfile(stdout, stderr io.Writer, rep *matmul.Report, rt *graph.Execution) error {
	dir := o.profile
	if rt != nil { // nil when the product was empty and no graph ran
		warn, err := cli.WriteProfile(dir, prog, rt)
		if err != nil {
			return err
		}
		if warn != nil {
			fmt.Fprintf(stderr, "%s: warning: %v\n", prog, warn)
		}
	}
	op := "mul"
	if o.hadamard {
		op = "hadamard"
	}
	r := report{Operation: op, Plan: rep.Plan, Kernel: rep.Kernel, ElapsedSec: rep.Elapsed.Seconds(), GFLOPS: rep.GFLOPS(),
		BytesRead: rep.BytesRead, BytesWritten: rep.BytesWritten, Products: rep.Products,
		UploadBytes: rep.UploadBytes, DownloadBytes: rep.DownloadBytes, DeviceBusy: rep.DeviceBusy}
	if err := outfile.WriteFile(filepath.Join(dir, prog+"-report.json"), func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}); err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	fmt.Fprintf(stdout, "profile: %s\n", dir)
	return nil
}

// progressBar is a progress.Bar whose total is learnt from the first
// update (matmul.Config.Progress passes it with each call). Its methods do
// nothing on a nil bar.
type progressBar struct {
	w    io.Writer
	unit string
	bar  *progress.Bar
}

func (p *progressBar) update(done, total int) {
	if p == nil {
		return
	}
	if p.bar == nil {
		p.bar = progress.New(p.w, "", int64(total), true).WithUnit(p.unit)
	}
	p.bar.Set(int64(done))
}

// finish ends the bar's line.
func (p *progressBar) finish() {
	if p != nil && p.bar != nil {
		p.bar.Finish()
	}
}
