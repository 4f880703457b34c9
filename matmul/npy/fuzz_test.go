package npy

import (
	"errors"
	"testing"
)

// FuzzParseHeader checks that ParseHeader never panics, that every error
// wraps one of the package's sentinels (or is an I/O error, which a byte
// slice cannot produce), and that any accepted header survives a round
// trip through EncodeHeader.
func FuzzParseHeader(f *testing.F) {
	for _, dict := range []string{
		canonical,
		"{'descr': '<f8', 'fortran_order': False, 'shape': (0, 0), }",
		"{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1000000), }",
		"{'shape': (3L, 4L), 'descr': \"<f8\", 'fortran_order': False}",
		"{'descr': '<f8', 'fortran_order': True, 'shape': (3, 4), }",
		"{'descr': '>f8', 'fortran_order': False, 'shape': (3, 4), }",
		"{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }",
		"{'descr': '<f8', 'fortran_order': False, 'shape': (-3, 4), }",
		"{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': ((3), [4]), }",
		"{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), 'x': None}",
	} {
		f.Add(padHeader(1, dict, 64))
		f.Add(padHeader(2, dict, 16))
		f.Add(rawHeader(3, 0, dict))
	}
	for _, bh := range badHeaders() {
		f.Add(bh.in)
	}
	for _, s := range [][2]int{{0, 0}, {2, 3}, {1 << 40, 1 << 10}} {
		b, _ := EncodeHeader(s[0], s[1])
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHeader(b)
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			if h != (Header{}) {
				t.Fatalf("non-zero header %+v with error %v", h, err)
			}
			return
		}
		if h.Rows < 0 || h.Cols < 0 || h.DataOffset > int64(len(b)) || h.DataOffset < 10 {
			t.Fatalf("accepted header %+v is inconsistent with %d input bytes", h, len(b))
		}
		if h.FileSize() < h.DataOffset {
			t.Fatalf("size of %+v overflows", h)
		}
		enc, err := EncodeHeader(h.Rows, h.Cols)
		if err != nil {
			t.Fatalf("EncodeHeader(%d, %d) of accepted header: %v", h.Rows, h.Cols, err)
		}
		if len(enc)%Alignment != 0 {
			t.Fatalf("EncodeHeader(%d, %d) is %d bytes long", h.Rows, h.Cols, len(enc))
		}
		h2, err := ParseHeader(enc)
		if err != nil {
			t.Fatalf("re-parsing %q: %v", enc, err)
		}
		if h2.Rows != h.Rows || h2.Cols != h.Cols || h2.DataOffset != int64(len(enc)) {
			t.Fatalf("round trip of %dx%d gave %+v", h.Rows, h.Cols, h2)
		}
	})
}
