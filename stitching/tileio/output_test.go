package tileio

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/gohtgs/htgs/stitching/align"
)

func TestWriteGlobalPositionsExact(t *testing.T) {
	pos := []GlobalPosition{
		{Name: "img_r001_c001.tif", Corr: 0.9876543210123, X: 0, Y: 12, Col: 0, Row: 0},
		{Name: "img_r001_c002.tif", Corr: -1, X: 1203, Y: 0, Col: 1, Row: 0},
		{Name: "my tile.tif", Corr: 0.5, X: 7, Y: 1000, Col: 0, Row: 1},
	}
	var buf bytes.Buffer
	if err := WriteGlobalPositions(&buf, pos); err != nil {
		t.Fatal(err)
	}
	want := "file: img_r001_c001.tif; corr: 0.9876543210; position: (0, 12); grid: (0, 0);\n" +
		"file: img_r001_c002.tif; corr: -1.0000000000; position: (1203, 0); grid: (1, 0);\n" +
		"file: my tile.tif; corr: 0.5000000000; position: (7, 1000); grid: (0, 1);\n"
	if buf.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", buf.String(), want)
	}
	got, err := ReadGlobalPositions(strings.NewReader(want))
	if err != nil {
		t.Fatal(err)
	}
	for i := range pos {
		p := pos[i]
		p.Corr = float64(int64(p.Corr*1e10+0.5*sign(p.Corr))) / 1e10
		if got[i] != p {
			t.Errorf("line %d: read %+v, want %+v", i, got[i], p)
		}
	}
}

func sign(v float64) float64 {
	if v < 0 {
		return -1
	}
	return 1
}

func TestWriteRelativePositionsExact(t *testing.T) {
	rel := []RelativePosition{
		{Dir: align.West, Tile: "img_r001_c002.tif", Neighbor: "img_r001_c001.tif", Corr: 0.25, X: 1203, Y: -3},
		{Dir: align.North, Tile: "img_r002_c001.tif", Neighbor: "img_r001_c001.tif", Corr: 0.123456789012, X: -2, Y: 900},
	}
	var buf bytes.Buffer
	if err := WriteRelativePositions(&buf, rel); err != nil {
		t.Fatal(err)
	}
	want := "west, img_r001_c002.tif, img_r001_c001.tif, 0.2500000000, 1203, -3\n" +
		"north, img_r002_c001.tif, img_r001_c001.tif, 0.1234567890, -2, 900\n"
	if buf.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", buf.String(), want)
	}
	got, err := ReadRelativePositions(strings.NewReader("\n" + want + "  \n"))
	if err != nil {
		t.Fatal(err)
	}
	rel[1].Corr = 0.123456789
	for i := range rel {
		if got[i] != rel[i] {
			t.Errorf("line %d: read %+v, want %+v", i, got[i], rel[i])
		}
	}
}

func TestWriteRejectsBadNames(t *testing.T) {
	var buf bytes.Buffer
	for _, name := range []string{"", "a;b", "a\nb", " lead"} {
		if err := WriteGlobalPositions(&buf, []GlobalPosition{{Name: name}}); err == nil {
			t.Errorf("global: name %q accepted", name)
		}
	}
	for _, name := range []string{"", "a,b", "trail "} {
		if err := WriteRelativePositions(&buf, []RelativePosition{{Tile: name, Neighbor: "x"}}); err == nil {
			t.Errorf("relative: name %q accepted", name)
		}
	}
	if err := WriteRelativePositions(&buf, []RelativePosition{{Dir: 7, Tile: "a", Neighbor: "b"}}); err == nil {
		t.Error("invalid direction accepted")
	}
}

func TestReadGlobalPositionsErrors(t *testing.T) {
	good := "file: a.tif; corr: 0.5; position: (1, 2); grid: (0, 0);"
	cases := []struct{ in, want string }{
		{good + "\nfile: b.tif; corr: x; position: (1, 2); grid: (0, 0);", "line 2: corr"},
		{"files: a.tif; corr: 0.5; position: (1, 2); grid: (0, 0);", `line 1: expected "file:"`},
		{"file: a.tif; corr: 0.5; position: (1 2); grid: (0, 0);", "line 1: position x"},
		{"file: a.tif; corr: 0.5; position: (1, 2.5); grid: (0, 0);", "line 1: position y"},
		{"file: a.tif; corr: 0.5; position: (1, 2); grid: (0, 0)", `expected ";"`},
		{"file: a.tif; corr: 0.5; position: (1, 2); grid: (-1, 0);", "negative grid"},
		{"file: a.tif; corr: Inf; position: (1, 2); grid: (0, 0);", "corr"},
		{"file: a.tif; corr: 0.5; position: (1, 2); grid: (0, 0); extra", "trailing"},
		{"file: ; corr: 0.5; position: (1, 2); grid: (0, 0);", "empty name"},
		{"file: a.tif", "missing"},
	}
	for _, c := range cases {
		_, err := ReadGlobalPositions(strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.in, err, c.want)
		}
	}
	got, err := ReadGlobalPositions(strings.NewReader("\r\n" + good + "\r\n\n"))
	if err != nil || len(got) != 1 || got[0].Name != "a.tif" || got[0].X != 1 || got[0].Y != 2 {
		t.Errorf("CRLF and blank lines: %+v, %v", got, err)
	}
}

func TestReadRelativePositionsErrors(t *testing.T) {
	cases := []struct{ in, want string }{
		{"west, a, b, 0.5, 1", "line 1: want 6"},
		{"west, a, b, 0.5, 1, 2\neast, a, b, 0.5, 1, 2", "line 2: align: unknown direction"},
		{"north, a, , 0.5, 1, 2", "empty tile name"},
		{"north, a, b, high, 1, 2", "corr"},
		{"north, a, b, 0.5, 1.5, 2", "x: invalid"},
		{"north, a, b, 0.5, 1, y", "y: invalid"},
	}
	for _, c := range cases {
		_, err := ReadRelativePositions(strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.in, err, c.want)
		}
	}
}

// TestReadMISTFiles reads files as MIST writes them (Stitching.java: "%.10f"
// in the machine's locale, so NaN and decimal commas occur), writes them
// back in our format and reads them again: the same records.
func TestReadMISTFiles(t *testing.T) {
	global := "file: img_r001_c001.tif; corr: NaN; position: (0, 0); grid: (0, 0);\n" +
		"file: img_r001_c002.tif; corr: 0.9876543210; position: (921, -3); grid: (1, 0);\n" +
		"file: img_r002_c001.tif; corr: 0,8765432109; position: (2, 690); grid: (0, 1);\n" +
		"file: img_r002_c002.tif; corr: 1.5E-3; position: (925, 688); grid: (1, 1);\n"
	relative := "west, img_r001_c002.tif, img_r001_c001.tif, 0.9876543210, 921, -3\n" +
		"north, img_r002_c001.tif, img_r001_c001.tif, 0,8765432109, 2, 690\n" +
		"north, img_r002_c002.tif, img_r001_c002.tif, -0,0123456789, 4, 691\n" +
		"west, img_r002_c002.tif, img_r002_c001.tif, NaN, 923, -2\n"
	g, err := ReadGlobalPositions(strings.NewReader(global))
	if err != nil {
		t.Fatal(err)
	}
	wantCorr := []float64{math.NaN(), 0.9876543210, 0.8765432109, 0.0015}
	for i, p := range g {
		if c := wantCorr[i]; !(p.Corr == c || math.IsNaN(c) && math.IsNaN(p.Corr)) {
			t.Errorf("global line %d: corr %v, want %v", i+1, p.Corr, c)
		}
	}
	if g[1].X != 921 || g[1].Y != -3 || g[2].Col != 0 || g[2].Row != 1 {
		t.Errorf("global positions %+v", g)
	}
	r, err := ReadRelativePositions(strings.NewReader(relative))
	if err != nil {
		t.Fatal(err)
	}
	wantRel := []float64{0.9876543210, 0.8765432109, -0.0123456789, math.NaN()}
	for i, p := range r {
		if c := wantRel[i]; !(p.Corr == c || math.IsNaN(c) && math.IsNaN(p.Corr)) {
			t.Errorf("relative line %d: corr %v, want %v", i+1, p.Corr, c)
		}
	}
	if r[1].Dir != align.North || r[1].X != 2 || r[1].Y != 690 || r[1].Tile != "img_r002_c001.tif" {
		t.Errorf("relative %+v", r[1])
	}
	var gb, rb bytes.Buffer
	if err := WriteGlobalPositions(&gb, g); err != nil {
		t.Fatal(err)
	}
	if err := WriteRelativePositions(&rb, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(gb.String(), "corr: NaN;") || !strings.Contains(gb.String(), "corr: 0.8765432109;") {
		t.Errorf("written:\n%s", gb.String())
	}
	g2, err1 := ReadGlobalPositions(&gb)
	r2, err2 := ReadRelativePositions(&rb)
	if err1 != nil || err2 != nil || len(g2) != len(g) || len(r2) != len(r) {
		t.Fatalf("read back: %v %v", err1, err2)
	}
	for i := range g {
		a, b := g[i], g2[i]
		if a.Name != b.Name || a.X != b.X || a.Y != b.Y || a.Col != b.Col || a.Row != b.Row || math.IsNaN(a.Corr) != math.IsNaN(b.Corr) || (!math.IsNaN(a.Corr) && a.Corr != b.Corr) {
			t.Errorf("global %d: %+v read back as %+v", i, a, b)
		}
	}
	for i := range r {
		a, b := r[i], r2[i]
		if a.Tile != b.Tile || a.Neighbor != b.Neighbor || a.Dir != b.Dir || a.X != b.X || a.Y != b.Y || math.IsNaN(a.Corr) != math.IsNaN(b.Corr) || (!math.IsNaN(a.Corr) && a.Corr != b.Corr) {
			t.Errorf("relative %d: %+v read back as %+v", i, a, b)
		}
	}
}
