package pathology

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// The segmentation operations are checked against slow references that
// follow their definitions literally, on small random images of every
// shape from 1 x 1 up.

// randomSizes yields (w, h) pairs, small and odd ones included.
func randomSizes(r *rand.Rand, n int) [][2]int {
	out := [][2]int{{1, 1}, {1, 7}, {9, 1}, {2, 2}, {8, 8}, {17, 9}}
	for range n {
		out = append(out, [2]int{1 + r.IntN(45), 1 + r.IntN(45)})
	}
	return out
}

// randomMask returns a mask with about one pixel in den set... or unset,
// with blobs, so that components have holes and necks.
func randomMask(r *rand.Rand, w, h, den int) []uint8 {
	m := make([]uint8, w*h)
	for i := range m {
		if r.IntN(den) != 0 {
			m[i] = 1
		}
	}
	return m
}

// refErode is the erosion by the disk of radius r, pixel by pixel, outside
// pixels ignored.
func refErode(in []uint8, w, h, r int) []uint8 {
	hw := diskHalfWidths(r)
	out := make([]uint8, w*h)
	for y := range h {
		for x := range w {
			m := uint8(255)
			for dy := -r; dy <= r; dy++ {
				for dx := -hw[dy+r]; dx <= hw[dy+r]; dx++ {
					xx, yy := x+dx, y+dy
					if xx >= 0 && yy >= 0 && xx < w && yy < h {
						m = min(m, in[yy*w+xx])
					}
				}
			}
			out[y*w+x] = m
		}
	}
	return out
}

func complement(a []uint8) []uint8 {
	out := make([]uint8, len(a))
	for i, v := range a {
		out[i] = 255 - v
	}
	return out
}

func TestDiskIsOpenCVEllipse(t *testing.T) {
	want := []int{0, 4, 6, 7, 7, 8, 8, 9, 9, 9, 9, 9, 8, 8, 7, 7, 6, 4, 0}
	if got := diskHalfWidths(9); !slices.Equal(got, want) {
		t.Errorf("19x19 disk half-widths %v, want %v", got, want)
	}
}

func TestMorphOpenMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, s := range randomSizes(r, 30) {
		w, h := s[0], s[1]
		rgb := make([]uint8, 3*w*h)
		for i := range rgb {
			rgb[i] = uint8(r.IntN(256))
			if r.IntN(3) == 0 {
				rgb[i] = 255 // plateaus and extreme values
			}
		}
		dark := make([]uint8, w*h)
		darkness(rgb, dark, w*h)
		for i := range dark {
			if want := uint8(255 - (int(rgb[i])+int(rgb[w*h+i])+int(rgb[2*w*h+i]))/3); dark[i] != want {
				t.Fatalf("darkness %d, want %d", dark[i], want)
			}
		}
		want := complement(refErode(complement(refErode(dark, w, h, openDiskRadius)), w, h, openDiskRadius))
		got := make([]uint8, w*h)
		morphOpen(rgb, got, w, h)
		if !slices.Equal(got, want) {
			t.Fatalf("%dx%d: opening by the 19x19 disk differs from the reference:\n got %v\nwant %v", w, h, got, want)
		}
		for _, rad := range []int{0, 1, 3, 15} {
			e, err := newDiskFilter(w, h, rad)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]uint8, w*h)
			e.erode(dark, got)
			if want := refErode(dark, w, h, rad); !slices.Equal(got, want) {
				t.Fatalf("%dx%d: erosion by the disk of radius %d differs", w, h, rad)
			}
			e.dilate(dark, got)
			if want := complement(refErode(complement(dark), w, h, rad)); !slices.Equal(got, want) {
				t.Fatalf("%dx%d: dilation by the disk of radius %d differs", w, h, rad)
			}
		}
	}
	if _, err := newDiskFilter(4, 4, 16); err == nil {
		t.Error("radius 16 accepted")
	}
}

// refReconstruct iterates the geodesic dilation (3x3 square, clipped by
// mask) until nothing changes.
func refReconstruct[T uint8 | uint16](marker, mask []T, w, h int) []T {
	j := make([]T, w*h)
	for i := range j {
		j[i] = min(marker[i], mask[i])
	}
	for changed := true; changed; {
		changed = false
		next := slices.Clone(j)
		for y := range h {
			for x := range w {
				v := j[y*w+x]
				for dy := -1; dy <= 1; dy++ {
					for dx := -1; dx <= 1; dx++ {
						xx, yy := x+dx, y+dy
						if xx >= 0 && yy >= 0 && xx < w && yy < h {
							v = max(v, j[yy*w+xx])
						}
					}
				}
				v = min(v, mask[y*w+x])
				if v != next[y*w+x] {
					next[y*w+x], changed = v, true
				}
			}
		}
		j = next
	}
	return j
}

func TestReconstructMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, s := range randomSizes(r, 40) {
		w, h := s[0], s[1]
		mask, marker := make([]uint16, w*h), make([]uint16, w*h)
		levels := 1 + r.IntN(300)
		for i := range mask {
			mask[i] = uint16(r.IntN(levels))
			if r.IntN(20) == 0 {
				marker[i] = uint16(r.IntN(levels))
			}
		}
		got := make([]uint16, w*h)
		reconstruct(marker, mask, got, w, h)
		if want := refReconstruct(marker, mask, w, h); !slices.Equal(got, want) {
			t.Fatalf("%dx%d: reconstruction differs:\n got %v\nwant %v", w, h, got, want)
		}
		m8, k8 := make([]uint8, w*h), make([]uint8, w*h)
		for i := range m8 {
			m8[i], k8[i] = uint8(mask[i]), uint8(marker[i])
		}
		got8 := make([]uint8, w*h)
		reconstruct(k8, m8, got8, w, h)
		if want := refReconstruct(k8, m8, w, h); !slices.Equal(got8, want) {
			t.Fatalf("%dx%d: 8-bit reconstruction differs", w, h)
		}
	}
}

// refComponents labels the components of mask by breadth-first search in
// raster order.
func refComponents[T uint8 | uint16](mask []T, w, h int, eight bool) ([]int32, int) {
	lab := make([]int32, w*h)
	n := int32(0)
	for s := range lab {
		if mask[s] == 0 || lab[s] != 0 {
			continue
		}
		n++
		lab[s] = n
		queue := []int{s}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			x, y := p%w, p/w
			for dy := -1; dy <= 1; dy++ {
				for dx := -1; dx <= 1; dx++ {
					if (dx != 0 && dy != 0 && !eight) || (dx == 0 && dy == 0) {
						continue
					}
					xx, yy := x+dx, y+dy
					if xx >= 0 && yy >= 0 && xx < w && yy < h && mask[yy*w+xx] != 0 && lab[yy*w+xx] == 0 {
						lab[yy*w+xx] = n
						queue = append(queue, yy*w+xx)
					}
				}
			}
		}
	}
	return lab, int(n)
}

func TestLabellingMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var l labeller
	for _, s := range randomSizes(r, 60) {
		w, h := s[0], s[1]
		mask := randomMask(r, w, h, 2+r.IntN(3))
		for _, eight := range []bool{false, true} {
			got := make([]int32, w*h)
			n := label(&l, mask, got, w, h, eight)
			want, wn := refComponents(mask, w, h, eight)
			if n != wn || !slices.Equal(got, want) {
				t.Fatalf("%dx%d eight=%v: %d labels %v, want %d %v", w, h, eight, n, got, wn, want)
			}
		}
		m16 := make([]uint16, w*h)
		for i, v := range mask {
			m16[i] = uint16(v)
		}
		labels := make([]uint16, w*h)
		n := bwLabel(m16, labels, w, h)
		want, wn := refComponents(mask, w, h, false)
		for i := range want {
			if int32(labels[i]) != want[i] {
				t.Fatalf("%dx%d: bwLabel %v, want %v", w, h, labels, want)
			}
		}
		if n != wn {
			t.Fatalf("%dx%d: bwLabel found %d, want %d", w, h, n, wn)
		}
	}
}

func TestAreaThresholdMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, s := range randomSizes(r, 40) {
		w, h := s[0], s[1]
		mask := randomMask(r, w, h, 2+r.IntN(2))
		lab, n := refComponents(mask, w, h, true)
		area := make([]int, n+1)
		for _, v := range lab {
			area[v]++
		}
		want := make([]uint8, w*h)
		for i, v := range lab {
			if v != 0 && area[v] >= minNucleusArea {
				want[i] = 1
			}
		}
		got := make([]uint8, w*h)
		areaThreshold(mask, got, w, h)
		if !slices.Equal(got, want) {
			t.Fatalf("%dx%d: area threshold %v, want %v", w, h, got, want)
		}
	}
}

func TestFillHolesMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, s := range randomSizes(r, 60) {
		w, h := s[0], s[1]
		mask := randomMask(r, w, h, 2+r.IntN(4))
		// The outside: background 4-components touching the border.
		bgMask := make([]uint8, w*h)
		for i, v := range mask {
			bgMask[i] = 1 - v
		}
		lab, n := refComponents(bgMask, w, h, false)
		border := make([]bool, n+1)
		for y := range h {
			for x := range w {
				if x == 0 || y == 0 || x == w-1 || y == h-1 {
					border[lab[y*w+x]] = true
				}
			}
		}
		want := make([]uint8, w*h)
		for i, v := range lab {
			if v == 0 || !border[v] {
				want[i] = 1
			}
		}
		got := make([]uint8, w*h)
		fillHoles(mask, got, w, h)
		if !slices.Equal(got, want) {
			t.Fatalf("%dx%d: filled %v, want %v", w, h, got, want)
		}
	}
}

// refDistance is the Euclidean distance to the nearest zero pixel by
// exhaustive search, in eighths of a pixel.
func refDistance(mask []uint8, w, h int) []uint16 {
	out := make([]uint16, w*h)
	for p := range out {
		if mask[p] == 0 {
			continue
		}
		best := -1
		for q, v := range mask {
			if v == 0 {
				dx, dy := p%w-q%w, p/w-q/w
				if d := dx*dx + dy*dy; best < 0 || d < best {
					best = d
				}
			}
		}
		if best < 0 {
			out[p] = distSat
		} else {
			out[p] = uint16(math.Round(distScale * math.Sqrt(float64(best))))
		}
	}
	return out
}

func TestPreWatershedMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	sizes := append(randomSizes(r, 30), [2]int{70, 3}, [2]int{3, 70})
	for _, s := range sizes {
		w, h := s[0], s[1]
		mask := randomMask(r, w, h, 1+r.IntN(12))
		want := refDistance(mask, w, h)
		got := make([]uint16, w*h)
		distanceTransform(mask, got, w, h)
		if !slices.Equal(got, want) {
			t.Fatalf("%dx%d: distance %v, want %v", w, h, got, want)
		}
		lower := make([]uint16, w*h)
		for i, d := range want {
			lower[i] = d - min(d, hMaxHeight)
		}
		wantH := refReconstruct(lower, want, w, h)
		preWatershed(mask, got, w, h)
		if !slices.Equal(got, wantH) {
			t.Fatalf("%dx%d: h-maxima of the distance %v, want %v", w, h, got, wantH)
		}
	}
}

// refMaxima marks the 8-connected plateaus of f > 0 with no higher
// neighbour.
func refMaxima(f []uint16, w, h int) []uint8 {
	out := make([]uint8, w*h)
	seen := make([]bool, w*h)
	for s := range f {
		if f[s] == 0 || seen[s] {
			continue
		}
		plateau, top := []int{s}, true
		seen[s] = true
		for k := 0; k < len(plateau); k++ {
			p := plateau[k]
			for dy := -1; dy <= 1; dy++ {
				for dx := -1; dx <= 1; dx++ {
					xx, yy := p%w+dx, p/w+dy
					if xx < 0 || yy < 0 || xx >= w || yy >= h {
						continue
					}
					q := yy*w + xx
					if f[q] > f[p] {
						top = false
					}
					if f[q] == f[p] && !seen[q] {
						seen[q] = true
						plateau = append(plateau, q)
					}
				}
			}
		}
		if top {
			for _, p := range plateau {
				out[p] = 1
			}
		}
	}
	return out
}

// refWatershed is the watershed as the top of watershed.go defines it,
// computed from the definition: the flood levels L by relaxing
// max-min paths until stable (checked equal to f, as the definition
// claims), D by relaxing distances, then the mask
// pixels sorted by their key (L, -D), each group of equal keys taking
// its candidates from the predecessors (greater keys) and losing them to
// a neighbour of the group with another.
func refWatershed(dist []uint16, filled []uint8, w, h int) []uint16 {
	n := w * h
	f := make([]uint16, n)
	var mask []int
	for i, m := range filled {
		if m != 0 {
			f[i] = min(dist[i], 0xfffe) + 1
			mask = append(mask, i)
		}
	}
	basin, _ := refComponents(refMaxima(f, w, h), w, h, true)
	nbrs := func(p int) []int {
		var out []int
		for dy := -1; dy <= 1; dy++ {
			for dx := -1; dx <= 1; dx++ {
				xx, yy := p%w+dx, p/w+dy
				if (dx != 0 || dy != 0) && xx >= 0 && yy >= 0 && xx < w && yy < h && f[yy*w+xx] != 0 {
					out = append(out, yy*w+xx)
				}
			}
		}
		return out
	}
	L := make([]int, n)
	for _, p := range mask {
		if basin[p] > 0 {
			L[p] = int(f[p])
		}
	}
	for changed := true; changed; {
		changed = false
		for _, p := range mask {
			for _, q := range nbrs(p) {
				if v := min(L[q], int(f[p])); v > L[p] {
					L[p], changed = v, true
				}
			}
		}
	}
	for _, p := range mask {
		if L[p] != int(f[p]) {
			panic(fmt.Sprintf("pixel %d: flooded at level %d, its relief is %d", p, L[p], f[p]))
		}
	}
	const inf = math.MaxInt32
	D := make([]int, n)
	for _, p := range mask {
		D[p] = inf
		if basin[p] > 0 {
			D[p] = 0
		}
		for _, q := range nbrs(p) {
			if L[q] > L[p] && D[p] != 0 {
				D[p] = 1
			}
		}
	}
	for changed := true; changed; {
		changed = false
		for _, p := range mask {
			for _, q := range nbrs(p) {
				if L[q] == L[p] && D[q] != inf && D[q]+1 < D[p] {
					D[p], changed = D[q]+1, true
				}
			}
		}
	}
	greater := func(q, p int) bool { return L[q] > L[p] || L[q] == L[p] && D[q] < D[p] }
	order := slices.Clone(mask)
	slices.SortStableFunc(order, func(p, q int) int {
		if greater(p, q) {
			return -1
		}
		if greater(q, p) {
			return 1
		}
		return 0
	})
	final, cand := make([]int32, n), make([]int32, n)
	for i := 0; i < len(order); {
		j := i
		for j < len(order) && !greater(order[i], order[j]) {
			j++
		}
		group := order[i:j]
		for _, p := range group {
			if basin[p] > 0 {
				cand[p] = basin[p]
				continue
			}
			labels := map[int32]bool{}
			for _, q := range nbrs(p) {
				if greater(q, p) && final[q] > 0 {
					labels[final[q]] = true
				}
			}
			cand[p] = 0
			if len(labels) == 1 {
				for b := range labels {
					cand[p] = b
				}
			}
		}
		for _, p := range group {
			final[p] = cand[p]
			for _, q := range nbrs(p) {
				if !greater(q, p) && !greater(p, q) && cand[q] > 0 && cand[p] > 0 && cand[q] != cand[p] {
					final[p] = 0
				}
			}
		}
		i = j
	}
	out := make([]uint16, n)
	for i, b := range final {
		if b > 0 {
			out[i] = 1
		}
	}
	return out
}

func TestWatershedMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	for _, s := range randomSizes(r, 40) {
		w, h := s[0], s[1]
		filled := randomMask(r, w, h, 1+r.IntN(6))
		dist := make([]uint16, w*h)
		preWatershed(filled, dist, w, h)
		if r.IntN(2) == 0 { // a rougher relief, with many maxima
			for i := range dist {
				if filled[i] != 0 {
					dist[i] = uint16(r.IntN(6))
				}
			}
		}
		f := make([]uint16, w*h)
		for i, m := range filled {
			if m != 0 {
				f[i] = dist[i] + 1
			}
		}
		peaks := make([]uint8, w*h)
		regionalMaxima(f, peaks, w, h)
		if want := refMaxima(f, w, h); !slices.Equal(peaks, want) {
			t.Fatalf("%dx%d: regional maxima %v, want %v", w, h, peaks, want)
		}
		got := make([]uint16, w*h)
		watershed(dist, filled, got, w, h)
		if want := refWatershed(dist, filled, w, h); !slices.Equal(got, want) {
			t.Fatalf("%dx%d: watershed %v, want %v", w, h, got, want)
		}
	}
}

// TestWatershedSplitsTouchingDisks: two overlapping disks become two
// nuclei after Watershed and BWLabel, where the old core threshold kept
// one.
func TestWatershedSplitsTouchingDisks(t *testing.T) {
	const w, h = 40, 24
	filled := make([]uint8, w*h)
	for y := range h {
		for x := range w {
			if (x-12)*(x-12)+(y-12)*(y-12) <= 64 || (x-26)*(x-26)+(y-12)*(y-12) <= 64 {
				filled[y*w+x] = 1
			}
		}
	}
	dist, ws, labels := make([]uint16, w*h), make([]uint16, w*h), make([]uint16, w*h)
	preWatershed(filled, dist, w, h)
	watershed(dist, filled, ws, w, h)
	if n := bwLabel(ws, labels, w, h); n != 2 {
		t.Errorf("two touching disks gave %d nuclei, want 2", n)
	}
}

// TestRBCAndCandidatesMatchReference checks RBCDetection (a reconstruction
// of the strongly red pixels under the reddish ones) and ReconToNuclei
// (the top-hat by reconstruction) against their definitions.
func TestRBCAndCandidatesMatchReference(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	for _, s := range randomSizes(r, 30) {
		w, h := s[0], s[1]
		n := w * h
		rgb := make([]uint8, 3*n)
		genTile(rgb, w, h, 1, r.IntN(100))
		for range 1 + n/20 { // reddish noise, some of it strong
			i := r.IntN(n)
			rgb[i], rgb[n+i], rgb[2*n+i] = uint8(125+r.IntN(131)), uint8(r.IntN(110)), uint8(r.IntN(130))
		}
		seed, loose := make([]uint8, n), make([]uint8, n)
		for i := range n {
			if rbcLoose(rgb[i], rgb[n+i], rgb[2*n+i]) {
				loose[i] = 1
			}
			if rbcSeed(rgb[i], rgb[n+i], rgb[2*n+i]) {
				seed[i] = 1
			}
		}
		lab, c := refComponents(loose, w, h, true)
		hasSeed := make([]bool, c+1)
		for i, v := range seed {
			if v != 0 {
				hasSeed[lab[i]] = true
			}
		}
		want := make([]uint8, n)
		for i, v := range lab {
			if v != 0 && hasSeed[v] {
				want[i] = 1
			}
		}
		rbc := make([]uint8, n)
		rbcDetect(rgb, rbc, w, h)
		if !slices.Equal(rbc, want) {
			t.Fatalf("%dx%d: red blood cells %v, want %v", w, h, rbc, want)
		}
		opened, dark := make([]uint8, n), make([]uint8, n)
		morphOpen(rgb, opened, w, h)
		darkness(rgb, dark, n)
		rec := refReconstruct(opened, dark, w, h)
		wantC := make([]uint8, n)
		for i := range wantC {
			if int(dark[i])-int(rec[i]) >= candidateThreshold && rbc[i] == 0 {
				wantC[i] = 1
			}
		}
		got := make([]uint8, n)
		reconToNuclei(rgb, opened, rbc, got, w, h)
		if !slices.Equal(got, wantC) {
			t.Fatalf("%dx%d: candidates %v, want %v", w, h, got, wantC)
		}
	}
}

// TestMinMaxBytes checks the row minimum and maximum (and the SWAR byte
// minimum) against the scalar ones, on every length and alignment.
func TestMinMaxBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	for n := range 70 {
		for off := range 3 {
			a, b := make([]byte, n+off), make([]byte, n+off)
			for i := range a {
				a[i], b[i] = uint8(r.IntN(256)), uint8(r.IntN(256))
				if r.IntN(4) == 0 {
					b[i] = a[i]
				}
			}
			lo, hi := make([]byte, n), make([]byte, n)
			minBytes(lo, a[off:], b[off:])
			maxBytes(hi, a[off:], b[off:])
			for i := range n {
				if lo[i] != min(a[off+i], b[off+i]) || hi[i] != max(a[off+i], b[off+i]) {
					t.Fatalf("n %d offset %d: byte %d of %d, %d: min %d max %d", n, off, i, a[off+i], b[off+i], lo[i], hi[i])
				}
			}
		}
	}
	for range 10000 {
		x, y := r.Uint64(), r.Uint64()
		m := min8(x, y)
		for k := 0; k < 64; k += 8 {
			if uint8(m>>k) != min(uint8(x>>k), uint8(y>>k)) {
				t.Fatalf("min8(%#x, %#x) = %#x", x, y, m)
			}
		}
	}
}

// TestBWLabelPast16Bits: a mask of 65536 isolated pixels takes the
// 32-bit path; the last component is left out, the others keep raster
// order.
func TestBWLabelPast16Bits(t *testing.T) {
	const w, h = 512, 512
	mask, labels := make([]uint16, w*h), make([]uint16, w*h)
	for y := 0; y < h; y += 2 {
		for x := 0; x < w; x += 2 {
			mask[y*w+x] = 1
		}
	}
	if n := bwLabel(mask, labels, w, h); n != 65535 {
		t.Fatalf("%d labels, want 65535", n)
	}
	if labels[0] != 1 || labels[2] != 2 || labels[w*2] != 257 || labels[(h-2)*w+w-4] != 65535 || labels[(h-2)*w+w-2] != 0 {
		t.Errorf("labels %d %d %d %d %d, want 1 2 257 65535 0", labels[0], labels[2], labels[w*2], labels[(h-2)*w+w-4], labels[(h-2)*w+w-2])
	}
}
