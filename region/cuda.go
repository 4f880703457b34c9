//go:build cuda

package region

import (
	"context"
	"fmt"

	"github.com/gohtgs/htgs/cuda"
)

// CUDADevice is the memory of a CUDA device for region data (built with the
// cuda tag only): buffers are cuda.DeviceMem allocations, which a kernel
// launch takes as they are, and copies go through Stream (nil: the default
// stream; every copy waits for completion either way).
type CUDADevice struct {
	*cuda.Device
	Stream *cuda.Stream
}

// Alloc allocates a cuda.DeviceMem of bytes.
func (c CUDADevice) Alloc(ctx context.Context, bytes int64) (Buffer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return c.Device.Alloc(bytes)
}

// Free frees a cuda.DeviceMem.
func (c CUDADevice) Free(b Buffer) error {
	m, err := c.mem(b)
	if err != nil {
		return err
	}
	return m.Free()
}

// Upload copies src into dst, a cuda.DeviceMem of the same size.
func (c CUDADevice) Upload(ctx context.Context, dst Buffer, src []byte) error {
	m, err := c.mem(dst)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return cuda.CopyToDevice(c.Stream, m, src)
}

// Download copies src, a cuda.DeviceMem, into dst of the same size.
func (c CUDADevice) Download(ctx context.Context, dst []byte, src Buffer) error {
	m, err := c.mem(src)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return cuda.CopyFromDevice(c.Stream, dst, m)
}

func (c CUDADevice) mem(b Buffer) (cuda.DeviceMem, error) {
	m, ok := b.(cuda.DeviceMem)
	if !ok {
		return cuda.DeviceMem{}, fmt.Errorf("region: %s: a %T is not CUDA memory", c.Name(), b)
	}
	return m, nil
}

var _ DeviceMemory = CUDADevice{}
