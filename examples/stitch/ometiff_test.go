package main

// The mosaic file the program writes: an OME-TIFF pyramid with the pixel
// size and compression asked for (natively or with MIST's options), read
// back by this package's reader and, where installed, by tifffile, GDAL
// and libtiff.

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gohtgs/htgs/tiled"
)

// stitchSmall stitches a small generated grid (2 x 3 tiles of 256 x 192)
// into out with args and returns the mosaic's path.
func stitchSmall(t *testing.T, dir, out string, args ...string) string {
	t.Helper()
	r := runArgs(t, context.Background(), append([]string{"-dir", dir, "-rows", "2", "-cols", "3", "-workers", "2", "-out", out, "-overlap", "10", "-start", "1"}, args...)...)
	if r.code != 0 {
		t.Fatalf("%v: exit %d\nstdout %s\nstderr %s", args, r.code, r.stdout, r.stderr)
	}
	return filepath.Join(out, defNames.mosaic)
}

// generateSmall generates the 2 x 3 grid of 256 x 192 tiles.
func generateSmall(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if r := runArgs(t, context.Background(), "-generate", dir, "-rows", "2", "-cols", "3", "-tile", "256x192"); r.code != 0 {
		t.Fatalf("generate: exit %d, %s", r.code, r.stderr)
	}
	return dir
}

// -pixel-size, -tile-size and -compression reach the file, and MIST's
// --unit/--unitX/--unitY and --compressionMode mean the same.
func TestMosaicOMETIFFOptions(t *testing.T) {
	dir := generateSmall(t)
	for _, tc := range []struct {
		args            []string
		comp            tiled.Compression
		tile            int
		desc, notInDesc string
	}{
		{nil, tiled.CompressionNone, 512, `SizeC="1"`, "PhysicalSize"},
		{[]string{"-pixel-size", "0.5x0.6nm", "-tile-size", "64", "-compression", "deflate"}, tiled.CompressionDeflate, 64, `PhysicalSizeX="0.5" PhysicalSizeXUnit="nm" PhysicalSizeY="0.6" PhysicalSizeYUnit="nm"`, ""},
		{[]string{"--unit", "NANOMETER", "--unitX", "0.5", "--unitY", "0.6", "--compressionMode", "ZLIB", "-tile-size", "64"}, tiled.CompressionDeflate, 64, `PhysicalSizeX="0.5" PhysicalSizeXUnit="nm" PhysicalSizeY="0.6" PhysicalSizeYUnit="nm"`, ""},
		{[]string{"--unitX", "0.65", "--compressionMode", "UNCOMPRESSED", "-tile-size", "32"}, tiled.CompressionNone, 32, `PhysicalSizeX="0.65" PhysicalSizeY="0.65">`, "Unit="},
		{[]string{"-pixel-size", "0.65", "-compression", "zstd"}, tiled.CompressionZstd, 512, `PhysicalSizeX="0.65" PhysicalSizeY="0.65">`, "Unit="},
	} {
		path := stitchSmall(t, dir, t.TempDir(), tc.args...)
		tf, err := tiled.OpenBigTIFF(path)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		lv := tf.Levels[0]
		if lv.Compression != tc.comp || lv.TW != tc.tile || lv.TH != tc.tile || !strings.Contains(tf.Description, tc.desc) ||
			(tc.notInDesc != "" && strings.Contains(tf.Description, tc.notInDesc)) {
			t.Errorf("%v: %v tiles of %d x %d, OME-XML %s; want %v, %d px, %s", tc.args, lv.Compression, lv.TW, lv.TH, tf.Description, tc.comp, tc.tile, tc.desc)
		}
		if want := tiled.Levels(lv.W, lv.H, tc.tile, tc.tile); len(tf.Levels) != want {
			t.Errorf("%v: %d levels, want %d (down to one tile)", tc.args, len(tf.Levels), want)
		}
		tf.Close()
	}
}

// Bad mosaic options are usage errors (exit 2) naming the option.
func TestMosaicOptionErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-tile-size", "100"},
		{"-tile-size", "0"},
		{"-compression", "lzw"},
		{"-pixel-size", "abc"},
		{"-pixel-size", "-1"},
		{"-pixel-size", "0.5furlong"},
		{"-pixel-size", "0.5", "--unitX", "0.5"},
		{"--compressionMode", "RLE"},
		{"--compressionMode", "ZLIB", "-compression", "zstd"},
		{"--unitX", "0"},
		{"--unit", "INCH", "--unitX", "1"},
	} {
		r := runArgs(t, context.Background(), append([]string{"-dir", t.TempDir(), "-rows", "1", "-cols", "2", "-out", t.TempDir()}, args...)...)
		if r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage)\n%s", args, r.code, r.stderr)
		}
	}
}

// The program's mosaic opens in tifffile as OME with >= 3 levels from
// SubIFDs, the pixel size given, and each level the 2x2 reduction of the
// one above; gdalinfo lists the overviews; tiffinfo reads every
// directory without a warning. Each reader is skipped where not installed.
func TestMosaicInReaders(t *testing.T) {
	dir := generateSmall(t)
	path := stitchSmall(t, dir, t.TempDir(), "-pixel-size", "0.325", "-tile-size", "64", "-compression", "deflate")
	tf, err := tiled.OpenBigTIFF(path)
	if err != nil {
		t.Fatal(err)
	}
	tf.Close()
	if len(tf.Levels) < 3 {
		t.Fatalf("%d levels", len(tf.Levels))
	}
	t.Run("tifffile", func(t *testing.T) {
		py := ""
		for _, p := range []string{"python3", "/usr/bin/python3"} {
			if exec.Command(p, "-c", "import tifffile, numpy").Run() == nil {
				py = p
				break
			}
		}
		if py == "" {
			t.Skip("tifffile not installed (apt-get install python3-tifffile): the tifffile check skips")
		}
		out, err := exec.Command(py, "../../tiled/testdata/tifffile_check.py", path, "0.325", "0.325", "µm").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "ok ") {
			t.Errorf("tifffile: %v\n%s", err, out)
		}
	})
	t.Run("gdalinfo", func(t *testing.T) {
		if _, err := exec.LookPath("gdalinfo"); err != nil {
			t.Skip("gdalinfo not installed (apt-get install gdal-bin): the GDAL check skips")
		}
		out, err := exec.Command("gdalinfo", path).CombinedOutput()
		var sizes []string
		for _, lv := range tf.Levels[1:] {
			sizes = append(sizes, strconv.Itoa(lv.W)+"x"+strconv.Itoa(lv.H))
		}
		if want := "Overviews: " + strings.Join(sizes, ", "); err != nil || !strings.Contains(string(out), want) {
			t.Errorf("gdalinfo: %v; want %q in\n%s", err, want, out)
		}
	})
	t.Run("tiffinfo", func(t *testing.T) {
		if _, err := exec.LookPath("tiffinfo"); err != nil {
			t.Skip("tiffinfo not installed (apt-get install libtiff-tools): the libtiff check skips")
		}
		cmd := exec.Command("tiffinfo", "-D", path)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil || stderr.Len() > 0 {
			t.Errorf("tiffinfo: %v\n%s", err, stderr.String())
		}
		// tiffinfo prints the SubIFDs after the top-level directory.
		if n := strings.Count(string(out), "TIFF Directory at offset"); n != len(tf.Levels) {
			t.Errorf("tiffinfo shows %d directories, want %d", n, len(tf.Levels))
		}
	})
}
