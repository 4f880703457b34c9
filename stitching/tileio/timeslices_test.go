package tileio

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gohtgs/htgs/internal/fuzzrun"
)

// A global-positions file whose positions span more than an int (the
// smallest is subtracted from each) is refused, instead of wrapping
// around to negative positions.
func TestReadPositionsFileRefusesHugeSpan(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pos.txt")
	data := fmt.Sprintf("file: a.tif; corr: 1; position: (%d, 0); grid: (0, 0);\nfile: b.tif; corr: 1; position: (%d, 0); grid: (1, 0);\n", math.MaxInt64-5, math.MinInt64+5)
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	pos, err := ReadPositionsFile(path, 1, 2)
	if err == nil || !strings.Contains(err.Error(), "beyond") {
		t.Fatalf("got %v, %v; want the span refused", pos, err)
	}
}

// A grid far larger than the positions file (10^5 x 10^5 tiles from a
// file of one line) is refused for the count of positions before
// anything is sized by the grid.
func TestReadPositionsFileRefusesGridLargerThanFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pos.txt")
	if err := os.WriteFile(path, []byte("file: a.tif; corr: 1; position: (0, 0); grid: (0, 0);\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadPositionsFile(path, 100000, 100000)
	if err == nil || !strings.Contains(err.Error(), "1 positions") {
		t.Fatalf("got %v; want the count of positions refused", err)
	}
}

// FuzzReadPositionsFile: ReadPositionsFile never panics on a fuzzed file
// and grid; what it accepts has one position per cell of the grid, in
// row-major order, shifted so that the smallest X and Y are 0 and none is
// negative.
func FuzzReadPositionsFile(f *testing.F) {
	fuzzrun.Prepare(f)
	f.Add([]byte("file: a.tif; corr: 0.9; position: (10, 3); grid: (0, 0);\nfile: b.tif; corr: NaN; position: (905, -2); grid: (1, 0);\n"), uint8(1), uint8(2))
	f.Add([]byte("file: a.tif; corr: 1; position: (9223372036854775802, 0); grid: (0, 0);\nfile: b.tif; corr: 1; position: (-9223372036854775803, 0); grid: (1, 0);\n"), uint8(1), uint8(2))
	f.Add([]byte("file: a.tif; corr: 1; position: (0, 0); grid: (0, 0);\n"), uint8(200), uint8(200))
	path := filepath.Join(f.TempDir(), "pos.txt")
	f.Fuzz(func(t *testing.T, data []byte, rows8, cols8 uint8) {
		data = data[:min(len(data), 2048)] // inputs stay small, so minimizing is fast
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		rows, cols := 1+int(rows8), 1+int(cols8)
		pos, err := ReadPositionsFile(path, rows, cols)
		if err != nil {
			return
		}
		if len(pos) != rows*cols {
			t.Fatalf("%d positions for %d x %d", len(pos), rows, cols)
		}
		minX, minY := math.MaxInt, math.MaxInt
		for i, p := range pos {
			if p.Row != i/cols || p.Col != i%cols || p.X < 0 || p.Y < 0 {
				t.Fatalf("position %d: %+v", i, p)
			}
			minX, minY = min(minX, p.X), min(minY, p.Y)
		}
		if minX != 0 || minY != 0 {
			t.Fatalf("smallest position (%d, %d)", minX, minY)
		}
	})
}

// -timeslices (and MIST's --timeSlices) cannot name more than a million
// slices in all: ranges of a million each, added up, were accepted
// without bound (here 2 million slices; 16 ranges make 16 million and
// some GB of map and slice).
func TestParseTimeSlicesBoundsTotal(t *testing.T) {
	s, err := ParseTimeSlices("0-1000000,1000001-2000001")
	if err == nil {
		t.Fatalf("accepted %d slices", len(s))
	}
	if s, err := ParseTimeSlices("0-999999"); err != nil || len(s) != 1000000 {
		t.Fatalf("a million slices: %d, %v", len(s), err)
	}
}

// FuzzParseTimeSlices: ParseTimeSlices never panics; what it accepts is a
// sorted list of distinct non-negative slices, at most a million, each
// named by one of the comma-separated parts, every part's numbers in it.
func FuzzParseTimeSlices(f *testing.F) {
	fuzzrun.Prepare(f)
	for _, s := range []string{"1-3,5", "0", " 2 - 4 , 3", "5-1", "-1", "1-1000000", "0-999999,5-1000005", "a", "1,,2", "007"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		s = s[:min(len(s), 256)]
		out, err := ParseTimeSlices(s)
		if err != nil {
			if out != nil {
				t.Fatalf("slices and error %v", err)
			}
			return
		}
		if len(out) == 0 || len(out) > 1_000_000 {
			t.Fatalf("%q: %d slices", s, len(out))
		}
		for i, v := range out {
			if v < 0 || i > 0 && v <= out[i-1] {
				t.Fatalf("%q: slices %v not increasing and non-negative", s, out[max(0, i-1):i+1])
			}
		}
		for part := range strings.SplitSeq(s, ",") {
			lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
			a, err := strconv.Atoi(strings.TrimSpace(lo)) // decimal, "010" is 10
			if err != nil {
				t.Fatalf("%q: accepted part %q", s, part)
			}
			b := a
			if isRange {
				b, _ = strconv.Atoi(strings.TrimSpace(hi))
			}
			for _, v := range []int{a, b} {
				if _, ok := slices.BinarySearch(out, v); !ok {
					t.Fatalf("%q: %d of part %q missing", s, v, part)
				}
			}
		}
	})
}
