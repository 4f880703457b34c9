//go:build !linux

package matmul

// adviseHuge does nothing where transparent huge pages are not asked for
// by madvise.
func adviseHuge([]float64) {}
