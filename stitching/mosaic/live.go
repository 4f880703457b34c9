package mosaic

import (
	"fmt"
	"image"
	"slices"

	"github.com/gohtgs/htgs/stitching/tileio"
)

// LivePreview draws the preview of a mosaic as it fills in, from the
// provisional positions of a live stitch: each placed tile reduced (box
// mean) once, when it is first placed, and drawn at its position over the
// tiles before it in row-major order. The 16-bit values are mapped to 8
// bits over the range of the first tile drawn (its 0.5th to 99.5th
// percentile). It is not safe for concurrent use.
type LivePreview struct {
	src    tileio.TileSource
	f      int
	thumbs map[int]*image.Gray // row-major index -> reduced tile
	lo, hi float64
	ranged bool
}

// NewLivePreview returns the preview of a rows x cols grid of w x h
// tiles loaded from src, reduced so that the grid laid side by side fits
// in PreviewSide pixels.
func NewLivePreview(src tileio.TileSource, rows, cols, w, h int) *LivePreview {
	f := max(1, (max(cols*w, rows*h)+PreviewSide-1)/PreviewSide)
	return &LivePreview{src: src, f: f, thumbs: map[int]*image.Gray{}}
}

// Draw returns the preview of the tiles at pos (global positions of a
// grid of w x h tiles), nil when pos is empty. It loads each tile of pos
// the first time it is drawn.
func (p *LivePreview) Draw(pos []tileio.GlobalPosition, w, h int) (*image.Gray, error) {
	if len(pos) == 0 {
		return nil, nil
	}
	tw, th := max(1, w/p.f), max(1, h/p.f)
	cols := p.src.Cols()
	W, H := 0, 0
	for _, q := range pos {
		W, H = max(W, q.X/p.f+tw), max(H, q.Y/p.f+th)
		i := q.Row*cols + q.Col
		if p.thumbs[i] != nil {
			continue
		}
		t, err := p.src.Load(q.Row, q.Col)
		if err != nil {
			return nil, fmt.Errorf("preview: %w", err)
		}
		if !p.ranged {
			p.lo, p.hi = valueRange(t)
			p.ranged = true
		}
		p.thumbs[i] = p.reduce(t, tw, th)
	}
	out := image.NewGray(image.Rect(0, 0, W, H))
	order := slices.Clone(pos)
	slices.SortFunc(order, func(a, b tileio.GlobalPosition) int { return (a.Row*cols + a.Col) - (b.Row*cols + b.Col) })
	for _, q := range order {
		t := p.thumbs[q.Row*cols+q.Col]
		x0, y0 := q.X/p.f, q.Y/p.f
		for y := range th {
			copy(out.Pix[(y0+y)*out.Stride+x0:(y0+y)*out.Stride+x0+tw], t.Pix[y*t.Stride:y*t.Stride+tw])
		}
	}
	return out, nil
}

// reduce is t reduced to tw x th by the mean of f x f boxes, mapped to 8
// bits over [lo, hi].
func (p *LivePreview) reduce(t *image.Gray16, tw, th int) *image.Gray {
	out := image.NewGray(image.Rect(0, 0, tw, th))
	scale := 255 / max(p.hi-p.lo, 1)
	for y := range th {
		for x := range tw {
			sum, n := 0.0, 0
			for yy := y * p.f; yy < min((y+1)*p.f, t.Rect.Dy()); yy++ {
				row := t.Pix[yy*t.Stride:]
				for xx := x * p.f; xx < min((x+1)*p.f, t.Rect.Dx()); xx++ {
					sum += float64(uint16(row[2*xx])<<8 | uint16(row[2*xx+1]))
					n++
				}
			}
			v := (sum/float64(max(n, 1)) - p.lo) * scale
			out.Pix[y*out.Stride+x] = uint8(min(255, max(0, v+0.5)))
		}
	}
	return out
}

// valueRange is the 0.5th and 99.5th percentiles of t's values.
func valueRange(t *image.Gray16) (lo, hi float64) {
	var hist [1 << 16]int
	n := 0
	for y := range t.Rect.Dy() {
		row := t.Pix[y*t.Stride:]
		for x := range t.Rect.Dx() {
			hist[uint16(row[2*x])<<8|uint16(row[2*x+1])]++
			n++
		}
	}
	at := func(q float64) float64 {
		k, c := int(q*float64(n)), 0
		for v, m := range hist {
			if c += m; c > k {
				return float64(v)
			}
		}
		return 65535
	}
	return at(0.005), at(0.995)
}
