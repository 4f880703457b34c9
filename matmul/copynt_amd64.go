//go:build !purego

package matmul

// copyNT copies n float64s from src to dst with non-temporal stores
// (copynt_amd64.s). The ranges must not overlap.
//
//go:noescape
func copyNT(dst, src *float64, n int)

// copyStream copies src into dst (len(src) elements, which dst must
// hold) with non-temporal stores: the destination is not read into the
// caches first, which saves a third of the memory traffic of a copy too
// large for them.
func copyStream(dst, src []float64) {
	if len(src) == 0 {
		return
	}
	_ = dst[len(src)-1] // bounds check, as copy would do
	copyNT(&dst[0], &src[0], len(src))
}
