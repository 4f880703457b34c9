package tiled

// Cross-checks of CreateOMETIFF's files in the readers microscopists use:
// tifffile (Python), GDAL's gdalinfo and libtiff's tiffinfo, each run
// where installed and skipped with a message elsewhere.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// tifffilePython returns a Python that imports tifffile and numpy (python3
// on PATH, else the system's), or skips t.
func tifffilePython(t *testing.T) string {
	t.Helper()
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(py, "-c", "import tifffile, numpy").Run() == nil {
			return py
		}
	}
	t.Skip("tifffile not installed (apt-get install python3-tifffile): the tifffile cross-check skips")
	return ""
}

// tifffileCheck is the script that checks an OME-TIFF as tifffile reads
// it (see its header).
const tifffileCheck = "testdata/tifffile_check.py"

// writeOME writes a w x h smooth image as an OME-TIFF with o.
func writeOME(t *testing.T, path string, w, h int, o OMETIFFOptions) {
	t.Helper()
	px, _ := smooth(w, h, 7)
	s, err := CreateOMETIFF(path, w, h, o)
	if err != nil {
		t.Fatal(err)
	}
	writeStream(t, s, px)
}

// tifffile opens the OME-TIFF as OME, its levels from SubIFDs, each the
// 2x2 reduction of the one above, with the physical pixel size given.
// Zstd needs the imagecodecs package, which Debian does not ship: without
// it the zstd file is only checked to be refused for that reason.
func TestTifffileReadsOMETIFF(t *testing.T) {
	py := tifffilePython(t)
	dir := t.TempDir()
	for _, c := range []Compression{CompressionNone, CompressionDeflate, CompressionZstd} {
		path := filepath.Join(dir, c.String()+".ome.tif")
		writeOME(t, path, 333, 250, OMETIFFOptions{TileW: 64, TileH: 64, Compression: c, PhysicalSizeX: 0.325, PhysicalSizeY: 0.5, PhysicalSizeUnit: "nm"})
		out, err := exec.Command(py, tifffileCheck, path, "0.325", "0.5", "nm").CombinedOutput()
		if c == CompressionZstd && err != nil && exec.Command(py, "-c", "import imagecodecs").Run() != nil {
			if !strings.Contains(string(out), "imagecodecs") {
				t.Errorf("zstd without imagecodecs: %s", out)
			}
			t.Logf("zstd: tifffile needs imagecodecs, not installed: %s", lastLine(out))
			continue
		}
		if err != nil || !strings.HasPrefix(string(out), "ok ") {
			t.Errorf("%v: tifffile: %v\n%s", c, err, out)
		}
	}
	// No pixel size: none in the OME-XML.
	path := filepath.Join(dir, "nosize.ome.tif")
	writeOME(t, path, 200, 130, OMETIFFOptions{TileW: 32, TileH: 32})
	if out, err := exec.Command(py, tifffileCheck, path, "-", "-", "µm").CombinedOutput(); err != nil {
		t.Errorf("no pixel size: tifffile: %v\n%s", err, out)
	}
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// gdalinfo lists the reduced levels as overviews, for every compression.
func TestGdalinfoListsOverviews(t *testing.T) {
	if _, err := exec.LookPath("gdalinfo"); err != nil {
		t.Skip("gdalinfo not installed (apt-get install gdal-bin): the GDAL cross-check skips")
	}
	dir := t.TempDir()
	for _, c := range []Compression{CompressionNone, CompressionDeflate, CompressionZstd} {
		path := filepath.Join(dir, c.String()+".ome.tif")
		writeOME(t, path, 333, 250, OMETIFFOptions{TileW: 64, TileH: 64, Compression: c})
		out, err := exec.Command("gdalinfo", "-checksum", path).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: gdalinfo: %v\n%s", c, err, out)
		}
		if !strings.Contains(string(out), "Overviews: 167x125, 84x63, 42x32") {
			t.Errorf("%v: gdalinfo lists no overviews 167x125, 84x63, 42x32:\n%s", c, out)
		}
		if strings.Contains(string(out), "ERROR") || strings.Contains(string(out), "Warning") {
			t.Errorf("%v: gdalinfo complains:\n%s", c, out)
		}
	}
}

// tiffinfo reads every directory, the SubIFDs included, without a warning
// or an error, and decodes every tile (-D).
func TestTiffinfoReadsEveryDirectory(t *testing.T) {
	if _, err := exec.LookPath("tiffinfo"); err != nil {
		t.Skip("tiffinfo not installed (apt-get install libtiff-tools): the libtiff cross-check skips")
	}
	dir := t.TempDir()
	for _, c := range []Compression{CompressionNone, CompressionDeflate, CompressionZstd} {
		path := filepath.Join(dir, c.String()+".ome.tif")
		writeOME(t, path, 333, 250, OMETIFFOptions{TileW: 64, TileH: 64, Compression: c, PhysicalSizeX: 0.65, PhysicalSizeY: 0.65})
		tf, err := OpenBigTIFF(path)
		if err != nil {
			t.Fatal(err)
		}
		tf.Close()
		// The top-level directory, then each SubIFD by its offset (-o).
		for l, off := range append([]uint64{0}, subIFDOffsets(t, path)...) {
			args := []string{"-D", path}
			if l > 0 {
				args = []string{"-D", "-o", fmt.Sprint(off), path}
			}
			cmd := exec.Command("tiffinfo", args...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil || stderr.Len() > 0 {
				t.Errorf("%v directory %d: tiffinfo: %v\n%s", c, l, err, stderr.String())
			}
			lv := tf.Levels[l]
			if want := fmt.Sprintf("Image Width: %d Image Length: %d", lv.W, lv.H); !strings.Contains(string(out), want) {
				t.Errorf("%v directory %d: no %q in\n%.600s", c, l, want, out)
			}
		}
	}
}

// subIFDOffsets returns the SubIFDs of the first IFD of the BigTIFF at
// path.
func subIFDOffsets(t *testing.T, path string) []uint64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	p := &ifdParser{r: f, size: st.Size(), seen: map[uint64]bool{}, budget: 1 << 30}
	var h [16]byte
	if _, err := f.ReadAt(h[:], 0); err != nil {
		t.Fatal(err)
	}
	d, err := p.parse(uint64(h[8]) | uint64(h[9])<<8 | uint64(h[10])<<16 | uint64(h[11])<<24)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.subs) < 2 {
		t.Fatalf("%d SubIFDs", len(d.subs))
	}
	return d.subs
}
