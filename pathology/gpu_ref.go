package pathology

import "math"

// This file mirrors, in Go, the CUDA kernels of kernels/pathology.cu with
// the same indexing and the same iteration scheme (grid-stride loops
// become plain loops, in-place relaxations sweep in index order). The host
// accelerator (hostAccel) runs these mirrors, so that without a GPU the
// tests check the kernels' arithmetic, and the plumbing of the GPU units,
// against the CPU implementations (kernels.go, morph.go, recon.go,
// edt.go).

// refFillInit mirrors patho_fill_init: reach gets the background pixels of
// the border, bg the background.
func refFillInit(in, reach, bg []uint8, w, h int) {
	for i := range w * h {
		x, y := i%w, i/w
		bg[i] = b2u8(in[i] == 0)
		reach[i] = b2u8(in[i] == 0 && (x == 0 || y == 0 || x == w-1 || y == h-1))
	}
}

// refFillFinal mirrors patho_fill_final.
func refFillFinal(in, reach, out []uint8) {
	for i := range out {
		if in[i] != 0 || reach[i] == 0 {
			out[i] = 1
		} else {
			out[i] = 0
		}
	}
}

// refCandFinal mirrors patho_cand_final.
func refCandFinal(dark, rec, rbc, out []uint8, threshold int) {
	for i := range out {
		if int(dark[i])-int(rec[i]) >= threshold && rbc[i] == 0 {
			out[i] = 1
		} else {
			out[i] = 0
		}
	}
}

// rankSeg is RANK_SEG of kernels/pathology.cu: the pixels of a segment
// of BWLabel's scan of the roots.
const rankSeg = 4096

// refLabInit mirrors patho_lab_init_u8 and _u16.
func refLabInit[T uint8 | uint16](mask []T, L []int32) {
	for i, v := range mask {
		if v != 0 {
			L[i] = int32(i)
		} else {
			L[i] = -1
		}
	}
}

// refLabRoot mirrors lab_root.
func refLabRoot(L []int32, a int32) int32 {
	for L[a] != a {
		a = L[a]
	}
	return a
}

// refLabUnite mirrors lab_unite (atomicMin a plain min: one thread).
func refLabUnite(L []int32, a, b int32) {
	a, b = refLabRoot(L, a), refLabRoot(L, b)
	for a != b {
		if a < b {
			a, b = b, a
		}
		old := L[a]
		L[a] = min(old, b)
		if old == a {
			a = b
		} else {
			a = old
		}
	}
}

// refLabMerge mirrors patho_lab_merge.
func refLabMerge(L []int32, w, h int, eight bool) {
	for i := range w * h {
		if L[i] < 0 {
			continue
		}
		x, y := i%w, i/w
		join := func(j int) {
			if L[j] >= 0 {
				refLabUnite(L, int32(i), int32(j))
			}
		}
		if x > 0 {
			join(i - 1)
		}
		if y > 0 {
			join(i - w)
			if eight && x > 0 {
				join(i - w - 1)
			}
			if eight && x+1 < w {
				join(i - w + 1)
			}
		}
	}
}

// refLabFlatten mirrors patho_lab_flatten.
func refLabFlatten(L []int32) {
	for i, v := range L {
		if v >= 0 {
			L[i] = refLabRoot(L, int32(i))
		}
	}
}

// refAreaThreshold mirrors patho_lab_area and patho_area_final.
func refAreaThreshold(L, area []int32, out []uint8, least int) {
	clear(area)
	for _, r := range L {
		if r >= 0 {
			area[r]++
		}
	}
	for i, r := range L {
		if r >= 0 && int(area[r]) >= least {
			out[i] = 1
		} else {
			out[i] = 0
		}
	}
}

// refRootCount mirrors patho_root_count.
func refRootCount(L, count []int32) {
	for s := range count {
		c := int32(0)
		for i := s * rankSeg; i < min((s+1)*rankSeg, len(L)); i++ {
			if L[i] == int32(i) {
				c++
			}
		}
		count[s] = c
	}
}

// refRootScan mirrors patho_root_scan: the exclusive prefix sums.
func refRootScan(count []int32) {
	sum := int32(0)
	for k, c := range count {
		count[k] = sum
		sum += c
	}
}

// refRootRank mirrors patho_root_rank.
func refRootRank(L, count, R []int32) {
	for s, base := range count {
		for i := s * rankSeg; i < min((s+1)*rankSeg, len(L)); i++ {
			if L[i] == int32(i) {
				R[i] = base
				base++
			}
		}
	}
}

// refBWFinal mirrors patho_bw_final.
func refBWFinal(L, R []int32, out []uint16) {
	for i, r := range L {
		v := int32(0)
		if r >= 0 {
			v = R[r] + 1
		}
		if v > 65535 {
			v = 0
		}
		out[i] = uint16(v)
	}
}

// Kinds of feature of patho_feat_accum and patho_feat_final.
const (
	featKindIntensity = 0
	featKindGradient  = 1
	featKindHema      = 2 // accumulated from the RGB image
	featKindEdge      = 3 // final only: the sums of refFeatCount
)

// refFeatAccum mirrors patho_feat_accum (one block): it adds each object's
// values to sums and its pixel count to counts.
func refFeatAccum(rgb []uint8, labels []uint16, sums []float64, counts []uint64, w, h, kind int) {
	n := w * h
	gray := func(x, y int) float64 {
		x, y = min(max(x, 0), w-1), min(max(y, 0), h-1)
		i := y*w + x
		return float64(int(rgb[i])+int(rgb[n+i])+int(rgb[2*n+i])) / 3
	}
	for i := range n {
		l := int(labels[i])
		if l == 0 || l > len(sums) {
			continue
		}
		var v float64
		switch kind {
		case featKindIntensity:
			v = 255 - float64(int(rgb[i])+int(rgb[n+i])+int(rgb[2*n+i]))/3
		case featKindHema:
			v = hemaR*opticalDensity(rgb[i]) + hemaG*opticalDensity(rgb[n+i]) + hemaB*opticalDensity(rgb[2*n+i])
		default:
			x, y := i%w, i/w
			gx := gray(x+1, y-1) + 2*gray(x+1, y) + gray(x+1, y+1) - gray(x-1, y-1) - 2*gray(x-1, y) - gray(x-1, y+1)
			gy := gray(x-1, y+1) + 2*gray(x, y+1) + gray(x+1, y+1) - gray(x-1, y-1) - 2*gray(x, y-1) - gray(x+1, y-1)
			v = math.Hypot(gx, gy)
		}
		sums[l-1] += v
		counts[l-1]++
	}
}

// refFeatPerim mirrors patho_feat_perim.
func refFeatPerim(labels []uint16, counts []uint64, w, h int) {
	for i, v := range labels {
		l := int(v)
		if l == 0 || l > len(counts) {
			continue
		}
		x, y := i%w, i/w
		if x == 0 || y == 0 || x == w-1 || y == h-1 || labels[i-1] != v || labels[i+1] != v || labels[i-w] != v || labels[i+w] != v {
			counts[l-1]++
		}
	}
}

// refPerimFinal mirrors patho_perim_final.
func refPerimFinal(counts []uint64, table []float64) {
	for k, c := range counts {
		table[k*numFeatures+featPerim] = float64(c)
	}
}

// refFeatFinal mirrors patho_feat_final.
func refFeatFinal(sums []float64, counts []uint64, table []float64, kind int) {
	for k := range len(counts) {
		a := float64(counts[k])
		row := table[k*numFeatures:]
		mean := 0.0
		if a > 0 {
			mean = sums[k] / a
		}
		switch kind {
		case featKindIntensity:
			row[featArea], row[featMean] = a, mean
		case featKindGradient:
			row[featGrad] = mean
		case featKindHema:
			row[featHema] = mean
		default:
			row[featEdge] = mean
		}
	}
}

// refRBCInit mirrors patho_rbc_init: loose gets the reddish pixels, out the
// strongly red ones among them.
func refRBCInit(rgb, loose, out []uint8, n int) {
	for i := range n {
		r, g, b := rgb[i], rgb[n+i], rgb[2*n+i]
		l := rbcLoose(r, g, b)
		loose[i], out[i] = b2u8(l), b2u8(l && rbcSeed(r, g, b))
	}
}

func b2u8(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// refDark mirrors patho_dark.
func refDark(rgb, dark []uint8, n int) {
	for i := range n {
		dark[i] = uint8(255 - (int(rgb[i])+int(rgb[n+i])+int(rgb[2*n+i]))/3)
	}
}

// Layout of patho_disk's disk table (DISK_MAXR, DISK_WIDX).
const (
	diskMaxR = 15
	diskWidx = 18 // 2 + the most distinct half-widths (diskMaxR+1)
)

// diskTable returns the description of the disk of radius r (at most
// diskMaxR) that patho_disk reads: r, the number of distinct half-widths
// of its rows, those half-widths (in the order diskFilter finds them), and
// from index diskWidx the index among them of each row's, rows -r..r.
func diskTable(r int) []int32 {
	t := make([]int32, diskWidx+2*r+1)
	idx := map[int]int{}
	var widths []int
	hw := diskHalfWidths(r)
	for _, v := range hw {
		if _, ok := idx[v]; !ok {
			idx[v] = len(widths)
			widths = append(widths, v)
		}
	}
	t[0], t[1] = int32(r), int32(len(widths))
	for k, v := range widths {
		t[2+k] = int32(v)
	}
	for dy, v := range hw {
		t[diskWidx+dy] = int32(idx[v])
	}
	return t
}

// refDisk mirrors patho_disk: the erosion (op 0) or dilation (op 1) of in
// by the disk, row minima (maxima) for each half-width, then the column of
// rows, pixels outside the image being the neutral element.
func refDisk(in, out []uint8, w, h, op int, disk []int32) {
	r, nw := int(disk[0]), int(disk[1])
	neutral := uint8(255)
	f := func(a, b uint8) uint8 { return min(a, b) }
	if op != 0 {
		neutral = 0
		f = func(a, b uint8) uint8 { return max(a, b) }
	}
	at := func(x, y int) uint8 {
		if x < 0 || x >= w || y < 0 || y >= h {
			return neutral
		}
		return in[y*w+x]
	}
	rows := make([][]uint8, nw)
	for k := range rows {
		rows[k] = make([]uint8, w*h)
	}
	for y := range h {
		for x := range w {
			m := at(x, y)
			for a := 0; a <= r; a++ {
				if a > 0 {
					m = f(m, f(at(x-a, y), at(x+a, y)))
				}
				for wi := range nw {
					if int(disk[2+wi]) == a {
						rows[wi][y*w+x] = m
					}
				}
			}
		}
	}
	for y := range h {
		for x := range w {
			m := neutral
			for dy := -r; dy <= r; dy++ {
				if yy := y + dy; yy >= 0 && yy < h {
					m = f(m, rows[disk[diskWidx+r+dy]][yy*w+x])
				}
			}
			out[y*w+x] = m
		}
	}
}

// reconTile is the tile edge of patho_recon* (RECON_T).
const reconTile = 32

// refReconStep mirrors one launch of patho_recon8_u8/u16 (conn 8) and
// patho_recon4_u8 (conn 4): tile by tile, the tile and its one-pixel frame
// copied, the tile relaxed until stable (each pixel min(max of its
// neighbourhood, I)), then written back. It reports whether any tile
// changed.
func refReconStep[T uint8 | uint16](J, I []T, w, h, conn int) bool {
	const t = reconTile
	var sj [(t + 2) * (t + 2)]T
	changed := false
	for y0 := 0; y0 < h; y0 += t {
		for x0 := 0; x0 < w; x0 += t {
			for sy := range t + 2 {
				for sx := range t + 2 {
					x, y := x0-1+sx, y0-1+sy
					var v T
					if x >= 0 && x < w && y >= 0 && y < h {
						v = J[y*w+x]
					}
					sj[sy*(t+2)+sx] = v
				}
			}
			tileChanged := false
			for {
				again := false
				for k := range t * t {
					sy, sx := k/t+1, k%t+1
					x, y := x0+sx-1, y0+sy-1
					if x >= w || y >= h {
						continue
					}
					m, v := I[y*w+x], sj[sy*(t+2)+sx]
					if v == m {
						continue
					}
					nv := v
					for dy := -1; dy <= 1; dy++ {
						for dx := -1; dx <= 1; dx++ {
							if conn == 8 || dx == 0 || dy == 0 {
								nv = max(nv, sj[(sy+dy)*(t+2)+sx+dx])
							}
						}
					}
					if nv = min(nv, m); nv != v {
						sj[sy*(t+2)+sx] = nv
						again = true
					}
				}
				if !again {
					break
				}
				tileChanged = true
			}
			if tileChanged {
				for k := range t * t {
					sy, sx := k/t, k%t
					if x, y := x0+sx, y0+sy; x < w && y < h {
						J[y*w+x] = sj[(sy+1)*(t+2)+sx+1]
					}
				}
				changed = true
			}
		}
	}
	return changed
}

// refEDTCols mirrors patho_edt_cols: per column, the distance to the
// nearest zero of mask in the column (w+h+1 where there is none).
func refEDTCols(mask []uint8, g []int32, w, h int) {
	inf := int32(w + h + 1)
	for x := range w {
		d := inf
		if mask[x] == 0 {
			d = 0
		}
		g[x] = d
		for y := 1; y < h; y++ {
			if mask[y*w+x] == 0 {
				d = 0
			} else {
				d = min(d+1, inf)
			}
			g[y*w+x] = d
		}
		for y := h - 2; y >= 0; y-- {
			v := g[y*w+x]
			if d+1 < v {
				v = d + 1
				g[y*w+x] = v
			}
			d = v
		}
	}
}

// refEDTRows mirrors patho_edt_rows: per pixel, the least (x-i)^2 + g(i)^2
// over the row, searched outwards, in eighths of a pixel.
func refEDTRows(g []int32, dist []uint16, w, h int) {
	inf := int64(w + h + 1)
	for i := range w * h {
		x := i % w
		row := i - x
		gx := int64(g[i])
		if gx == 0 {
			dist[i] = 0
			continue
		}
		best := gx * gx
		for k := 1; int64(k*k) < best && (x-k >= 0 || x+k < w); k++ {
			if x-k >= 0 {
				v := int64(g[row+x-k])
				best = min(best, int64(k*k)+v*v)
			}
			if x+k < w {
				v := int64(g[row+x+k])
				best = min(best, int64(k*k)+v*v)
			}
		}
		if best >= inf*inf {
			dist[i] = math.MaxUint16
		} else {
			dist[i] = uint16(min(math.Round(8*math.Sqrt(float64(best))), math.MaxUint16))
		}
	}
}

// refHMaxInit mirrors patho_hmax_init.
func refHMaxInit(dist, marker []uint16) {
	for i, d := range dist {
		marker[i] = d - min(d, hMaxHeight)
	}
}

// States of patho_ws_lab_init and patho_ws_flood's C and F, beside the
// basins 1, 2, ... (WS_UNK, WS_LINE, WS_OUT), and D's unknown (WS_INF).
const (
	wsUnknown = 0
	wsLine    = -1
	wsOut     = -2
	wsInf     = 0x3fffffff
)

// refWSInit mirrors patho_ws_init: f the relief, J = f - 1 (0 stays 0).
func refWSInit(dist []uint16, filled []uint8, f, J []uint16) {
	for i, m := range filled {
		v := uint16(0)
		if m != 0 {
			v = relief(dist[i])
		}
		f[i], J[i] = v, v-min(v, 1)
	}
}

// refWSMarkers mirrors patho_ws_markers.
func refWSMarkers(f, J []uint16, L []int32) {
	for i := range f {
		if f[i] > J[i] {
			L[i] = int32(i)
		} else {
			L[i] = -1
		}
	}
}

// refWSDistInit mirrors patho_ws_dist_init.
func refWSDistInit(f []uint16, L, D []int32, w, h int) {
	for i := range w * h {
		d := int32(wsInf)
		if f[i] != 0 {
			if L[i] >= 0 {
				d = 0
			} else {
				x, y := i%w, i/w
				for dy := -1; dy <= 1; dy++ {
					for dx := -1; dx <= 1; dx++ {
						xx, yy := x+dx, y+dy
						if xx >= 0 && xx < w && yy >= 0 && yy < h && f[yy*w+xx] > f[i] {
							d = 1
						}
					}
				}
			}
		}
		D[i] = d
	}
}

// wsTile is a tile of patho_ws_dist and patho_ws_flood in shared memory:
// WS_T x WS_T pixels and a one-pixel frame, of reconTile (WS_T) pixels.
type wsTile struct {
	f        [(reconTile + 2) * (reconTile + 2)]uint16
	d, c, fl [(reconTile + 2) * (reconTile + 2)]int32
}

// refWSTiles runs one launch of patho_ws_dist or patho_ws_flood: tile by
// tile, load copies the tile and its frame (s, x0, y0), the tile is
// swept with step until stable, and store writes it back if it changed.
// It reports whether any tile changed.
func refWSTiles(w, h int, load, store func(s *wsTile, x0, y0 int), step func(s *wsTile, k int) bool) bool {
	const t = reconTile
	var s wsTile
	changed := false
	for y0 := 0; y0 < h; y0 += t {
		for x0 := 0; x0 < w; x0 += t {
			load(&s, x0, y0)
			tileChanged := false
			for {
				again := false
				for k := range t * t {
					if step(&s, (k/t+1)*(t+2)+k%t+1) {
						again = true
					}
				}
				if !again {
					break
				}
				tileChanged = true
			}
			if tileChanged {
				store(&s, x0, y0)
				changed = true
			}
		}
	}
	return changed
}

// wsLoad returns a load function of refWSTiles: each array of s from
// its image, where given, and its value outside the image.
func wsLoad(f []uint16, D, C, F []int32, w, h int) func(s *wsTile, x0, y0 int) {
	const t = reconTile
	return func(s *wsTile, x0, y0 int) {
		for sy := range t + 2 {
			for sx := range t + 2 {
				k, x, y := sy*(t+2)+sx, x0-1+sx, y0-1+sy
				in := x >= 0 && x < w && y >= 0 && y < h
				i := y*w + x
				s.f[k], s.d[k], s.c[k], s.fl[k] = 0, wsInf, wsOut, wsOut
				if in {
					s.f[k], s.d[k] = f[i], D[i]
					if C != nil {
						s.c[k], s.fl[k] = C[i], F[i]
					}
				}
			}
		}
	}
}

// wsStore returns a store function of refWSTiles writing back a tile's
// D (C and F nil) or its C and F.
func wsStore(D, C, F []int32, w, h int) func(s *wsTile, x0, y0 int) {
	const t = reconTile
	return func(s *wsTile, x0, y0 int) {
		for sy := range t {
			for sx := range t {
				x, y := x0+sx, y0+sy
				if x >= w || y >= h {
					continue
				}
				k := (sy+1)*(t+2) + sx + 1
				if C == nil {
					D[y*w+x] = s.d[k]
				} else {
					C[y*w+x], F[y*w+x] = s.c[k], s.fl[k]
				}
			}
		}
	}
}

// wsNbrs returns the offsets of the 8 neighbours in a tile with its
// frame.
func wsNbrs() [8]int {
	const r = reconTile + 2
	return [8]int{-r - 1, -r, -r + 1, -1, 1, r - 1, r, r + 1}
}

// refWSDistStep mirrors one launch of patho_ws_dist.
func refWSDistStep(f []uint16, D []int32, w, h int) bool {
	return refWSTiles(w, h, wsLoad(f, D, nil, nil, w, h), wsStore(D, nil, nil, w, h), wsDistStep)
}

// wsDistStep mirrors ws_dist_step.
func wsDistStep(s *wsTile, k int) bool {
	v, d := s.f[k], s.d[k]
	if v == 0 || d <= 1 {
		return false
	}
	nd := d
	for _, o := range wsNbrs() {
		if s.f[k+o] == v && s.d[k+o] < wsInf {
			nd = min(nd, s.d[k+o]+1)
		}
	}
	if nd < d {
		s.d[k] = nd
		return true
	}
	return false
}

// refWSLabInit mirrors patho_ws_lab_init (C in L's place).
func refWSLabInit(f []uint16, C, F []int32) {
	for i := range f {
		c := int32(wsUnknown)
		switch {
		case f[i] == 0:
			c = wsOut
		case C[i] >= 0:
			c = C[i] + 1
		}
		C[i], F[i] = c, c
	}
}

// refWSStep mirrors ws_step.
func refWSStep(s *wsTile, k int) bool {
	if s.fl[k] != wsUnknown {
		return false
	}
	v, d := s.f[k], s.d[k]
	moved := false
	c := s.c[k]
	if c == wsUnknown {
		lab := int32(0)
		for _, o := range wsNbrs() {
			qv := s.f[k+o]
			if qv == 0 {
				continue
			}
			if qv > v || qv == v && s.d[k+o] < d {
				b := s.fl[k+o]
				if b == wsUnknown {
					return false
				}
				if b > 0 {
					if lab == 0 || lab == b {
						lab = b
					} else {
						lab = wsLine
					}
				}
			}
		}
		c = wsLine
		if lab > 0 {
			c = lab
		}
		s.c[k], moved = c, true
	}
	fin := c
	for _, o := range wsNbrs() {
		if s.f[k+o] != v || s.d[k+o] != d {
			continue
		}
		b := s.c[k+o]
		if b == wsUnknown {
			return moved
		}
		if b > 0 && c > 0 && b != c {
			fin = wsLine
		}
	}
	s.fl[k] = fin
	return true
}

// refWSFloodStep mirrors one launch of patho_ws_flood.
func refWSFloodStep(f []uint16, D, C, F []int32, w, h int) bool {
	return refWSTiles(w, h, wsLoad(f, D, C, F, w, h), wsStore(nil, C, F, w, h), refWSStep)
}

// refWSFinal mirrors patho_ws_final.
func refWSFinal(F []int32, out []uint16) {
	for i, v := range F {
		out[i] = 0
		if v > 0 {
			out[i] = 1
		}
	}
}

// refFeatCount mirrors patho_feat_count.
func refFeatCount(vals []uint8, labels []uint16, sums []float64, counts []uint64) {
	for i, v := range labels {
		l := int(v)
		if l == 0 || l > len(sums) {
			continue
		}
		sums[l-1] += float64(vals[i])
		counts[l-1]++
	}
}

// refCanny mirrors patho_canny: the candidates into mask, the strong ones
// into marker.
func refCanny(rgb, marker, mask []uint8, w, h int) {
	n := w * h
	g := make([]uint8, n) // the kernel's grey_at, pixel by pixel
	greyImage(rgb, g, n)
	mag := func(x, y int) int32 {
		if x < 0 || x >= w || y < 0 || y >= h {
			return 0
		}
		dx, dy := cannyD(g, w, h, x, y)
		return abs32(dx) + abs32(dy)
	}
	for i := range n {
		x, y := i%w, i/w
		xs, ys := cannyD(g, w, h, x, y)
		v := abs32(xs) + abs32(ys)
		cand := false
		if v > cannyLow {
			switch cannyDir(xs, ys) {
			case 0:
				cand = v > mag(x-1, y) && v >= mag(x+1, y)
			case 1:
				cand = v > mag(x, y-1) && v >= mag(x, y+1)
			default:
				s := 1
				if (xs ^ ys) < 0 {
					s = -1
				}
				cand = v > mag(x-s, y-1) && v > mag(x+s, y+1)
			}
		}
		mask[i], marker[i] = b2u8(cand), b2u8(cand && v > cannyHigh)
	}
}
