package compose

import (
	"bytes"
	"image"
	"image/color"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/disintegration/imaging"
)

// randomGray is a w x h gray image of smooth random content with some
// sharp edges (the kind of picture a preview resizes).
func randomGray(r *rand.Rand, w, h int) *image.Gray {
	img := image.NewGray(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			v := 128 + 100*math.Sin(float64(x)/7+float64(y)/11)
			if (x/13+y/17)%5 == 0 {
				v = float64(r.IntN(256))
			}
			img.Pix[y*img.Stride+x] = uint8(max(0, min(255, v)))
		}
	}
	return img
}

// The gray resize gives imaging's bytes, shrinking or enlarging either
// side, or neither.
func TestResizeGrayEqualsImaging(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 7))
	sizes := [][4]int{
		{2339, 1325, 2000, 1133}, {1169, 663, 1000, 567}, {640, 480, 500, 375}, {300, 200, 300, 150},
		{300, 200, 250, 200}, {100, 80, 100, 80}, {50, 40, 70, 90}, {1, 1, 3, 2}, {9, 3, 1, 1}, {7, 300, 2, 250},
	}
	for range 6 {
		sizes = append(sizes, [4]int{1 + r.IntN(400), 1 + r.IntN(400), 1 + r.IntN(300), 1 + r.IntN(300)})
	}
	for _, s := range sizes {
		img := randomGray(r, s[0], s[1])
		got := resizeGray(img, s[2], s[3])
		want := redChannel(imaging.Resize(img, s[2], s[3], imaging.Lanczos), s[2], s[3])
		if got.Rect != want.Rect || !bytes.Equal(got.Pix, want.Pix) {
			diff := 0
			for i := range got.Pix {
				if i < len(want.Pix) && got.Pix[i] != want.Pix[i] {
					diff++
				}
			}
			t.Errorf("%d x %d to %d x %d: %v, %d bytes differ from imaging's %v", s[0], s[1], s[2], s[3], got.Rect, diff, want.Rect)
		}
	}
}

// previewReference is Preview as it was before the gray resize and the
// box reduction's shortcut for a factor of 1: the general box reduction
// and imaging's resize.
func previewReference(img *image.Gray16, maxSide int) *image.Gray {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	tw, th := w, h
	if side := max(w, h); maxSide > 0 && side > maxSide {
		tw = max(1, int(math.Round(float64(w)*float64(maxSide)/float64(side))))
		th = max(1, int(math.Round(float64(h)*float64(maxSide)/float64(side))))
	}
	f := max(1, int(float64(max(w, h))/(1.25*float64(max(tw, th)))))
	rw, rh := (w+f-1)/f, (h+f-1)/f
	red := make([]float64, rw*rh)
	cnt := make([]float64, rw)
	for y := range h {
		row := red[(y/f)*rw : (y/f+1)*rw]
		off := img.PixOffset(b.Min.X, b.Min.Y+y)
		for x := range w {
			row[x/f] += float64(uint16(img.Pix[off+2*x])<<8 | uint16(img.Pix[off+2*x+1]))
		}
		if y%f == f-1 || y == h-1 {
			for rx := range rw {
				cnt[rx] = float64(min(f, w-rx*f)) * float64(y%f+1)
			}
			for rx := range row {
				row[rx] /= cnt[rx]
			}
		}
	}
	lo, hi := percentiles(red, 0.005, 0.995)
	small := image.NewGray(image.Rect(0, 0, rw, rh))
	scale := 255 / math.Max(hi-lo, 1e-9)
	for i, v := range red {
		s := (v - lo) * scale
		switch {
		case s <= 0:
			small.Pix[i] = 0
		case s >= 255:
			small.Pix[i] = 255
		default:
			small.Pix[i] = uint8(s + 0.5)
		}
	}
	if rw == tw && rh == th {
		return small
	}
	return redChannel(imaging.Resize(small, tw, th, imaging.Lanczos), tw, th)
}

// Preview's bytes are those of the general box reduction and imaging's
// resize, for a box factor of 1 (the 2339-pixel level of a mosaic) and
// more, and for an image already small enough.
func TestPreviewEqualsReference(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for _, s := range [][3]int{{2339, 1325, 2000}, {620, 410, 500}, {1400, 900, 500}, {3000, 200, 1000}, {333, 777, 2000}, {90, 60, 40}} {
		img := image.NewGray16(image.Rect(0, 0, s[0], s[1]))
		for y := range s[1] {
			for x := range s[0] {
				v := 20000 + 15000*math.Sin(float64(x)/23)*math.Cos(float64(y)/31) + float64(r.IntN(2000))
				if x < s[0]/10 && y < s[1]/10 {
					v = 0 // uncovered
				}
				img.SetGray16(x, y, color.Gray16{Y: uint16(v)})
			}
		}
		got, want := Preview(img, s[2]), previewReference(img, s[2])
		if got.Rect != want.Rect || !bytes.Equal(got.Pix, want.Pix) {
			t.Errorf("%d x %d to %d: preview %v differs from the reference's %v", s[0], s[1], s[2], got.Rect, want.Rect)
		}
	}
}

// BenchmarkPreviewResize compares, on the 2339 x 1325 level a 6 x 8
// grid's mosaic previews from, the gray resize with imaging's, the two
// interleaved in each iteration (metrics gray-ms and imaging-ms, means).
//
//	go test -run '^$' -bench PreviewResize -benchtime 10x ./stitching/compose
func BenchmarkPreviewResize(b *testing.B) {
	img := randomGray(rand.New(rand.NewPCG(1, 2)), 2339, 1325)
	var gray, ref time.Duration
	for b.Loop() {
		t0 := time.Now()
		resizeGray(img, 2000, 1133)
		t1 := time.Now()
		imaging.Resize(img, 2000, 1133, imaging.Lanczos)
		gray, ref = gray+t1.Sub(t0), ref+time.Since(t1)
	}
	b.ReportMetric(float64(gray.Microseconds())/1000/float64(b.N), "gray-ms")
	b.ReportMetric(float64(ref.Microseconds())/1000/float64(b.N), "imaging-ms")
}

// BenchmarkPreview is Preview of the 2339 x 1325 pyramid level a 6 x 8
// grid's out-of-core mosaic previews from (a box factor of 1).
//
//	go test -run '^$' -bench 'Preview$' -benchtime 10x ./stitching/compose
func BenchmarkPreview(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 3))
	img := image.NewGray16(image.Rect(0, 0, 2339, 1325))
	for i := range img.Pix {
		img.Pix[i] = byte(r.IntN(256))
	}
	for b.Loop() {
		Preview(img, 2000)
	}
}
