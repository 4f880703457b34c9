package pathology

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestWatershedKernelsOrderFree runs Watershed's GPU relaxations (the Go
// mirrors' steps, refWSDistStep's and refWSStep) in the orders a GPU may
// take: tiles in any order, each tile's pixels swept in a random order,
// and in half the sweeps every pixel reading the tile as it was when the
// sweep began (threads that all read before any writes), then checks
// that the output is the CPU's. The kernels rely on this: D only falls
// and C and F are written once, so no order changes the result.
func TestWatershedKernelsOrderFree(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	cases := maskCases(false)
	for k, c := range cases {
		w, h, n := c.w, c.h, c.w*c.h
		dist := make([]uint16, n)
		preWatershed(c.in, dist, w, h)
		if k%2 == 1 {
			for i := range dist {
				dist[i] = uint16(r.IntN(6))
			}
		}
		want := make([]uint16, n)
		watershed(dist, c.in, want, w, h)
		f, J := make([]uint16, n), make([]uint16, n)
		C, D, F := make([]int32, n), make([]int32, n), make([]int32, n)
		refWSInit(dist, c.in, f, J)
		for refReconStep(J, f, w, h, 8) {
		}
		refWSMarkers(f, J, C)
		refLabMerge(C, w, h, true)
		refLabFlatten(C)
		refWSDistInit(f, C, D, w, h)
		for shuffledTiles(r, w, h, wsLoad(f, D, nil, nil, w, h), wsStore(D, nil, nil, w, h), wsDistStep) {
		}
		refWSLabInit(f, C, F)
		for shuffledTiles(r, w, h, wsLoad(f, D, C, F, w, h), wsStore(nil, C, F, w, h), refWSStep) {
		}
		got := make([]uint16, n)
		refWSFinal(F, got)
		if !slices.Equal(got, want) {
			t.Errorf("%s %dx%d (rough %v): %s", c.name, w, h, k%2 == 1, firstDiffs(bytesOf(want), bytesOf(got), 2, w))
		}
	}
}

// shuffledTiles is refWSTiles in a random order of tiles and pixels, half
// its sweeps reading the tile as it was when the sweep began.
func shuffledTiles(r *rand.Rand, w, h int, load, store func(s *wsTile, x0, y0 int), step func(s *wsTile, k int) bool) bool {
	const t = reconTile
	var tiles [][2]int
	for y0 := 0; y0 < h; y0 += t {
		for x0 := 0; x0 < w; x0 += t {
			tiles = append(tiles, [2]int{x0, y0})
		}
	}
	r.Shuffle(len(tiles), func(i, j int) { tiles[i], tiles[j] = tiles[j], tiles[i] })
	order := make([]int, t*t)
	for k := range order {
		order[k] = (k/t+1)*(t+2) + k%t + 1
	}
	var s wsTile
	changed := false
	for _, tl := range tiles {
		load(&s, tl[0], tl[1])
		tileChanged := false
		for {
			r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			again := false
			if r.IntN(2) == 0 { // in place, one pixel after another
				for _, k := range order {
					again = step(&s, k) || again
				}
			} else { // every pixel reads the tile as it was
				snap := s
				for _, k := range order {
					c, fl, d := snap.c[k], snap.fl[k], snap.d[k]
					if step(&snap, k) {
						again = true
						s.c[k], s.fl[k], s.d[k] = snap.c[k], snap.fl[k], snap.d[k]
					}
					snap.c[k], snap.fl[k], snap.d[k] = c, fl, d
				}
			}
			if !again {
				break
			}
			tileChanged = true
		}
		if tileChanged {
			store(&s, tl[0], tl[1])
			changed = true
		}
	}
	return changed
}
