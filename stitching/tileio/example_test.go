package tileio_test

import (
	"fmt"
	"log"
	"os"

	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/tileio"
)

// A pattern names the tile files of a grid; NIST's data sets count rows
// and columns from 1.
func ExampleParsePattern() {
	pat, err := tileio.ParsePattern("img_r{rrr}_c{ccc}.tif", 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(pat.Name(0, 0, 3, 10), pat.Name(2, 11, 3, 12))
	seq, err := tileio.ParsePattern("tile_{iiii}.png", 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(seq.Name(2, 3, 3, 10))
	// Output:
	// img_r001_c001.tif img_r003_c012.tif
	// tile_0023.png
}

// Translations are written in MIST's relative-positions format.
func ExampleWriteRelativePositions() {
	tr := align.NewTranslations(2, 2)
	tr.Set(align.Pair{Row: 0, Col: 1, Dir: align.West}, align.Translation{X: 230, Y: 2, Corr: 0.95})
	tr.Set(align.Pair{Row: 1, Col: 0, Dir: align.North}, align.Translation{X: -1, Y: 172, Corr: 0.9})
	tr.Set(align.Pair{Row: 1, Col: 1, Dir: align.West}, align.Translation{X: 231, Y: 1, Corr: 0.8})
	tr.Set(align.Pair{Row: 1, Col: 1, Dir: align.North}, align.Translation{X: 0, Y: 171, Corr: 0.85})
	name := func(row, col int) string { return fmt.Sprintf("r%d_c%d.tif", row, col) }
	if err := tileio.WriteRelativePositions(os.Stdout, tileio.RelativePositions(tr, name)); err != nil {
		log.Fatal(err)
	}
	// Output:
	// west, r0_c1.tif, r0_c0.tif, 0.9500000000, 230, 2
	// north, r1_c0.tif, r0_c0.tif, 0.9000000000, -1, 172
	// west, r1_c1.tif, r1_c0.tif, 0.8000000000, 231, 1
	// north, r1_c1.tif, r0_c1.tif, 0.8500000000, 0, 171
}
