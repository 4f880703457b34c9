package tiled

// Reading the OME-Zarr NGFF 0.5 images CreateOMEZarr writes (Zarr v3):
// OpenOMEZarr finds a zarr.json at the image's root and reads its "ome"
// attributes and each level's array metadata; ReadChunk then reads the
// chunk files at level/c/0/cy/cx, decompressing zstd or gzip.

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/klauspost/compress/zstd"
)

// ParseNGFF05 checks the zarr.json of an OME-Zarr NGFF 0.5 image as
// CreateOMEZarr writes it (a Zarr v3 group whose "ome" attributes hold
// version 0.5 and one multiscale with axes c (channel), y and x (space),
// each dataset with one positive 3-D scale) and returns its datasets'
// paths and x, y scales.
func ParseNGFF05(b []byte) (paths []string, scales [][2]float64, err error) {
	var g struct {
		ZarrFormat int    `json:"zarr_format"`
		NodeType   string `json:"node_type"`
		Attributes struct {
			OME struct {
				Version     string `json:"version"`
				Multiscales []struct {
					Axes []struct {
						Name string `json:"name"`
						Type string `json:"type"`
					} `json:"axes"`
					Datasets []struct {
						Path       string `json:"path"`
						Transforms []struct {
							Type  string    `json:"type"`
							Scale []float64 `json:"scale"`
						} `json:"coordinateTransformations"`
					} `json:"datasets"`
				} `json:"multiscales"`
			} `json:"ome"`
		} `json:"attributes"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		return nil, nil, zarrErr("zarr.json: %v", err)
	}
	ome := g.Attributes.OME
	switch {
	case g.ZarrFormat != 3 || g.NodeType != "group":
		return nil, nil, zarrErr("zarr.json: zarr_format %d, node_type %q: want a Zarr v3 group", g.ZarrFormat, g.NodeType)
	case ome.Version != "0.5":
		return nil, nil, zarrErr("ome version %q, want 0.5", ome.Version)
	case len(ome.Multiscales) == 0:
		return nil, nil, zarrErr("no multiscales")
	}
	m := ome.Multiscales[0]
	if len(m.Axes) != 3 || m.Axes[0].Name != "c" || m.Axes[0].Type != "channel" ||
		m.Axes[1].Name != "y" || m.Axes[1].Type != "space" || m.Axes[2].Name != "x" || m.Axes[2].Type != "space" {
		return nil, nil, zarrErr("axes %v, want c (channel), y and x (space)", m.Axes)
	}
	if len(m.Datasets) == 0 || len(m.Datasets) > 64 {
		return nil, nil, zarrErr("%d datasets", len(m.Datasets))
	}
	for _, d := range m.Datasets {
		if d.Path == "" || !filepath.IsLocal(d.Path) {
			return nil, nil, zarrErr("dataset path %q", d.Path)
		}
		if len(d.Transforms) != 1 || d.Transforms[0].Type != "scale" || len(d.Transforms[0].Scale) != 3 ||
			!(d.Transforms[0].Scale[1] > 0) || !(d.Transforms[0].Scale[2] > 0) {
			return nil, nil, zarrErr("dataset %q: want one positive 3-D scale transform", d.Path)
		}
		paths = append(paths, d.Path)
		scales = append(scales, [2]float64{d.Transforms[0].Scale[2], d.Transforms[0].Scale[1]})
	}
	return paths, scales, nil
}

// ParseZarrV3Array checks a level's zarr.json as CreateOMEZarr writes it
// (a uint16 array of shape (1, h, w) in a regular grid of (1, th, tw)
// chunks, "/" chunk keys, the bytes codec little-endian, then at most one
// of zstd and gzip) and returns its size, chunk size and compression.
func ParseZarrV3Array(b []byte) (w, h, tw, th int, c Compression, err error) {
	var a struct {
		ZarrFormat int    `json:"zarr_format"`
		NodeType   string `json:"node_type"`
		Shape      []int  `json:"shape"`
		DataType   string `json:"data_type"`
		ChunkGrid  struct {
			Name   string `json:"name"`
			Config struct {
				ChunkShape []int `json:"chunk_shape"`
			} `json:"configuration"`
		} `json:"chunk_grid"`
		ChunkKey struct {
			Name   string `json:"name"`
			Config struct {
				Separator string `json:"separator"`
			} `json:"configuration"`
		} `json:"chunk_key_encoding"`
		FillValue json.RawMessage `json:"fill_value"`
		Codecs    []struct {
			Name   string `json:"name"`
			Config struct {
				Endian string `json:"endian"`
			} `json:"configuration"`
		} `json:"codecs"`
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return 0, 0, 0, 0, 0, zarrErr("array zarr.json: %v", err)
	}
	cs := a.ChunkGrid.Config.ChunkShape
	switch {
	case a.ZarrFormat != 3 || a.NodeType != "array":
		err = zarrErr("zarr_format %d, node_type %q: want a Zarr v3 array", a.ZarrFormat, a.NodeType)
	case a.DataType != "uint16":
		err = zarrErr("data_type %q, want uint16", a.DataType)
	case len(a.Shape) != 3 || len(cs) != 3 || a.Shape[0] != 1 || cs[0] != 1:
		err = zarrErr("shape %v, chunks %v: want (1, h, w)", a.Shape, cs)
	case a.ChunkGrid.Name != "regular" || a.ChunkKey.Name != "default" || a.ChunkKey.Config.Separator != "/":
		err = zarrErr("chunk grid %q, key encoding %q %q: want regular, default, /", a.ChunkGrid.Name, a.ChunkKey.Name, a.ChunkKey.Config.Separator)
	case string(a.FillValue) != "0":
		err = zarrErr("fill_value %s, want 0", a.FillValue)
	case a.Shape[1] <= 0 || a.Shape[2] <= 0 || cs[1] <= 0 || cs[2] <= 0:
		err = zarrErr("shape %v, chunks %v", a.Shape, cs)
	case cs[1] > maxZarrChunk/cs[2]:
		err = zarrErr("chunks %v too large", cs)
	case len(a.Codecs) == 0 || len(a.Codecs) > 2 || a.Codecs[0].Name != "bytes" || a.Codecs[0].Config.Endian != "little":
		err = zarrErr("codecs %v: want bytes (little-endian), then at most one of zstd and gzip", a.Codecs)
	}
	if err != nil {
		return 0, 0, 0, 0, 0, err
	}
	c = CompressionNone
	if len(a.Codecs) == 2 {
		switch a.Codecs[1].Name {
		case "zstd":
			c = CompressionZstd
		case "gzip":
			c = CompressionDeflate
		default:
			return 0, 0, 0, 0, 0, zarrErr("codec %q, want zstd or gzip", a.Codecs[1].Name)
		}
	}
	return a.Shape[2], a.Shape[1], cs[2], cs[1], c, nil
}

// openNGFF05 reads the metadata of the NGFF 0.5 image in dir, whose
// zarr.json is b.
func openNGFF05(dir string, b []byte) (*OMEZarr, error) {
	paths, scales, err := ParseNGFF05(b)
	if err != nil {
		return nil, err
	}
	z := &OMEZarr{Dir: dir}
	for i, p := range paths {
		b, err := os.ReadFile(filepath.Join(dir, p, "zarr.json"))
		if err != nil {
			return nil, err
		}
		w, h, tw, th, c, err := ParseZarrV3Array(b)
		if err != nil {
			return nil, fmt.Errorf("level %q: %w", p, err)
		}
		z.Levels = append(z.Levels, ZarrLevel{Path: p, W: w, H: h, TW: tw, TH: th, Scale: scales[i][0], v3: true, compression: c})
	}
	return z, nil
}

// decodeChunk decompresses a v3 chunk file's bytes into at most n bytes,
// refusing more: a crafted chunk cannot make the reader allocate without
// limit.
func decodeChunk(c Compression, data []byte, n int) ([]byte, error) {
	var r io.Reader
	switch c {
	case CompressionNone:
		return data, nil
	case CompressionZstd:
		d, err := zstd.NewReader(bytes.NewReader(data), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(n)+1<<20))
		if err != nil {
			return nil, err
		}
		defer d.Close()
		r = d
	case CompressionDeflate:
		g, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		r = g
	default:
		return nil, zarrErr("compression %v", c)
	}
	out, err := io.ReadAll(io.LimitReader(r, int64(n)+1))
	if err != nil {
		return nil, err
	}
	return out, nil
}
