//go:build !cuda

package stitching

func newCUDABackend() (gpuBackend, error) { return nil, ErrNoGPUBuild }
