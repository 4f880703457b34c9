package npy

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gohtgs/htgs/internal/fuzzrun"
)

// FuzzRead writes each input to a file and reads it with Read and Open:
// neither panics; an error wraps ErrFormat, ErrUnsupported or ErrRange (a
// path error around one of them); a matrix that reads has rows*cols
// elements (so Read allocates no more than the file's size), a block read
// with ReadBlockStride equals the same elements of ReadAll, and the
// matrix written back with Write reads back bit for bit.
func FuzzRead(f *testing.F) {
	fuzzrun.Prepare(f)
	for _, s := range [][2]int{{0, 0}, {1, 1}, {2, 3}, {3, 1}} {
		h, _ := EncodeHeader(s[0], s[1])
		data := append([]byte(nil), h...)
		for i := range s[0] * s[1] * 8 {
			data = append(data, byte(i*37))
		}
		f.Add(data, uint8(1), uint8(0), uint8(1), uint8(2))
	}
	f.Add(padHeader(1, "{'descr': '>f8', 'fortran_order': False, 'shape': (1, 2), }", 64), uint8(0), uint8(0), uint8(1), uint8(1))
	f.Add(padHeader(2, canonical, 16), uint8(0), uint8(0), uint8(0), uint8(0))
	dir := f.TempDir()
	name := filepath.Join(dir, "in.npy")
	back := filepath.Join(dir, "back.npy")
	f.Fuzz(func(t *testing.T, b []byte, r0, c0, nr, nc uint8) {
		b = b[:min(len(b), 4096)] // inputs stay small, so minimizing is fast
		if err := os.WriteFile(name, b, 0o644); err != nil {
			t.Fatal(err)
		}
		rows, cols, data, err := Read(name)
		if err != nil {
			var pe *fs.PathError
			if !errors.As(err, &pe) || !(errors.Is(err, ErrFormat) || errors.Is(err, ErrUnsupported) || errors.Is(err, ErrRange)) {
				t.Fatalf("error %v is not a path error wrapping a sentinel", err)
			}
			return
		}
		if rows < 0 || cols < 0 || len(data) != rows*cols || int64(len(data))*8 > int64(len(b)) {
			t.Fatalf("read %d x %d, %d elements from %d bytes", rows, cols, len(data), len(b))
		}
		file, err := Open(name)
		if err != nil {
			t.Fatalf("Read succeeded, Open failed: %v", err)
		}
		defer file.Close()
		// A block inside the matrix, stored with a stride of cols+1.
		if rows > 0 && cols > 0 {
			br, bc := int(r0)%rows, int(c0)%cols
			h, w := 1+int(nr)%(rows-br), 1+int(nc)%(cols-bc)
			dst := make([]float64, h*(w+1))
			if err := file.ReadBlockStride(br, bc, h, w, dst, w+1); err != nil {
				t.Fatalf("block (%d, %d) %d x %d of %d x %d: %v", br, bc, h, w, rows, cols, err)
			}
			for i := range h {
				for j := range w {
					if math.Float64bits(dst[i*(w+1)+j]) != math.Float64bits(data[(br+i)*cols+bc+j]) {
						t.Fatalf("block element (%d, %d) differs from ReadAll", br+i, bc+j)
					}
				}
			}
		}
		if err := file.ReadBlock(rows, 0, 1, 1, make([]float64, 1)); !errors.Is(err, ErrRange) {
			t.Fatalf("a block below the matrix: %v", err)
		}
		if err := Write(back, rows, cols, data); err != nil {
			t.Fatal(err)
		}
		r2, c2, d2, err := Read(back)
		if err != nil || r2 != rows || c2 != cols || len(d2) != len(data) {
			t.Fatalf("written back: %d x %d, %v", r2, c2, err)
		}
		for i := range data {
			if math.Float64bits(d2[i]) != math.Float64bits(data[i]) {
				t.Fatalf("element %d: %v written back as %v", i, data[i], d2[i])
			}
		}
	})
}
