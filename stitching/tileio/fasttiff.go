package tileio

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"math"
)

// The fast TIFF path decodes the common microscope tile, an uncompressed
// single-channel 8- or 16-bit grayscale classic TIFF in strips or tiles,
// with bulk copies instead of golang.org/x/image/tiff's pixel-by-pixel
// loop (about 25 ms for a 1392 x 1040 16-bit tile).
//
// It gives exactly what the x/image/tiff path of DecodeTileLimit gives for
// the files it accepts, and accepts only files on which it knows that
// path succeeds (or fails the size check of checkTileConfig): the first
// directory must be well formed as x/image/tiff reads it (tags in
// ascending order, the values of the tags it interprets of type BYTE,
// SHORT or LONG and inside the file), with PhotometricInterpretation 0
// (WhiteIsZero, inverted as x/image/tiff does) or 1, one BitsPerSample
// of 8 or 16, SamplesPerPixel and PlanarConfiguration absent or 1,
// Compression absent, 0 or 1, Predictor absent or 1, SampleFormat absent
// or 1, no ColorMap, in strips or in tiles of 8 x 8 to 65536 x 65536
// pixels (8-bit images only when the tiles divide the width), and every
// strip or tile inside the file and long enough for the pixels
// x/image/tiff reads from it. Anything else, corrupt files included, is left
// to the x/image/tiff path, so that errors and unusual files behave as
// they always did.

// TIFF tags read or checked by the fast path.
const (
	tagImageWidth                = 256
	tagImageLength               = 257
	tagBitsPerSample             = 258
	tagCompression               = 259
	tagPhotometricInterpretation = 262
	tagFillOrder                 = 266
	tagStripOffsets              = 273
	tagSamplesPerPixel           = 277
	tagRowsPerStrip              = 278
	tagStripByteCounts           = 279
	tagPlanarConfiguration       = 284
	tagT4Options                 = 292
	tagT6Options                 = 293
	tagPredictor                 = 317
	tagColorMap                  = 320
	tagTileWidth                 = 322
	tagTileLength                = 323
	tagTileOffsets               = 324
	tagTileByteCounts            = 325
	tagExtraSamples              = 338
	tagSampleFormat              = 339
)

// tiffValues are the values of one directory entry of type BYTE (1),
// SHORT (3) or LONG (4).
type tiffValues struct {
	order binary.ByteOrder
	typ   uint16
	n     int
	raw   []byte // n values of the entry's size
}

func (v tiffValues) get(i int) uint64 {
	switch v.typ {
	case 1:
		return uint64(v.raw[i])
	case 3:
		return uint64(v.order.Uint16(v.raw[2*i:]))
	default:
		return uint64(v.order.Uint32(v.raw[4*i:]))
	}
}

// fastTIFF is the first directory of a TIFF the fast path decodes.
type fastTIFF struct {
	order           binary.ByteOrder
	width, height   int
	bits            int        // 8 or 16
	invert          bool       // WhiteIsZero
	rowsPerStrip    int        // 0: one strip
	offsets, counts tiffValues // of the strips

	tiled                   bool // a TileWidth tag
	tileWidth, tileLength   int
	tileOffsets, tileCounts tiffValues
}

// parseFastTIFF reads the first directory of data; ok is false when the
// file is not one the fast path handles (see the comment at the top).
func parseFastTIFF(data []byte) (t fastTIFF, ok bool) {
	if len(data) < 8 {
		return t, false
	}
	switch string(data[:4]) {
	case "II*\x00":
		t.order = binary.LittleEndian
	case "MM\x00*":
		t.order = binary.BigEndian
	default:
		return t, false
	}
	bo := t.order
	size := uint64(len(data))
	ifd := uint64(bo.Uint32(data[4:]))
	if ifd+2 > size {
		return t, false
	}
	n := uint64(bo.Uint16(data[ifd:]))
	start := ifd + 2
	if start+12*n > size {
		return t, false
	}
	var (
		haveBits, haveOffsets, haveCounts bool
		haveTileLength, haveTileOffsets   bool
		haveTileCounts                    bool
		photometric, compression          uint64
	)
	prev := -1
	for k := uint64(0); k < n; k++ {
		e := data[start+12*k : start+12*k+12]
		tag := int(bo.Uint16(e))
		if tag <= prev {
			return t, false // x/image/tiff refuses unsorted tags
		}
		prev = tag
		switch tag {
		case tagImageWidth, tagImageLength, tagBitsPerSample, tagCompression,
			tagPhotometricInterpretation, tagFillOrder, tagStripOffsets,
			tagSamplesPerPixel, tagRowsPerStrip, tagStripByteCounts,
			tagPlanarConfiguration, tagT4Options, tagT6Options, tagPredictor,
			tagColorMap, tagTileWidth, tagTileLength, tagTileOffsets,
			tagTileByteCounts, tagExtraSamples, tagSampleFormat:
		default:
			continue // a tag x/image/tiff ignores
		}
		typ := bo.Uint16(e[2:])
		var width uint64
		switch typ {
		case 1:
			width = 1
		case 3:
			width = 2
		case 4:
			width = 4
		default:
			return t, false
		}
		count := uint64(bo.Uint32(e[4:]))
		if count == 0 || count > math.MaxInt32/width {
			return t, false
		}
		var raw []byte
		if dl := width * count; dl <= 4 {
			raw = e[8 : 8+dl]
		} else {
			p := uint64(bo.Uint32(e[8:]))
			if p+dl > size {
				return t, false
			}
			raw = data[p : p+dl]
		}
		v := tiffValues{order: bo, typ: typ, n: int(count), raw: raw}
		first := v.get(0)
		switch tag {
		case tagImageWidth:
			t.width = int(first)
		case tagImageLength:
			t.height = int(first)
		case tagBitsPerSample:
			if count != 1 || (first != 8 && first != 16) {
				return t, false
			}
			t.bits, haveBits = int(first), true
		case tagCompression:
			compression = first
		case tagPhotometricInterpretation:
			photometric = first
		case tagStripOffsets:
			t.offsets, haveOffsets = v, true
		case tagStripByteCounts:
			t.counts, haveCounts = v, true
		case tagRowsPerStrip:
			t.rowsPerStrip = int(first)
		case tagSamplesPerPixel, tagPlanarConfiguration, tagPredictor:
			if count != 1 || first != 1 {
				return t, false
			}
		case tagSampleFormat:
			for i := 0; i < v.n; i++ {
				if v.get(i) != 1 {
					return t, false
				}
			}
		case tagTileWidth:
			t.tiled, t.tileWidth = true, int(first)
		case tagTileLength:
			t.tileLength, haveTileLength = int(first), true
		case tagTileOffsets:
			t.tileOffsets, haveTileOffsets = v, true
		case tagTileByteCounts:
			t.tileCounts, haveTileCounts = v, true
		case tagColorMap:
			return t, false
		}
	}
	// Width and height are LONG or SHORT values, below 2^32.
	if !haveBits || t.width <= 0 || t.height <= 0 || compression > 1 || photometric > 1 {
		return t, false
	}
	if t.tiled {
		// x/image/tiff refuses tiles below 8 x 8 and reads a TileWidth
		// of 0 as strips: left to it, like huge tiles (bounding them
		// keeps the arithmetic below far from overflow) and 8-bit
		// images with partial tiles at the right edge, whose padding
		// x/image/tiff does not skip.
		if !haveTileLength || !haveTileOffsets || !haveTileCounts ||
			t.tileWidth < 8 || t.tileLength < 8 || t.tileWidth > 1<<16 || t.tileLength > 1<<16 ||
			(t.bits == 8 && t.width%t.tileWidth != 0) {
			return t, false
		}
	} else if !haveOffsets || !haveCounts {
		return t, false
	}
	// A missing PhotometricInterpretation reads as 0 (WhiteIsZero), as in
	// x/image/tiff.
	t.invert = photometric == 0
	return t, true
}

// decodeFastTIFF decodes data, the whole content of a TIFF file, when it
// is a file the fast path handles (ok true); the error is then that of the
// size check (see checkTileConfig), the one the x/image/tiff path gives
// too. For other files ok is false: decode them with x/image/tiff.
func decodeFastTIFF(data []byte, maxPixels int64) (img *image.Gray16, ok bool, err error) {
	t, ok := parseFastTIFF(data)
	if !ok {
		return nil, false, nil
	}
	cfg := image.Config{ColorModel: color.Gray16Model, Width: t.width, Height: t.height}
	if t.bits == 8 {
		cfg.ColorModel = color.GrayModel
	}
	if err := checkTileConfig(cfg, maxPixels); err != nil {
		return nil, true, err
	}
	// Width and height are below 2^32: the product does not overflow.
	if uint64(t.width)*uint64(t.height) > math.MaxInt/4 {
		return nil, false, nil
	}
	// The image is read in blocks: strips of the full width, or tiles.
	bpp := t.bits / 8
	bw, bh := t.width, t.height
	offsets, counts := t.offsets, t.counts
	if t.tiled {
		bw, bh = t.tileWidth, t.tileLength
		offsets, counts = t.tileOffsets, t.tileCounts
	} else if t.rowsPerStrip > 0 && t.rowsPerStrip < bh {
		bh = t.rowsPerStrip
	}
	across, down := (t.width+bw-1)/bw, (t.height+bh-1)/bh
	if offsets.n/across < down || counts.n/across < down {
		return nil, false, nil
	}
	// Rows of a block follow each other bw pixels apart: strips and
	// tiles are padded to whole tiles on the right (8-bit images with
	// partial tiles there are not taken).
	stride := bw * bpp
	// Every block must lie inside the file and hold the pixels
	// x/image/tiff reads from it; checked before the image is allocated.
	size := uint64(len(data))
	for k := 0; k < across*down; k++ {
		cols := min(bw, t.width-k%across*bw)
		rows := min(bh, t.height-k/across*bh)
		off, n := offsets.get(k), counts.get(k)
		if need := uint64((rows-1)*stride + cols*bpp); off+n > size || n < need {
			return nil, false, nil
		}
	}
	img = image.NewGray16(image.Rect(0, 0, t.width, t.height))
	for k := 0; k < across*down; k++ {
		x0, y0 := k%across*bw, k/across*bh
		cols := min(bw, t.width-x0)
		rows := min(bh, t.height-y0)
		src := data[int(offsets.get(k)):]
		if cols == t.width && cols == bw {
			// Whole unpadded rows: one run of pixels.
			src = src[:rows*stride]
			dst := img.Pix[y0*img.Stride : (y0+rows)*img.Stride]
			t.convert(dst, src)
			continue
		}
		for y := 0; y < rows; y++ {
			o := (y0+y)*img.Stride + 2*x0
			t.convert(img.Pix[o:o+2*cols], src[y*stride:y*stride+cols*bpp])
		}
	}
	return img, true, nil
}

// convert writes the pixels of src, a run of t's pixels, big-endian into
// dst.
func (t *fastTIFF) convert(dst, src []byte) {
	switch {
	case t.bits == 8:
		widen8(dst, src, t.invert)
	case t.order == binary.ByteOrder(binary.BigEndian):
		copy16(dst, src, t.invert)
	default:
		swap16(dst, src, t.invert)
	}
}

// widen8 writes the 8-bit pixels of src as big-endian 16-bit values into
// dst (len(dst) == 2*len(src)): high byte 0, low byte the value (inverted
// when invert), as toGray16 converts x/image/tiff's 8-bit images.
func widen8(dst, src []byte, invert bool) {
	var m byte
	if invert {
		m = 0xff
	}
	dst = dst[:2*len(src)]
	for i, v := range src {
		d := dst[2*i : 2*i+2 : 2*i+2]
		d[0] = 0
		d[1] = v ^ m
	}
}

// copy16 copies big-endian 16-bit pixels (inverted when invert).
func copy16(dst, src []byte, invert bool) {
	copy(dst, src)
	if !invert {
		return
	}
	dst = dst[:len(src)]
	n := len(dst) &^ 7
	for i := 0; i < n; i += 8 {
		d := dst[i : i+8 : i+8]
		binary.LittleEndian.PutUint64(d, ^binary.LittleEndian.Uint64(d))
	}
	for i := n; i < len(dst); i++ {
		dst[i] = ^dst[i]
	}
}

// swap16 writes the little-endian 16-bit pixels of src big-endian into dst
// (inverted when invert), eight bytes at a time.
func swap16(dst, src []byte, invert bool) {
	var m uint64
	if invert {
		m = math.MaxUint64
	}
	dst = dst[:len(src)]
	n := len(src) &^ 7
	for i := 0; i < n; i += 8 {
		v := binary.LittleEndian.Uint64(src[i : i+8 : i+8])
		v = (v>>8)&0x00ff00ff00ff00ff | (v&0x00ff00ff00ff00ff)<<8
		binary.LittleEndian.PutUint64(dst[i:i+8:i+8], v^m)
	}
	for i := n; i+1 < len(src); i += 2 {
		dst[i], dst[i+1] = src[i+1]^byte(m), src[i]^byte(m)
	}
}

// decodeTileBytes is [DecodeTileLimit] for a file read whole into data:
// the fast path where it applies, DecodeTileLimit otherwise.
func decodeTileBytes(data []byte, maxPixels int64) (img *image.Gray16, err error) {
	if sniff(data) == formatTIFF {
		img, ok, err := decodeFastTIFFSafe(data, maxPixels)
		if ok {
			return img, err
		}
	}
	return DecodeTileLimit(bytes.NewReader(data), maxPixels)
}

// decodeFastTIFFSafe is decodeFastTIFF turning a panic (a bug: the fast
// path checks its input) into an error, as DecodeTileLimit does for the
// image decoders.
func decodeFastTIFFSafe(data []byte, maxPixels int64) (img *image.Gray16, ok bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			img, ok, err = nil, true, fmt.Errorf("corrupt or unreadable image: decoder failed: %v", p)
		}
	}()
	return decodeFastTIFF(data, maxPixels)
}
