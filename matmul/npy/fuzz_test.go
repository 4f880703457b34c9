package npy

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/gohtgs/htgs/internal/fuzzrun"
)

// FuzzParseHeader checks that ParseHeader never panics, that every error
// wraps one of the package's sentinels (or is an I/O error, which a byte
// slice cannot produce), and that any accepted header survives a round
// trip through EncodeHeader.
func FuzzParseHeader(f *testing.F) {
	fuzzrun.Prepare(f)
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

// errInjected is the failure of a fuzzed stream.
var errInjected = errors.New("injected read failure")

// fuzzStream is an io.Reader over data that returns at most chunk bytes
// per call (at least 1), may return io.EOF together with the last bytes,
// may return empty reads with no error (a few, as slow streams do), and
// fails with errInjected once failAt bytes have been read (failAt < 0:
// never). It counts the bytes read.
type fuzzStream struct {
	data       []byte
	pos        int
	chunk      int
	failAt     int
	eofWithEnd bool
	stalls     int
}

func (s *fuzzStream) Read(p []byte) (int, error) {
	if s.failAt >= 0 && s.pos >= s.failAt {
		return 0, errInjected
	}
	if s.stalls > 0 && len(p) > 0 {
		s.stalls--
		return 0, nil
	}
	if s.pos == len(s.data) {
		return 0, io.EOF
	}
	n := min(len(p), s.chunk, len(s.data)-s.pos)
	if s.failAt >= 0 {
		n = min(n, s.failAt-s.pos)
	}
	copy(p, s.data[s.pos:s.pos+n])
	s.pos += n
	if s.eofWithEnd && s.pos == len(s.data) {
		return n, io.EOF
	}
	return n, nil
}

// FuzzReadHeader feeds ReadHeader a stream that delivers its bytes in
// small pieces, with io.EOF alongside the last bytes, empty reads, and a
// read error at any position. ReadHeader must never panic, must read
// exactly the preamble on success and never past it, must agree with
// ParseHeader on the same bytes whenever the stream delivers them all, and
// must report a stream error (wrapped) only where the preamble needed more
// bytes than the stream gave before failing.
func FuzzReadHeader(f *testing.F) {
	fuzzrun.Prepare(f)
	seeds := [][]byte{padHeader(1, canonical, 64), padHeader(2, canonical, 16), rawHeader(3, 0, canonical+"\n")}
	for _, bh := range badHeaders() {
		seeds = append(seeds, bh.in)
	}
	for _, s := range [][2]int{{0, 0}, {2, 3}, {1 << 40, 1 << 10}} {
		b, _ := EncodeHeader(s[0], s[1])
		seeds = append(seeds, append(b, 1, 2, 3, 4, 5, 6, 7, 8))
	}
	for i, b := range seeds {
		f.Add(b, uint8(i%7), int16(-1), i%2 == 0, uint8(i%3))
		f.Add(b, uint8(1), int16(len(b)/2), i%2 == 1, uint8(0))
	}
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8, failAt int16, eofWithEnd bool, stalls uint8) {
		s := &fuzzStream{data: data, chunk: max(1, int(chunk)), failAt: int(failAt), eofWithEnd: eofWithEnd, stalls: int(stalls % 8)}
		if s.failAt > len(data) {
			s.failAt = -1
		}
		h, err := ReadHeader(s)
		if s.pos > len(data) {
			t.Fatalf("read %d of %d bytes", s.pos, len(data))
		}
		if err != nil && h != (Header{}) {
			t.Fatalf("non-zero header %+v with error %v", h, err)
		}
		if err == nil && int64(s.pos) != h.DataOffset {
			t.Fatalf("header %+v: read %d bytes, want exactly DataOffset", h, s.pos)
		}
		if errors.Is(err, errInjected) {
			// The preamble needed bytes beyond the failure: the bytes
			// before it are a truncated preamble.
			if !strings.Contains(err.Error(), "npy: reading") {
				t.Fatalf("stream error not described: %v", err)
			}
			if _, perr := ParseHeader(data[:s.failAt]); !errors.Is(perr, ErrFormat) || !strings.Contains(perr.Error(), "truncated") {
				t.Fatalf("stream failed at %d (%v) but %d bytes parse as: %v", s.failAt, err, s.failAt, perr)
			}
			return
		}
		ph, perr := ParseHeader(data)
		if ph != h || (err == nil) != (perr == nil) || (err != nil && err.Error() != perr.Error()) {
			t.Fatalf("stream: %+v, %v; ParseHeader: %+v, %v", h, err, ph, perr)
		}
		if err != nil && !errors.Is(err, ErrFormat) && !errors.Is(err, ErrUnsupported) {
			t.Fatalf("error %v wraps no sentinel", err)
		}
	})
}
