//go:build !amd64 || purego

package matmul

// copyStream copies src into dst (len(src) elements, which dst must
// hold); on this architecture with ordinary stores.
func copyStream(dst, src []float64) {
	if len(src) > len(dst) {
		panic("matmul: copyStream: destination too short")
	}
	copy(dst, src)
}
