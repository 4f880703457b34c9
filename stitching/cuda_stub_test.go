//go:build !cuda

package stitching

const cudaBuilt = false
