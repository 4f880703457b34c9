package matmul

import (
	"context"
	"errors"
	"fmt"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// Kernel is an implementation of the block product: it makes one
// [Multiplier] per copy of the multiply task, so that each copy can own
// per-thread resources (a GPU handle, a stream, scratch memory).
type Kernel interface {
	// Name returns the kernel's name, as accepted by [LookupKernel].
	Name() string
	// NewMultiplier returns the multiplier of one multiply-task copy.
	// It must return a new value on every call.
	NewMultiplier() Multiplier
}

// Multiplier computes block products for one copy of the multiply task;
// its methods are called from that copy's goroutine only.
//
// A Multiplier may also implement task.Initializer and task.Shutdowner:
// Initialize then runs once, on the goroutine that makes every later Mul
// call of the copy, before the first product (bind a device, create a
// library handle), and Shutdown after the last one, also when the graph
// fails. The info passed to Initialize names the copy's device when the
// multiply task runs in an execution pipeline.
type Multiplier interface {
	// Mul sets c = a·b + beta·c, where a is an m x k matrix stored
	// row-major with lda elements between rows, b is k x n with stride ldb
	// and c is m x n with stride ldc. beta == 0 means c is overwritten
	// (its old contents, even NaN, are ignored). Mul uses the calling
	// goroutine only: the graph supplies the parallelism.
	Mul(ctx context.Context, m, n, k int, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) error
}

// Gemmer is implemented by kernels that can also multiply whole matrices
// with the library's own threads: the "one call" baselines that the graphs
// are compared with in the benchmarks and the program's -verify.
type Gemmer interface {
	// Gemm sets c = a·b using at most threads threads (0: the library's
	// default). It may change process-wide library settings (the OpenBLAS
	// thread count) and must not run concurrently with a graph using the
	// same kernel.
	Gemm(threads int, a, b, c *Dense) error
}

// ErrNotBuilt is matched (with errors.Is) by the error of [LookupKernel]
// for a kernel that exists but was not compiled into the program: a
// missing build tag.
var ErrNotBuilt = errors.New("matmul: kernel not built into this program")

// ErrUnavailable is wrapped by LookupKernel's error for a kernel that is
// built in but cannot run on this machine (the cuda kernel without a GPU).
var ErrUnavailable = errors.New("matmul: kernel unavailable on this machine")

// NotBuilt returns the error for a kernel that needs the build tag tag,
// such as `matmul: kernel "cuda": not built with -tags cuda`; it matches
// ErrNotBuilt.
func NotBuilt(kernel, tag string) error { return &notBuiltError{kernel, tag} }

type notBuiltError struct{ kernel, tag string }

func (e *notBuiltError) Error() string {
	return fmt.Sprintf("matmul: kernel %q: not built with -tags %s", e.kernel, e.tag)
}

func (e *notBuiltError) Is(target error) bool { return target == ErrNotBuilt }

// KernelNames returns the names LookupKernel knows, sorted (including the
// ones whose lookup fails because they were not built).
func KernelNames() []string { return []string{"auto", "cuda", "gonum", "openblas"} }

// LookupKernel returns the kernel named name: "auto" (the default: OpenBLAS
// when it can be loaded, else gonum; see [Auto]), "gonum" (always
// available), "openblas" (OpenBLAS loaded at run time, in every build; an
// error wrapping [ErrUnavailable] when libopenblas.so.0 is not installed),
// "cuda" (with the cuda build tag). A kernel that was not compiled in gives
// an error wrapping [ErrNotBuilt] that says which build tag is missing. The set is fixed at build time: build tags select the files that
// provide each kernel, so no registry needs to be mutated at run time.
func LookupKernel(name string) (Kernel, error) {
	switch name {
	case "auto":
		return Auto(), nil
	case "gonum":
		return Gonum(), nil
	case "openblas":
		return newOpenBLAS()
	case "cuda":
		return newCUDA()
	}
	return nil, fmt.Errorf("matmul: unknown kernel %q (have %v)", name, KernelNames())
}

// checkMul validates the arguments of Multiplier.Mul, so that kernels
// calling into C never read or write outside the slices.
func checkMul(m, n, k int, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) error {
	switch {
	case m < 0 || n < 0 || k < 0:
		return fmt.Errorf("matmul: negative product dimensions m=%d n=%d k=%d", m, n, k)
	case lda < max(1, k) || ldb < max(1, n) || ldc < max(1, n):
		return fmt.Errorf("matmul: strides lda=%d ldb=%d ldc=%d too small for m=%d n=%d k=%d", lda, ldb, ldc, m, n, k)
	case m > 0 && k > 0 && len(a) < (m-1)*lda+k:
		return fmt.Errorf("matmul: a has %d elements, a %dx%d matrix with stride %d needs %d", len(a), m, k, lda, (m-1)*lda+k)
	case k > 0 && n > 0 && len(b) < (k-1)*ldb+n:
		return fmt.Errorf("matmul: b has %d elements, a %dx%d matrix with stride %d needs %d", len(b), k, n, ldb, (k-1)*ldb+n)
	case m > 0 && n > 0 && len(c) < (m-1)*ldc+n:
		return fmt.Errorf("matmul: c has %d elements, a %dx%d matrix with stride %d needs %d", len(c), m, n, ldc, (m-1)*ldc+n)
	}
	return nil
}

// scale sets c = beta·c (beta == 0 clears c, NaNs included).
func scale(m, n int, beta float64, c []float64, ldc int) {
	if beta == 1 {
		return
	}
	for i := range m {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}

// The gonum kernel's tile sizes. gonum's Dgemm goes parallel, starting a
// goroutine per 64x64 block of c, whenever c has at least 4 such blocks
// (blas/gonum: blockSize 64, minParBlock 4); on smaller products it runs
// its serial loops on the calling goroutine. A tile of gonumTileM x
// gonumTileN covers ceil(64/64)·ceil(128/64) = 2 blocks, so every call
// below stays serial. gonumTileK bounds the panel of b (256 x 128 doubles,
// 256 KiB) that one tile streams through the cache. The sizes were chosen by
// measurement on the development machine (see the package documentation).
const (
	gonumTileM = 64
	gonumTileN = 128
	gonumTileK = 256
)

// Gonum returns the pure-Go kernel: gonum's Dgemm (blas/gonum) called on
// tiles small enough that it never starts goroutines of its own, so each
// multiply-task copy uses exactly one core and the graph's thread count is
// the real parallelism (no nested parallelism).
func Gonum() Kernel { return gonumKernel{} }

type gonumKernel struct{}

func (gonumKernel) Name() string                     { return "gonum" }
func (gonumKernel) NewMultiplier() Multiplier        { return &gonumMultiplier{} }
func (gonumKernel) String() string                   { return "gonum (pure Go, serial tiles)" }
func (gonumKernel) Gemm(_ int, a, b, c *Dense) error { return denseGemm(a, b, c, gonumWhole) }

// gonumWhole is one multithreaded gonum Dgemm call on whole matrices
// (gonum's own goroutines, up to GOMAXPROCS of them).
func gonumWhole(m, n, k int, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) error {
	gonum.Implementation{}.Dgemm(blas.NoTrans, blas.NoTrans, m, n, k, 1, a, lda, b, ldb, 0, c, ldc)
	return nil
}

// denseGemm checks the shapes of c = a·b and calls f on them.
func denseGemm(a, b, c *Dense, f func(m, n, k int, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) error) error {
	for _, d := range []struct {
		m    *Dense
		what string
	}{{a, "A"}, {b, "B"}, {c, "C"}} {
		if err := d.m.check(d.what); err != nil {
			return err
		}
	}
	if a.C != b.R || c.R != a.R || c.C != b.C {
		return fmt.Errorf("matmul: cannot store the product of %dx%d and %dx%d in %dx%d", a.R, a.C, b.R, b.C, c.R, c.C)
	}
	m, n, k := a.R, b.C, a.C
	if m == 0 || n == 0 {
		return nil
	}
	if k == 0 {
		scale(m, n, 0, c.Data, c.Stride)
		return nil
	}
	return f(m, n, k, a.Data, a.Stride, b.Data, b.Stride, c.Data, c.Stride)
}

// gonumMultiplier has no state; it is a pointer so that copies are
// distinct values, as the task factories require.
type gonumMultiplier struct{ _ byte }

// Mul computes c = a·b + beta·c tile by tile on the calling goroutine.
func (*gonumMultiplier) Mul(_ context.Context, m, n, k int, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) error {
	if err := checkMul(m, n, k, a, lda, b, ldb, c, ldc); err != nil {
		return err
	}
	if m == 0 || n == 0 {
		return nil
	}
	scale(m, n, beta, c, ldc)
	var impl gonum.Implementation
	for i := 0; i < m; i += gonumTileM {
		mi := min(gonumTileM, m-i)
		for j := 0; j < n; j += gonumTileN {
			nj := min(gonumTileN, n-j)
			for l := 0; l < k; l += gonumTileK {
				kl := min(gonumTileK, k-l)
				impl.Dgemm(blas.NoTrans, blas.NoTrans, mi, nj, kl, 1,
					a[i*lda+l:], lda, b[l*ldb+j:], ldb, 1, c[i*ldc+j:], ldc)
			}
		}
	}
	return nil
}

// Describe returns a one-line description of k: its String method if it
// has one (the OpenBLAS kernel reports its core type and library), else its
// name.
func Describe(k Kernel) string {
	if s, ok := k.(fmt.Stringer); ok {
		return s.String()
	}
	return k.Name()
}
