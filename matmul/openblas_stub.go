//go:build !(openblas && cgo)

package matmul

func newOpenBLAS() (Kernel, error) { return nil, NotBuilt("openblas", "openblas (and cgo)") }
