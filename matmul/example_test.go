package matmul_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/gohtgs/htgs/matmul"
	"github.com/gohtgs/htgs/matmul/npy"
)

// Multiply two small matrices in memory with 2x2 blocks: the graph loads
// A(i,l) and B(l,j), multiplies each pair, and accumulates the partial
// products of each block of C.
func Example() {
	a := &matmul.Dense{R: 2, C: 3, Stride: 3, Data: []float64{1, 2, 3, 4, 5, 6}}
	b := &matmul.Dense{R: 3, C: 2, Stride: 2, Data: []float64{7, 8, 9, 10, 11, 12}}
	c, rep, err := matmul.MultiplyDense(context.Background(), a, b, matmul.Config{BlockSize: 2, Copies: 2})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.Data)
	fmt.Println(rep.Products, "block products")
	// Output:
	// [58 64 139 154]
	// 2 block products
}

// Multiply .npy files out of core: with a budget of 25 blocks of 64x64,
// A (4x4 blocks) cannot stay in memory whole, so it is kept in panels of
// block rows and B is read once per panel: 2 row panels need 2·4+2 blocks
// of A, 4 of B in flight and 2+2·2+2 partial products.
func ExampleMultiplyFiles() {
	dir, err := os.MkdirTemp("", "matmul-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	a, b := matmul.Random(256, 256, 1), matmul.Random(256, 256, 2)
	for name, m := range map[string]*matmul.Dense{"a.npy": a, "b.npy": b} {
		if err := npy.Write(filepath.Join(dir, name), m.R, m.C, m.Data); err != nil {
			log.Fatal(err)
		}
	}
	cfg := matmul.Config{BlockSize: 64, Copies: 2, MemoryBudget: 25 * 64 * 64 * 8}
	rep, err := matmul.MultiplyFiles(context.Background(),
		filepath.Join(dir, "a.npy"), filepath.Join(dir, "b.npy"), filepath.Join(dir, "c.npy"), cfg)
	if err != nil {
		log.Fatal(err)
	}
	p := rep.Plan
	fmt.Printf("%v of %d block rows, %d passes\n", p.Order, p.Panel, p.Panels)
	fmt.Printf("read %d KiB (A once, B %d times), wrote %d KiB\n", rep.BytesRead>>10, p.Panels, rep.BytesWritten>>10)

	_, _, got, err := npy.Read(filepath.Join(dir, "c.npy"))
	if err != nil {
		log.Fatal(err)
	}
	want := matmul.NewDense(256, 256)
	if err := matmul.Gonum().(matmul.Gemmer).Gemm(0, a, b, want); err != nil {
		log.Fatal(err)
	}
	cmp, err := matmul.Compare(a, b, &matmul.Dense{R: 256, C: 256, Stride: 256, Data: got}, want)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("matches one Dgemm call:", cmp.OK)
	// Output:
	// row panels of 2 block rows, 2 passes
	// read 1536 KiB (A once, B 2 times), wrote 512 KiB
	// matches one Dgemm call: true
}

// The element-wise product runs on the same loaders with a simpler pairing.
func ExampleHadamard() {
	a := &matmul.Dense{R: 2, C: 2, Stride: 2, Data: []float64{1, 2, 3, 4}}
	b := &matmul.Dense{R: 2, C: 2, Stride: 2, Data: []float64{5, 6, 7, 8}}
	c := matmul.NewDense(2, 2)
	if _, err := matmul.Hadamard(context.Background(), a, b, c, matmul.Config{BlockSize: 1}); err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.Data)
	// Output: [5 12 21 32]
}
