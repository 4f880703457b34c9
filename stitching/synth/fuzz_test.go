package synth

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gohtgs/htgs/internal/fuzzrun"
)

// FuzzParseTruth: whatever ParseTruth accepts is a valid truth table
// (header checked, rows and columns non-negative, names non-empty, no
// tile twice) that WriteTruth writes and ParseTruth reads back unchanged.
func FuzzParseTruth(f *testing.F) {
	fuzzrun.Prepare(f)
	// A truth.csv written by GenerateToDir, and some by WriteTruth.
	cfg := ConfigFor(Easy)
	cfg.Rows, cfg.Cols, cfg.TileWidth, cfg.TileHeight = 2, 3, 64, 48
	dir := f.TempDir()
	if err := GenerateToDir(context.Background(), cfg, dir, nil); err != nil {
		f.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, TruthFile))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	var buf bytes.Buffer
	if err := WriteTruth(&buf, []TruthEntry{{0, 0, -5, 7, "a,b.tif"}, {0, 1, 300, 2, "quote\".tif"}, {1, 0, 0, 0, "space and ünïcode.tif"}}); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte("row,col,x,y,file\n0,0,1,2,\n"))
	f.Add([]byte("row,col,x,y,file\r\n-1,0,1,2,a\r\n"))
	f.Add([]byte("row,col,x,y,file\n0,0,0,0,\"line\nbreak\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		es, err := ParseTruth(bytes.NewReader(data))
		if err != nil {
			if es != nil {
				t.Fatalf("entries and error %v", err)
			}
			return
		}
		seen := map[[2]int]bool{}
		for _, e := range es {
			if e.Row < 0 || e.Col < 0 || e.File == "" || seen[[2]int{e.Row, e.Col}] {
				t.Fatalf("accepted %+v", e)
			}
			seen[[2]int{e.Row, e.Col}] = true
		}
		var w bytes.Buffer
		if err := WriteTruth(&w, es); err != nil {
			t.Fatal(err)
		}
		back, err := ParseTruth(bytes.NewReader(w.Bytes()))
		if err != nil || !reflect.DeepEqual(back, es) {
			t.Fatalf("round trip: %v\nread  %+v\nwrote %q\nback  %+v", err, es, w.Bytes(), back)
		}
	})
}
