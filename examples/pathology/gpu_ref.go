package main

import "math"

// This file mirrors, in Go, the CUDA kernels of kernels/pathology.cu with
// the same indexing and the same iteration scheme (grid-stride loops
// become plain loops, in-place relaxations sweep in index order). The host
// accelerator (hostAccel) runs these mirrors, so that without a GPU the
// tests check the kernels' arithmetic, and the plumbing of the GPU units,
// against the CPU implementations of kernels.go. The kernels of the
// operations that run on CPU cores only (patho_rbc, patho_dark,
// patho_filter3: their former definitions) have no mirror; patho_dt_init
// and patho_dt_step keep theirs, which TestDistanceMirror checks.

// refFillInit mirrors patho_fill_init.
func refFillInit(in, reach []uint8, w, h int) {
	for i := range w * h {
		x, y := i%w, i/w
		if in[i] == 0 && (x == 0 || y == 0 || x == w-1 || y == h-1) {
			reach[i] = 1
		} else {
			reach[i] = 0
		}
	}
}

// refFillStep mirrors patho_fill_step and reports whether it changed reach.
func refFillStep(in, reach []uint8, w, h int) bool {
	changed := false
	for i := range w * h {
		if in[i] != 0 || reach[i] != 0 {
			continue
		}
		x, y := i%w, i/w
		if (x > 0 && reach[i-1] != 0) || (x < w-1 && reach[i+1] != 0) ||
			(y > 0 && reach[i-w] != 0) || (y < h-1 && reach[i+w] != 0) {
			reach[i] = 1
			changed = true
		}
	}
	return changed
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

// refDTInit mirrors patho_dt_init.
func refDTInit(mask []uint8, dist []uint16) {
	for i := range dist {
		if mask[i] != 0 {
			dist[i] = math.MaxUint16
		} else {
			dist[i] = 0
		}
	}
}

// refDTStep mirrors patho_dt_step and reports whether it changed dist.
func refDTStep(dist []uint16, w, h int) bool {
	changed := false
	for i := range w * h {
		d := uint32(dist[i])
		if d == 0 {
			continue
		}
		x, y := i%w, i/w
		m := uint32(math.MaxUint16)
		nb := func(ok bool, j int) {
			v := uint32(0)
			if ok {
				v = uint32(dist[j])
			}
			m = min(m, v)
		}
		nb(x > 0, i-1)
		nb(x < w-1, i+1)
		nb(y > 0, i-w)
		nb(y < h-1, i+w)
		if m+1 < d {
			dist[i] = uint16(m + 1)
			changed = true
		}
	}
	return changed
}

// Kinds of feature of patho_feat_accum and patho_feat_final.
const (
	featKindIntensity = 0
	featKindGradient  = 1
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
		if l == 0 || l > maxObjects {
			continue
		}
		var v float64
		if kind == featKindIntensity {
			v = 255 - float64(int(rgb[i])+int(rgb[n+i])+int(rgb[2*n+i]))/3
		} else {
			x, y := i%w, i/w
			gx := gray(x+1, y-1) + 2*gray(x+1, y) + gray(x+1, y+1) - gray(x-1, y-1) - 2*gray(x-1, y) - gray(x-1, y+1)
			gy := gray(x-1, y+1) + 2*gray(x, y+1) + gray(x+1, y+1) - gray(x-1, y-1) - 2*gray(x, y-1) - gray(x+1, y-1)
			v = math.Hypot(gx, gy)
		}
		sums[l-1] += v
		counts[l-1]++
	}
}

// refFeatFinal mirrors patho_feat_final.
func refFeatFinal(sums []float64, counts []uint64, table []float64, kind int) {
	for k := range maxObjects {
		a := float64(counts[k])
		row := table[k*numFeatures:]
		mean := 0.0
		if a > 0 {
			mean = sums[k] / a
		}
		if kind == featKindIntensity {
			row[featArea], row[featMean] = a, mean
		} else {
			row[featGrad] = mean
		}
	}
}
