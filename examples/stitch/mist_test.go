package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gohtgs/htgs/stitching/synth"
	"github.com/gohtgs/htgs/stitching/tileio"
)

// snakeGrid copies the 3 x 3 generated grid into a folder under MIST
// SEQUENTIAL names tile_{ppp}.tif counted from startTile 1 in the
// HORIZONTALCONTINUOUS order from the upper-left corner (a snake: row 0
// left to right, row 1 right to left, ...), written here as a walk. It
// returns the folder and the true positions, row-major.
func snakeGrid(t *testing.T) (dir string, truth []synth.TruthEntry) {
	t.Helper()
	src := generated(t, 3, 3, 1, nil)
	truth, err := synth.ReadTruth(filepath.Join(src, synth.TruthFile))
	if err != nil {
		t.Fatal(err)
	}
	const rows, cols = 3, 3
	dir = t.TempDir()
	idx := 0
	for r := range rows {
		for k := range cols {
			c := k
			if r%2 == 1 {
				c = cols - 1 - k
			}
			idx++
			data, err := os.ReadFile(filepath.Join(src, synth.DefaultName(r, c)))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("tile_%03d.tif", idx)), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	slices.SortFunc(truth, func(a, b synth.TruthEntry) int { return (a.Row*cols + a.Col) - (b.Row*cols + b.Col) })
	return dir, truth
}

// mistArgs is a MIST headless command line for the snake grid, in both of
// MIST's forms (--name value and --name=value).
func mistArgs(dir, out string, extra ...string) []string {
	return append([]string{
		"--gridWidth", "3", "--gridHeight=3", "--startTile", "1",
		"--imageDir", dir, "--filenamePattern", "tile_{ppp}.tif", "--filenamePatternType=SEQUENTIAL",
		"--gridOrigin", "UL", "--numberingPattern", "HORIZONTALCONTINUOUS",
		"--outputPath", out, "--blendingMode", "LINEAR", "--outputFullImage", "true",
		"--programType", "AUTO", "--numCPUThreads", "2", "--headless", "true",
	}, extra...)
}

func readGlobal(t *testing.T, path string) []tileio.GlobalPosition {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pos, err := tileio.ReadGlobalPositions(f)
	if err != nil {
		t.Fatal(err)
	}
	return pos
}

// TestMISTCommandLine runs a MIST headless command line unchanged: a
// SEQUENTIAL snake-numbered grid is stitched exactly, MIST's files are
// written under MIST's names, and the ignored performance options print a
// note.
func TestMISTCommandLine(t *testing.T) {
	dir, truth := snakeGrid(t)
	out := t.TempDir()
	r := runArgs(t, context.Background(), mistArgs(dir, out)...)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	for _, opt := range []string{"--programType AUTO ignored", "--headless true ignored"} {
		if !strings.Contains(r.stderr, opt) {
			t.Errorf("no note %q in stderr:\n%s", opt, r.stderr)
		}
	}
	for _, name := range []string{"img-global-positions-1.txt", "img-relative-positions-1.txt",
		"img-relative-positions-no-optimization-1.txt", "img-stitched-1.ome.tif", "img-statistics.txt", "img-log.txt"} {
		if st, err := os.Stat(filepath.Join(out, name)); err != nil || st.Size() == 0 {
			t.Errorf("output %s: %v", name, err)
		}
	}
	pos := readGlobal(t, filepath.Join(out, "img-global-positions-1.txt"))
	if len(pos) != 9 {
		t.Fatalf("%d positions", len(pos))
	}
	byCell := map[[2]int]tileio.GlobalPosition{}
	for _, p := range pos {
		byCell[[2]int{p.Row, p.Col}] = p
	}
	o := byCell[[2]int{0, 0}]
	for _, e := range truth {
		p := byCell[[2]int{e.Row, e.Col}]
		if p.X-o.X != e.X-truth[0].X || p.Y-o.Y != e.Y-truth[0].Y {
			t.Errorf("tile (%d, %d) %s at (%d, %d) from tile (0, 0), true (%d, %d)", e.Row, e.Col, p.Name,
				p.X-o.X, p.Y-o.Y, e.X-truth[0].X, e.Y-truth[0].Y)
		}
	}
	// Row 1 runs right to left: its first column is tile 6.
	if n := byCell[[2]int{1, 0}].Name; n != "tile_006.tif" {
		t.Errorf("tile (1, 0) is %s, want tile_006.tif", n)
	}
	stats, _ := os.ReadFile(filepath.Join(out, "img-statistics.txt"))
	for _, want := range []string{"Total time for experiment (ms): ", "North overlap: ", "West repeatability: ", "gridWidth: 3", "numberingPattern: HORIZONTALCONTINUOUS", "Stitching Run-time parameters:"} {
		if !bytes.Contains(stats, []byte(want)) {
			t.Errorf("statistics lack %q:\n%s", want, stats)
		}
	}
	log, _ := os.ReadFile(filepath.Join(out, "img-log.txt"))
	if !bytes.Contains(log, []byte("stitched in ")) || !bytes.Contains(log, []byte("--programType AUTO ignored")) {
		t.Errorf("log is not what the run printed:\n%s", log)
	}

	// Two clients of MIST's files: NIST WIPP imports stitching vectors by
	// the "img-global-positions-" prefix; a published EM tool globs
	// *global-positions-*.txt and reads the two (x, y) groups of each line
	// with a regular expression.
	es, _ := os.ReadDir(out)
	var wipp []string
	for _, e := range es {
		if strings.HasPrefix(e.Name(), "img-global-positions-") {
			wipp = append(wipp, e.Name())
		}
	}
	if len(wipp) != 1 {
		t.Errorf("WIPP would import %q, want one stitching vector", wipp)
	}
	matches, _ := filepath.Glob(filepath.Join(out, "*global-positions-*.txt"))
	if len(matches) != 1 {
		t.Fatalf("glob *global-positions-*.txt: %q", matches)
	}
	re := regexp.MustCompile(`\((-?\d+), (-?\d+)\)`)
	data, _ := os.ReadFile(matches[0])
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	for i, l := range lines {
		g := re.FindAllStringSubmatch(l, -1)
		if len(g) != 2 {
			t.Fatalf("line %d %q: %d (x, y) groups, want 2", i+1, l, len(g))
		}
		x, _ := strconv.Atoi(g[0][1])
		col, _ := strconv.Atoi(g[1][1])
		if x != pos[i].X || col != pos[i].Col {
			t.Errorf("line %d: regex read position x %d grid col %d, want %d %d", i+1, x, col, pos[i].X, pos[i].Col)
		}
	}

	// Assembling from the positions file gives the same mosaic as the run.
	out2 := t.TempDir()
	r = runArgs(t, context.Background(), mistArgs(dir, out2, "--assembleFromMetadata", "true",
		"--globalPositionsFile", filepath.Join(out, "img-global-positions-1.txt"))...)
	if r.code != 0 {
		t.Fatalf("assemble: exit %d\n%s", r.code, r.stderr)
	}
	a, _ := os.ReadFile(filepath.Join(out, "img-stitched-1.ome.tif"))
	b, err := os.ReadFile(filepath.Join(out2, "img-stitched-1.ome.tif"))
	if err != nil || len(a) == 0 || !bytes.Equal(a, b) {
		t.Errorf("assembled mosaic differs from the full run's (%d and %d bytes, %v)", len(a), len(b), err)
	}
	if _, err := os.Stat(filepath.Join(out2, "img-global-positions-1.txt")); err == nil {
		t.Error("assembling wrote positions")
	}
}

// TestTimeSliceNames: with 1 slice the slice number is "1"; with 12 it is
// zero-padded to two digits, one set of files per slice.
func TestTimeSliceNames(t *testing.T) {
	if n := sliceNames("img-", 1, 1); n.global != "img-global-positions-1.txt" || n.noOpt != "img-relative-positions-no-optimization-1.txt" || n.mosaic != "img-stitched-1.ome.tif" {
		t.Errorf("1 slice: %+v", n)
	}
	if n := sliceNames("run7_", 3, 12); n.relative != "run7_relative-positions-03.txt" {
		t.Errorf("slice 3 of 12: %+v", n)
	}
	src := generated(t, 3, 3, 1, nil)
	dir := t.TempDir()
	for ts := 1; ts <= 12; ts++ {
		for r := range 3 {
			for c := range 3 {
				old := filepath.Join(src, synth.DefaultName(r, c))
				if err := os.Symlink(old, filepath.Join(dir, fmt.Sprintf("t%02d_r%03d_c%03d.tif", ts, r+1, c+1))); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	out := t.TempDir()
	r := runArgs(t, context.Background(), "-dir", dir, "-rows", "3", "-cols", "3", "-pattern", "t{tt}_r{rrr}_c{ccc}.tif",
		"-timeslices", "1-11,12", "-out", out, "-workers", "2", "-mosaic=false", "-reuse-positions")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	// -reuse-positions stitches slice 1 only; the later slices get its
	// positions under their own tile names.
	var got []string
	es, _ := os.ReadDir(out)
	for _, e := range es {
		got = append(got, e.Name())
	}
	want := []string{"img-log.txt", "img-relative-positions-01.txt", "img-relative-positions-no-optimization-01.txt", "img-statistics.txt"}
	for ts := 1; ts <= 12; ts++ {
		want = append(want, fmt.Sprintf("img-global-positions-%02d.txt", ts))
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("-reuse-positions -mosaic=false wrote %q, want %q", got, want)
	}
	p1, p12 := readGlobal(t, filepath.Join(out, "img-global-positions-01.txt")), readGlobal(t, filepath.Join(out, "img-global-positions-12.txt"))
	if len(p12) != 9 || p12[4].X != p1[4].X || p12[4].Y != p1[4].Y || p12[4].Name != "t12_r002_c002.tif" {
		t.Errorf("slice 12 reuses %+v as %+v", p1[4], p12[4])
	}
	out = t.TempDir()
	r = runArgs(t, context.Background(), "--gridWidth", "3", "--gridHeight", "3", "--startTileRow", "1", "--startTileCol", "1",
		"--imageDir", dir, "--filenamePattern", "t{tt}_r{rrr}_c{ccc}.tif", "--timeSlices", "1-12", "--outputPath", out,
		"--outputFullImage", "false", "--numCPUThreads", "2")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for ts := 1; ts <= 12; ts++ {
		n := sliceNames("img-", ts, 12)
		for _, name := range []string{n.global, n.relative, n.noOpt} {
			if _, err := os.Stat(filepath.Join(out, name)); err != nil {
				t.Errorf("slice %d: %v", ts, err)
			}
		}
	}
	stats, _ := os.ReadFile(filepath.Join(out, "img-statistics.txt"))
	if c := bytes.Count(stats, []byte("Time slice: ")); c != 12 {
		t.Errorf("statistics report %d time slices, want 12", c)
	}
}

// TestMISTOptionErrors: subgrids and unknown options are refused with a
// message naming the option.
func TestMISTOptionErrors(t *testing.T) {
	dir, _ := snakeGrid(t)
	for _, c := range []struct {
		extra []string
		want  string
	}{
		{[]string{"--startRow", "1"}, "--startRow"},
		{[]string{"--extentWidth", "2"}, "--extentWidth"},
		{[]string{"--notAMISTOption", "x"}, "-notAMISTOption"},
		{[]string{"--filenamePatternType", "ROWCOL"}, "--filenamePatternType"},
		{[]string{"--outputFullImage", "maybe"}, "-outputFullImage"},
		{[]string{"--assembleFromMetadata", "true"}, "-global-positions"},
		{[]string{"--timeSlices", "3-1"}, "time slices"},
	} {
		r := runArgs(t, context.Background(), mistArgs(dir, t.TempDir(), c.extra...)...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 naming %q", c.extra, r.code, r.stderr, c.want)
		}
	}
}
