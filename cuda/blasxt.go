package cuda

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"

	"gonum.org/v1/gonum/blas"
)

// BLASXt is a cuBLASXt handle: BLAS on matrices in host memory, which the
// library tiles, copies to the selected devices and multiplies there,
// returning when the result is back in host memory. It is what a program
// would call for one large host-memory DGEMM, and serves as the reference
// that host-memory products are compared with. cuBLASXt lives in the
// cuBLAS library that [Device.NewBLAS] loads; a library without it makes
// [NewBLASXt] fail with an error naming the missing symbols' library.
//
// A handle must not be used by two goroutines at once.
type BLASXt struct {
	dev *Device // the first selected device, whose context the calls run in
	ctx uintptr
	h   atomic.Uintptr // cublasXtHandle_t; 0 after Close
}

// NewBLASXt creates a cuBLASXt handle that runs on the given devices.
func NewBLASXt(devs []*Device) (*BLASXt, error) {
	if len(devs) == 0 {
		return nil, fmt.Errorf("cuda: NewBLASXt: %w", ErrNoDevice)
	}
	if _, err := loadCUBLAS(); err != nil {
		return nil, err
	}
	c, err := devs[0].context()
	if err != nil {
		return nil, err
	}
	h, err := xtCreate(c)
	if err != nil {
		return nil, fmt.Errorf("cuda: cuBLASXt: %w", err)
	}
	x := &BLASXt{dev: devs[0], ctx: c}
	x.h.Store(h)
	ids := make([]int, len(devs))
	for i, d := range devs {
		ids[i] = d.ordinal
	}
	if err := xtDeviceSelect(c, h, ids); err != nil {
		return nil, fmt.Errorf("cuda: cuBLASXt: select devices %v: %w (%w)", ids, err, x.Close())
	}
	return x, nil
}

func (x *BLASXt) handle() (uintptr, error) {
	h := x.h.Load()
	if h == 0 {
		return 0, fmt.Errorf("cuda: BLASXt: %w", ErrClosed)
	}
	return h, nil
}

// SetBlockDim sets the side of the square tiles cuBLASXt moves to the
// devices.
func (x *BLASXt) SetBlockDim(n int) error {
	h, err := x.handle()
	if err != nil {
		return err
	}
	if n < 1 {
		return fmt.Errorf("%w: cuBLASXt block dimension %d", ErrSize, n)
	}
	if err := xtSetBlockDim(x.ctx, h, n); err != nil {
		return fmt.Errorf("cuda: cuBLASXt: %w", err)
	}
	return nil
}

// SetPinning lets cuBLASXt page-lock, for the time of each call, host
// matrices that are not page-locked already (off by default).
func (x *BLASXt) SetPinning(on bool) error {
	h, err := x.handle()
	if err != nil {
		return err
	}
	if err := xtSetPinning(x.ctx, h, on); err != nil {
		return fmt.Errorf("cuda: cuBLASXt: %w", err)
	}
	return nil
}

// Dgemm computes C = alpha * op(A) * op(B) + beta * C on row-major float64
// matrices in host memory, with the conventions of [BLAS.Dgemm] (lda, ldb,
// ldc are row strides in elements). It returns when C holds the result.
func (x *BLASXt) Dgemm(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int,
	b []float64, ldb int, beta float64, c []float64, ldc int) error {
	h, err := x.handle()
	if err != nil {
		return err
	}
	if err := checkGemm(tA, tB, m, n, k, 8*int64(len(a)), lda, 8*int64(len(b)), ldb, 8*int64(len(c)), ldc); err != nil {
		return err
	}
	if m == 0 || n == 0 {
		return nil
	}
	addr := func(s []float64) uintptr {
		if len(s) == 0 {
			return 0
		}
		return uintptr(unsafe.Pointer(&s[0]))
	}
	// Row-major as column-major: swap the operands and m, n (see
	// BLAS.Dgemm).
	err = xtDgemm(x.ctx, h, tB != blas.NoTrans, tA != blas.NoTrans, n, m, k, alpha, addr(b), ldb, addr(a), lda, beta, addr(c), ldc)
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	runtime.KeepAlive(c)
	if err != nil {
		return fmt.Errorf("cuda: cuBLASXt: %w", err)
	}
	return nil
}

// Close destroys the handle. Close is idempotent.
func (x *BLASXt) Close() error {
	h := x.h.Swap(0)
	if h == 0 {
		return nil
	}
	if err := xtDestroy(x.ctx, h); err != nil {
		return fmt.Errorf("cuda: cuBLASXt: %w", err)
	}
	return nil
}
