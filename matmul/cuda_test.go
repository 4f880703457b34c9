//go:build cuda

package matmul

import (
	"context"
	"errors"
	"testing"
)

// cudaTag tells the tests whether the cuda kernel is compiled in.
const cudaTag = true

// cudaKernelOrSkip returns the cuda kernel, or skips where no GPU is usable.
func cudaKernelOrSkip(t *testing.T) Kernel {
	t.Helper()
	k, err := LookupKernel("cuda")
	if errors.Is(err, ErrUnavailable) {
		t.Skip("no CUDA device:", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// The graph with the cuda kernel gives the gonum result, on an odd shape
// with edge blocks, in memory and with several copies per device.
func TestCUDAKernelMatchesGonum(t *testing.T) {
	k := cudaKernelOrSkip(t)
	a, b := Random(300, 257, 1), Random(257, 411, 2)
	want := NewDense(300, 411)
	if err := Gonum().(Gemmer).Gemm(1, a, b, want); err != nil {
		t.Fatal(err)
	}
	for _, threads := range []int{1, 3} {
		got, _, err := MultiplyDense(context.Background(), a, b, Config{BlockSize: 128, Threads: threads, Kernel: k})
		if err != nil {
			t.Fatal(err)
		}
		cmp, err := Compare(a, b, got, want)
		if err != nil || !cmp.OK {
			t.Fatalf("threads %d: %+v, %v", threads, cmp, err)
		}
	}
	one := NewDense(300, 411)
	if err := k.(Gemmer).Gemm(0, a, b, one); err != nil {
		t.Fatal(err)
	}
	if cmp, err := Compare(a, b, one, want); err != nil || !cmp.OK {
		t.Fatalf("one cuBLAS call: %+v, %v", cmp, err)
	}
}
