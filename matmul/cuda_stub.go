//go:build !cuda

package matmul

// newCUDA reports that no CUDA kernel is compiled in. The CUDA kernel (a
// file with the cuda build tag, using the cuda package's cuBLAS) replaces
// this; until it exists, every build says which tag is missing.
func newCUDA() (Kernel, error) { return nil, NotBuilt("cuda", "cuda") }
