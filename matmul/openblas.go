//go:build openblas && cgo

package matmul

// The OpenBLAS kernel. It needs Debian's libopenblas-dev (for cblas.h) at
// build time and libopenblas.so.0 at run time.
//
// The library is loaded with dlopen on first use instead of being linked:
// OpenBLAS picks its CPU kernels (DYNAMIC_ARCH) in a constructor that runs
// when the library is loaded, reading OPENBLAS_CORETYPE then. A linked
// library is initialized by the dynamic loader before any Go (or cgo
// constructor) code of the program runs, so a program could not correct a
// wrong detection; loading it ourselves lets us set the variable first.
// OpenBLAS falls back to its Prescott (SSE3) kernels on CPU models it does
// not know, about 5x slower than its SkylakeX kernels on an AVX-512 CPU.

/*
#cgo CFLAGS: -I/usr/include/x86_64-linux-gnu/openblas-pthread -I/usr/include/aarch64-linux-gnu/openblas-pthread -I/usr/include/openblas
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <cblas.h>

static __typeof__(&cblas_dgemm) htgs_dgemm;
static __typeof__(&openblas_set_num_threads) htgs_set_threads;
static __typeof__(&openblas_get_num_threads) htgs_get_threads;
static __typeof__(&openblas_get_corename) htgs_corename;
static __typeof__(&openblas_get_config) htgs_config;

// htgs_cpu_coretype names the OpenBLAS core type matching the CPU's vector
// extensions (as reported by the CPU and enabled by the OS), or NULL when
// OpenBLAS's own detection should be left alone.
static const char *htgs_cpu_coretype(void) {
#if defined(__x86_64__) && defined(__GNUC__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
	    __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512vl"))
		return "SkylakeX";
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		return "Haswell";
#endif
	return NULL;
}

// htgs_load opens the library and resolves its symbols; it returns NULL or
// the dlerror message.
static const char *htgs_load(const char *name) {
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL)
		return dlerror();
	htgs_dgemm = (__typeof__(htgs_dgemm))dlsym(h, "cblas_dgemm");
	htgs_set_threads = (__typeof__(htgs_set_threads))dlsym(h, "openblas_set_num_threads");
	htgs_get_threads = (__typeof__(htgs_get_threads))dlsym(h, "openblas_get_num_threads");
	htgs_corename = (__typeof__(htgs_corename))dlsym(h, "openblas_get_corename");
	htgs_config = (__typeof__(htgs_config))dlsym(h, "openblas_get_config");
	if (!htgs_dgemm || !htgs_set_threads || !htgs_get_threads || !htgs_corename || !htgs_config)
		return "cblas_dgemm or openblas_* symbols missing";
	return NULL;
}

static void htgs_call_dgemm(int m, int n, int k, const double *a, int lda,
	const double *b, int ldb, double beta, double *c, int ldc) {
	htgs_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
}
static void htgs_threads(int n) { htgs_set_threads(n); }
static int htgs_num_threads(void) { return htgs_get_threads(); }
static const char *htgs_core(void) { return htgs_corename(); }
static const char *htgs_cfg(void) { return htgs_config(); }
*/
import "C"

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// openblasLib is the process-wide state of the loaded library.
var openblasLib struct {
	once     sync.Once
	err      error
	soname   string
	coretype string // OPENBLAS_CORETYPE when the library was loaded
	setByUs  bool   // we chose coretype from the CPU's features
	threads  atomic.Int64
	mu       sync.Mutex // serializes thread-count changes
}

// loadOpenBLAS loads libopenblas once. Unless OPENBLAS_CORETYPE is already
// set, it first sets it from the CPU's features (SkylakeX with AVX-512,
// Haswell with AVX2 and FMA), which is what a current OpenBLAS would detect
// on such CPUs; users override the choice by setting OPENBLAS_CORETYPE
// themselves. os.Setenv updates the C environment too (cgo), so the
// library's getenv sees it.
func loadOpenBLAS() error {
	l := &openblasLib
	l.once.Do(func() {
		if v, ok := os.LookupEnv("OPENBLAS_CORETYPE"); ok {
			l.coretype = v
		} else if ct := C.htgs_cpu_coretype(); ct != nil {
			l.coretype, l.setByUs = C.GoString(ct), true
			if err := os.Setenv("OPENBLAS_CORETYPE", l.coretype); err != nil {
				l.err = fmt.Errorf("matmul: openblas: setting OPENBLAS_CORETYPE: %w", err)
				return
			}
		}
		var msgs []string
		for _, name := range []string{"libopenblas.so.0", "libopenblas.so"} {
			cname := C.CString(name)
			msg := C.htgs_load(cname)
			C.free(unsafe.Pointer(cname))
			if msg == nil {
				l.soname = name
				l.threads.Store(int64(C.htgs_num_threads()))
				return
			}
			msgs = append(msgs, C.GoString(msg))
		}
		l.err = fmt.Errorf("matmul: openblas: cannot load the library (install libopenblas0): %v", msgs)
	})
	return l.err
}

// setOpenBLASThreads sets the library's process-wide thread count to n if
// it differs (openblas_set_num_threads is global, not per caller).
func setOpenBLASThreads(n int) {
	l := &openblasLib
	if l.threads.Load() == int64(n) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.threads.Load() != int64(n) {
		C.htgs_threads(C.int(n))
		l.threads.Store(int64(n))
	}
}

func newOpenBLAS() (Kernel, error) {
	if err := loadOpenBLAS(); err != nil {
		return nil, err
	}
	return openblasKernel{}, nil
}

type openblasKernel struct{}

func (openblasKernel) Name() string              { return "openblas" }
func (openblasKernel) NewMultiplier() Multiplier { return &openblasMultiplier{} }

// String reports the library, the core type in use and where it came from.
func (openblasKernel) String() string {
	l := &openblasLib
	src := "OpenBLAS's own detection"
	switch {
	case l.setByUs:
		src = "OPENBLAS_CORETYPE chosen from the CPU's features"
	case l.coretype != "":
		src = "OPENBLAS_CORETYPE from the environment"
	}
	return fmt.Sprintf("openblas (%s, core %s by %s; %s)", l.soname, openblasCore(), src,
		C.GoString(C.htgs_cfg()))
}

// openblasCore returns the core type the loaded library reports.
func openblasCore() string { return C.GoString(C.htgs_core()) }

// Gemm is one OpenBLAS dgemm call on whole matrices with threads library
// threads (0: the number of CPUs Go may use).
func (openblasKernel) Gemm(threads int, a, b, c *Dense) error {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	setOpenBLASThreads(threads)
	return denseGemm(a, b, c, func(m, n, k int, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) error {
		return openblasDgemm(m, n, k, a, lda, b, ldb, 0, c, ldc)
	})
}

// openblasMultiplier runs single-threaded dgemm calls: the multiply task's
// copies are the parallelism.
type openblasMultiplier struct{ _ byte }

// Mul computes c = a·b + beta·c with one OpenBLAS thread.
func (*openblasMultiplier) Mul(_ context.Context, m, n, k int, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) error {
	if err := checkMul(m, n, k, a, lda, b, ldb, c, ldc); err != nil {
		return err
	}
	setOpenBLASThreads(1)
	return openblasDgemm(m, n, k, a, lda, b, ldb, beta, c, ldc)
}

func openblasDgemm(m, n, k int, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) error {
	if m == 0 || n == 0 {
		return nil
	}
	if k == 0 {
		scale(m, n, beta, c, ldc)
		return nil
	}
	for _, v := range []int{m, n, k, lda, ldb, ldc} {
		if v > math.MaxInt32 {
			return fmt.Errorf("matmul: openblas: dimension %d exceeds the 32-bit BLAS interface", v)
		}
	}
	C.htgs_call_dgemm(C.int(m), C.int(n), C.int(k),
		(*C.double)(unsafe.Pointer(&a[0])), C.int(lda),
		(*C.double)(unsafe.Pointer(&b[0])), C.int(ldb), C.double(beta),
		(*C.double)(unsafe.Pointer(&c[0])), C.int(ldc))
	return nil
}
