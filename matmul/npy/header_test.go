package npy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rawHeader builds a preamble with the given version whose header is text
// exactly as given (no padding is added).
func rawHeader(major, minor byte, text string) []byte {
	b := append([]byte(magic), major, minor)
	if major == 1 {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(text)))
	} else {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(text)))
	}
	return append(b, text...)
}

// padHeader builds a preamble like NumPy does: the dict, spaces, and a
// final newline, so that the preamble length is a multiple of align.
func padHeader(major byte, dict string, align int) []byte {
	lenSize := 2
	if major != 1 {
		lenSize = 4
	}
	n := len(magic) + 2 + lenSize + len(dict) + 1
	pad := (align - n%align) % align
	return rawHeader(major, 0, dict+strings.Repeat(" ", pad)+"\n")
}

const canonical = "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }"

func TestEncodeHeaderLayout(t *testing.T) {
	for _, tc := range []struct{ rows, cols int }{
		{0, 0}, {1, 1}, {2, 3}, {1, 1000}, {1000, 1}, {1000, 777},
		{123456789, 987654321}, {1 << 40, 1 << 10},
	} {
		b, err := EncodeHeader(tc.rows, tc.cols)
		if err != nil {
			t.Fatalf("EncodeHeader(%d, %d): %v", tc.rows, tc.cols, err)
		}
		if !bytes.HasPrefix(b, []byte("\x93NUMPY\x01\x00")) {
			t.Errorf("%dx%d: preamble starts with %q", tc.rows, tc.cols, b[:8])
		}
		if len(b)%64 != 0 {
			t.Errorf("%dx%d: preamble length %d not a multiple of 64", tc.rows, tc.cols, len(b))
		}
		if hlen := int(binary.LittleEndian.Uint16(b[8:])); hlen != len(b)-10 {
			t.Errorf("%dx%d: header length field %d, want %d", tc.rows, tc.cols, hlen, len(b)-10)
		}
		dict := fmt.Sprintf("{'descr': '<f8', 'fortran_order': False, 'shape': (%d, %d), }", tc.rows, tc.cols)
		if !bytes.HasPrefix(b[10:], []byte(dict)) {
			t.Errorf("%dx%d: header %q does not start with %q", tc.rows, tc.cols, b[10:], dict)
		}
		rest := b[10+len(dict):]
		if rest[len(rest)-1] != '\n' || strings.Trim(string(rest[:len(rest)-1]), " ") != "" {
			t.Errorf("%dx%d: padding %q is not spaces then newline", tc.rows, tc.cols, rest)
		}
		h, err := ParseHeader(b)
		if err != nil {
			t.Fatalf("ParseHeader(EncodeHeader(%d, %d)): %v", tc.rows, tc.cols, err)
		}
		want := Header{Major: 1, Rows: tc.rows, Cols: tc.cols, DataOffset: int64(len(b))}
		if h != want {
			t.Errorf("parsed %+v, want %+v", h, want)
		}
	}
}

// TestEncodeHeaderMatchesNumPy compares with preambles written by NumPy
// 1.24 (see testdata/gen_fixtures.py).
func TestEncodeHeaderMatchesNumPy(t *testing.T) {
	for _, tc := range []struct {
		file       string
		rows, cols int
	}{
		{"numpy_2x3_v1.npy", 2, 3},
		{"numpy_col_5x1.npy", 5, 1},
		{"numpy_empty_0x777.npy", 0, 777},
	} {
		data, err := os.ReadFile(filepath.Join("testdata", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		b, err := EncodeHeader(tc.rows, tc.cols)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(data, b) || len(data) != len(b)+8*tc.rows*tc.cols {
			t.Errorf("%s: our preamble %q differs from NumPy's %q", tc.file, b, data[:min(len(data), len(b))])
		}
	}
}

func TestEncodeHeaderVersion2(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("testdata", "numpy_2x3_v2.npy"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := encodeHeader(2, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(want, b) {
		t.Errorf("v2 preamble %q differs from NumPy's %q", b, want[:len(b)])
	}
	h, err := ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.Major != 2 || h.Minor != 0 || h.Rows != 2 || h.Cols != 3 || h.DataOffset != int64(len(b)) || len(b)%64 != 0 {
		t.Errorf("parsed %+v from %d-byte v2 preamble", h, len(b))
	}
}

func TestEncodeHeaderInvalid(t *testing.T) {
	for _, tc := range []struct{ rows, cols int }{
		{-1, 3}, {3, -1}, {math.MaxInt, 2}, {1 << 31, 1 << 31}, {math.MaxInt / 8, 1},
	} {
		_, err := EncodeHeader(tc.rows, tc.cols)
		if !errors.Is(err, ErrRange) {
			t.Errorf("EncodeHeader(%d, %d) = %v, want ErrRange", tc.rows, tc.cols, err)
		}
	}
}

func TestParseHeaderValid(t *testing.T) {
	for _, tc := range []struct {
		name       string
		in         []byte
		rows, cols int
	}{
		{"canonical", padHeader(1, canonical, 64), 3, 4},
		{"align16", padHeader(1, canonical, 16), 3, 4},
		{"unaligned", rawHeader(1, 0, canonical+"\n"), 3, 4},
		{"no trailing newline", rawHeader(1, 0, canonical), 3, 4},
		{"v2", padHeader(2, canonical, 64), 3, 4},
		{"v3", padHeader(3, canonical, 64), 3, 4},
		{"key order", padHeader(1, "{'shape': (3, 4), 'fortran_order': False, 'descr': '<f8'}", 64), 3, 4},
		{"double quotes", padHeader(1, `{"descr": "<f8", "fortran_order": False, "shape": (3, 4)}`, 64), 3, 4},
		{"no spaces", padHeader(1, "{'descr':'<f8','fortran_order':False,'shape':(3,4)}", 64), 3, 4},
		{"tuple trailing comma", padHeader(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4,), }", 64), 3, 4},
		{"whitespace", padHeader(1, "  {\n 'descr' : '<f8' ,\t'fortran_order'\r\n:False,'shape':( 3 ,\n4 ) \f}\t\r\n  ", 64), 3, 4},
		{"python2 longs", padHeader(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (3L, 4L), }", 16), 3, 4},
		{"zero rows", padHeader(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 4), }", 64), 0, 4},
		{"zero cols", padHeader(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (5, 0), }", 64), 5, 0},
		{"minus zero", padHeader(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (-0, 00), }", 64), 0, 0},
		{"big", padHeader(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 1024), }", 64), 1 << 32, 1024},
		{"parenthesized dim", padHeader(1, "{'descr': '<f8', 'fortran_order': False, 'shape': ((3), 4), }", 64), 3, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := append(tc.in, 1, 2, 3) // data after the preamble is ignored
			h, err := ParseHeader(in)
			if err != nil {
				t.Fatalf("ParseHeader(%q): %v", tc.in, err)
			}
			if h.Rows != tc.rows || h.Cols != tc.cols || h.DataOffset != int64(len(tc.in)) {
				t.Errorf("got %+v, want %dx%d at offset %d", h, tc.rows, tc.cols, len(tc.in))
			}
			if h.Major != tc.in[6] || h.Minor != 0 {
				t.Errorf("version %d.%d, want %d.0", h.Major, h.Minor, tc.in[6])
			}
			r := bytes.NewReader(in)
			h2, err := ReadHeader(r)
			if err != nil || h2 != h {
				t.Errorf("ReadHeader = %+v, %v; want %+v", h2, err, h)
			}
			if rest, _ := io.ReadAll(r); !bytes.Equal(rest, []byte{1, 2, 3}) {
				t.Errorf("ReadHeader left %q unread, want the data bytes", rest)
			}
		})
	}
}

type badHeader struct {
	name string
	in   []byte
	want error
}

func badHeaders() []badHeader {
	dict := func(descr, fortran, shape string) []byte {
		return padHeader(1, fmt.Sprintf("{'descr': %s, 'fortran_order': %s, 'shape': %s, }", descr, fortran, shape), 64)
	}
	good := padHeader(1, canonical, 64)
	v2len := rawHeader(2, 0, "")
	v2len = binary.LittleEndian.AppendUint32(v2len[:8], 1<<31)
	return []badHeader{
		{"empty", nil, ErrFormat},
		{"short magic", []byte("\x93NUM"), ErrFormat},
		{"bad magic", append([]byte("\x93NUMPZ\x01\x00"), good[8:]...), ErrFormat},
		{"not npy", []byte("PK\x03\x04 this is a zip file"), ErrFormat},
		{"no version", []byte(magic), ErrFormat},
		{"no length", []byte(magic + "\x01\x00\x10"), ErrFormat},
		{"truncated header", good[:40], ErrFormat},
		{"truncated v2 length", []byte(magic + "\x02\x00\x10\x00"), ErrFormat},
		{"version 1.1", append([]byte(magic+"\x01\x01"), good[8:]...), ErrUnsupported},
		{"version 4.0", append([]byte(magic+"\x04\x00"), good[8:]...), ErrUnsupported},
		{"version 0.0", append([]byte(magic+"\x00\x00"), good[8:]...), ErrUnsupported},
		{"huge header length", v2len, ErrUnsupported},
		{"empty dict text", rawHeader(1, 0, ""), ErrFormat},
		{"only spaces", rawHeader(1, 0, "     \n"), ErrFormat},
		{"not a dict", padHeader(1, "('descr', '<f8')", 64), ErrFormat},
		{"unterminated dict", rawHeader(1, 0, "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4)"), ErrFormat},
		{"unterminated dict after comma", rawHeader(1, 0, "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4),"), ErrFormat},
		{"unterminated tuple", rawHeader(1, 0, "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4"), ErrFormat},
		{"unterminated string", rawHeader(1, 0, "{'descr': '<f8"), ErrFormat},
		{"trailing garbage", padHeader(1, canonical+" x", 64), ErrFormat},
		{"second dict", padHeader(1, canonical+canonical, 64), ErrFormat},
		{"nul padding", rawHeader(1, 0, canonical+"\x00\x00\n"), ErrFormat},
		{"leading newline", rawHeader(1, 0, "\n"+canonical+"\n"), ErrFormat},
		{"missing colon", padHeader(1, "{'descr' '<f8', 'fortran_order': False, 'shape': (3, 4)}", 64), ErrFormat},
		{"missing comma", padHeader(1, "{'descr': '<f8' 'fortran_order': False, 'shape': (3, 4)}", 64), ErrFormat},
		{"double comma", padHeader(1, "{'descr': '<f8',, 'fortran_order': False, 'shape': (3, 4)}", 64), ErrFormat},
		{"lone comma", padHeader(1, "{,}", 64), ErrFormat},
		{"empty dict", padHeader(1, "{}", 64), ErrFormat},
		{"missing shape", padHeader(1, "{'descr': '<f8', 'fortran_order': False}", 64), ErrFormat},
		{"missing descr", padHeader(1, "{'fortran_order': False, 'shape': (3, 4)}", 64), ErrFormat},
		{"missing fortran_order", padHeader(1, "{'descr': '<f8', 'shape': (3, 4)}", 64), ErrFormat},
		{"unknown key", padHeader(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), 'extra': 1}", 64), ErrFormat},
		{"duplicate key", padHeader(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), 'shape': (3, 4)}", 64), ErrFormat},
		{"int key", padHeader(1, "{1: '<f8', 'fortran_order': False, 'shape': (3, 4)}", 64), ErrFormat},
		{"escape in string", padHeader(1, `{'descr': '<f\x38', 'fortran_order': False, 'shape': (3, 4)}`, 64), ErrFormat},
		{"newline in string", padHeader(1, "{'descr': '<f8\n', 'fortran_order': False, 'shape': (3, 4)}", 64), ErrFormat},
		{"unknown name", dict("'<f8'", "false", "(3, 4)"), ErrFormat},
		{"fortran_order int", dict("'<f8'", "0", "(3, 4)"), ErrFormat},
		{"fortran_order None", dict("'<f8'", "None", "(3, 4)"), ErrFormat},
		{"descr int", dict("8", "False", "(3, 4)"), ErrFormat},
		{"shape list", dict("'<f8'", "False", "[3, 4]"), ErrFormat},
		{"shape int", dict("'<f8'", "False", "12"), ErrFormat},
		{"shape parenthesized int", dict("'<f8'", "False", "(12)"), ErrFormat},
		{"shape string", dict("'<f8'", "False", "'(3, 4)'"), ErrFormat},
		{"shape float", dict("'<f8'", "False", "(3.0, 4)"), ErrFormat},
		{"shape None", dict("'<f8'", "False", "(None, 4)"), ErrFormat},
		{"shape nested", dict("'<f8'", "False", "((3, 4), 4)"), ErrFormat},
		{"shape double comma", dict("'<f8'", "False", "(3,, 4)"), ErrFormat},
		{"shape leading comma", dict("'<f8'", "False", "(, 4)"), ErrFormat},
		{"shape hex", dict("'<f8'", "False", "(0x3, 4)"), ErrFormat},
		{"shape underscore", dict("'<f8'", "False", "(1_000, 4)"), ErrFormat},
		{"shape leading zero", dict("'<f8'", "False", "(03, 4)"), ErrFormat},
		{"shape plus", dict("'<f8'", "False", "(+3, 4)"), ErrFormat},
		{"shape lone minus", dict("'<f8'", "False", "(-, 4)"), ErrFormat},
		{"negative rows", dict("'<f8'", "False", "(-3, 4)"), ErrFormat},
		{"negative cols", dict("'<f8'", "False", "(3, -1)"), ErrFormat},
		{"overflowing dim", dict("'<f8'", "False", "(99999999999999999999999, 4)"), ErrFormat},
		{"negative overflowing dim", dict("'<f8'", "False", "(-99999999999999999999999, 4)"), ErrFormat},
		{"int64 max dim", dict("'<f8'", "False", "(9223372036854775807, 1)"), ErrFormat},
		{"overflowing size", dict("'<f8'", "False", "(4294967296, 4294967296)"), ErrFormat},
		{"long suffix in v3", padHeader(3, "{'descr': '<f8', 'fortran_order': False, 'shape': (3L, 4L), }", 64), ErrFormat},
		{"deep nesting", dict("'<f8'", "False", strings.Repeat("(", 100)+"3"+strings.Repeat(")", 100)), ErrFormat},
		{"non-ascii", padHeader(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4)\xa0}", 64), ErrFormat},
		// Well-formed but unsupported.
		{"fortran order", dict("'<f8'", "True", "(3, 4)"), ErrUnsupported},
		{"big-endian", dict("'>f8'", "False", "(3, 4)"), ErrUnsupported},
		{"float32", dict("'<f4'", "False", "(3, 4)"), ErrUnsupported},
		{"int64", dict("'<i8'", "False", "(3, 4)"), ErrUnsupported},
		{"native f8", dict("'=f8'", "False", "(3, 4)"), ErrUnsupported},
		{"bare f8", dict("'f8'", "False", "(3, 4)"), ErrUnsupported},
		{"alias d", dict("'<d'", "False", "(3, 4)"), ErrUnsupported},
		{"empty descr", dict("''", "False", "(3, 4)"), ErrUnsupported},
		{"structured", dict("[('x', '<f8')]", "False", "(3, 4)"), ErrUnsupported},
		{"scalar", dict("'<f8'", "False", "()"), ErrUnsupported},
		{"1-D", dict("'<f8'", "False", "(12,)"), ErrUnsupported},
		{"3-D", dict("'<f8'", "False", "(2, 3, 4)"), ErrUnsupported},
	}
}

func TestParseHeaderErrors(t *testing.T) {
	for _, tc := range badHeaders() {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ParseHeader(tc.in)
			if !errors.Is(err, tc.want) {
				t.Fatalf("ParseHeader(%q) = %+v, %v; want error wrapping %v", tc.in, h, err, tc.want)
			}
			if h != (Header{}) {
				t.Errorf("ParseHeader returned non-zero header %+v with error", h)
			}
			for _, other := range []error{ErrFormat, ErrUnsupported, ErrRange} {
				if other != tc.want && errors.Is(err, other) {
					t.Errorf("error %v also wraps %v", err, other)
				}
			}
			if !strings.HasPrefix(err.Error(), "npy: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
		})
	}
}

// TestNumPyFixtures reads headers and files written by NumPy itself.
func TestNumPyFixtures(t *testing.T) {
	for _, tc := range []struct {
		file         string
		major        byte
		rows, cols   int
		data         []float64
		wantErr      error
		errSubstring string
	}{
		{file: "numpy_2x3_v1.npy", major: 1, rows: 2, cols: 3, data: []float64{-2, -0.5, 1, 2.5, 4, 5.5}},
		{file: "numpy_2x3_v2.npy", major: 2, rows: 2, cols: 3, data: []float64{-2, -0.5, 1, 2.5, 4, 5.5}},
		{file: "numpy_2x3_v3.npy", major: 3, rows: 2, cols: 3, data: []float64{-2, -0.5, 1, 2.5, 4, 5.5}},
		{file: "numpy_col_5x1.npy", major: 1, rows: 5, cols: 1, data: []float64{1, -2.5, math.Inf(1), math.Copysign(0, -1), 1e-300}},
		{file: "numpy_empty_0x777.npy", major: 1, rows: 0, cols: 777, data: []float64{}},
		{file: "numpy_fortran.npy", wantErr: ErrUnsupported, errSubstring: "fortran_order"},
		{file: "numpy_bigendian.npy", wantErr: ErrUnsupported, errSubstring: ">f8"},
		{file: "numpy_float32.npy", wantErr: ErrUnsupported, errSubstring: "<f4"},
		{file: "numpy_int64.npy", wantErr: ErrUnsupported, errSubstring: "<i8"},
		{file: "numpy_1d.npy", wantErr: ErrUnsupported, errSubstring: "1-dimensional"},
		{file: "numpy_3d.npy", wantErr: ErrUnsupported, errSubstring: "3-dimensional"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			name := filepath.Join("testdata", tc.file)
			rows, cols, data, err := Read(name)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.errSubstring) || !strings.Contains(err.Error(), name) {
					t.Fatalf("Read(%s) error = %v; want %v mentioning %q and the file name", name, err, tc.wantErr, tc.errSubstring)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rows != tc.rows || cols != tc.cols || !sameFloats(data, tc.data) {
				t.Errorf("Read = %dx%d %v, want %dx%d %v", rows, cols, data, tc.rows, tc.cols, tc.data)
			}
			f, err := Open(name)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Header().Major != tc.major {
				t.Errorf("version %d, want %d", f.Header().Major, tc.major)
			}
		})
	}
}

// sameFloats compares bit patterns, so that -0 and NaN payloads count.
func sameFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}
