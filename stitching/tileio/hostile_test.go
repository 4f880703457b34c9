package tileio

import (
	"encoding/binary"
	"image"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hostileGrid writes a 1 x 2 grid of 16-bit tiles named img_r1_c{1,2}.tif
// in a new folder and returns it with its pattern.
func hostileGrid(t *testing.T) (string, Pattern) {
	t.Helper()
	dir := t.TempDir()
	pat, err := ParsePattern("img_r{r}_c{c}.tif", 1)
	if err != nil {
		t.Fatal(err)
	}
	for c := range 2 {
		writeImage(t, filepath.Join(dir, pat.Name(0, c, 1, 2)), gray16Ramp(10, 8), "tif")
	}
	return dir, pat
}

// openWithin runs OpenTileSet and fails the test if it takes over 10 s.
func openWithin(t *testing.T, dir string, pat Pattern) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { _, err := OpenTileSet(dir, pat, 1, 2); done <- err }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("OpenTileSet still running after 10 s (blocked in an open?)")
		return nil
	}
}

// A tile that is a named pipe used to block the open forever (no writer
// ever comes); a tile that is a folder got "neither TIFF nor PNG". Both
// are refused at once, saying what they are.
func TestTileThatIsNotAFile(t *testing.T) {
	for _, c := range []struct {
		kind, want string
		make       func(string) error
	}{
		{"fifo", "is a named pipe (FIFO)", func(p string) error { return syscall.Mkfifo(p, 0o644) }},
		{"dir", "is a directory", func(p string) error { return os.Mkdir(p, 0o755) }},
	} {
		t.Run(c.kind, func(t *testing.T) {
			dir, pat := hostileGrid(t)
			p := filepath.Join(dir, pat.Name(0, 1, 1, 2))
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := c.make(p); err != nil {
				t.Skipf("cannot make a %s here: %v", c.kind, err)
			}
			err := openWithin(t, dir, pat)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
				t.Fatalf("OpenTileSet: %v, want an error naming %s that says %q", err, p, c.want)
			}
			done := make(chan error, 1)
			go func() { _, err := LoadTile(p); done <- err }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("LoadTile: %v, want %q", err, c.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("LoadTile still running after 10 s")
			}
		})
	}
}

// A pattern cannot name files outside the tile folder: ".." components
// and absolute paths are refused; subfolders inside are fine.
func TestPatternStaysInFolder(t *testing.T) {
	for _, s := range []string{
		"../other/img_r{rrr}_c{ccc}.tif",
		"../../etc/img_r{r}_c{c}",
		"sub/../../img_{p}.tif",
		"/etc/img_r{r}_c{c}",
		"a/..",
		"img_{i}/..",
	} {
		if _, err := ParsePattern(s, 1); err == nil || !strings.Contains(err.Error(), "folder") {
			t.Errorf("ParsePattern(%q): %v, want a refusal", s, err)
		}
	}
	for _, s := range []string{"sub/img_r{r}_c{c}.tif", "..img_{p}.tif", "img..{r}_{c}", "./img_{i}.tif"} {
		if _, err := ParsePattern(s, 1); err != nil {
			t.Errorf("ParsePattern(%q): %v", s, err)
		}
	}
}

// OpenTileSetIn reads the tiles through an os.Root: a tile that is a link
// to a file outside the folder is refused, where OpenTileSet (the user's
// own folder) follows it.
func TestOpenTileSetInRefusesEscapingLinks(t *testing.T) {
	dir, pat := hostileGrid(t)
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.tif")
	writeImage(t, secret, gray16Ramp(10, 8), "tif")
	p := filepath.Join(dir, pat.Name(0, 1, 1, 2))
	os.Remove(p)
	rel, err := filepath.Rel(dir, secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(rel, p); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenTileSet(dir, pat, 1, 2); err != nil {
		t.Fatalf("OpenTileSet of the user's own links: %v", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := OpenTileSetIn(root, pat, 1, 2, 0); err == nil {
		t.Fatal("OpenTileSetIn followed a link out of its folder")
	}
	// A relative link inside the folder is followed.
	os.Remove(p)
	writeImage(t, filepath.Join(dir, "real.tif"), gray16Ramp(10, 8), "tif")
	if err := os.Symlink("real.tif", p); err != nil {
		t.Fatal(err)
	}
	ts, err := OpenTileSetIn(root, pat, 1, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Load(0, 1); err != nil {
		t.Fatal(err)
	}
}

// An 8-bit tile among 16-bit ones used to enter the mosaic at its raw
// values (about 1/256 of the brightness); it is now an error naming both.
func TestMixedBitDepthsRefused(t *testing.T) {
	dir, pat := hostileGrid(t)
	p := filepath.Join(dir, pat.Name(0, 1, 1, 2))
	g8 := image.NewGray(image.Rect(0, 0, 10, 8))
	writeImage(t, p, g8, "tif")
	err := openWithin(t, dir, pat)
	if err == nil || !strings.Contains(err.Error(), "8-bit grayscale") || !strings.Contains(err.Error(), "16-bit grayscale") || !strings.Contains(err.Error(), "bit depth") {
		t.Fatalf("OpenTileSet: %v, want an error naming both bit depths", err)
	}
}

// floatTIFF is a 2 x 2 TIFF of 32-bit floating-point samples.
func floatTIFF() []byte {
	type tag struct {
		id, typ uint16
		val     uint32
	}
	tags := []tag{
		{256, 3, 2}, {257, 3, 2}, {258, 3, 32}, {259, 3, 1}, {262, 3, 1},
		{273, 4, 8}, {277, 3, 1}, {278, 3, 2}, {279, 4, 16}, {339, 3, 3},
	}
	b := []byte("II*\x00")
	b = binary.LittleEndian.AppendUint32(b, 8+16)
	b = append(b, make([]byte, 16)...) // the pixels
	b = binary.LittleEndian.AppendUint16(b, uint16(len(tags)))
	for _, g := range tags {
		b = binary.LittleEndian.AppendUint16(b, g.id)
		b = binary.LittleEndian.AppendUint16(b, g.typ)
		b = binary.LittleEndian.AppendUint32(b, 1)
		b = binary.LittleEndian.AppendUint32(b, g.val)
	}
	return binary.LittleEndian.AppendUint32(b, 0)
}

// Float tiles get a message that says what is supported, not the
// decoder's "unsupported feature: sample format".
func TestFloatTilesExplained(t *testing.T) {
	dir, pat := hostileGrid(t)
	p := filepath.Join(dir, pat.Name(0, 0, 1, 2))
	if err := os.WriteFile(p, floatTIFF(), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{"OpenTileSet": openWithin(t, dir, pat), "LoadTile": func() error { _, err := LoadTile(p); return err }()} {
		if err == nil || !strings.Contains(err.Error(), "floating-point") || !strings.Contains(err.Error(), "16-bit unsigned grayscale") {
			t.Errorf("%s: %v, want a message saying floating-point samples are not supported and what is", name, err)
		}
	}
}

// A missing tile folder is reported as such, and a missing tile by its
// file name alone (it used to be "tile (row 0, col 0): open
// .../img_r001_c001.tif", 0-based numbers beside a 1-based name).
func TestMissingFolderAndTileMessages(t *testing.T) {
	dir, pat := hostileGrid(t)
	_, err := OpenTileSet(filepath.Join(dir, "nope"), pat, 1, 2)
	if err == nil || !strings.Contains(err.Error(), "tile folder") || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing folder: %v", err)
	}
	os.Remove(filepath.Join(dir, pat.Name(0, 1, 1, 2)))
	_, err = OpenTileSet(dir, pat, 1, 2)
	if err == nil || !strings.Contains(err.Error(), "img_r1_c2.tif") || strings.Contains(err.Error(), "row 0") || strings.Contains(err.Error(), "col 1") {
		t.Errorf("missing tile: %v", err)
	}
}
