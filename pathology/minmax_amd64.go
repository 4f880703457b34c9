//go:build amd64 && !purego

package pathology

// minBytesSSE2 and maxBytesSSE2 (minmax_amd64.s, SSE2, in every amd64)
// write the byte-wise minimum (maximum) of a and b into dst for the first
// n &^ 15 bytes.
//
//go:noescape
func minBytesSSE2(dst, a, b *byte, n int)

//go:noescape
func maxBytesSSE2(dst, a, b *byte, n int)

// minBytes writes min(a[i], b[i]) into dst[i] for every i < len(dst); a
// and b must be as long as dst (dst may be a or b).
func minBytes(dst, a, b []byte) {
	n := len(dst)
	a, b = a[:n], b[:n]
	if n >= 16 {
		minBytesSSE2(&dst[0], &a[0], &b[0], n)
	}
	for i := n &^ 15; i < n; i++ {
		dst[i] = min(a[i], b[i])
	}
}

// maxBytes writes max(a[i], b[i]) into dst[i] for every i < len(dst); a
// and b must be as long as dst (dst may be a or b).
func maxBytes(dst, a, b []byte) {
	n := len(dst)
	a, b = a[:n], b[:n]
	if n >= 16 {
		maxBytesSSE2(&dst[0], &a[0], &b[0], n)
	}
	for i := n &^ 15; i < n; i++ {
		dst[i] = max(a[i], b[i])
	}
}
