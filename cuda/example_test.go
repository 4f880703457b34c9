package cuda_test

import (
	"context"
	"errors"
	"fmt"

	"gonum.org/v1/gonum/blas"

	"github.com/gohtgs/htgs/cuda"
	"github.com/gohtgs/htgs/task"
)

// gemmTask multiplies n x n matrices on the GPU of its pipeline clone. Each
// task copy binds its goroutine to the GPU and owns a stream, a cuBLAS
// handle and device buffers.
type gemmTask struct {
	n       int
	unbind  func()
	stream  *cuda.Stream
	blas    *cuda.BLAS
	a, b, c cuda.DeviceMem
}

func (t *gemmTask) Initialize(ctx context.Context, info task.Info) (err error) {
	if t.unbind, err = cuda.Bind(ctx, info.Device); err != nil {
		return err
	}
	d := info.Device.(*cuda.Device)
	if t.stream, err = d.NewStream(); err != nil {
		return err
	}
	if t.blas, err = d.NewBLAS(); err != nil {
		return err
	}
	if err = t.blas.SetStream(t.stream); err != nil {
		return err
	}
	bytes := int64(8 * t.n * t.n)
	for _, m := range []*cuda.DeviceMem{&t.a, &t.b, &t.c} {
		if *m, err = d.Alloc(bytes); err != nil {
			return err
		}
	}
	return nil
}

// Execute computes C = A*B for one pair of row-major matrices.
func (t *gemmTask) Execute(ctx context.Context, in [2][]float64, out task.Emitter[[]float64]) error {
	if err := cuda.CopyToDevice(t.stream, t.a, in[0]); err != nil {
		return err
	}
	if err := cuda.CopyToDevice(t.stream, t.b, in[1]); err != nil {
		return err
	}
	if err := t.blas.Dgemm(blas.NoTrans, blas.NoTrans, t.n, t.n, t.n, 1, t.a, t.n, t.b, t.n, 0, t.c, t.n); err != nil {
		return err
	}
	c := make([]float64, t.n*t.n)
	if err := cuda.CopyFromDevice(t.stream, c, t.c); err != nil { // waits for the Dgemm too
		return err
	}
	return out.Emit(c)
}

func (t *gemmTask) Shutdown(context.Context) error {
	defer t.unbind()
	return errors.Join(t.a.Free(), t.b.Free(), t.c.Free(), t.blas.Close(), t.stream.Close())
}

// A GPU task binds in Initialize and unbinds in Shutdown; callers fall back
// to the CPU when Devices fails (always, in builds without the cuda tag).
func Example_task() {
	ds, err := cuda.Devices()
	if err != nil {
		fmt.Println("CPU fallback:", errors.Is(err, cuda.ErrNoDevice))
		return
	}
	defer func() {
		for _, d := range ds {
			_ = d.Close()
		}
	}()
	// One pipeline clone per GPU, each running gemmTask copies.
	_ = cuda.AsDevices(ds)
	var _ task.Task[[2][]float64, []float64] = &gemmTask{n: 1024}
}
