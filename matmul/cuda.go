//go:build cuda

package matmul

import (
	"context"
	"errors"
	"fmt"

	"gonum.org/v1/gonum/blas"

	"github.com/gohtgs/htgs/cuda"
	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/memmgr"
	"github.com/gohtgs/htgs/task"
)

// cudaKernel multiplies blocks with cuBLAS on every GPU of the machine. It
// is an offloader: Multiply runs it in the offload graph (offload.go), one
// execution-pipeline clone per GPU, with blocks kept in device memory pools
// for as many products as use them. Its Multiplier (cudaMultiplier, which
// copies the blocks of every product in and out) serves the one-call
// baseline Gemm.
type cudaKernel struct {
	devices []*cuda.Device
}

func newCUDA() (Kernel, error) {
	ds, err := cuda.Devices()
	if err == nil && len(ds) == 0 {
		err = cuda.ErrNoDevice
	}
	if err != nil {
		return nil, fmt.Errorf("matmul: kernel \"cuda\": %w: %w", ErrUnavailable, err)
	}
	return &cudaKernel{devices: ds}, nil
}

// Name returns "cuda".
func (k *cudaKernel) Name() string { return "cuda" }

// NewMultiplier returns the multiplier of one task copy.
func (k *cudaKernel) NewMultiplier() Multiplier { return &cudaMultiplier{k: k} }

// Gemm is the one-call baseline: the whole product in one cuBLAS call on
// the first device. threads is ignored.
func (k *cudaKernel) Gemm(_ int, a, b, c *Dense) error {
	if a.C != b.R || c.R != a.R || c.C != b.C {
		return fmt.Errorf("%w: %dx%d times %dx%d into %dx%d", ErrShape, a.R, a.C, b.R, b.C, c.R, c.C)
	}
	m := &cudaMultiplier{k: k}
	if err := m.Initialize(context.Background(), task.Info{}); err != nil {
		return err
	}
	defer func() { _ = m.Shutdown(context.Background()) }()
	return m.Mul(context.Background(), a.R, b.C, a.C, a.Data, a.Stride, b.Data, b.Stride, 0, c.Data, c.Stride)
}

type cudaMultiplier struct {
	k       *cudaKernel
	dev     *cuda.Device
	unbind  func()
	blas    *cuda.BLAS
	stream  *cuda.Stream
	a, b, c cuda.DeviceMem
}

// Initialize binds the copy's goroutine to its GPU and makes its handle.
func (m *cudaMultiplier) Initialize(ctx context.Context, info task.Info) error {
	m.dev = m.k.devices[info.Thread%len(m.k.devices)]
	if d, ok := info.Device.(*cuda.Device); ok {
		m.dev = d
	}
	unbind, err := cuda.Bind(ctx, m.dev)
	if err != nil {
		return err
	}
	m.unbind = unbind
	if m.stream, err = m.dev.NewStream(); err != nil {
		return err
	}
	if m.blas, err = m.dev.NewBLAS(); err != nil {
		return err
	}
	return m.blas.SetStream(m.stream)
}

// Shutdown frees the copy's GPU resources.
func (m *cudaMultiplier) Shutdown(context.Context) error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	for _, d := range []*cuda.DeviceMem{&m.a, &m.b, &m.c} {
		if d.Size() > 0 {
			keep(d.Free())
			*d = cuda.DeviceMem{}
		}
	}
	if m.blas != nil {
		keep(m.blas.Close())
	}
	if m.stream != nil {
		keep(m.stream.Close())
	}
	if m.unbind != nil {
		m.unbind()
	}
	return first
}

// span is the number of elements a rows x cols block with stride ld covers.
func span(rows, cols, ld int) int {
	if rows == 0 || cols == 0 {
		return 0
	}
	return (rows-1)*ld + cols
}

// fit makes buf hold at least n float64s on the device.
func (m *cudaMultiplier) fit(buf *cuda.DeviceMem, n int) (cuda.DeviceMem, error) {
	bytes := int64(n) * 8
	if buf.Size() < bytes {
		if buf.Size() > 0 {
			if err := buf.Free(); err != nil {
				return cuda.DeviceMem{}, err
			}
		}
		d, err := m.dev.Alloc(bytes)
		if err != nil {
			*buf = cuda.DeviceMem{}
			return cuda.DeviceMem{}, err
		}
		*buf = d
	}
	return buf.Slice(0, bytes), nil
}

// Mul copies the blocks (with their strides) to the GPU, multiplies with
// cuBLAS and copies c back.
func (m *cudaMultiplier) Mul(_ context.Context, rows, cols, inner int, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) error {
	if m.blas == nil {
		return fmt.Errorf("matmul: cuda multiplier used before Initialize")
	}
	na, nb, nc := span(rows, inner, lda), span(inner, cols, ldb), span(rows, cols, ldc)
	if nc == 0 {
		return nil
	}
	if inner == 0 { // c = beta·c: no product, no GPU needed
		for r := range rows {
			row := c[r*ldc : r*ldc+cols]
			for i := range row {
				if beta == 0 {
					row[i] = 0
				} else {
					row[i] *= beta
				}
			}
		}
		return nil
	}
	da, err := m.fit(&m.a, na)
	if err != nil {
		return err
	}
	db, err := m.fit(&m.b, nb)
	if err != nil {
		return err
	}
	dc, err := m.fit(&m.c, nc)
	if err != nil {
		return err
	}
	if err := cuda.CopyToDevice(m.stream, da, a[:na]); err != nil {
		return err
	}
	if err := cuda.CopyToDevice(m.stream, db, b[:nb]); err != nil {
		return err
	}
	// C is copied in when its old values count, and also when rows are
	// strided: copying the span back would otherwise overwrite the elements
	// between rows, which belong to other blocks.
	if beta != 0 || (ldc != cols && rows > 1) {
		if err := cuda.CopyToDevice(m.stream, dc, c[:nc]); err != nil {
			return err
		}
	}
	if err := m.blas.Dgemm(blas.NoTrans, blas.NoTrans, rows, cols, inner, 1, da, lda, db, ldb, beta, dc, ldc); err != nil {
		return err
	}
	return cuda.CopyFromDevice(m.stream, c[:nc], dc)
}

// String describes the kernel and its GPUs.
func (k *cudaKernel) String() string {
	s := fmt.Sprintf("cuda (cuBLAS) on %d GPU", len(k.devices))
	if len(k.devices) != 1 {
		s += "s"
	}
	for i, d := range k.devices {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		s += sep + d.String()
	}
	return s
}

func (k *cudaKernel) offloadDevices() []device.Device { return cuda.AsDevices(k.devices) }

// offloadMemory is three quarters of the free memory of the GPU with the
// least (cuBLAS and the CUDA context need some of the rest).
func (k *cudaKernel) offloadMemory() int64 {
	least := int64(-1)
	for _, d := range k.devices {
		free, _, err := d.MemInfo()
		if err != nil {
			free = d.Memory() / 2
		}
		if least < 0 || free < least {
			least = free
		}
	}
	return max(1, least/4*3)
}

// cudaBlock is a block of float64s in GPU memory.
type cudaBlock struct{ cuda.DeviceMem }

func (b cudaBlock) Len() int { return int(b.Size() / 8) }

type cudaAlloc struct {
	a memmgr.Allocator[cuda.DeviceMem]
}

func (k *cudaKernel) deviceBuffers(n int) memmgr.Allocator[devMem] {
	return cudaAlloc{cuda.DeviceBuffers(8 * int64(n))}
}

func (c cudaAlloc) Alloc(dev device.Device) (devMem, error) {
	m, err := c.a.Alloc(dev)
	if err != nil {
		return nil, err
	}
	return cudaBlock{m}, nil
}

func (c cudaAlloc) Free(dev device.Device, m devMem) error {
	b, ok := m.(cudaBlock)
	if !ok {
		return fmt.Errorf("matmul: freeing %T as GPU memory", m)
	}
	return c.a.Free(dev, b.DeviceMem)
}

func gpuBlock(m devMem) (cuda.DeviceMem, error) {
	b, ok := m.(cudaBlock)
	if !ok {
		return cuda.DeviceMem{}, fmt.Errorf("matmul: %T is not GPU memory", m)
	}
	return b.DeviceMem, nil
}

// gpuWorker is what every task copy of a GPU clone holds: its goroutine
// bound to the clone's GPU, and a stream of its own.
type gpuWorker struct {
	dev    *cuda.Device
	unbind func()
	stream *cuda.Stream
}

func (w *gpuWorker) start(ctx context.Context, info task.Info) error {
	d, ok := info.Device.(*cuda.Device)
	if !ok {
		return fmt.Errorf("matmul: cuda task copy on %v, not a GPU", info.Device)
	}
	w.dev = d
	unbind, err := cuda.Bind(ctx, d)
	if err != nil {
		return err
	}
	w.unbind = unbind
	w.stream, err = d.NewStream()
	return err
}

func (w *gpuWorker) stop() error {
	var err error
	if w.stream != nil {
		err = w.stream.Close()
	}
	if w.unbind != nil {
		w.unbind()
	}
	return err
}

// cudaMover copies blocks through a pinned staging buffer of its own:
// asynchronous copies at full bus speed need page-locked memory, and the
// staging buffer also packs strided blocks into one copy.
type cudaMover struct {
	gpuWorker
	n       int
	staging cuda.HostMem
	host    []float64
}

func (k *cudaKernel) newMover(n int) mover { return &cudaMover{n: n} }

func (m *cudaMover) Initialize(ctx context.Context, info task.Info) error {
	if err := m.start(ctx, info); err != nil {
		return err
	}
	var err error
	if m.staging, err = m.dev.AllocHost(8 * int64(max(1, m.n))); err != nil {
		return err
	}
	m.host = cuda.HostSlice[float64](m.staging)
	return nil
}

func (m *cudaMover) Shutdown(context.Context) error {
	var errs []error
	if m.staging.Size() > 0 {
		errs = append(errs, m.staging.Free())
		m.staging, m.host = cuda.HostMem{}, nil
	}
	return errors.Join(append(errs, m.stop())...)
}

func (m *cudaMover) upload(_ context.Context, dst devMem, src []float64, rows, cols, ld int) error {
	d, err := gpuBlock(dst)
	if err != nil {
		return err
	}
	n := rows * cols
	if n > len(m.host) {
		return fmt.Errorf("matmul: %dx%d block larger than the staging buffer (%d)", rows, cols, len(m.host))
	}
	for r := range rows {
		copy(m.host[r*cols:(r+1)*cols], src[r*ld:r*ld+cols])
	}
	if err := cuda.CopyHtoD(m.stream, d.Slice(0, 8*int64(n)), m.staging.Slice(0, 8*int64(n))); err != nil {
		return err
	}
	return m.stream.Synchronize()
}

func (m *cudaMover) download(_ context.Context, dst []float64, src devMem, n int) error {
	s, err := gpuBlock(src)
	if err != nil {
		return err
	}
	if n > len(m.host) {
		return fmt.Errorf("matmul: %d elements larger than the staging buffer (%d)", n, len(m.host))
	}
	if err := cuda.CopyDtoH(m.stream, m.staging.Slice(0, 8*int64(n)), s.Slice(0, 8*int64(n))); err != nil {
		return err
	}
	if err := m.stream.Synchronize(); err != nil {
		return err
	}
	copy(dst[:n], m.host[:n])
	return nil
}

// cudaDeviceMultiplier runs one cuBLAS DGEMM per product on its stream.
type cudaDeviceMultiplier struct {
	gpuWorker
	blas *cuda.BLAS
}

func (k *cudaKernel) newDeviceMultiplier() deviceMultiplier { return &cudaDeviceMultiplier{} }

func (t *cudaDeviceMultiplier) Initialize(ctx context.Context, info task.Info) error {
	if err := t.start(ctx, info); err != nil {
		return err
	}
	var err error
	if t.blas, err = t.dev.NewBLAS(); err != nil {
		return err
	}
	return t.blas.SetStream(t.stream)
}

func (t *cudaDeviceMultiplier) Shutdown(context.Context) error {
	var err error
	if t.blas != nil {
		err = t.blas.Close()
	}
	return errors.Join(err, t.stop())
}

func (t *cudaDeviceMultiplier) mul(_ context.Context, m, n, k int, a, b, c devMem) error {
	da, err := gpuBlock(a)
	if err != nil {
		return err
	}
	db, err := gpuBlock(b)
	if err != nil {
		return err
	}
	dc, err := gpuBlock(c)
	if err != nil {
		return err
	}
	if err := t.blas.Dgemm(blas.NoTrans, blas.NoTrans, m, n, k, 1, da, k, db, n, 0, dc, n); err != nil {
		return err
	}
	// The copy-out task reads c on its own stream: wait for the product.
	return t.stream.Synchronize()
}
