package native

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// OpenBLAS is the loaded OpenBLAS library. Its thread count is global to
// the library: the object mirrors it so that [OpenBLAS.SetThreads] calls
// into the library only when it changes.
type OpenBLAS struct {
	soname   string
	coretype string // OPENBLAS_CORETYPE when the library was loaded
	setByUs  bool   // coretype was chosen from the CPU's features

	dgemm func(order, transA, transB, m, n, k int32, alpha float64, a unsafe.Pointer, lda int32,
		b unsafe.Pointer, ldb int32, beta float64, c unsafe.Pointer, ldc int32)
	setThreads, getThreads, corename, config uintptr

	mu      sync.Mutex // serializes thread-count changes
	threads atomic.Int64
}

// LoadOpenBLAS loads OpenBLAS once per process and returns it, or the
// reason it is not available (install Debian's libopenblas0-pthread).
//
// It tries libopenblas.so.0, libopenblas.so and libblas.so.3 (Debian's
// alternatives link, accepted only when it is OpenBLAS: the openblas_*
// symbols must be present, since a reference BLAS would be slower than
// gonum and its threading is not controllable). Unless OPENBLAS_CORETYPE
// is already set, it is first set from the CPU's features (SkylakeX with
// AVX-512, Haswell with AVX2 and FMA): OpenBLAS picks its kernels in a
// constructor that runs at load time and falls back to its SSE3 kernels,
// about 5x slower, on CPU models it does not know (Debian's 0.3.21 on
// recent Xeons). Users override the choice by setting the variable. The
// library starts with one thread: each copy of a multiply task is one
// thread, so OpenBLAS's own threads would oversubscribe the CPUs.
var LoadOpenBLAS = sync.OnceValues(loadOpenBLAS)

func loadOpenBLAS() (*OpenBLAS, error) {
	if !supported {
		return nil, ErrUnsupported
	}
	b := &OpenBLAS{}
	if v, ok := os.LookupEnv("OPENBLAS_CORETYPE"); ok {
		b.coretype = v
	} else if ct := cpuCoreType(); ct != "" {
		// os.Setenv keeps Go's view consistent (and reaches C with cgo);
		// setenvC reaches the C library's environment without cgo.
		if err := os.Setenv("OPENBLAS_CORETYPE", ct); err != nil {
			return nil, fmt.Errorf("native: OpenBLAS: setting OPENBLAS_CORETYPE: %w", err)
		}
		if err := setenvC("OPENBLAS_CORETYPE", ct); err != nil {
			return nil, fmt.Errorf("native: OpenBLAS: setting OPENBLAS_CORETYPE: %w", err)
		}
		b.coretype, b.setByUs = ct, true
	}
	var errs []string
	for _, name := range []string{"libopenblas.so.0", "libopenblas.so", "libblas.so.3", "libopenblas.dylib", "/opt/homebrew/opt/openblas/lib/libopenblas.dylib"} {
		h, err := dlopen(name)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if err := b.bind(h); err != nil {
			dlclose(h)
			errs = append(errs, name+": "+err.Error())
			continue
		}
		b.soname = name
		call(b.setThreads, 1)
		b.threads.Store(int64(int32(call(b.getThreads))))
		return b, nil
	}
	return nil, fmt.Errorf("native: cannot load OpenBLAS (install libopenblas0-pthread): %s", strings.Join(errs, "; "))
}

func (b *OpenBLAS) bind(h uintptr) error {
	dgemm, err := dlsym(h, "cblas_dgemm")
	if err != nil {
		return err
	}
	for _, s := range []struct {
		name string
		p    *uintptr
	}{
		{"openblas_set_num_threads", &b.setThreads},
		{"openblas_get_num_threads", &b.getThreads},
		{"openblas_get_corename", &b.corename},
		{"openblas_get_config", &b.config},
	} {
		if *s.p, err = dlsym(h, s.name); err != nil {
			return fmt.Errorf("not OpenBLAS: %w", err)
		}
	}
	register(&b.dgemm, dgemm)
	return nil
}

// cpuCoreType names the OpenBLAS core type matching the CPU's vector
// extensions as the kernel reports them (Linux's /proc/cpuinfo lists a
// feature only when the OS enables it), or "" to leave OpenBLAS's own
// detection alone.
func cpuCoreType() string {
	if runtime.GOARCH != "amd64" || runtime.GOOS != "linux" {
		return ""
	}
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	flags := map[string]bool{}
	for _, line := range strings.Split(string(info), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "flags" {
			for _, f := range strings.Fields(v) {
				flags[f] = true
			}
			break
		}
	}
	all := func(fs ...string) bool {
		for _, f := range fs {
			if !flags[f] {
				return false
			}
		}
		return true
	}
	switch {
	case all("avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl"):
		return "SkylakeX"
	case all("avx2", "fma"):
		return "Haswell"
	}
	return ""
}

// Soname returns the file name the library was loaded from.
func (b *OpenBLAS) Soname() string { return b.soname }

// CoreName returns the core type the library runs (openblas_get_corename).
func (b *OpenBLAS) CoreName() string { return cString(call(b.corename)) }

// Config returns the library's build configuration (openblas_get_config),
// such as "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Haswell
// MAX_THREADS=64".
func (b *OpenBLAS) Config() string { return cString(call(b.config)) }

// CoreType returns OPENBLAS_CORETYPE as it was when the library was loaded
// and whether it was chosen from the CPU's features by LoadOpenBLAS.
func (b *OpenBLAS) CoreType() (coretype string, chosen bool) { return b.coretype, b.setByUs }

// Threads returns the library's current thread count.
func (b *OpenBLAS) Threads() int { return int(b.threads.Load()) }

// SetThreads sets the library's process-wide thread count to n if it
// differs.
func (b *OpenBLAS) SetThreads(n int) {
	if b.threads.Load() == int64(n) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.threads.Load() != int64(n) {
		call(b.setThreads, uintptr(n))
		b.threads.Store(int64(n))
	}
}

// CBLAS enumerations (cblas.h).
const (
	cblasRowMajor = 101
	cblasNoTrans  = 111
)

// Dgemm computes c = alpha·a·b + beta·c on row-major matrices (cblas_dgemm,
// no transposes): a is m x k with stride lda, b k x n with stride ldb, c
// m x n with stride ldc. The caller checks the slice lengths; m, n, k > 0.
func (b *OpenBLAS) Dgemm(m, n, k int, alpha float64, a []float64, lda int, bm []float64, ldb int, beta float64, c []float64, ldc int) error {
	for _, v := range []int{m, n, k, lda, ldb, ldc} {
		if v > math.MaxInt32 {
			return fmt.Errorf("native: OpenBLAS: dimension %d exceeds the 32-bit BLAS interface", v)
		}
	}
	b.dgemm(cblasRowMajor, cblasNoTrans, cblasNoTrans, int32(m), int32(n), int32(k), alpha,
		unsafe.Pointer(&a[0]), int32(lda), unsafe.Pointer(&bm[0]), int32(ldb), beta, unsafe.Pointer(&c[0]), int32(ldc))
	runtime.KeepAlive(a)
	runtime.KeepAlive(bm)
	runtime.KeepAlive(c)
	return nil
}
