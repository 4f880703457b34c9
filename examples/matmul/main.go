// Command matmul multiplies matrices on the HTGS block task graph of
// package matmul, in memory or out of core.
//
// Usage:
//
//	matmul -a A.npy -b B.npy -o C.npy [flags]   multiply .npy files ('<f8', C order, 2-D)
//	matmul -n N [-verify] [flags]               multiply random N x N matrices
//
// Flags:
//
//	-block B      block size (default 512)
//	-threads T    copies of the multiply task (default: the number of CPUs)
//	-mem SIZE     RAM budget for matrix blocks, such as 64MiB or 2GiB; when the
//	              matrices (A, B and C) do not fit in it, the product runs out of
//	              core: blocks are read from and written to .npy files on demand
//	-kernel K     block kernel: gonum (default), openblas (build with
//	              -tags openblas), cuda (build with -tags cuda)
//	-verify       compare the result with one multithreaded gonum Dgemm call
//	              (needs A, B and C in memory); exit status 1 if it differs
//	-profile DIR  write the run's statistics to DIR/stats.json
//	-progress     draw the progress bar even when stderr is not a terminal
//	-op OP        mul (default) or hadamard (element-wise product)
//	-seed S       seed of the random matrices (A uses S, B uses S+1)
//	-tmp DIR      directory for the temporary files of an out-of-core -n run
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
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/internal/units"
	"github.com/gohtgs/htgs/matmul"
	"github.com/gohtgs/htgs/matmul/npy"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
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
	mem        int64
	gpuMem     int64
	kernel     matmul.Kernel
	profile    string
	progress   bool
	hadamard   bool
	tmp        string
	stderrIsTT bool
}

// usageError is a command-line mistake (exit status 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

func parse(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("matmul", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{}
	var mem, gpuMem, kernel, op string
	fs.StringVar(&o.a, "a", "", "`A.npy`: the left operand")
	fs.StringVar(&o.b, "b", "", "`B.npy`: the right operand")
	fs.StringVar(&o.o, "o", "", "`C.npy`: where to write the product")
	fs.IntVar(&o.n, "n", 0, "multiply random `N` x N matrices")
	fs.Uint64Var(&o.seed, "seed", 1, "`seed` of the random matrices")
	fs.BoolVar(&o.verify, "verify", false, "check the result against one gonum Dgemm call")
	fs.IntVar(&o.block, "block", matmul.DefaultBlockSize, "block `size`")
	fs.IntVar(&o.threads, "threads", 0, "multiply-task `copies` (0: one per CPU)")
	fs.StringVar(&mem, "mem", "", "RAM `budget` for blocks, e.g. 64MiB (default: no limit)")
	fs.StringVar(&gpuMem, "gpumem", "", "GPU memory `budget` per device for blocks with -kernel cuda (default: 3/4 of the free memory)")
	fs.StringVar(&kernel, "kernel", "gonum", "block `kernel`: "+strings.Join(matmul.KernelNames(), ", "))
	fs.StringVar(&o.profile, "profile", "", "write run statistics into `DIR`")
	fs.BoolVar(&o.progress, "progress", false, "draw the progress bar even if stderr is not a terminal")
	fs.StringVar(&op, "op", "mul", "`operation`: mul or hadamard")
	fs.StringVar(&o.tmp, "tmp", "", "`directory` for temporary files of out-of-core -n runs (default: the system's)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage:\n  matmul -a A.npy -b B.npy -o C.npy [flags]\n  matmul -n N [-verify] [flags]\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected arguments: %q", fs.Args())
	}
	files := o.a != "" || o.b != ""
	switch {
	case files && o.n != 0:
		return nil, usagef("give either -a/-b files or -n, not both")
	case !files && o.n == 0:
		return nil, usagef("nothing to multiply: give -a A.npy -b B.npy -o C.npy, or -n N")
	case files && (o.a == "" || o.b == ""):
		return nil, usagef("-a and -b go together")
	case files && o.o == "":
		return nil, usagef("-o C.npy is required with -a and -b")
	case o.n < 0:
		return nil, usagef("-n %d: want a positive size", o.n)
	case o.block <= 0:
		return nil, usagef("-block %d: want a positive block size", o.block)
	case o.threads < 0:
		return nil, usagef("-threads %d: want a positive count (or 0 for one per CPU)", o.threads)
	}
	switch op {
	case "mul":
	case "hadamard":
		o.hadamard = true
	default:
		return nil, usagef("-op %q: want mul or hadamard", op)
	}
	if mem != "" {
		v, err := units.ParseBytes(mem)
		if err != nil {
			return nil, usagef("-mem: %v", err)
		}
		if v == 0 {
			return nil, usagef("-mem %s: want a positive size", mem)
		}
		o.mem = v
	}
	if gpuMem != "" {
		v, err := units.ParseBytes(gpuMem)
		if err != nil {
			return nil, usagef("-gpumem: %v", err)
		}
		if v == 0 {
			return nil, usagef("-gpumem %s: want a positive size", gpuMem)
		}
		o.gpuMem = v
	}
	k, err := matmul.LookupKernel(kernel)
	if err != nil {
		return nil, usagef("-kernel %s: %s", kernel, strings.TrimPrefix(err.Error(), "matmul: "))
	}
	o.kernel = k
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "matmul: %s\nrun matmul -h for usage\n", strings.TrimPrefix(err.Error(), "matmul: "))
		return 2
	}
	o.stderrIsTT = isTerminal(stderr)
	if err := o.execute(ctx, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "matmul: %s\n", strings.TrimPrefix(err.Error(), "matmul: "))
		return 1
	}
	return 0
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// errVerify marks a wrong result found by -verify.
var errVerify = errors.New("verification failed")

func (o *options) config(stderr io.Writer) (matmul.Config, *progressBar) {
	cfg := matmul.Config{BlockSize: o.block, Threads: o.threads, Kernel: o.kernel, MemoryBudget: o.mem, DeviceMemory: o.gpuMem}
	var bar *progressBar
	if o.progress || o.stderrIsTT {
		bar = &progressBar{w: stderr, start: time.Now()}
		cfg.Progress = bar.update
	}
	// Hook for the observability work: Config.Observe receives the graph
	// and its runtime when the run starts (DOT picture, live trace); for
	// now -profile only writes the final statistics (see writeProfile).
	return cfg, bar
}

// inMemory reports whether matrices of the given element counts fit in the
// budget (always, without -mem).
func (o *options) inMemory(elements ...int64) bool {
	if o.mem == 0 {
		return true
	}
	var total int64
	for _, e := range elements {
		total += 8 * e
	}
	return total <= o.mem
}

func (o *options) execute(ctx context.Context, stdout, stderr io.Writer) error {
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

// files multiplies -a by -b into -o: in memory when the three matrices fit
// in the budget, else out of core.
func (o *options) files(ctx context.Context, stdout, stderr io.Writer) (err error) {
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
	cfg, bar := o.config(stderr)
	if o.inMemory(int64(fa.Rows())*int64(fa.Cols()), int64(fb.Rows())*int64(fb.Cols()), int64(m)*int64(n)) {
		a, err := readDense(fa)
		if err != nil {
			return err
		}
		b, err := readDense(fb)
		if err != nil {
			return err
		}
		c := matmul.NewDense(m, n)
		rep, err := o.multiply(ctx, a, b, c, cfg)
		bar.finish()
		if err != nil {
			return err
		}
		if err := npy.Write(o.o, m, n, c.Data); err != nil {
			return fmt.Errorf("C: %w", err)
		}
		return o.finish(stdout, rep, a, b, c)
	}
	fc, err := npy.Create(o.o, m, n)
	if err != nil {
		return fmt.Errorf("C: %w", err)
	}
	rep, err := o.multiply(ctx, fa, fb, fc, cfg)
	bar.finish()
	if cerr := fc.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("C: closing %s: %w", o.o, cerr)
	}
	if err != nil {
		os.Remove(o.o)
		return err
	}
	if !o.verify {
		return o.finish(stdout, rep, nil, nil, nil)
	}
	a, err := readDense(fa)
	if err != nil {
		return err
	}
	b, err := readDense(fb)
	if err != nil {
		return err
	}
	c, err := readFile(o.o)
	if err != nil {
		return err
	}
	return o.finish(stdout, rep, a, b, c)
}

func readDense(f *npy.File) (*matmul.Dense, error) {
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

// random multiplies random N x N matrices: in memory when they fit in the
// budget, else through temporary .npy files.
func (o *options) random(ctx context.Context, stdout, stderr io.Writer) error {
	nn := int64(o.n) * int64(o.n)
	cfg, bar := o.config(stderr)
	if o.inMemory(nn, nn, nn) {
		a, b := matmul.Random(o.n, o.n, o.seed), matmul.Random(o.n, o.n, o.seed+1)
		c := matmul.NewDense(o.n, o.n)
		rep, err := o.multiply(ctx, a, b, c, cfg)
		bar.finish()
		if err != nil {
			return err
		}
		if o.o != "" {
			if err := npy.Write(o.o, o.n, o.n, c.Data); err != nil {
				return fmt.Errorf("C: %w", err)
			}
		}
		return o.finish(stdout, rep, a, b, c)
	}
	dir, err := os.MkdirTemp(o.tmp, "matmul-")
	if err != nil {
		return fmt.Errorf("temporary directory: %w", err)
	}
	defer os.RemoveAll(dir)
	ap, bp := filepath.Join(dir, "a.npy"), filepath.Join(dir, "b.npy")
	fmt.Fprintf(stderr, "out of core: writing random A and B (%s each) to %s\n", units.FormatBytes(8*nn), dir)
	if err := writeRandom(ap, o.n, o.seed); err != nil {
		return err
	}
	if err := writeRandom(bp, o.n, o.seed+1); err != nil {
		return err
	}
	keep := o.o != ""
	o.a, o.b = ap, bp
	if !keep {
		o.o = filepath.Join(dir, "c.npy")
	}
	return o.files(ctx, stdout, stderr)
}

// writeRandom writes matmul.Random(n, n, seed) to name a few rows at a time.
func writeRandom(name string, n int, seed uint64) error {
	w, err := npy.Create(name, n, n)
	if err != nil {
		return err
	}
	rs := matmul.NewRandomStream(seed)
	rows := max(1, (1<<20)/max(1, n)) // about 8 MiB per chunk
	buf := make([]float64, rows*n)
	for r := 0; r < n && err == nil; r += rows {
		k := min(rows, n-r)
		rs.Fill(buf[:k*n])
		err = w.WriteBlock(r, 0, k, n, buf[:k*n])
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return err
}

// finish prints the summary, checks the result with -verify (when a, b and
// c are given) and writes the profile.
func (o *options) finish(stdout io.Writer, rep *matmul.Report, a, b, c *matmul.Dense) error {
	p := rep.Plan
	what := "C = A·B"
	if o.hadamard {
		what = "C = A∘B"
	}
	fmt.Fprintf(stdout, "%s: %v\n", what, p)
	fmt.Fprintf(stdout, "kernel: %s\n", rep.Kernel)
	fmt.Fprintf(stdout, "time: %.3f s, %.2f GFLOP/s", rep.Elapsed.Seconds(), rep.GFLOPS())
	if rep.BytesRead > 0 || !p.InMemory {
		fmt.Fprintf(stdout, ", read %s, wrote %s", units.FormatBytes(rep.BytesRead), units.FormatBytes(rep.BytesWritten))
	}
	if rep.UploadBytes > 0 {
		fmt.Fprintf(stdout, ", to GPUs %s, from GPUs %s", units.FormatBytes(rep.UploadBytes), units.FormatBytes(rep.DownloadBytes))
	}
	fmt.Fprintln(stdout)
	var verr error
	if o.verify {
		verr = o.check(stdout, a, b, c)
	}
	if o.profile != "" {
		if err := writeProfile(o.profile, rep); err != nil {
			return errors.Join(verr, err)
		}
		fmt.Fprintf(stdout, "profile: %s\n", filepath.Join(o.profile, "stats.json"))
	}
	return verr
}

func (o *options) check(stdout io.Writer, a, b, c *matmul.Dense) error {
	if o.hadamard {
		bad := 0
		for i := range c.R {
			for j := range c.C {
				if c.At(i, j) != a.At(i, j)*b.At(i, j) {
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
	fmt.Fprintf(stdout, "verify: one gonum Dgemm call took %.3f s; max abs error %.3g, relative to ‖A‖∞·max|B| %.3g (bound 2·γ_k = %.3g): %s\n",
		refTime.Seconds(), cmp.MaxAbsErr, cmp.RelErr, cmp.Bound, verdict)
	if !cmp.OK {
		return errVerify
	}
	return nil
}

// profile is what -profile writes to DIR/stats.json.
type profile struct {
	Plan         matmul.Plan
	Kernel       string
	ElapsedSec   float64
	GFLOPS       float64
	BytesRead    int64
	BytesWritten int64
	Stats        graph.Stats
}

// writeProfile writes the run's statistics to dir/stats.json. The
// observability work will add the graph's DOT picture and an execution
// trace here.
func writeProfile(dir string, rep *matmul.Report) error {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	data, err := json.MarshalIndent(profile{Plan: rep.Plan, Kernel: rep.Kernel, ElapsedSec: rep.Elapsed.Seconds(),
		GFLOPS: rep.GFLOPS(), BytesRead: rep.BytesRead, BytesWritten: rep.BytesWritten, Stats: rep.Stats}, "", "  ")
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	name := filepath.Join(dir, "stats.json")
	if err := os.WriteFile(name, append(data, '\n'), 0o666); err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	return nil
}

// progressBar draws "[#####-----] done/total blocks of C" on stderr,
// redrawing at most every 100 ms.
type progressBar struct {
	w        io.Writer
	start    time.Time
	last     time.Time
	drawn    bool
	finished bool
}

func (p *progressBar) update(done, total int) {
	now := time.Now()
	if done < total && now.Sub(p.last) < 100*time.Millisecond {
		return
	}
	p.last, p.drawn = now, true
	const width = 30
	fill := width
	if total > 0 {
		fill = done * width / total
	}
	fmt.Fprintf(p.w, "\r[%s%s] %d/%d blocks of C %3d%% %6.1fs", strings.Repeat("#", fill), strings.Repeat("-", width-fill),
		done, total, done*100/max(1, total), now.Sub(p.start).Seconds())
}

// finish ends the bar's line; it is a no-op on a nil bar.
func (p *progressBar) finish() {
	if p == nil || !p.drawn || p.finished {
		return
	}
	p.finished = true
	fmt.Fprintln(p.w)
}
