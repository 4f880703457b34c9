//go:build !cuda

package matmul

// cudaTag tells the tests whether the cuda kernel is compiled in.
const cudaTag = false
