// Package npy reads and writes two-dimensional float64 matrices stored in
// NumPy's .npy file format, with random access to rectangular sub-blocks so
// that matrices larger than memory can be processed block by block.
//
// # Supported files
//
// A .npy file starts with the magic string "\x93NUMPY", a major and minor
// version byte, a little-endian header length (2 bytes for version 1.0,
// 4 bytes for versions 2.0 and 3.0) and an ASCII header holding a Python
// dict literal such as
//
//	{'descr': '<f8', 'fortran_order': False, 'shape': (1000, 777), }
//
// padded with spaces and terminated by '\n'. The raw array data follows
// immediately.
//
// This package accepts versions 1.0, 2.0 and 3.0 whose dict has exactly the
// keys 'descr', 'fortran_order' and 'shape' with descr '<f8' (little-endian
// IEEE 754 float64), fortran_order False (row-major, "C order") and a
// two-element shape. The native-order spellings '=f8' and 'f8' and the
// aliases such as '<d' are rejected with [ErrUnsupported]: NumPy itself
// always writes an explicit byte order ('<f8' or '>f8'), and a native-order
// descr does not say which order the writer's machine used. Any header
// alignment is accepted (NumPy used 16 bytes before 1.9 and 64 since), and
// integer dimensions with the Python 2 'L' suffix written by old NumPy
// versions are accepted in version 1.0 and 2.0 headers, as NumPy does.
//
// Files written by this package use version 1.0 headers (2.0 only when a
// header would not fit, which cannot happen for two-dimensional shapes) laid
// out byte for byte as numpy.save writes them (checked against NumPy 1.24),
// so the preamble is a multiple of 64 bytes long and numpy.load and
// numpy.memmap read them.
//
// # Errors
//
// Malformed input is reported with errors that wrap [ErrFormat]; valid .npy
// files that this package cannot handle (other dtypes, Fortran order, other
// ranks, unknown versions) are reported with errors that wrap
// [ErrUnsupported]; invalid arguments such as out-of-range blocks wrap
// [ErrRange]. Errors about a named file are [*fs.PathError] values carrying
// the file name. No input makes the package panic.
//
// # Concurrency
//
// [File.ReadBlock] and [Writer.WriteBlock] use positioned I/O (pread and
// pwrite) and may be called from several goroutines at once; concurrent
// writes must target disjoint blocks.
package npy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
)

// Sentinel errors wrapped by the errors this package returns. Test for them
// with [errors.Is].
var (
	// ErrFormat reports input that is not a well-formed .npy file: a bad
	// magic string, a truncated header, a malformed header dict, missing or
	// unknown keys, negative or overflowing dimensions, or a data section
	// whose length does not match the shape.
	ErrFormat = errors.New("npy: invalid format")

	// ErrUnsupported reports a well-formed .npy file that this package does
	// not handle: a dtype other than '<f8', Fortran order, a shape that is
	// not two-dimensional, an unknown format version or an oversized header.
	ErrUnsupported = errors.New("npy: unsupported")

	// ErrRange reports an invalid argument: a block outside the matrix, a
	// buffer of the wrong length, or a negative or too large shape.
	ErrRange = errors.New("npy: out of range")
)

const (
	magic = "\x93NUMPY"

	// MaxHeaderLen is the largest header dict length, in bytes, that
	// ReadHeader accepts. Version 2.0 headers may declare up to 4 GiB; a
	// valid two-dimensional float64 header needs well under 200 bytes.
	MaxHeaderLen = 1 << 20

	// Alignment is the multiple of which the preambles written by this
	// package are long, as in NumPy's format.ARRAY_ALIGN.
	Alignment = 64

	// growthDigits mirrors NumPy's GROWTH_AXIS_MAX_DIGITS: spare spaces
	// are left after the dict so that the row count can later be rewritten
	// in place with up to this many digits.
	growthDigits = 21

	// maxDepth bounds the nesting of tuples and lists in a header dict.
	maxDepth = 32

	elemSize = 8
)

// Header describes a float64 matrix stored in a .npy file.
type Header struct {
	// Major and Minor are the format version (1.0, 2.0 or 3.0).
	Major, Minor uint8
	// Rows and Cols are the matrix shape; either may be zero.
	Rows, Cols int
	// DataOffset is the length of the preamble (magic, version, header
	// length and header dict): the offset of the first element.
	DataOffset int64
}

// DataSize returns the length in bytes of the data section, Rows*Cols*8.
func (h Header) DataSize() int64 {
	return int64(h.Rows) * int64(h.Cols) * elemSize
}

// FileSize returns the length in bytes of a complete file with this header,
// DataOffset + DataSize().
func (h Header) FileSize() int64 {
	return h.DataOffset + h.DataSize()
}

func formatErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrFormat}, args...)...)
}

func unsupportedErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrUnsupported}, args...)...)
}

func rangeErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrRange}, args...)...)
}

// readFull reads exactly len(b) bytes, turning an early end of input into
// an ErrFormat error that names what was being read.
func readFull(r io.Reader, b []byte, what string) error {
	n, err := io.ReadFull(r, b)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return formatErr("truncated %s: got %d of %d bytes", what, n, len(b))
	default:
		return fmt.Errorf("npy: reading %s: %w", what, err)
	}
}

// ReadHeader reads and validates a .npy preamble from r and returns the
// header. On success exactly DataOffset bytes have been consumed, so r is
// positioned at the first element. ReadHeader does not check that the data
// section is present.
func ReadHeader(r io.Reader) (Header, error) {
	var pre [12]byte
	if err := readFull(r, pre[:8], "magic and version"); err != nil {
		return Header{}, err
	}
	if string(pre[:6]) != magic {
		return Header{}, formatErr("bad magic %q, want %q", pre[:6], magic)
	}
	h := Header{Major: pre[6], Minor: pre[7]}
	var lenSize int
	switch {
	case h.Major == 1 && h.Minor == 0:
		lenSize = 2
	case (h.Major == 2 || h.Major == 3) && h.Minor == 0:
		lenSize = 4
	default:
		return Header{}, unsupportedErr("format version %d.%d", h.Major, h.Minor)
	}
	if err := readFull(r, pre[8:8+lenSize], "header length"); err != nil {
		return Header{}, err
	}
	var hlen uint32
	if lenSize == 2 {
		hlen = uint32(binary.LittleEndian.Uint16(pre[8:]))
	} else {
		hlen = binary.LittleEndian.Uint32(pre[8:])
	}
	if hlen > MaxHeaderLen {
		return Header{}, unsupportedErr("header length %d exceeds limit of %d bytes", hlen, MaxHeaderLen)
	}
	dict := make([]byte, hlen)
	if err := readFull(r, dict, "header"); err != nil {
		return Header{}, err
	}
	rows, cols, err := parseDict(dict, h.Major <= 2)
	if err != nil {
		return Header{}, err
	}
	h.Rows, h.Cols = rows, cols
	h.DataOffset = int64(8+lenSize) + int64(hlen)
	if err := checkShape(rows, cols, h.DataOffset); err != nil {
		return Header{}, formatErr("%v", err)
	}
	return h, nil
}

// ParseHeader parses the preamble at the start of b, which may be followed
// by any amount of data (or none). It behaves like ReadHeader on a reader
// over b.
func ParseHeader(b []byte) (Header, error) {
	return ReadHeader(&byteReader{b: b})
}

// byteReader is a minimal io.Reader over a byte slice (bytes.Reader without
// the dependency and extra methods).
type byteReader struct{ b []byte }

func (r *byteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// checkShape reports whether a rows x cols float64 matrix preceded by a
// preamble of off bytes has a size representable as an int64 file length
// and an int element count. It returns an unwrapped description.
func checkShape(rows, cols int, off int64) error {
	if rows < 0 || cols < 0 {
		return fmt.Errorf("negative dimension in shape (%d, %d)", rows, cols)
	}
	if rows == 0 || cols == 0 {
		return nil
	}
	if uint64(rows) > uint64(math.MaxInt)/uint64(cols) {
		return fmt.Errorf("shape (%d, %d) has too many elements", rows, cols)
	}
	if int64(rows) > (math.MaxInt64-off)/elemSize/int64(cols) {
		return fmt.Errorf("shape (%d, %d) is too large for a file", rows, cols)
	}
	return nil
}

// EncodeHeader returns the preamble of a .npy file holding a rows x cols
// float64 matrix in C order: a version 1.0 header laid out as NumPy writes
// it, padded so that its length is a multiple of [Alignment]. The data
// section must follow it immediately. It fails with ErrRange if the shape is
// negative or too large to be stored.
func EncodeHeader(rows, cols int) ([]byte, error) {
	return encodeHeader(rows, cols, 1)
}

// encodeHeader is EncodeHeader with a requested major version (1, 2 or 3).
// Version 1 is promoted to 2 when the header does not fit a 2-byte length.
func encodeHeader(rows, cols int, major uint8) ([]byte, error) {
	// Check with a generous preamble bound; the exact length is known
	// only after formatting.
	if err := checkShape(rows, cols, 1<<16); err != nil {
		return nil, rangeErr("%v", err)
	}
	dict := make([]byte, 0, 128)
	dict = append(dict, "{'descr': '<f8', 'fortran_order': False, 'shape': ("...)
	dict = strconv.AppendInt(dict, int64(rows), 10)
	dict = append(dict, ", "...)
	dict = strconv.AppendInt(dict, int64(cols), 10)
	dict = append(dict, "), }"...)
	if d := len(strconv.Itoa(rows)); d < growthDigits {
		for range growthDigits - d {
			dict = append(dict, ' ')
		}
	}
	lenSize := 2
	if major != 1 {
		lenSize = 4
	}
	hlen := len(dict) + 1 // trailing '\n'
	if major == 1 && hlen+Alignment > math.MaxUint16 {
		major, lenSize = 2, 4
	}
	pad := Alignment - (len(magic)+2+lenSize+hlen)%Alignment
	total := len(magic) + 2 + lenSize + hlen + pad

	out := make([]byte, 0, total)
	out = append(out, magic...)
	out = append(out, major, 0)
	if lenSize == 2 {
		out = binary.LittleEndian.AppendUint16(out, uint16(hlen+pad))
	} else {
		out = binary.LittleEndian.AppendUint32(out, uint32(hlen+pad))
	}
	out = append(out, dict...)
	for range pad {
		out = append(out, ' ')
	}
	out = append(out, '\n')
	return out, nil
}
