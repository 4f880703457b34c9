package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gohtgs/htgs/cluster"
	"github.com/gohtgs/htgs/internal/fuzzrun"
	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/tileio"
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
	pos, err := readPositionsFile(path, 1, 2)
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
	_, err := readPositionsFile(path, 100000, 100000)
	if err == nil || !strings.Contains(err.Error(), "1 positions") {
		t.Fatalf("got %v; want the count of positions refused", err)
	}
}

// FuzzReadPositionsFile: readPositionsFile never panics on a fuzzed file
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
		pos, err := readPositionsFile(path, rows, cols)
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
	s, err := parseTimeSlices("0-1000000,1000001-2000001")
	if err == nil {
		t.Fatalf("accepted %d slices", len(s))
	}
	if s, err := parseTimeSlices("0-999999"); err != nil || len(s) != 1000000 {
		t.Fatalf("a million slices: %d, %v", len(s), err)
	}
}

// FuzzParseTimeSlices: parseTimeSlices never panics; what it accepts is a
// sorted list of distinct non-negative slices, at most a million, each
// named by one of the comma-separated parts, every part's numbers in it.
func FuzzParseTimeSlices(f *testing.F) {
	fuzzrun.Prepare(f)
	for _, s := range []string{"1-3,5", "0", " 2 - 4 , 3", "5-1", "-1", "1-1000000", "0-999999,5-1000005", "a", "1,,2", "007"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		s = s[:min(len(s), 256)]
		out, err := parseTimeSlices(s)
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

// FuzzMISTOptions passes fuzzed values to MIST's options (and ours they
// alias): parseFlags never panics, and what it accepts has a numbering and
// origin tileio reads, at least one worker, MIST's peaks within what
// align.Options accepts, and the time slices of -timeslices, sorted.
func FuzzMISTOptions(f *testing.F) {
	fuzzrun.Prepare(f)
	f.Add("10", "8", "HORIZONTALCONTINUOUS", "UL", "SEQUENTIAL", "img_{ppp}.tif", "1", "2", "1-3,5", "ZLIB", "MICROMETER", "0.5")
	f.Add("1", "1", "verticalcombing", "lr", "ROWCOL", "r{rr}_c{cc}_t{t}.tif", "0", "0", "", "UNCOMPRESSED", "", "")
	f.Add("-1", "x", "DIAGONAL", "XX", "OTHER", "../{p}", "-3", "1000000000", "9-1", "LZW", "PARSEC", "NaN")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, gridW, gridH, numbering, origin, patType, pattern, startTile, peaks, timeSlices, compression, unit, unitX string) {
		args := []string{"--imageDir", dir, "--outputPath", dir}
		for _, kv := range [][2]string{
			{"gridWidth", gridW}, {"gridHeight", gridH}, {"numberingPattern", numbering}, {"gridOrigin", origin},
			{"filenamePatternType", patType}, {"filenamePattern", pattern}, {"startTile", startTile},
			{"numFFTPeaks", peaks}, {"timeSlices", timeSlices}, {"compressionMode", compression},
			{"unit", unit}, {"unitX", unitX},
		} {
			if kv[1] != "" {
				args = append(args, "--"+kv[0], kv[1][:min(len(kv[1]), 64)])
			}
		}
		c, err := parseFlags(args)
		if err != nil {
			return
		}
		if _, err := tileio.ParseNumbering(c.numbering); err != nil {
			t.Fatalf("accepted numbering: %v", err)
		}
		if _, err := tileio.ParseOrigin(c.origin); err != nil {
			t.Fatalf("accepted origin: %v", err)
		}
		if c.workers < 1 || c.peaks < 0 {
			t.Fatalf("accepted %d workers, %d peaks", c.workers, c.peaks)
		}
		if err := (align.Options{PeakCount: c.peaks}).Validate(); err != nil && c.peaks > 0 {
			t.Fatalf("accepted --numFFTPeaks %d that align refuses: %v", c.peaks, err)
		}
		if !slices.IsSorted(c.slices) || (timeSlices != "") != (c.slices != nil) {
			t.Fatalf("-timeslices %q became %v", timeSlices, c.slices)
		}
	})
}

// FuzzBandJob decodes fuzzed bytes as a worker decodes a band job (the
// cluster's gob codec into bandJob): it never panics, allocates at most
// what the message's bytes can hold (the codec's check), and a job that
// decodes encodes to a message that decodes to the same job; its pattern
// and options are then read as the worker reads them, without panic.
func FuzzBandJob(f *testing.F) {
	fuzzrun.Prepare(f)
	codec := cluster.Gob()
	// A 2 x 2 flat field in its binary form (align's format 1).
	ffBytes := []byte{'F', 'F', 'L', 1, 2, 0, 0, 0, 2, 0, 0, 0}
	ffBytes = binary.LittleEndian.AppendUint64(ffBytes, math.Float64bits(0.5))
	ffBytes = binary.LittleEndian.AppendUint64(ffBytes, math.Float64bits(4))
	ffBytes = append(ffBytes, 0)
	for _, g := range []float32{1, 1.5, 0.5, 1} {
		ffBytes = binary.LittleEndian.AppendUint32(ffBytes, math.Float32bits(g))
	}
	ff := new(align.FlatField)
	if err := ff.UnmarshalBinary(ffBytes); err != nil {
		f.Fatal(err)
	}
	for _, j := range []bandJob{
		{Dir: "/data/tiles", Pattern: "img_r{rrr}_c{ccc}.tif", Start: 1, Numbering: "HORIZONTALCOMBING", Origin: "UL", Rows: 3, Cols: 4, MaxTilePixels: 1 << 20, Row0: 1, Row1: 2, Band: 1, Bands: 3},
		{Dir: "/", Pattern: "{p}", Rows: 1 << 40, Cols: 1 << 40, MaxTilePixels: -1, Options: align.Options{PeakCount: 1 << 40}, FlatField: ff},
	} {
		data, err := codec.Marshal(&j)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		data = data[:min(len(data), 2048)]
		var j bandJob
		if err := codec.Unmarshal(data, &j); err != nil {
			return
		}
		again, err := codec.Marshal(&j)
		if err != nil {
			return // a flat field MarshalBinary refuses
		}
		var k bandJob
		if err := codec.Unmarshal(again, &k); err != nil {
			t.Fatalf("re-encoded job does not decode: %v", err)
		}
		if a, b := fmt.Sprintf("%+v", jobFields(j)), fmt.Sprintf("%+v", jobFields(k)); a != b {
			t.Fatalf("round trip:\n%s\n%s", a, b)
		}
		// What the worker reads from the job before opening any file.
		if pat, err := tileio.ParsePattern(j.Pattern, j.Start); err == nil {
			_ = pat.AtTime(j.Time).Name(0, 0, 1, 1)
		}
		_ = j.Options.Validate()
	})
}

// jobFields prints j with its flat field's gains, for comparison (NaN
// options print alike).
func jobFields(j bandJob) string {
	ff := j.FlatField
	j.FlatField = nil
	s := fmt.Sprintf("%+v", j)
	if ff != nil {
		s += fmt.Sprintf(" flat field %v %v %v", ff.Gains(), ff.Identity(), math.Float64bits(ff.Falloff()))
	}
	return s
}
