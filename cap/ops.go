package cap

import (
	"context"
	"slices"
	"sync"

	"github.com/gohtgs/htgs/tiled"
)

// Median filters src into dst (same size and tiles) with a square
// (2r+1) x (2r+1) median, edge pixels repeated, through Exchange with a
// halo of r. The result equals MedianInMemory on the whole image.
func Median(ctx context.Context, src, dst *tiled.Image, r int, o Options) error {
	g := Exchange(src, dst, r, o, MedianFunc(r))
	if err := Run(ctx, g, src.Tiles()); err != nil {
		return err
	}
	return dst.Flush()
}

// MedianFunc is Median's process function: the (2r+1) x (2r+1) median of
// a tile read with a halo of r, into an output tile of the same size.
func MedianFunc(r int) ProcessFunc {
	return func(_ context.Context, t *Tile, out []uint16) error {
		win := make([]uint16, (2*r+1)*(2*r+1))
		ow := t.Stride - 2*t.Halo
		for y := 0; y < t.H; y++ {
			for x := 0; x < t.W; x++ {
				k := 0
				for dy := -r; dy <= r; dy++ {
					row := t.In[(y+t.Halo+dy)*t.Stride+x+t.Halo-r:]
					for dx := -r; dx <= r; dx++ {
						win[k] = row[dx+r]
						k++
					}
				}
				slices.Sort(win)
				out[y*ow+x] = win[len(win)/2]
			}
		}
		return nil
	}
}

// MedianInMemory is the reference (2r+1) x (2r+1) median of a w x h image
// held in memory, edge pixels repeated.
func MedianInMemory(px []uint16, w, h, r int) []uint16 {
	out := make([]uint16, w*h)
	win := make([]uint16, (2*r+1)*(2*r+1))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			k := 0
			for dy := -r; dy <= r; dy++ {
				for dx := -r; dx <= r; dx++ {
					sx, sy := min(max(x+dx, 0), w-1), min(max(y+dy, 0), h-1)
					win[k] = px[sy*w+sx]
					k++
				}
			}
			slices.Sort(win)
			out[y*w+x] = win[len(win)/2]
		}
	}
	return out
}

// Histogram counts every pixel value of src through Gather: each tile makes
// a partial histogram, merged in one thread.
func Histogram(ctx context.Context, src *tiled.Image, o Options) ([]uint64, error) {
	hist := make([]uint64, 65536)
	g := Gather(src, o, HistogramTile, func(part *[65536]uint64) error {
		MergeHistogram(hist, part)
		return nil
	})
	if err := Run(ctx, g, src.Tiles()); err != nil {
		return nil, err
	}
	return hist, nil
}

// HistogramTile is Histogram's process function: the 65536-bin histogram
// of one tile's pixels, in a partial from a pool that MergeHistogram
// returns it to (so no tile allocates its 512 KB of bins).
func HistogramTile(_ context.Context, t *Tile) (*[65536]uint64, error) {
	part := histPool.Get().(*[65536]uint64) // all zero
	for y := 0; y < t.H; y++ {
		for _, v := range t.In[y*t.Stride : y*t.Stride+t.W] {
			part[v]++
		}
	}
	return part, nil
}

// MergeHistogram adds the partial histogram part to hist (65536 bins),
// zeroes part as it goes and returns it to HistogramTile's pool.
func MergeHistogram(hist []uint64, part *[65536]uint64) {
	hist = hist[:len(part)]
	for i, n := range part {
		if n != 0 {
			hist[i] += n
			part[i] = 0
		}
	}
	histPool.Put(part)
}

var histPool = sync.Pool{New: func() any { return new([65536]uint64) }}

// Percentile is the smallest value v with at least p (0..1) of the
// histogram's counts at or below v.
func Percentile(hist []uint64, p float64) uint16 {
	var total uint64
	for _, n := range hist {
		total += n
	}
	need := uint64(p * float64(total))
	if need == 0 {
		need = 1
	}
	var acc uint64
	for v, n := range hist {
		acc += n
		if acc >= need {
			return uint16(v)
		}
	}
	return 65535
}
