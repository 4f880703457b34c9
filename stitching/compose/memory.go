package compose

import (
	"math"
	"runtime"
)

// MemoryEstimate returns about how many bytes [ComposeFunc] needs for
// slots in the given mode, so that a program can refuse a mosaic that
// cannot fit before composing it: the mosaic (2 bytes per pixel), the
// tiles loaded at once (those meeting a band of 256 mosaic rows, 2 bytes
// per pixel each) and, for Average and Linear, 16 bytes per mosaic column
// per worker. Slots that ComposeFunc would refuse (negative positions,
// empty tiles) are counted as they are; the result saturates at
// math.MaxInt64.
func MemoryEstimate(slots []Slot, mode Blend) int64 {
	mw, mh := 0.0, 0.0
	for _, s := range slots {
		mw = max(mw, float64(s.X)+float64(s.Width))
		mh = max(mh, float64(s.Y)+float64(s.Height))
	}
	if mw <= 0 || mh <= 0 {
		return 0
	}
	total := 2 * mw * mh
	// Tile i is loaded for the band holding its top row and released after
	// the band holding its bottom row.
	if bands := math.Ceil(mh / bandHeight); bands <= 1<<24 {
		diff := make([]float64, int(bands)+1)
		for _, s := range slots {
			if s.Width <= 0 || s.Height <= 0 || s.Y < 0 {
				continue
			}
			first := s.Y / bandHeight
			last := (s.Y + s.Height - 1) / bandHeight
			b := 2 * float64(s.Width) * float64(s.Height)
			diff[first] += b
			diff[last+1] -= b
		}
		live, peak := 0.0, 0.0
		for _, d := range diff {
			live += d
			peak = max(peak, live)
		}
		total += peak
	} else {
		for _, s := range slots {
			total += 2 * float64(s.Width) * float64(s.Height)
		}
	}
	if mode != Overlay {
		total += 16 * mw * float64(max(1, runtime.GOMAXPROCS(0)))
	}
	total += 8 * float64(len(slots))
	if total >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(total)
}
