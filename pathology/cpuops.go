package pathology

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/gohtgs/htgs/internal/outfile"
)

// This file holds the operations timed on one core on a generated tile
// (the program's -cpu-ops), so that the times can be set beside another
// library's on the same tile in the same run (testdata/opencv_ops.py does
// the OpenCV side).

// OpTile is a generated tile and every intermediate of the pipeline on
// it: the inputs of each operation, and its outputs, for timing the
// operations one by one (OpTile.Time).
type OpTile struct {
	w, h                 int
	rgb                  []uint8
	rbc, opened, cand    []uint8
	area, filled         []uint8
	distance, ws, labels []uint16
	feats                [3][]float64
	nuclei               int
}

// NewOpTile generates tile 0 of seed (size x size) and runs the
// pipeline on it once, so that every operation has its inputs.
func NewOpTile(size int, seed uint64) *OpTile {
	n := size * size
	t := &OpTile{w: size, h: size, rgb: make([]uint8, 3*n),
		rbc: make([]uint8, n), opened: make([]uint8, n), cand: make([]uint8, n), area: make([]uint8, n), filled: make([]uint8, n),
		distance: make([]uint16, n), ws: make([]uint16, n), labels: make([]uint16, n)}
	for k := range t.feats {
		t.feats[k] = make([]float64, objectRows(size)*numFeatures)
	}
	genTile(t.rgb, size, size, seed, 0)
	for _, op := range t.ops() {
		op.run()
	}
	return t
}

// cpuOp is one operation of a cpuOpTile, run on its inputs.
type cpuOp struct {
	name string
	run  func()
}

// ops returns the pipeline's operations on the tile, in pipeline order.
func (t *OpTile) ops() []cpuOp {
	w, h := t.w, t.h
	return []cpuOp{
		{"RBCDetection", func() { rbcDetect(t.rgb, t.rbc, w, h) }},
		{"MorphOpen", func() { morphOpen(t.rgb, t.opened, w, h) }},
		{"ReconToNuclei", func() { reconToNuclei(t.rgb, t.opened, t.rbc, t.cand, w, h) }},
		{"AreaThreshold", func() { areaThreshold(t.cand, t.area, w, h) }},
		{"FillHoles", func() { fillHoles(t.area, t.filled, w, h) }},
		{"PreWatershed", func() { preWatershed(t.filled, t.distance, w, h) }},
		{"Watershed", func() { watershed(t.distance, t.filled, t.ws, w, h) }},
		{"BWLabel", func() { t.nuclei = bwLabel(t.ws, t.labels, w, h) }},
		{"FeatIntensity", func() { clear(t.feats[0]); intensityFeatures(t.rgb, t.labels, t.feats[0]) }},
		{"FeatGradient", func() { clear(t.feats[1]); gradientFeatures(t.rgb, t.labels, t.feats[1], w, h) }},
		{"FeatMorphometry", func() { clear(t.feats[2]); morphometryFeatures(t.labels, t.feats[2], w, h) }},
	}
}

// onOneCore runs f with GOMAXPROCS 1 on a locked OS thread (the garbage
// collector's background work included), then restores GOMAXPROCS.
func onOneCore(f func()) {
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	runtime.GC()
	f()
}

// timeOps times each of ops on one core: a warm-up run, then the median
// of rounds runs, in wall time or, with cpuTime, in the thread's CPU time
// (less disturbed by other processes on a loaded machine). It returns the
// medians in the order of ops.
func timeOps(ops []cpuOp, rounds int, cpuTime bool) ([]time.Duration, error) {
	if _, ok := threadCPUTime(); cpuTime && !ok {
		return nil, errors.New("the thread's CPU time is not available on this platform")
	}
	clock := func() time.Duration {
		if cpuTime {
			d, _ := threadCPUTime()
			return d
		}
		return time.Duration(time.Now().UnixNano())
	}
	med := make([]time.Duration, len(ops))
	onOneCore(func() {
		for k, op := range ops {
			op.run()
			ts := make([]time.Duration, rounds)
			for r := range ts {
				start := clock()
				op.run()
				ts[r] = clock() - start
			}
			slices.Sort(ts)
			med[k] = ts[rounds/2]
		}
	})
	return med, nil
}

// writeOpInputs writes into dir, as NumPy .npy files: rgb (3 x h x w,
// planar), dark (the darkness MorphOpen opens), candidates (AreaThreshold's
// input), area (FillHoles'), filled (PreWatershed's and Watershed's mask),
// relief (Watershed's relief as OpenCV floods it: 255 for the lowest
// value of PreWatershed's map in the mask down to 0 for its highest, a
// uint8 when the map fits, which the check needs), markers (Watershed's
// markers: labels of the regional maxima, int32) and ws (BWLabel's input).
func writeOpInputs(dir string, t *OpTile) error {
	n := t.w * t.h
	dark := make([]uint8, n)
	darkness(t.rgb, dark, n)
	f := make([]uint16, n)
	maxF := uint16(0)
	for i, m := range t.filled {
		if m != 0 {
			f[i] = relief(t.distance[i])
			maxF = max(maxF, f[i])
		}
	}
	peaks := make([]uint8, n)
	regionalMaxima(f, peaks, t.w, t.h)
	var l labeller
	markers := make([]int32, n)
	label(&l, peaks, markers, t.w, t.h, true)
	rel := make([]uint8, n)
	for i, v := range f {
		rel[i] = uint8(min(int(maxF-v), 255))
	}
	ws := make([]uint8, n)
	for i, v := range t.ws {
		ws[i] = uint8(min(v, 1))
	}
	grey := make([]uint8, n)
	greyImage(t.rgb, grey, n)
	files := []struct {
		name, dtype string
		shape       []int
		data        []byte
	}{
		{"rgb", "|u1", []int{3, t.h, t.w}, t.rgb},
		{"dark", "|u1", []int{t.h, t.w}, dark},
		{"candidates", "|u1", []int{t.h, t.w}, t.cand},
		{"area", "|u1", []int{t.h, t.w}, t.area},
		{"filled", "|u1", []int{t.h, t.w}, t.filled},
		{"relief", "|u1", []int{t.h, t.w}, rel},
		{"markers", "<i4", []int{t.h, t.w}, int32Bytes(markers)},
		{"ws", "|u1", []int{t.h, t.w}, ws},
		{"grey", "|u1", []int{t.h, t.w}, grey},
	}
	for _, f := range files {
		path := filepath.Join(dir, f.name+".npy")
		err := outfile.WriteFile(path, func(w io.Writer) error { return writeNPY(w, f.dtype, f.shape, f.data) })
		if err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	return nil
}

// int32Bytes returns the little-endian bytes of s.
func int32Bytes(s []int32) []byte {
	b := make([]byte, 4*len(s))
	for i, v := range s {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	}
	return b
}

// writeNPY writes data as a NumPy .npy file (format 1.0, C order) of the
// given dtype ("|u1", "<u2", "<i4") and shape.
func writeNPY(w io.Writer, dtype string, shape []int, data []byte) error {
	dims := make([]string, len(shape))
	for i, s := range shape {
		dims[i] = fmt.Sprint(s)
	}
	tuple := strings.Join(dims, ", ")
	if len(shape) == 1 {
		tuple += ","
	}
	hdr := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", dtype, tuple)
	// Magic, version, header length, then the header padded with spaces
	// and ended by a newline so that the data start on 64 bytes.
	total := 10 + len(hdr) + 1
	hdr += strings.Repeat(" ", (64-total%64)%64) + "\n"
	var b bytes.Buffer
	b.WriteString("\x93NUMPY\x01\x00")
	binary.Write(&b, binary.LittleEndian, uint16(len(hdr)))
	b.WriteString(hdr)
	if _, err := w.Write(b.Bytes()); err != nil {
		return err
	}
	_, err := w.Write(data)
	return err
}

// OpTime is the time of one operation on one core.
type OpTime struct {
	Op     string        // the operation's name (Operations)
	Median time.Duration // the median of the timed runs
}

// Time times each operation of the pipeline on the tile on one core
// (GOMAXPROCS 1 and a locked thread for the time of the call): a warm-up
// run, then the median of rounds runs, in wall time or, with cpuTime, in
// the thread's CPU time (less disturbed by other processes on a loaded
// machine; Linux only, an error elsewhere). It returns the times in
// pipeline order.
func (t *OpTile) Time(rounds int, cpuTime bool) ([]OpTime, error) {
	if rounds < 1 {
		return nil, fmt.Errorf("pathology: time the operations: %d rounds, want at least one", rounds)
	}
	ops := t.ops()
	med, err := timeOps(ops, rounds, cpuTime)
	if err != nil {
		return nil, fmt.Errorf("pathology: time the operations: %w", err)
	}
	out := make([]OpTime, len(ops))
	for k, op := range ops {
		out[k] = OpTime{Op: op.name, Median: med[k]}
	}
	return out, nil
}

// WriteInputs writes the tile and the operations' inputs into the folder
// dir as NumPy .npy files, for testdata/opencv_ops.py: rgb (3 x h x w,
// planar), dark (the darkness MorphOpen opens), candidates
// (AreaThreshold's input), area (FillHoles'), filled (PreWatershed's and
// Watershed's mask), relief (Watershed's relief as OpenCV floods it),
// markers (Watershed's markers, int32) and ws (BWLabel's input).
func (t *OpTile) WriteInputs(dir string) error {
	if err := writeOpInputs(dir, t); err != nil {
		return fmt.Errorf("pathology: write the operations' inputs: %w", err)
	}
	return nil
}
