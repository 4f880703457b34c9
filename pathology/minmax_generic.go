//go:build !amd64 || purego

package pathology

// minBytes writes min(a[i], b[i]) into dst[i] for every i < len(dst); a
// and b must be as long as dst (dst may be a or b). Eight bytes at a time
// in a uint64 (SWAR).
func minBytes(dst, a, b []byte) {
	n := len(dst)
	a, b = a[:n], b[:n]
	i := 0
	for ; i+8 <= n; i += 8 {
		st(dst, i, min8(ld(a, i), ld(b, i)))
	}
	for ; i < n; i++ {
		dst[i] = min(a[i], b[i])
	}
}

// maxBytes writes max(a[i], b[i]) into dst[i] for every i < len(dst); a
// and b must be as long as dst (dst may be a or b).
func maxBytes(dst, a, b []byte) {
	n := len(dst)
	a, b = a[:n], b[:n]
	i := 0
	for ; i+8 <= n; i += 8 {
		x, y := ld(a, i), ld(b, i)
		st(dst, i, x^y^min8(x, y))
	}
	for ; i < n; i++ {
		dst[i] = max(a[i], b[i])
	}
}
