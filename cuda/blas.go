package cuda

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"gonum.org/v1/gonum/blas"
)

// cublasSonames returns the cuBLAS libraries to try, in order (CUDA 13,
// 12, 11), after $HTGS_CUBLAS.
func cublasSonames() []string {
	return withCUDAHome("libcublas.so.13", "libcublas.so.12", "libcublas.so.11")
}

// withCUDAHome returns the sonames (found through the loader's search
// path), then the same names in /usr/local/cuda/lib64, where NVIDIA's
// installers put them when ld.so is not configured for it.
func withCUDAHome(sonames ...string) []string {
	out := append([]string(nil), sonames...)
	for _, s := range sonames {
		out = append(out, "/usr/local/cuda/lib64/"+s)
	}
	return out
}

// BLAS is a cuBLAS handle bound to one device. The library is loaded at run
// time on the first [Device.NewBLAS]; if no cuBLAS library can be opened
// the error wraps [ErrLibrary].
//
// A handle must not be used by two goroutines at once (its stream is
// handle state): make one per task copy.
type BLAS struct {
	dev    *Device
	ctx    uintptr
	h      atomic.Uintptr // cublasHandle_t; 0 after Close
	lib    string
	mu     sync.Mutex // guards stream
	stream *Stream    // nil: the legacy default stream, and calls wait
}

// NewBLAS creates a cuBLAS handle on d.
func (d *Device) NewBLAS() (*BLAS, error) {
	lib, err := loadCUBLAS()
	if err != nil {
		return nil, err
	}
	c, err := d.context()
	if err != nil {
		return nil, err
	}
	h, err := blasCreate(c)
	if err != nil {
		return nil, fmt.Errorf("cuda: device %d: %w", d.ordinal, err)
	}
	b := &BLAS{dev: d, ctx: c, lib: lib}
	b.h.Store(h)
	if v, err := blasVersion(c, h); err == nil {
		b.lib = fmt.Sprintf("%s (cuBLAS %d)", lib, v)
	}
	return b, nil
}

// Library names the cuBLAS library in use and its version, such as
// "libcublas.so.13 (cuBLAS 130000)".
func (b *BLAS) Library() string { return b.lib }

func (b *BLAS) handle() (uintptr, error) {
	h := b.h.Load()
	if h == 0 {
		return 0, fmt.Errorf("cuda: BLAS: %w", ErrClosed)
	}
	return h, nil
}

// SetStream makes later calls queue their work on s, asynchronously; nil
// selects the legacy default stream, on which calls wait for completion.
func (b *BLAS) SetStream(s *Stream) error {
	h, err := b.handle()
	if err != nil {
		return err
	}
	var sh uintptr
	if s != nil {
		if sh, err = s.on(b.dev, "BLAS handle"); err != nil {
			return err
		}
	}
	if err := blasSetStream(b.ctx, h, sh); err != nil {
		return fmt.Errorf("cuda: device %d: %w", b.dev.ordinal, err)
	}
	b.mu.Lock()
	b.stream = s
	b.mu.Unlock()
	return nil
}

// Dgemm computes C = alpha * op(A) * op(B) + beta * C on row-major float64
// matrices in device memory, like gonum's blas64.Gemm: op(A) is m x k,
// op(B) is k x n, C is m x n, and lda, ldb, ldc are the row strides (in
// elements) of A, B and C as stored. blas.Trans (or blas.ConjTrans)
// transposes. Dimensions and buffer sizes are checked before anything is
// queued; a mismatch is an error wrapping [ErrSize].
//
// With a stream set by [BLAS.SetStream] the call returns once the work is
// queued; otherwise it waits for completion.
func (b *BLAS) Dgemm(tA, tB blas.Transpose, m, n, k int, alpha float64, a DeviceMem, lda int,
	bm DeviceMem, ldb int, beta float64, c DeviceMem, ldc int) error {
	h, err := b.handle()
	if err != nil {
		return err
	}
	if err := checkGemm(tA, tB, m, n, k, a.size, lda, bm.size, ldb, c.size, ldc); err != nil {
		return err
	}
	for _, x := range []DeviceMem{a, bm, c} {
		if x.dev != nil && x.dev.ordinal != b.dev.ordinal {
			return fmt.Errorf("%w: Dgemm on device %d with memory of device %d", ErrWrongDevice, b.dev.ordinal, x.dev.ordinal)
		}
	}
	if m == 0 || n == 0 {
		return nil
	}
	// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, and
	// a row-major matrix read column-major is its transpose: so swap the
	// operands and the m, n dimensions, and keep the transpose flags.
	if err := blasDgemm(b.ctx, h, tB != blas.NoTrans, tA != blas.NoTrans, n, m, k,
		alpha, bm.ptr, ldb, a.ptr, lda, beta, c.ptr, ldc); err != nil {
		return fmt.Errorf("cuda: device %d: %w", b.dev.ordinal, err)
	}
	b.mu.Lock()
	s := b.stream
	b.mu.Unlock()
	if s == nil {
		if err := drvStreamSync(b.ctx, 0); err != nil {
			return fmt.Errorf("cuda: device %d: Dgemm: %w", b.dev.ordinal, err)
		}
	}
	return nil
}

// Close destroys the handle. Close is idempotent.
func (b *BLAS) Close() error {
	h := b.h.Swap(0)
	if h == 0 {
		return nil
	}
	if err := blasDestroy(b.ctx, h); err != nil {
		return fmt.Errorf("cuda: device %d: %w", b.dev.ordinal, err)
	}
	return nil
}

// checkGemm validates the arguments of a row-major Dgemm whose buffers
// have the given sizes in bytes.
func checkGemm(tA, tB blas.Transpose, m, n, k int, aBytes int64, lda int, bBytes int64, ldb int, cBytes int64, ldc int) error {
	for _, t := range []blas.Transpose{tA, tB} {
		if t != blas.NoTrans && t != blas.Trans && t != blas.ConjTrans {
			return fmt.Errorf("%w: Dgemm: invalid transpose %q", ErrSize, byte(t))
		}
	}
	if m < 0 || n < 0 || k < 0 {
		return fmt.Errorf("%w: Dgemm: negative dimension m=%d n=%d k=%d", ErrSize, m, n, k)
	}
	for _, v := range []int{m, n, k, lda, ldb, ldc} {
		if v > math.MaxInt32 {
			return fmt.Errorf("%w: Dgemm: dimension %d exceeds cuBLAS's 32-bit limit", ErrSize, v)
		}
	}
	// Stored shapes (rows x cols) of A and B.
	ar, ac := m, k
	if tA != blas.NoTrans {
		ar, ac = k, m
	}
	br, bc := k, n
	if tB != blas.NoTrans {
		br, bc = n, k
	}
	mats := []struct {
		name       string
		rows, cols int
		ld         int
		bytes      int64
	}{
		{"A", ar, ac, lda, aBytes},
		{"B", br, bc, ldb, bBytes},
		{"C", m, n, ldc, cBytes},
	}
	for _, x := range mats {
		if x.ld < max(1, x.cols) {
			return fmt.Errorf("%w: Dgemm: ld%s=%d < %d columns", ErrSize, x.name, x.ld, x.cols)
		}
		if x.rows == 0 || x.cols == 0 {
			continue
		}
		need := (int64(x.rows-1)*int64(x.ld) + int64(x.cols)) * 8
		if x.bytes < need {
			return fmt.Errorf("%w: Dgemm: %s (%dx%d, ld %d) needs %d bytes, buffer has %d", ErrSize, x.name, x.rows, x.cols, x.ld, need, x.bytes)
		}
	}
	return nil
}
