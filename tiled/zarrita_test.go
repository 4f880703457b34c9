package tiled

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// zarritaDir returns the folder whose node_modules holds zarrita (and
// @zarrita/storage, numcodecs), from $HTGS_ZARRITA (.ci/run installs it
// there), or skips t.
func zarritaDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("HTGS_ZARRITA")
	if dir == "" {
		t.Skip("no Zarr v3 reader: set HTGS_ZARRITA to a folder where `npm install zarrita@0.7.5 numcodecs@0.3.2` ran (.ci/run does); the zarrita cross-check skips")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node not installed: the zarrita cross-check skips")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "zarrita")); err != nil {
		t.Skipf("HTGS_ZARRITA=%s has no node_modules/zarrita: the zarrita cross-check skips", dir)
	}
	return dir
}

// zarrita, a Zarr v3 reader independent of this project, reads every
// level of the NGFF 0.5 image CreateOMEZarr writes, in each compression,
// with the OME-TIFF's sizes and pixel sums.
func TestZarritaReadsNGFF05(t *testing.T) {
	zdir := zarritaDir(t)
	dir := t.TempDir()
	script, err := os.ReadFile("testdata/zarrita_levels.mjs")
	if err != nil {
		t.Fatal(err)
	}
	// An ES module finds its imports in node_modules beside it.
	if err := os.WriteFile(filepath.Join(dir, "levels.mjs"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(zdir, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	w, h := 333, 250
	px, _ := smooth(w, h, 9)
	ref := refOMETIFF(t, dir, w, h, 64, px)
	want := []string{"0.5"}
	buf := make([]uint16, 64*64)
	for l, lv := range ref.Levels {
		sum := 0
		for ty := 0; ty*lv.TH < lv.H; ty++ {
			for tx := 0; tx*lv.TW < lv.W; tx++ {
				if err := ref.ReadTile(l, Coord{tx, ty}, buf); err != nil {
					t.Fatal(err)
				}
				for y := range min(lv.TH, lv.H-ty*lv.TH) {
					for x := range min(lv.TW, lv.W-tx*lv.TW) {
						sum += int(buf[y*lv.TW+x])
					}
				}
			}
		}
		want = append(want, strconv.Itoa(lv.W)+"x"+strconv.Itoa(lv.H)+":"+strconv.Itoa(sum))
	}
	for _, c := range []Compression{CompressionNone, CompressionDeflate, CompressionZstd} {
		zarr := filepath.Join(dir, c.String()+".ome.zarr")
		s, err := CreateOMEZarr(zarr, w, h, OMETIFFOptions{TileW: 64, TileH: 64, Compression: c})
		if err != nil {
			t.Fatal(err)
		}
		writeStream(t, s, px)
		out, err := exec.Command("node", filepath.Join(dir, "levels.mjs"), zarr).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: zarrita: %v\n%s", c, err, out)
		}
		if got := strings.TrimSpace(string(out)); got != strings.Join(want, " ") {
			t.Errorf("%v: zarrita read %q, the OME-TIFF has %q", c, got, strings.Join(want, " "))
		}
	}
}
