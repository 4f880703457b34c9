package npy_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/gohtgs/htgs/matmul/npy"
)

func ExampleWrite() {
	dir, err := os.MkdirTemp("", "npy-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	name := filepath.Join(dir, "a.npy")

	// A 2x3 matrix in row-major order; numpy.load(name) reads it back.
	if err := npy.Write(name, 2, 3, []float64{1, 2, 3, 4, 5, 6}); err != nil {
		log.Fatal(err)
	}
	rows, cols, data, err := npy.Read(name)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rows, cols, data)
	// Output: 2 3 [1 2 3 4 5 6]
}

func ExampleOpen() {
	dir, err := os.MkdirTemp("", "npy-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	name := filepath.Join(dir, "c.npy")

	// Write a 4x4 matrix block by block, as an out-of-core product would.
	w, err := npy.Create(name, 4, 4)
	if err != nil {
		log.Fatal(err)
	}
	for r0 := 0; r0 < 4; r0 += 2 {
		for c0 := 0; c0 < 4; c0 += 2 {
			blk := make([]float64, 4)
			for i := range blk {
				blk[i] = float64(10*(r0+i/2) + c0 + i%2)
			}
			if err := w.WriteBlock(r0, c0, 2, 2, blk); err != nil {
				log.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}

	// Read back only the 2x3 block starting at row 1, column 1.
	f, err := npy.Open(name)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	dst := make([]float64, 2*3)
	if err := f.ReadBlock(1, 1, 2, 3, dst); err != nil {
		log.Fatal(err)
	}
	fmt.Println(f.Rows(), f.Cols(), dst)
	// Output: 4 4 [11 12 13 21 22 23]
}
