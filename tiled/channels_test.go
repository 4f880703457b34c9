package tiled

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// writeRows writes every row of px into s, two rows of tiles at a time.
func writeRows(t *testing.T, s *BigTIFFStream, px []uint16) {
	t.Helper()
	for y := 0; y < s.H; {
		n := min(2*s.TH, s.H-y)
		if err := s.WriteRows(y, n, px[y*s.W:]); err != nil {
			t.Fatal(err)
		}
		y += n
	}
}

// An OME-TIFF of three channels holds one top-level IFD per channel, each
// with its own pyramid in SubIFDs; the OME-XML says SizeC 3 with the
// channels' names; every level of every plane equals the single-channel
// OME-TIFF of that channel's image. The stream refuses a channel switch
// before a channel is complete or past the last, and a Close before the
// last channel.
func TestOMETIFFChannels(t *testing.T) {
	dir := t.TempDir()
	w, h := 201, 133
	names := []string{"DAPI", "GFP", "R&D <3>"}
	var imgs [][]uint16
	for c := range names {
		px, _ := smooth(w, h, uint64(10+c))
		imgs = append(imgs, px)
	}
	for _, comp := range []Compression{CompressionNone, CompressionDeflate} {
		path := filepath.Join(dir, comp.String()+".ome.tif")
		o := OMETIFFOptions{TileW: 32, TileH: 32, Compression: comp, Channels: names, PhysicalSizeX: 0.5, PhysicalSizeY: 0.5}
		s, err := CreateOMETIFF(path, w, h, o)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.NextChannel(); err == nil {
			t.Fatal("NextChannel before the first channel's rows")
		}
		for c, px := range imgs {
			if c > 0 {
				if err := s.NextChannel(); err != nil {
					t.Fatal(err)
				}
			}
			writeRows(t, s, px)
		}
		if err := s.NextChannel(); err == nil {
			t.Fatal("NextChannel past the last channel")
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		mc, err := OpenBigTIFF(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(mc.Planes) != 3 || !strings.Contains(mc.Description, `SizeC="3"`) || !strings.Contains(mc.Description, `Name="R&amp;D &lt;3&gt;"`) || !strings.Contains(mc.Description, `PlaneCount="3"`) {
			t.Fatalf("%v: %d planes, OME-XML %s", comp, len(mc.Planes), mc.Description)
		}
		for c, px := range imgs {
			one := filepath.Join(dir, "one.ome.tif")
			o1 := o
			o1.Channels = nil
			s, err := CreateOMETIFF(one, w, h, o1)
			if err != nil {
				t.Fatal(err)
			}
			writeStream(t, s, px)
			ref, err := OpenBigTIFF(one)
			if err != nil {
				t.Fatal(err)
			}
			if len(mc.Planes[c]) != len(ref.Levels) {
				t.Fatalf("channel %d: %d levels, want %d", c, len(mc.Planes[c]), len(ref.Levels))
			}
			got, want := make([]uint16, 32*32), make([]uint16, 32*32)
			for l, lv := range ref.Levels {
				for ty := 0; ty*lv.TH < lv.H; ty++ {
					for tx := 0; tx*lv.TW < lv.W; tx++ {
						if err := mc.ReadPlaneTile(c, l, Coord{tx, ty}, got); err != nil {
							t.Fatal(err)
						}
						if err := ref.ReadTile(l, Coord{tx, ty}, want); err != nil {
							t.Fatal(err)
						}
						if !slices.Equal(got, want) {
							t.Fatalf("%v channel %d level %d tile (%d, %d) differs from its single-channel OME-TIFF", comp, c, l, tx, ty)
						}
					}
				}
			}
			ref.Close()
		}
		mc.Close()
	}
	// Closed before the last channel: an error, and no file.
	path := filepath.Join(dir, "short.ome.tif")
	s, err := CreateOMETIFF(path, w, h, OMETIFFOptions{TileW: 32, TileH: 32, Channels: names})
	if err != nil {
		t.Fatal(err)
	}
	writeRows(t, s, imgs[0])
	if err := s.Close(); err == nil || !strings.Contains(err.Error(), "1 of 3 channels") {
		t.Fatalf("Close after one of three channels: %v", err)
	}
	if _, err := OpenBigTIFF(path); err == nil {
		t.Error("a file was left after the failed Close")
	}
	if _, err := CreateOMEZarr(filepath.Join(dir, "x.ome.zarr"), w, h, OMETIFFOptions{Channels: names}); err == nil {
		t.Error("CreateOMEZarr took three channels")
	}
}

// tifffile reads the three-channel OME-TIFF as one series of shape
// (3, h, w), every level from SubIFDs, with the channels' names.
func TestTifffileReadsChannels(t *testing.T) {
	py := tifffilePython(t)
	dir := t.TempDir()
	w, h := 150, 100
	path := filepath.Join(dir, "c3.ome.tif")
	names := []string{"DAPI", "GFP", "Cy5"}
	s, err := CreateOMETIFF(path, w, h, OMETIFFOptions{TileW: 32, TileH: 32, Channels: names})
	if err != nil {
		t.Fatal(err)
	}
	var sums []string
	for c := range names {
		px, _ := smooth(w, h, uint64(20+c))
		if c > 0 {
			if err := s.NextChannel(); err != nil {
				t.Fatal(err)
			}
		}
		writeRows(t, s, px)
		sum := 0
		for _, v := range px {
			sum += int(v)
		}
		sums = append(sums, strconv.Itoa(sum))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	script := `
import sys, tifffile, xml.etree.ElementTree as ET
with tifffile.TiffFile(sys.argv[1]) as tif:
    assert tif.is_ome, "not OME"
    s = tif.series[0]
    assert s.shape == (3, ` + strconv.Itoa(h) + `, ` + strconv.Itoa(w) + `), "shape %s" % (s.shape,)
    assert len(s.levels) >= 3, "%d levels" % len(s.levels)
    a = s.asarray()
    names = [c.get("Name") for c in ET.fromstring(tif.ome_metadata).iter("{http://www.openmicroscopy.org/Schemas/OME/2016-06}Channel")]
    print(" ".join(names), " ".join(str(int(a[c].astype("uint64").sum())) for c in range(3)), len(s.levels))
`
	out, err := exec.Command(py, "-c", script, path).CombinedOutput()
	if err != nil {
		t.Fatalf("tifffile: %v\n%s", err, out)
	}
	want := strings.Join(names, " ") + " " + strings.Join(sums, " ")
	if !strings.HasPrefix(strings.TrimSpace(string(out)), want+" ") {
		t.Errorf("tifffile read %q, want %q and the level count", strings.TrimSpace(string(out)), want)
	}
}
