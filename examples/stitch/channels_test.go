package main

import (
	"bytes"
	"context"
	"image"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gohtgs/htgs/stitching/synth"
	"github.com/gohtgs/htgs/stitching/tileio"
	"github.com/gohtgs/htgs/tiled"
)

// channelGrid writes three channels of the small generated grid into a
// new folder as img_r{rrr}_c{ccc}_{ch}.tif: A the tiles as they are, B
// halved, C inverted.
func channelGrid(t *testing.T) string {
	t.Helper()
	src := generateSmall(t)
	dir := t.TempDir()
	for r := 1; r <= 2; r++ {
		for c := 1; c <= 3; c++ {
			name := "img_r00" + string(rune('0'+r)) + "_c00" + string(rune('0'+c))
			img, err := tileio.LoadTile(filepath.Join(src, name+".tif"))
			if err != nil {
				t.Fatal(err)
			}
			for ch, f := range map[string]func(uint16) uint16{
				"A": func(v uint16) uint16 { return v },
				"B": func(v uint16) uint16 { return v / 2 },
				"C": func(v uint16) uint16 { return 65535 - v },
			} {
				out := image.NewGray16(img.Bounds())
				for i := 0; i < len(img.Pix); i += 2 {
					v := f(uint16(img.Pix[i])<<8 | uint16(img.Pix[i+1]))
					out.Pix[i], out.Pix[i+1] = byte(v>>8), byte(v)
				}
				if err := synth.WriteTIFF(filepath.Join(dir, name+"_"+ch+".tif"), out); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return dir
}

// A three-channel grid, registered on one channel, composes into one
// three-channel OME-TIFF, in memory and out of core alike (the same file),
// and each channel equals the single-channel mosaic of its tiles at the
// same positions (-assemble-from-metadata).
func TestChannelsComposeIntoOneOMETIFF(t *testing.T) {
	dir := channelGrid(t)
	base := []string{"-dir", dir, "-rows", "2", "-cols", "3", "-workers", "2", "-overlap", "10", "-tile-size", "64"}
	var files [][]byte
	var out string
	for _, mem := range []string{"4GiB", "1MiB"} {
		out = t.TempDir()
		r := runArgs(t, context.Background(), append(base, "-out", out, "-mem", mem,
			"-pattern", "img_r{rrr}_c{ccc}_{ch}.tif", "-channels", "A,B,C", "-ref-channel", "B")...)
		if r.code != 0 {
			t.Fatalf("-mem %s: exit %d\n%s\n%s", mem, r.code, r.stdout, r.stderr)
		}
		if path := map[string]string{"4GiB": ": in memory", "1MiB": ": out of core"}[mem]; !strings.Contains(r.stdout, path) {
			t.Errorf("-mem %s: not composed %s:\n%s", mem, path, r.stdout)
		}
		if !strings.Contains(r.stdout, "3 channel(s) A,B,C registered on B") {
			t.Errorf("-mem %s: the run does not say which channels:\n%s", mem, r.stdout)
		}
		b, err := os.ReadFile(filepath.Join(out, defNames.mosaic))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, b)
	}
	if !bytes.Equal(files[0], files[1]) {
		t.Error("the in-memory and out-of-core three-channel files differ")
	}
	mc, err := tiled.OpenBigTIFF(filepath.Join(out, defNames.mosaic))
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	if len(mc.Planes) != 3 || !strings.Contains(mc.Description, `SizeC="3"`) {
		t.Fatalf("%d planes; OME-XML %s", len(mc.Planes), mc.Description)
	}
	for ch, name := range []string{"A", "B", "C"} {
		if !strings.Contains(mc.Description, `Name="`+name+`"`) {
			t.Errorf("channel %s not named in the OME-XML", name)
		}
		one := t.TempDir()
		r := runArgs(t, context.Background(), append(base, "-out", one, "-pattern", "img_r{rrr}_c{ccc}_"+name+".tif",
			"-assemble-from-metadata", "-global-positions", filepath.Join(out, defNames.global))...)
		if r.code != 0 {
			t.Fatalf("channel %s alone: exit %d\n%s", name, r.code, r.stderr)
		}
		ref, err := tiled.OpenBigTIFF(filepath.Join(one, defNames.mosaic))
		if err != nil {
			t.Fatal(err)
		}
		if len(mc.Planes[ch]) != len(ref.Levels) {
			t.Fatalf("channel %s: %d levels, alone %d", name, len(mc.Planes[ch]), len(ref.Levels))
		}
		got, want := make([]uint16, 64*64), make([]uint16, 64*64)
		for l, lv := range ref.Levels {
			for ty := 0; ty*lv.TH < lv.H; ty++ {
				for tx := 0; tx*lv.TW < lv.W; tx++ {
					if err := mc.ReadPlaneTile(ch, l, tiled.Coord{X: tx, Y: ty}, got); err != nil {
						t.Fatal(err)
					}
					if err := ref.ReadTile(l, tiled.Coord{X: tx, Y: ty}, want); err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(got, want) {
						t.Fatalf("channel %s level %d tile (%d, %d) differs from the channel's own mosaic", name, l, tx, ty)
					}
				}
			}
		}
		ref.Close()
	}
}

// The channel flags' mistakes are usage errors that say what to do.
func TestChannelFlagErrors(t *testing.T) {
	dir := channelGrid(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-pattern", "img_r{rrr}_c{ccc}_{ch}.tif"}, "give the names with -channels"},
		{[]string{"-channels", "A,B"}, "has no {ch}"},
		{[]string{"-pattern", "img_r{rrr}_c{ccc}_{ch}.tif", "-channels", "A,,B"}, "an empty name"},
		{[]string{"-pattern", "img_r{rrr}_c{ccc}_{ch}.tif", "-channels", "A,A"}, "named twice"},
		{[]string{"-pattern", "img_r{rrr}_c{ccc}_{ch}.tif", "-channels", "A,../x"}, "path separators"},
		{[]string{"-pattern", "img_r{rrr}_c{ccc}_{ch}.tif", "-channels", "A,B", "-ref-channel", "Z"}, "not one of -channels"},
		{[]string{"-pattern", "img_r{rrr}_c{ccc}_{ch}.tif", "-channels", "A,B", "-format", "ome-zarr"}, "takes one channel"},
		{[]string{"-ref-channel", "A"}, "applies to -channels"},
	} {
		r := runArgs(t, context.Background(), append([]string{"-dir", dir, "-rows", "2", "-cols", "3", "-out", t.TempDir()}, c.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, r.code, r.stderr, c.want)
		}
	}
	// A channel whose tiles are missing fails before any work.
	os.Remove(filepath.Join(dir, "img_r002_c003_C.tif"))
	r := runArgs(t, context.Background(), "-dir", dir, "-rows", "2", "-cols", "3", "-out", t.TempDir(), "-pattern", "img_r{rrr}_c{ccc}_{ch}.tif", "-channels", "A,B,C")
	if r.code == 0 || !strings.Contains(r.stderr, "channel C") || strings.Contains(r.stdout, "stitched in") {
		t.Errorf("missing channel tile: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
