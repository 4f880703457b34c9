package compose

import (
	"fmt"
	"image"
	"image/png"
	"io"
	"math"

	"golang.org/x/image/tiff"

	"github.com/gohtgs/htgs/internal/outfile"
)

// maxTIFFBytes is the largest pixel payload a classic (32-bit offset) TIFF
// file can hold, less room for the header and directory.
const maxTIFFBytes = math.MaxUint32 - 1<<16

// MaxClassicTIFFSide is the longest side EncodeTIFF writes. The encoder
// (golang.org/x/image/tiff) records ImageWidth, ImageLength and
// RowsPerStrip as 16-bit SHORTs, so a longer side would be stored modulo
// 65536: a file that lies about its size. Larger mosaics go to the tiled
// BigTIFF writer (package tiled).
const MaxClassicTIFFSide = math.MaxUint16

// WriteTIFF writes img to path as an uncompressed 16-bit grayscale TIFF
// (see [EncodeTIFF]). The file is written atomically: the data goes to a
// temporary file in the same folder, renamed onto path only when complete,
// so path keeps its old content if anything fails and readers never see a
// partial file.
func WriteTIFF(path string, img *image.Gray16) error {
	if err := checkTIFF(img); err != nil {
		return err
	}
	return writeFile(path, func(w io.Writer) error { return EncodeTIFF(w, img) })
}

// EncodeTIFF writes img to w as an uncompressed 16-bit grayscale TIFF.
// Classic TIFF cannot hold more than 4 GiB, so images above about 2.1
// gigapixels, and images with a side over [MaxClassicTIFFSide], are
// refused with an error instead of producing a corrupt file.
func EncodeTIFF(w io.Writer, img *image.Gray16) error {
	if err := checkTIFF(img); err != nil {
		return err
	}
	return tiff.Encode(w, img, &tiff.Options{Compression: tiff.Uncompressed})
}

func checkTIFF(img *image.Gray16) error {
	b := img.Bounds()
	if b.Dx() > MaxClassicTIFFSide || b.Dy() > MaxClassicTIFFSide {
		return fmt.Errorf("compose: %d x %d image: a classic TIFF records sides of at most %d px (write it as a tiled BigTIFF, package tiled)", b.Dx(), b.Dy(), MaxClassicTIFFSide)
	}
	if n := int64(b.Dx()) * int64(b.Dy()) * 2; n > maxTIFFBytes {
		return fmt.Errorf("compose: %d x %d image (%d bytes) exceeds the 4 GiB limit of classic TIFF", b.Dx(), b.Dy(), n)
	}
	return nil
}

// WritePNG writes img to path as a PNG file, atomically like [WriteTIFF].
func WritePNG(path string, img image.Image) error {
	return writeFile(path, func(w io.Writer) error { return png.Encode(w, img) })
}

// writeFile writes path atomically with encode (see outfile.WriteFile).
func writeFile(path string, encode func(io.Writer) error) error {
	if err := outfile.WriteFile(path, encode); err != nil {
		return fmt.Errorf("compose: %w", err)
	}
	return nil
}

// Preview returns an 8-bit view of img whose longer side is at most maxSide
// (no downscaling when maxSide <= 0 or the image is already small enough),
// keeping the aspect ratio. The image is first box-averaged by an integer
// factor to between 1.25 and 2.5 times the target size (cheap, and memory
// stays small for huge mosaics), then contrast-stretched so that the 0.5 and 99.5
// percentiles of the non-zero pixels (zero marks uncovered mosaic area) map
// to 0 and 255, and finally resized with a Lanczos filter (disintegration/
// imaging).
func Preview(img *image.Gray16, maxSide int) *image.Gray {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	if w <= 0 || h <= 0 {
		return image.NewGray(image.Rect(0, 0, 0, 0))
	}
	tw, th := w, h
	if side := max(w, h); maxSide > 0 && side > maxSide {
		tw = max(1, int(math.Round(float64(w)*float64(maxSide)/float64(side))))
		th = max(1, int(math.Round(float64(h)*float64(maxSide)/float64(side))))
	}
	// Box-reduce by an integer factor, leaving at least 1.25 times the
	// target size for the final Lanczos resize.
	f := max(1, int(float64(max(w, h))/(1.25*float64(max(tw, th)))))
	rw, rh := (w+f-1)/f, (h+f-1)/f
	var small *image.Gray
	if f == 1 {
		small = stretch16(img)
	} else {
		red := boxReduce(img, f, rw, rh)
		lo, hi := percentiles(red, 0.005, 0.995)
		small = image.NewGray(image.Rect(0, 0, rw, rh))
		scale := 255 / math.Max(hi-lo, 1e-9)
		for i, v := range red {
			small.Pix[i] = stretched(v, lo, scale)
		}
	}
	if rw == tw && rh == th {
		return small
	}
	return resizeGray(small, tw, th)
}

// boxReduce averages f x f blocks of img (partial blocks at the right and
// bottom edges average what they have) into an rw x rh buffer.
func boxReduce(img *image.Gray16, f, rw, rh int) []float64 {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	out := make([]float64, rw*rh)
	cnt := make([]float64, rw)
	for y := range h {
		ry := y / f
		row := out[ry*rw : (ry+1)*rw]
		off := img.PixOffset(b.Min.X, b.Min.Y+y)
		pix := img.Pix[off : off+2*w]
		for x := range w {
			row[x/f] += float64(uint16(pix[2*x])<<8 | uint16(pix[2*x+1]))
		}
		if y%f == f-1 || y == h-1 {
			rows := float64(y%f + 1)
			for rx := range rw {
				cnt[rx] = float64(min(f, w-rx*f)) * rows
			}
			for rx := range row {
				row[rx] /= cnt[rx]
			}
		}
	}
	return out
}

// stretched is the 8-bit value of v contrast-stretched from lo with
// scale (255 over the stretched range).
func stretched(v, lo, scale float64) uint8 {
	s := (v - lo) * scale
	switch {
	case s <= 0:
		return 0
	case s >= 255:
		return 255
	default:
		return uint8(s + 0.5)
	}
}

// stretch16 is Preview's contrast stretch of img without reduction (a box
// factor of 1, the box means being the pixels themselves): the same
// percentiles, on the same histogram, and each pixel stretched as its
// value is, through a table of the 65536 values.
func stretch16(img *image.Gray16) *image.Gray {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	hist := new([65536]int)
	for y := range h {
		off := img.PixOffset(b.Min.X, b.Min.Y+y)
		pix := img.Pix[off : off+2*w]
		for x := range w {
			hist[uint16(pix[2*x])<<8|uint16(pix[2*x+1])]++
		}
	}
	n := w*h - hist[0] // the non-zero pixels, as percentiles counts them
	hist[0] = 0
	lo, hi := histPercentiles(hist, n, 0.005, 0.995)
	scale := 255 / math.Max(hi-lo, 1e-9)
	lut := new([65536]uint8)
	for v := range lut {
		lut[v] = stretched(float64(v), lo, scale)
	}
	out := image.NewGray(image.Rect(0, 0, w, h))
	for y := range h {
		off := img.PixOffset(b.Min.X, b.Min.Y+y)
		pix := img.Pix[off : off+2*w]
		row := out.Pix[y*out.Stride : y*out.Stride+w]
		for x := range row {
			row[x] = lut[uint16(pix[2*x])<<8|uint16(pix[2*x+1])]
		}
	}
	return out
}

// percentiles returns the p and q quantiles of the non-zero values of v (of
// all values when none is non-zero), on a 16-bit histogram.
func percentiles(v []float64, p, q float64) (lo, hi float64) {
	hist := new([65536]int)
	n := 0
	for _, x := range v {
		k := int(x + 0.5)
		if k <= 0 {
			continue
		}
		hist[min(k, 65535)]++
		n++
	}
	return histPercentiles(hist, n, p, q)
}

// histPercentiles returns the p and q quantiles of the n values counted in
// hist (0 and 1 when n is 0).
func histPercentiles(hist *[65536]int, n int, p, q float64) (lo, hi float64) {
	if n == 0 {
		return 0, 1
	}
	find := func(frac float64) float64 {
		target := int(frac * float64(n-1))
		acc := 0
		for k, c := range hist {
			acc += c
			if acc > target {
				return float64(k)
			}
		}
		return 65535
	}
	return find(p), find(q)
}
