//go:build cuda

package matmul

import (
	"context"
	"fmt"

	"gonum.org/v1/gonum/blas"

	"github.com/gohtgs/htgs/cuda"
	"github.com/gohtgs/htgs/task"
)

// cudaKernel multiplies blocks with cuBLAS. Each copy of the multiply task
// binds its goroutine to one GPU (copy i uses device i mod the number of
// devices, or the device of its execution-pipeline clone when that is a
// GPU), and owns a cuBLAS handle, a stream and device buffers that grow to
// the largest block it has seen. Blocks are copied in and out on every
// product: this is the simple kernel; keeping operands on the GPU across
// products is the job of GPU memory pools in the graph.
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
