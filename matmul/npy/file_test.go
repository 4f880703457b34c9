package npy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// matrix returns a rows x cols matrix whose elements identify their
// position and include awkward values.
func matrix(rows, cols int) []float64 {
	m := make([]float64, rows*cols)
	for i := range rows {
		for j := range cols {
			m[i*cols+j] = float64(i)*1000 + float64(j) + 0.25
		}
	}
	special := []float64{math.Inf(1), math.Inf(-1), math.NaN(), math.Copysign(0, -1), math.SmallestNonzeroFloat64, math.MaxFloat64}
	for k, v := range special {
		if k*7 < len(m) {
			m[k*7] = v
		}
	}
	return m
}

// subBlock extracts a block of m (with cols columns) as ReadBlock would.
func subBlock(m []float64, cols, r0, c0, br, bc int) []float64 {
	out := make([]float64, br*bc)
	for i := range br {
		copy(out[i*bc:(i+1)*bc], m[(r0+i)*cols+c0:])
	}
	return out
}

// withPortable runs f with the zero-copy path disabled and restores it.
// Tests using it must not run in parallel.
func withPortable(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	t.Run("native", f)
	old := zeroCopy
	zeroCopy = false
	defer func() { zeroCopy = old }()
	t.Run("portable", f)
}

var shapes = [][2]int{
	{1, 1}, {1, 17}, {17, 1}, {2, 3}, {7, 13}, {64, 64}, {33, 65}, {1, 5000}, {5000, 1},
	{0, 0}, {0, 5}, {5, 0},
}

func TestRoundTrip(t *testing.T) {
	withPortable(t, func(t *testing.T) {
		dir := t.TempDir()
		for _, s := range shapes {
			rows, cols := s[0], s[1]
			name := filepath.Join(dir, fmt.Sprintf("m_%dx%d.npy", rows, cols))
			want := matrix(rows, cols)
			if err := Write(name, rows, cols, want); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			checkFileBytes(t, raw, rows, cols, want)
			r, c, got, err := Read(name)
			if err != nil {
				t.Fatal(err)
			}
			if r != rows || c != cols || !sameFloats(got, want) {
				t.Errorf("%dx%d: Read = %dx%d, data equal %v", rows, cols, r, c, sameFloats(got, want))
			}
		}
	})
}

// checkFileBytes verifies the on-disk layout independently of the reader:
// a NumPy-compatible preamble followed by little-endian float64 data.
func checkFileBytes(t *testing.T, raw []byte, rows, cols int, want []float64) {
	t.Helper()
	if !bytes.HasPrefix(raw, []byte("\x93NUMPY\x01\x00")) {
		t.Fatalf("file starts with %q", raw[:min(len(raw), 8)])
	}
	off := 10 + int(binary.LittleEndian.Uint16(raw[8:]))
	if off%64 != 0 || raw[off-1] != '\n' {
		t.Errorf("preamble length %d not a multiple of 64 or not newline-terminated", off)
	}
	dict := fmt.Sprintf("{'descr': '<f8', 'fortran_order': False, 'shape': (%d, %d), }", rows, cols)
	if got := strings.TrimRight(string(raw[10:off]), " \n"); got != dict {
		t.Errorf("header dict %q, want %q", got, dict)
	}
	if len(raw)-off != 8*len(want) {
		t.Fatalf("data section is %d bytes, want %d", len(raw)-off, 8*len(want))
	}
	for i, v := range want {
		if got := binary.LittleEndian.Uint64(raw[off+8*i:]); got != math.Float64bits(v) {
			t.Fatalf("element %d stored as %#x, want %#x", i, got, math.Float64bits(v))
		}
	}
}

func TestReadBlock(t *testing.T) {
	const rows, cols = 23, 37
	name := filepath.Join(t.TempDir(), "m.npy")
	m := matrix(rows, cols)
	if err := Write(name, rows, cols, m); err != nil {
		t.Fatal(err)
	}
	withPortable(t, func(t *testing.T) {
		f, err := Open(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if f.Rows() != rows || f.Cols() != cols || f.Name() != name {
			t.Fatalf("Open: %dx%d %q", f.Rows(), f.Cols(), f.Name())
		}
		starts := []int{0, 1, 5, 16}
		sizes := []int{0, 1, 2, 7, 16}
		for _, r0 := range append(starts, rows-1, rows) {
			for _, c0 := range append(starts, cols-1, cols) {
				for _, br := range append(sizes, rows-r0) {
					for _, bc := range append(sizes, cols-c0) {
						if r0+br > rows || c0+bc > cols {
							continue
						}
						want := subBlock(m, cols, r0, c0, br, bc)
						got := make([]float64, br*bc+2)
						got[br*bc], got[br*bc+1] = 42, 43
						if err := f.ReadBlock(r0, c0, br, bc, got); err != nil {
							t.Fatalf("ReadBlock(%d, %d, %d, %d): %v", r0, c0, br, bc, err)
						}
						if !sameFloats(got[:br*bc], want) || got[br*bc] != 42 || got[br*bc+1] != 43 {
							t.Fatalf("ReadBlock(%d, %d, %d, %d) = %v, want %v", r0, c0, br, bc, got, want)
						}
					}
				}
			}
		}
		all, err := f.ReadAll()
		if err != nil || !sameFloats(all, m) {
			t.Errorf("ReadAll: %v, equal %v", err, sameFloats(all, m))
		}
	})
}

func TestReadBlockStride(t *testing.T) {
	const rows, cols = 9, 11
	name := filepath.Join(t.TempDir(), "m.npy")
	m := matrix(rows, cols)
	if err := Write(name, rows, cols, m); err != nil {
		t.Fatal(err)
	}
	f, err := Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, tc := range []struct{ r0, c0, br, bc, stride int }{
		{0, 0, rows, cols, cols + 3}, {2, 3, 4, 5, 8}, {0, 0, rows, cols, cols}, {8, 10, 1, 1, 4}, {1, 0, 3, cols, 20},
	} {
		buf := make([]float64, (tc.br-1)*tc.stride+tc.bc)
		for i := range buf {
			buf[i] = -1
		}
		if err := f.ReadBlockStride(tc.r0, tc.c0, tc.br, tc.bc, buf, tc.stride); err != nil {
			t.Fatal(err)
		}
		for i := range tc.br {
			for j := range tc.stride {
				k := i*tc.stride + j
				if k >= len(buf) {
					break
				}
				want := -1.0
				if j < tc.bc {
					want = m[(tc.r0+i)*cols+tc.c0+j]
				}
				if math.Float64bits(buf[k]) != math.Float64bits(want) {
					t.Fatalf("%+v: buf[%d] = %v, want %v", tc, k, buf[k], want)
				}
			}
		}
	}
}

func TestBlockArgumentErrors(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "m.npy")
	if err := Write(name, 4, 5, matrix(4, 5)); err != nil {
		t.Fatal(err)
	}
	f, err := Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := Create(filepath.Join(dir, "w.npy"), 4, 5)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	buf := make([]float64, 100)
	for _, tc := range []struct {
		r0, c0, rows, cols, stride, n int
	}{
		{-1, 0, 1, 1, 1, 1}, {0, -1, 1, 1, 1, 1}, {0, 0, -1, 1, 1, 1}, {0, 0, 1, -1, 1, 1},
		{4, 0, 1, 1, 1, 1}, {0, 5, 1, 1, 1, 1}, {3, 0, 2, 1, 1, 2}, {0, 4, 1, 2, 2, 2},
		{0, 0, 5, 5, 5, 100}, {1, 1, math.MaxInt, 1, 1, 1}, {math.MaxInt, 0, 1, 1, 1, 1},
		{0, 0, 2, 2, 2, 3},   // buffer too short
		{0, 0, 2, 3, 2, 100}, // stride < cols
		{0, 0, 3, 2, math.MaxInt, 100},
	} {
		if err := f.ReadBlockStride(tc.r0, tc.c0, tc.rows, tc.cols, buf[:tc.n], tc.stride); !errors.Is(err, ErrRange) || !strings.Contains(err.Error(), name) {
			t.Errorf("ReadBlockStride%v = %v, want ErrRange naming the file", tc, err)
		}
		if err := w.WriteBlockStride(tc.r0, tc.c0, tc.rows, tc.cols, buf[:tc.n], tc.stride); !errors.Is(err, ErrRange) {
			t.Errorf("WriteBlockStride%v = %v, want ErrRange", tc, err)
		}
	}
	if err := f.ReadBlock(0, 0, 2, 2, buf[:3]); !errors.Is(err, ErrRange) {
		t.Errorf("ReadBlock with short buffer = %v, want ErrRange", err)
	}
	if err := w.WriteBlock(0, 0, 2, 2, buf[:3]); !errors.Is(err, ErrRange) {
		t.Errorf("WriteBlock with short buffer = %v, want ErrRange", err)
	}
	// Empty blocks anywhere inside (or at the edge of) the matrix are fine.
	if err := f.ReadBlock(4, 5, 0, 0, nil); err != nil {
		t.Errorf("empty block: %v", err)
	}
}

func TestWriteBlock(t *testing.T) {
	withPortable(t, func(t *testing.T) {
		const rows, cols = 19, 29
		m := matrix(rows, cols)
		dir := t.TempDir()
		for _, bs := range [][2]int{{1, 1}, {4, 4}, {5, 7}, {rows, 3}, {3, cols}, {rows, cols}, {32, 32}} {
			name := filepath.Join(dir, fmt.Sprintf("w%dx%d.npy", bs[0], bs[1]))
			w, err := Create(name, rows, cols)
			if err != nil {
				t.Fatal(err)
			}
			if w.Rows() != rows || w.Cols() != cols || w.Name() != name || w.Header().DataOffset%64 != 0 {
				t.Fatalf("Create: %dx%d %q %+v", w.Rows(), w.Cols(), w.Name(), w.Header())
			}
			for r0 := 0; r0 < rows; r0 += bs[0] {
				for c0 := 0; c0 < cols; c0 += bs[1] {
					br, bc := min(bs[0], rows-r0), min(bs[1], cols-c0)
					if err := w.WriteBlock(r0, c0, br, bc, subBlock(m, cols, r0, c0, br, bc)); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			checkFileBytes(t, raw, rows, cols, m)
		}
	})
}

func TestWriteBlockStrideAndZeroFill(t *testing.T) {
	const rows, cols = 6, 8
	name := filepath.Join(t.TempDir(), "w.npy")
	w, err := Create(name, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	// Write a 2x3 block at (1, 4) from a buffer with stride 5; leave the
	// rest unwritten, which must read back as zeros.
	src := []float64{1, 2, 3, -1, -1, 4, 5, 6}
	if err := w.WriteBlockStride(1, 4, 2, 3, src, 5); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_, _, got, err := Read(name)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float64, rows*cols)
	copy(want[1*cols+4:], []float64{1, 2, 3})
	copy(want[2*cols+4:], []float64{4, 5, 6})
	if !sameFloats(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestConcurrentBlocks(t *testing.T) {
	const rows, cols, bs = 96, 80, 16
	m := matrix(rows, cols)
	name := filepath.Join(t.TempDir(), "c.npy")
	w, err := Create(name, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	type blk struct{ r0, c0 int }
	var blocks []blk
	for r0 := 0; r0 < rows; r0 += bs {
		for c0 := 0; c0 < cols; c0 += bs {
			blocks = append(blocks, blk{r0, c0})
		}
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(blocks), func(i, j int) { blocks[i], blocks[j] = blocks[j], blocks[i] })
	var wg sync.WaitGroup
	errs := make(chan error, len(blocks))
	for _, b := range blocks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- w.WriteBlock(b.r0, b.c0, bs, bs, subBlock(m, cols, b.r0, b.c0, bs, bs))
		}()
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	f, err := Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	errs = make(chan error, len(blocks))
	for _, b := range blocks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := make([]float64, bs*bs)
			if err := f.ReadBlock(b.r0, b.c0, bs, bs, got); err != nil {
				errs <- err
				return
			}
			if !sameFloats(got, subBlock(m, cols, b.r0, b.c0, bs, bs)) {
				errs <- fmt.Errorf("block at (%d, %d) differs", b.r0, b.c0)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile(filepath.Join("testdata", "numpy_2x3_v1.npy"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o666); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name string
		path string
		want error
	}{
		{"missing", filepath.Join(dir, "nope.npy"), fs.ErrNotExist},
		{"directory", dir, ErrUnsupported},
		{"empty", write("empty.npy", nil), ErrFormat},
		{"data truncated", write("trunc.npy", good[:len(good)-1]), ErrFormat},
		{"data missing", write("nodata.npy", good[:128]), ErrFormat},
		{"trailing bytes", write("trailing.npy", append(append([]byte{}, good...), 0)), ErrFormat},
	}
	for _, bh := range badHeaders() {
		cases = append(cases, struct {
			name string
			path string
			want error
		}{"header " + bh.name, write("hdr_"+strings.ReplaceAll(bh.name, " ", "_")+".npy", bh.in), bh.want})
	}
	for _, tc := range cases {
		f, err := Open(tc.path)
		if err == nil {
			f.Close()
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: Open error %v, want %v", tc.name, err, tc.want)
			continue
		}
		var pe *fs.PathError
		if !errors.As(err, &pe) || pe.Path != tc.path || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("%s: error %v does not name the file %s", tc.name, err, tc.path)
		}
		if _, _, _, err := Read(tc.path); !errors.Is(err, tc.want) {
			t.Errorf("%s: Read error %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestHandCraftedV2 builds a version 2.0 file byte by byte, with a 16-byte
// aligned preamble, and reads it back.
func TestHandCraftedV2(t *testing.T) {
	text := "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }"
	var b []byte
	b = append(b, "\x93NUMPY\x02\x00"...)
	pad := 16 - (12+len(text)+1)%16
	b = binary.LittleEndian.AppendUint32(b, uint32(len(text)+pad+1))
	b = append(b, text...)
	b = append(b, bytes.Repeat([]byte{' '}, pad)...)
	b = append(b, '\n')
	if len(b)%16 != 0 {
		t.Fatalf("test bug: preamble length %d", len(b))
	}
	want := []float64{1.5, -2, math.Pi, 1e300}
	for _, v := range want {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	name := filepath.Join(t.TempDir(), "v2.npy")
	if err := os.WriteFile(name, b, 0o666); err != nil {
		t.Fatal(err)
	}
	f, err := Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if h := f.Header(); h.Major != 2 || h.Minor != 0 || h.Rows != 2 || h.Cols != 2 || h.DataOffset != int64(len(b)-32) {
		t.Errorf("header %+v", h)
	}
	col := make([]float64, 2)
	if err := f.ReadBlock(0, 1, 2, 1, col); err != nil || col[0] != -2 || col[1] != 1e300 {
		t.Errorf("column 1 = %v, %v", col, err)
	}
	all, err := f.ReadAll()
	if err != nil || !sameFloats(all, want) {
		t.Errorf("ReadAll = %v, %v", all, err)
	}
}

func TestWriteErrors(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "x.npy")
	if err := Write(name, 2, 3, make([]float64, 5)); !errors.Is(err, ErrRange) || !strings.Contains(err.Error(), name) {
		t.Errorf("Write with 5 elements for 2x3 = %v, want ErrRange naming the file", err)
	}
	if err := Write(name, -2, 3, nil); !errors.Is(err, ErrRange) {
		t.Errorf("Write with negative rows = %v, want ErrRange", err)
	}
	if _, err := Create(name, 1<<40, 1<<40); !errors.Is(err, ErrRange) {
		t.Errorf("Create with huge shape = %v, want ErrRange", err)
	}
	if _, err := os.Stat(name); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("failed Write/Create left %s behind (%v)", name, err)
	}
	if err := Write(filepath.Join(dir, "no", "such", "dir.npy"), 1, 1, []float64{1}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Write into missing directory = %v", err)
	}

	w, err := Create(name, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(); err != nil {
		t.Errorf("Sync: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteBlock(0, 0, 1, 1, []float64{1}); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("WriteBlock after Close = %v, want fs.ErrClosed", err)
	}
	if err := w.Close(); err == nil {
		t.Error("second Close succeeded")
	}
	f, err := Open(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.ReadBlock(0, 0, 1, 1, make([]float64, 1)); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("ReadBlock after Close = %v, want fs.ErrClosed", err)
	}
}

// TestFileShrinksAfterOpen checks that data lost after Open is reported,
// not returned as zeros.
func TestFileShrinksAfterOpen(t *testing.T) {
	name := filepath.Join(t.TempDir(), "s.npy")
	if err := Write(name, 8, 8, matrix(8, 8)); err != nil {
		t.Fatal(err)
	}
	f, err := Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Truncate(name, f.Header().DataOffset+8*20); err != nil {
		t.Fatal(err)
	}
	withPortable(t, func(t *testing.T) {
		for _, b := range [][4]int{{0, 0, 8, 8}, {4, 2, 2, 2}, {2, 0, 1, 8}} {
			err := f.ReadBlock(b[0], b[1], b[2], b[3], make([]float64, 64))
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), name) {
				t.Errorf("ReadBlock%v on truncated file = %v, want ErrFormat naming the file", b, err)
			}
		}
		if err := f.ReadBlock(0, 0, 2, 8, make([]float64, 16)); err != nil {
			t.Errorf("ReadBlock of the surviving rows: %v", err)
		}
	})
}

func TestCreateTruncatesExisting(t *testing.T) {
	name := filepath.Join(t.TempDir(), "t.npy")
	if err := Write(name, 50, 50, matrix(50, 50)); err != nil {
		t.Fatal(err)
	}
	if err := Write(name, 2, 2, []float64{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	r, c, got, err := Read(name)
	if err != nil || r != 2 || c != 2 || !sameFloats(got, []float64{1, 2, 3, 4}) {
		t.Errorf("Read after overwrite = %d, %d, %v, %v", r, c, got, err)
	}
}

func BenchmarkReadBlock(b *testing.B) {
	const n = 2048
	name := filepath.Join(b.TempDir(), "bench.npy")
	if err := Write(name, n, n, matrix(n, n)); err != nil {
		b.Fatal(err)
	}
	f, err := Open(name)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	dst := make([]float64, 1024*1024)
	for _, path := range []struct {
		name string
		zero bool
	}{{"native", true}, {"portable", false}} {
		for _, blk := range []struct {
			name           string
			r0, c0, br, bc int
		}{{"fullrows", 512, 0, 512, 2048}, {"square", 512, 512, 1024, 1024}} {
			b.Run(path.name+"/"+blk.name, func(b *testing.B) {
				if path.zero && !hostLittleEndian {
					b.Skip("big-endian host")
				}
				old := zeroCopy
				zeroCopy = path.zero
				defer func() { zeroCopy = old }()
				b.SetBytes(int64(blk.br * blk.bc * 8))
				for b.Loop() {
					if err := f.ReadBlock(blk.r0, blk.c0, blk.br, blk.bc, dst); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
