package matmul

// The OpenBLAS kernel. The library (Debian's libopenblas0-pthread,
// libopenblas.so.0) is loaded at run time by internal/native, without cgo,
// so every build has the kernel and uses it when the library is installed;
// see the package documentation for the CPU-type correction applied before
// loading.

import (
	"context"
	"fmt"
	"runtime"
	"strings"

	"github.com/gohtgs/htgs/internal/native"
)

func newOpenBLAS() (Kernel, error) {
	lib, err := native.LoadOpenBLAS()
	if err != nil {
		return nil, fmt.Errorf("matmul: kernel \"openblas\": %w: %w", ErrUnavailable, err)
	}
	return openblasKernel{lib}, nil
}

// Auto returns the default kernel: OpenBLAS when the library can be loaded,
// else [Gonum].
func Auto() Kernel {
	if k, err := newOpenBLAS(); err == nil {
		return k
	}
	return Gonum()
}

type openblasKernel struct{ lib *native.OpenBLAS }

func (openblasKernel) Name() string                { return "openblas" }
func (k openblasKernel) NewMultiplier() Multiplier { return &openblasMultiplier{lib: k.lib} }

// String reports the library, the core type in use and where it came from.
func (k openblasKernel) String() string {
	ct, chosen := k.lib.CoreType()
	src := "OpenBLAS's own detection"
	switch {
	case chosen:
		src = "OPENBLAS_CORETYPE chosen from the CPU's features"
	case ct != "":
		src = "OPENBLAS_CORETYPE from the environment"
	}
	return fmt.Sprintf("openblas (%s, core %s by %s; %s)", k.lib.Soname(), k.lib.CoreName(), src, k.lib.Config())
}

// Gemm is one OpenBLAS dgemm call on whole matrices with threads library
// threads (0: the number of CPUs Go may use).
func (k openblasKernel) Gemm(threads int, a, b, c *Dense) error {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	k.lib.SetThreads(threads)
	return denseGemm(a, b, c, func(m, n, kk int, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) error {
		return k.lib.Dgemm(m, n, kk, 1, a, lda, b, ldb, 0, c, ldc)
	})
}

// newThreadedMultiplier returns a multiplier whose calls use threads
// OpenBLAS threads.
func (k openblasKernel) newThreadedMultiplier(threads int) Multiplier {
	return &openblasMultiplier{lib: k.lib, threads: threads}
}

// openblasMultiplier runs dgemm calls with threads library threads (0 or
// 1: single-threaded calls, when the multiply task's copies are the
// parallelism and the library's own threads would oversubscribe the
// cores). The library's thread count is process-wide: the multiplier sets
// it before each call, so copies must not mix counts.
type openblasMultiplier struct {
	lib     *native.OpenBLAS
	threads int
}

// Mul computes c = a·b + beta·c with the multiplier's OpenBLAS threads.
func (p *openblasMultiplier) Mul(_ context.Context, m, n, k int, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) error {
	if err := checkMul(m, n, k, a, lda, b, ldb, c, ldc); err != nil {
		return err
	}
	if m == 0 || n == 0 {
		return nil
	}
	if k == 0 {
		scale(m, n, beta, c, ldc)
		return nil
	}
	p.lib.SetThreads(max(1, p.threads))
	return p.lib.Dgemm(m, n, k, 1, a, lda, b, ldb, beta, c, ldc)
}

// BLASLine returns a one-line description of the BLAS that k runs, for a
// program's output: "BLAS: OpenBLAS 0.3.21 SkylakeX (libopenblas.so.0)",
// or for the gonum kernel "BLAS: gonum (pure Go)", followed when OpenBLAS
// is not installed by a hint to install it.
func BLASLine(k Kernel) string {
	switch k := k.(type) {
	case openblasKernel:
		cfg := k.lib.Config()
		if f := strings.Fields(cfg); len(f) >= 2 && f[0] == "OpenBLAS" {
			cfg = f[0] + " " + f[1]
		}
		return fmt.Sprintf("BLAS: %s %s (%s)", cfg, k.lib.CoreName(), k.lib.Soname())
	case gonumKernel:
		if _, err := native.LoadOpenBLAS(); err != nil {
			return "BLAS: gonum (pure Go); install libopenblas0-pthread for ~6-10x faster DGEMM"
		}
		return "BLAS: gonum (pure Go)"
	}
	return "BLAS: " + Describe(k)
}
