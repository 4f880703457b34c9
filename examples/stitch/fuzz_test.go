package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/gohtgs/htgs/cluster"
	"github.com/gohtgs/htgs/internal/fuzzrun"
	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/tileio"
)

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
