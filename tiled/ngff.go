package tiled

// OME-Zarr NGFF 0.5 on Zarr v3, streamed: CreateOMEZarr starts a
// BigTIFFStream whose rows of tiles go, as each level's row completes, to
// one chunk file per tile (uncompressed, zstd or gzip) instead of a TIFF,
// and whose Close writes the group's and the arrays' zarr.json.

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/klauspost/compress/zstd"
)

// ngffUnits are NGFF's names (UDUNITS-2) of the OME-XML length symbols.
var ngffUnits = map[string]string{
	"km": "kilometer", "hm": "hectometer", "dam": "decameter", "m": "meter", "dm": "decimeter",
	"cm": "centimeter", "mm": "millimeter", "µm": "micrometer", "nm": "nanometer", "pm": "picometer",
	"Å": "angstrom",
}

// zarrSink writes a stream's tiles as the chunks of an NGFF 0.5 image:
// level l is the array dir/l of shape (1, h, w) (axes c, y, x), chunks of
// (1, TH, TW) at dir/l/c/0/ty/tx (the default chunk key encoding).
type zarrSink struct {
	dir  string
	o    OMETIFFOptions
	zstd *zstd.Encoder // for Compression zstd
	bufs [][]byte      // a run's encoded chunks
}

// CreateOMEZarr starts an OME-Zarr image (NGFF 0.5, Zarr v3) of a w x h
// 16-bit grayscale image in the folder dir (created; it must not exist),
// written as a BigTIFFStream writes its TIFF: rows in order, each level's
// rows of tiles as they complete, so memory stays about a row of tiles
// whatever the height. The group's zarr.json holds the "ome" attributes
// (version 0.5, one multiscale with axes c (channel), y and x (space, with
// NGFF's name of o's unit when a pixel size is given), one dataset per
// level with its scale); each level is a uint16 array of shape (1, h, w)
// in chunks of (1, TileH, TileW), compressed with the zstd or gzip codec
// for CompressionZstd or CompressionDeflate (no predictor: Zarr has none
// in its core codecs). The arrays' zarr.json and the group's are written at
// Close, so a folder without them is an incomplete write; on error the
// folder is removed.
func CreateOMEZarr(dir string, w, h int, o OMETIFFOptions) (*BigTIFFStream, error) {
	o, err := o.resolved()
	if err != nil {
		return nil, err
	}
	if len(o.Channels) > 1 {
		return nil, fmt.Errorf("tiled: OME-Zarr of %d channels: this writer takes one channel", len(o.Channels))
	}
	z := &zarrSink{dir: dir, o: o}
	switch o.Compression {
	case CompressionNone, CompressionDeflate:
	case CompressionZstd:
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderCRC(false))
		if err != nil {
			return nil, fmt.Errorf("tiled: zstd: %w", err)
		}
		z.zstd = enc
	default:
		return nil, fmt.Errorf("tiled: cannot write %v", o.Compression)
	}
	s, err := newStreamTo(w, h, o.TileW, o.TileH, o.Levels, func(s *BigTIFFStream) error {
		s.zarr = z
		z.bufs = make([][]byte, s.run)
		return os.Mkdir(dir, 0o755)
	})
	if err != nil {
		if z.zstd != nil {
			z.zstd.Close()
		}
		return nil, fmt.Errorf("tiled: %w", err)
	}
	return s, nil
}

// chunkPath is the file of chunk (ty, tx) of level l.
func (z *zarrSink) chunkPath(l, ty, tx int) string {
	return filepath.Join(z.dir, strconv.Itoa(l), "c", "0", strconv.Itoa(ty), strconv.Itoa(tx))
}

// run writes the k tiles of buf, level l's tiles (ty, tx0) to
// (ty, tx0+k-1), as chunk files, encoded in up to GOMAXPROCS goroutines.
func (z *zarrSink) run(s *BigTIFFStream, l, ty, tx0, k int, buf []uint16) error {
	if err := os.MkdirAll(filepath.Dir(z.chunkPath(l, ty, 0)), 0o755); err != nil {
		return err
	}
	tsz := s.TW * s.TH
	return parallel(k, 1<<20, func(i int) error {
		tile := buf[i*tsz : (i+1)*tsz]
		raw := z.bufs[i][:0]
		if hostLE {
			raw = append(raw, asBytes(tile)...)
		} else {
			for _, v := range tile {
				raw = binary.LittleEndian.AppendUint16(raw, v)
			}
		}
		data := raw
		switch z.o.Compression {
		case CompressionZstd:
			data = z.zstd.EncodeAll(raw, nil)
		case CompressionDeflate:
			var b bytes.Buffer
			zw, err := gzip.NewWriterLevel(&b, gzip.BestSpeed)
			if err != nil {
				return err
			}
			if _, err := zw.Write(raw); err != nil {
				return err
			}
			if err := zw.Close(); err != nil {
				return err
			}
			data = b.Bytes()
		}
		z.bufs[i] = raw
		return os.WriteFile(z.chunkPath(l, ty, tx0+i), data, 0o644)
	})
}

// finish writes the arrays' and the group's zarr.json (err == nil), or
// removes the folder.
func (z *zarrSink) finish(s *BigTIFFStream, err error) error {
	if z.zstd != nil {
		z.zstd.Close()
	}
	if err == nil {
		err = z.writeMeta(s)
	}
	if err != nil {
		os.RemoveAll(z.dir)
	}
	return err
}

// writeMeta writes every level's array metadata, then the group's.
func (z *zarrSink) writeMeta(s *BigTIFFStream) error {
	var codecs []any
	codecs = append(codecs, map[string]any{"name": "bytes", "configuration": map[string]any{"endian": "little"}})
	switch z.o.Compression {
	case CompressionZstd:
		codecs = append(codecs, map[string]any{"name": "zstd", "configuration": map[string]any{"level": 3, "checksum": false}})
	case CompressionDeflate:
		codecs = append(codecs, map[string]any{"name": "gzip", "configuration": map[string]any{"level": 1}})
	}
	sx, sy := z.o.PhysicalSizeX, z.o.PhysicalSizeY
	if sx <= 0 || sy <= 0 {
		sx, sy = 1, 1
	}
	var datasets []any
	for l, lv := range s.levels {
		arr := map[string]any{
			"zarr_format": 3,
			"node_type":   "array",
			"shape":       []int{1, lv.h, lv.w},
			"data_type":   "uint16",
			"chunk_grid": map[string]any{"name": "regular",
				"configuration": map[string]any{"chunk_shape": []int{1, s.TH, s.TW}}},
			"chunk_key_encoding": map[string]any{"name": "default",
				"configuration": map[string]any{"separator": "/"}},
			"fill_value":      0,
			"codecs":          codecs,
			"dimension_names": []string{"c", "y", "x"},
			"attributes":      map[string]any{},
		}
		if err := writeJSON(filepath.Join(z.dir, strconv.Itoa(l), "zarr.json"), arr); err != nil {
			return err
		}
		f := float64(int64(1) << l)
		datasets = append(datasets, map[string]any{
			"path": strconv.Itoa(l),
			"coordinateTransformations": []any{map[string]any{
				"type": "scale", "scale": []float64{1, sy * f, sx * f}}},
		})
	}
	space := func(name string) map[string]any {
		a := map[string]any{"name": name, "type": "space"}
		if z.o.PhysicalSizeX > 0 && z.o.PhysicalSizeY > 0 {
			u := z.o.PhysicalSizeUnit
			if u == "" {
				u = "µm"
			}
			a["unit"] = ngffUnits[u]
		}
		return a
	}
	ms := map[string]any{
		"axes":     []any{map[string]any{"name": "c", "type": "channel"}, space("y"), space("x")},
		"datasets": datasets,
		"type":     "mean",
	}
	if z.o.Name != "" {
		ms["name"] = z.o.Name
	}
	group := map[string]any{
		"zarr_format": 3,
		"node_type":   "group",
		"attributes":  map[string]any{"ome": map[string]any{"version": "0.5", "multiscales": []any{ms}}},
	}
	b, err := json.MarshalIndent(group, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(z.dir, "zarr.json"), b, 0o644)
}
