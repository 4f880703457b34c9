package pathology

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// This file holds the images on which each GPU operation is compared with
// its CPU kernel, and the comparison itself; TestHostKernelEdgeCases runs
// it through the Go mirrors (host memory posing as a GPU), and with -tags
// cuda TestCUDAKernelEdgeCases through the CUDA kernels.

// kernelCase is one input of an operation.
type kernelCase struct {
	name string
	w, h int
	in   []byte // the operation's input: planar RGB, or an 8-bit mask
}

// rgbImage returns a w x h planar RGB image with every pixel (r, g, b).
func rgbImage(w, h int, r, g, b uint8) []byte {
	n := w * h
	out := make([]byte, 3*n)
	for i := range n {
		out[i], out[n+i], out[2*n+i] = r, g, b
	}
	return out
}

// setRGB sets pixel (x, y) of the planar RGB image to (r, g, b).
func setRGB(img []byte, w, h, x, y int, c [3]uint8) {
	n := w * h
	i := y*w + x
	img[i], img[n+i], img[2*n+i] = c[0], c[1], c[2]
}

// Colours of the RBC cases: background, reddish (loose), strongly red (seed).
var (
	rbcBG     = [3]uint8{235, 195, 215}
	rbcLooseC = [3]uint8{130, 100, 120}
	rbcSeedC  = [3]uint8{200, 30, 40}
)

// snake draws a 1-pixel-wide serpentine path over every other row of a
// w x h image, joined at alternating ends, calling set for each pixel in
// path order.
func snake(w, h int, set func(x, y int)) {
	for y := 0; y < h; y += 2 {
		for x := range w {
			set(x, y)
		}
		if y+1 < h {
			if (y/2)%2 == 0 {
				set(w-1, y+1)
			} else {
				set(0, y+1)
			}
		}
	}
}

// rbcCases returns the RBCDetection inputs; big adds larger ones.
func rbcCases(big bool) []kernelCase {
	var cs []kernelCase
	gen := func(w, h int, seed uint64) {
		img := make([]byte, 3*w*h)
		genTile(img, w, h, seed, 0)
		cs = append(cs, kernelCase{fmt.Sprintf("generated %d", seed), w, h, img})
	}
	gen(1, 1, 1)
	gen(17, 13, 2)
	gen(200, 150, 3)
	cs = append(cs, kernelCase{"empty", 40, 30, rgbImage(40, 30, rbcBG[0], rbcBG[1], rbcBG[2])})
	cs = append(cs, kernelCase{"all seed", 37, 41, rgbImage(37, 41, rbcSeedC[0], rbcSeedC[1], rbcSeedC[2])})
	all := rgbImage(70, 50, rbcLooseC[0], rbcLooseC[1], rbcLooseC[2])
	setRGB(all, 70, 50, 69, 49, rbcSeedC) // one seed in the corner reaches everything
	cs = append(cs, kernelCase{"all loose, seed in a corner", 70, 50, all})
	for _, sz := range [][2]int{{64, 64}, {1, 90}, {90, 1}} {
		w, h := sz[0], sz[1]
		img := rgbImage(w, h, rbcBG[0], rbcBG[1], rbcBG[2])
		first := true
		snake(w, h, func(x, y int) {
			c := rbcLooseC
			if first {
				c, first = rbcSeedC, false
			}
			setRGB(img, w, h, x, y, c)
		})
		cs = append(cs, kernelCase{"1-pixel snake", w, h, img})
	}
	// Diagonals: 8-connected, not 4-connected; a second one with no seed.
	const dw, dh = 50, 45
	diag := rgbImage(dw, dh, rbcBG[0], rbcBG[1], rbcBG[2])
	for k := range dh {
		setRGB(diag, dw, dh, k, k, rbcLooseC)
		if k+3 < dw {
			setRGB(diag, dw, dh, k+3, k, rbcLooseC)
		}
	}
	setRGB(diag, dw, dh, dh-1, dh-1, rbcSeedC)
	cs = append(cs, kernelCase{"diagonals", dw, dh, diag})
	// The frame of the image reddish, a seed on the right edge, an inner
	// reddish square without seed.
	const fw, fh = 66, 35
	frame := rgbImage(fw, fh, rbcBG[0], rbcBG[1], rbcBG[2])
	for x := range fw {
		setRGB(frame, fw, fh, x, 0, rbcLooseC)
		setRGB(frame, fw, fh, x, fh-1, rbcLooseC)
	}
	for y := range fh {
		setRGB(frame, fw, fh, 0, y, rbcLooseC)
		setRGB(frame, fw, fh, fw-1, y, rbcLooseC)
	}
	setRGB(frame, fw, fh, fw-1, fh/2, rbcSeedC)
	for y := 10; y < 20; y++ {
		for x := 10; x < 20; x++ {
			setRGB(frame, fw, fh, x, y, rbcLooseC)
		}
	}
	cs = append(cs, kernelCase{"border frame", fw, fh, frame})
	// Random: each pixel background, reddish or (rarely) strongly red.
	r := rand.New(rand.NewPCG(3, 4))
	for _, sz := range [][2]int{{5, 3}, {97, 61}, {130, 129}} {
		w, h := sz[0], sz[1]
		img := rgbImage(w, h, rbcBG[0], rbcBG[1], rbcBG[2])
		for y := range h {
			for x := range w {
				switch v := r.IntN(100); {
				case v < 2:
					setRGB(img, w, h, x, y, rbcSeedC)
				case v < 55:
					setRGB(img, w, h, x, y, rbcLooseC)
				}
			}
		}
		cs = append(cs, kernelCase{"random", w, h, img})
	}
	if big {
		gen(1024, 1024, 5)
		img := rgbImage(512, 512, rbcBG[0], rbcBG[1], rbcBG[2])
		first := true
		snake(512, 512, func(x, y int) {
			c := rbcLooseC
			if first {
				c, first = rbcSeedC, false
			}
			setRGB(img, 512, 512, x, y, c)
		})
		cs = append(cs, kernelCase{"1-pixel snake", 512, 512, img})
	}
	return cs
}

// morphCases returns the MorphOpen inputs; big adds larger ones.
func morphCases(big bool) []kernelCase {
	r := rand.New(rand.NewPCG(5, 6))
	noise := func(w, h int) kernelCase {
		img := make([]byte, 3*w*h)
		for i := range img {
			img[i] = uint8(r.IntN(256))
		}
		return kernelCase{"noise", w, h, img}
	}
	var cs []kernelCase
	for _, sz := range [][2]int{{1, 1}, {1, 50}, {50, 1}, {7, 5}, {19, 19}, {40, 37}, {64, 64}, {100, 77}} {
		cs = append(cs, noise(sz[0], sz[1]))
	}
	cs = append(cs, kernelCase{"all black", 45, 33, rgbImage(45, 33, 0, 0, 0)})
	cs = append(cs, kernelCase{"all white", 33, 45, rgbImage(33, 45, 255, 255, 255)})
	dot := rgbImage(41, 39, 255, 255, 255)
	setRGB(dot, 41, 39, 20, 19, [3]uint8{0, 0, 0})
	setRGB(dot, 41, 39, 0, 0, [3]uint8{0, 0, 0})
	cs = append(cs, kernelCase{"single dark pixels", 41, 39, dot})
	lines := rgbImage(80, 60, 255, 255, 255)
	for k := range 60 {
		setRGB(lines, 80, 60, 40, k, [3]uint8{0, 0, 0})
		setRGB(lines, 80, 60, k, k, [3]uint8{20, 20, 20})
	}
	cs = append(cs, kernelCase{"1-pixel lines", 80, 60, lines})
	// Dark discs of every radius around the disk's, some on the border.
	discs := rgbImage(120, 90, 240, 200, 220)
	for k, c := range [][3]int{{10, 10, 8}, {50, 20, 9}, {90, 40, 10}, {0, 80, 12}, {119, 89, 9}, {60, 70, 5}} {
		cx, cy, rad := c[0], c[1], c[2]
		for y := max(0, cy-rad); y < min(90, cy+rad+1); y++ {
			for x := max(0, cx-rad); x < min(120, cx+rad+1); x++ {
				if (x-cx)*(x-cx)+(y-cy)*(y-cy) <= rad*rad {
					setRGB(discs, 120, 90, x, y, [3]uint8{uint8(60 + 10*k), 40, 120})
				}
			}
		}
	}
	cs = append(cs, kernelCase{"discs", 120, 90, discs})
	img := make([]byte, 3*150*140)
	genTile(img, 150, 140, 9, 1)
	cs = append(cs, kernelCase{"generated", 150, 140, img})
	if big {
		cs = append(cs, noise(1000, 777))
		img := make([]byte, 3*1024*1024)
		genTile(img, 1024, 1024, 9, 2)
		cs = append(cs, kernelCase{"generated", 1024, 1024, img})
	}
	return cs
}

// maskCases returns the PreWatershed inputs (masks, 1 foreground); big
// adds larger ones.
func maskCases(big bool) []kernelCase {
	r := rand.New(rand.NewPCG(7, 8))
	filled := func(w, h int, v uint8) []byte { return bytes.Repeat([]byte{v}, w*h) }
	var cs []kernelCase
	cs = append(cs, kernelCase{"empty", 40, 30, filled(40, 30, 0)})
	cs = append(cs, kernelCase{"all foreground", 40, 30, filled(40, 30, 1)})
	cs = append(cs, kernelCase{"1x1 foreground", 1, 1, filled(1, 1, 1)})
	cs = append(cs, kernelCase{"1x1 background", 1, 1, filled(1, 1, 0)})
	for _, sz := range [][2]int{{1, 70}, {70, 1}} {
		m := filled(sz[0], sz[1], 1)
		m[len(m)/3] = 0
		cs = append(cs, kernelCase{"line with one gap", sz[0], sz[1], m})
	}
	centre := filled(61, 47, 1)
	centre[23*61+30] = 0
	cs = append(cs, kernelCase{"one background pixel, centre", 61, 47, centre})
	corner := filled(150, 150, 1)
	corner[0] = 0 // distances up to 149*sqrt(2): past the Go code's table
	cs = append(cs, kernelCase{"one background pixel, corner", 150, 150, corner})
	lines := filled(90, 70, 0)
	for k := range 70 {
		lines[k*90+45] = 1 // a 1-pixel-wide vertical line
		lines[k*90+k] = 1  // a diagonal
	}
	for x := range 90 {
		lines[35*90+x] = 1
	}
	cs = append(cs, kernelCase{"1-pixel lines", 90, 70, lines})
	bgLines := filled(90, 70, 1)
	for k := range 70 {
		bgLines[k*90+30] = 0
	}
	cs = append(cs, kernelCase{"1-pixel background line", 90, 70, bgLines})
	for _, d := range []int{50, 90, 99} {
		for _, sz := range [][2]int{{33, 65}, {130, 97}} {
			m := make([]byte, sz[0]*sz[1])
			for i := range m {
				if r.IntN(100) < d {
					m[i] = 1
				}
			}
			cs = append(cs, kernelCase{fmt.Sprintf("random %d%%", d), sz[0], sz[1], m})
		}
	}
	// Discs and blobs touching the border, with plateaus and bumps.
	blobs := filled(128, 96, 0)
	for _, c := range [][3]int{{0, 0, 20}, {64, 48, 25}, {100, 48, 18}, {127, 95, 15}, {30, 80, 9}, {80, 10, 6}} {
		cx, cy, rad := c[0], c[1], c[2]
		for y := max(0, cy-rad); y < min(96, cy+rad+1); y++ {
			for x := max(0, cx-rad); x < min(128, cx+rad+1); x++ {
				if (x-cx)*(x-cx)+(y-cy)*(y-cy) <= rad*rad {
					blobs[y*128+x] = 1
				}
			}
		}
	}
	cs = append(cs, kernelCase{"blobs", 128, 96, blobs})
	if big {
		m := filled(600, 500, 1)
		m[250*600+300] = 0
		cs = append(cs, kernelCase{"one background pixel, centre", 600, 500, m})
		tile := NewOpTile(1024, 1)
		cs = append(cs, kernelCase{"filled mask of a generated tile", 1024, 1024, tile.filled})
	}
	return cs
}

// labelCases returns the BWLabel inputs: the masks of maskCases as 16-bit
// images (a watershed's), foreground values other than 1 among them, and
// a checkerboard of more 4-connected components than 16-bit labels hold.
func labelCases(big bool) []kernelCase {
	var cs []kernelCase
	for k, c := range maskCases(big) {
		m := make([]uint16, c.w*c.h)
		for i, v := range c.in {
			m[i] = uint16(v) * uint16(1+(k+i)%3*1000) // basins of several labels
		}
		cs = append(cs, kernelCase{c.name, c.w, c.h, bytesOf(m)})
	}
	w, h := 600, 300 // 90000 components
	m := make([]uint16, w*h)
	for i := range m {
		if (i%w+i/w)%2 == 0 {
			m[i] = 1
		}
	}
	return append(cs, kernelCase{"checkerboard, 90000 components", w, h, bytesOf(m)})
}

// kernelOp is an operation under test: its cases, its CPU kernel and the
// size of an output element.
type kernelOp struct {
	name  string
	cases func(big bool) []kernelCase
	cpu   func(in []byte, w, h int) []byte
	elem  int
}

// kernelOpsUnderTest returns RBCDetection, MorphOpen, PreWatershed,
// FillHoles and AreaThreshold (on the PreWatershed masks) and BWLabel.
func kernelOpsUnderTest() []kernelOp {
	return []kernelOp{
		{"FillHoles", maskCases, func(in []byte, w, h int) []byte {
			out := make([]byte, w*h)
			fillHoles(in, out, w, h)
			return out
		}, 1},
		{"RBCDetection", rbcCases, func(in []byte, w, h int) []byte {
			out := make([]byte, w*h)
			rbcDetect(in, out, w, h)
			return out
		}, 1},
		{"MorphOpen", morphCases, func(in []byte, w, h int) []byte {
			out := make([]byte, w*h)
			morphOpen(in, out, w, h)
			return out
		}, 1},
		{"AreaThreshold", maskCases, func(in []byte, w, h int) []byte {
			out := make([]byte, w*h)
			areaThreshold(in, out, w, h)
			return out
		}, 1},
		{"BWLabel", labelCases, func(in []byte, w, h int) []byte {
			out := make([]uint16, w*h)
			bwLabel(view[uint16](in), out, w, h)
			return bytesOf(out)
		}, 2},
		{"PreWatershed", maskCases, func(in []byte, w, h int) []byte {
			out := make([]uint16, w*h)
			preWatershed(in, out, w, h)
			return bytesOf(out)
		}, 2},
	}
}

// runOnAccel runs op on a with inputs ins: uploaded, run, downloaded.
func runOnAccel(ctx context.Context, a accel, op string, ins [][]byte, outBytes, w, h int) (_ []byte, err error) {
	if b := a.bind(); b != nil {
		unbind, err := b(ctx, a)
		if err != nil {
			return nil, err
		}
		defer unbind()
	}
	var bufs []gpuBuf
	defer func() {
		for _, b := range bufs {
			a.release(b)
		}
	}()
	for _, in := range ins {
		ib, err := a.alloc(int64(len(in)))
		if err != nil {
			return nil, err
		}
		bufs = append(bufs, ib)
		if err := a.upload(ctx, ib, in); err != nil {
			return nil, err
		}
	}
	ob, err := a.alloc(int64(outBytes))
	if err != nil {
		return nil, err
	}
	bufs = append(bufs, ob)
	if err := a.run(ctx, op, bufs, w, h); err != nil {
		return nil, err
	}
	out := make([]byte, outBytes)
	return out, a.download(ctx, out, ob)
}

// firstDiffs describes the first (at most 8) pixels where the outputs
// differ, and how many do.
func firstDiffs(cpu, gpu []byte, elem, w int) string {
	val := func(b []byte, i int) int {
		if elem == 2 {
			return int(view[uint16](b)[i])
		}
		return int(b[i])
	}
	var parts []string
	count := 0
	for i := range len(cpu) / elem {
		if a, b := val(cpu, i), val(gpu, i); a != b {
			if count < 8 {
				parts = append(parts, fmt.Sprintf("(%d,%d) cpu %d gpu %d", i%w, i/w, a, b))
			}
			count++
		}
	}
	return fmt.Sprintf("%d pixels differ; first: %s", count, strings.Join(parts, ", "))
}

// checkKernelCases compares op on a with its CPU kernel on every case.
func checkKernelCases(t *testing.T, a accel, op kernelOp, big bool) {
	t.Helper()
	ctx := context.Background()
	for _, c := range op.cases(big) {
		want := op.cpu(c.in, c.w, c.h)
		got, err := runOnAccel(ctx, a, op.name, [][]byte{c.in}, len(want), c.w, c.h)
		if err != nil {
			t.Fatalf("%s, %s %dx%d: %v", op.name, c.name, c.w, c.h, err)
		}
		if !bytes.Equal(want, got) {
			t.Errorf("%s, %s %dx%d on %s: %s", op.name, c.name, c.w, c.h, a.Name(), firstDiffs(want, got, op.elem, c.w))
		}
	}
}

// checkReconToNucleiCases compares ReconToNuclei on a with its CPU kernel
// on the RGB images of the MorphOpen and RBCDetection cases, its other
// inputs (the opening and the red blood cells) made from each by the CPU
// as in the pipeline.
func checkReconToNucleiCases(t *testing.T, a accel, big bool) {
	t.Helper()
	ctx := context.Background()
	for _, c := range append(morphCases(big), rbcCases(big)...) {
		n := c.w * c.h
		opened, rbc, want := make([]byte, n), make([]byte, n), make([]byte, n)
		morphOpen(c.in, opened, c.w, c.h)
		rbcDetect(c.in, rbc, c.w, c.h)
		reconToNuclei(c.in, opened, rbc, want, c.w, c.h)
		got, err := runOnAccel(ctx, a, "ReconToNuclei", [][]byte{c.in, opened, rbc}, n, c.w, c.h)
		if err != nil {
			t.Fatalf("ReconToNuclei, %s %dx%d: %v", c.name, c.w, c.h, err)
		}
		if !bytes.Equal(want, got) {
			t.Errorf("ReconToNuclei, %s %dx%d on %s: %s", c.name, c.w, c.h, a.Name(), firstDiffs(want, got, 1, c.w))
		}
	}
}

// checkWatershedCases compares Watershed on a with its CPU kernel on the
// masks of maskCases, each with its distance map (as in the pipeline)
// and with a rough relief of random levels 0-5 (many maxima, plateaus
// and ties between basins), and on the filled mask of a generated tile
// when big.
func checkWatershedCases(t *testing.T, a accel, big bool) {
	t.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(21, 22))
	for _, c := range maskCases(big) {
		n := c.w * c.h
		for _, rough := range []bool{false, true} {
			dist := make([]uint16, n)
			preWatershed(c.in, dist, c.w, c.h)
			if rough {
				for i := range dist {
					dist[i] = uint16(r.IntN(6))
				}
			}
			want := make([]uint16, n)
			watershed(dist, c.in, want, c.w, c.h)
			got, err := runOnAccel(ctx, a, "Watershed", [][]byte{bytesOf(dist), c.in}, 2*n, c.w, c.h)
			if err != nil {
				t.Fatalf("Watershed, %s %dx%d (rough %v): %v", c.name, c.w, c.h, rough, err)
			}
			if !bytes.Equal(bytesOf(want), got) {
				t.Errorf("Watershed, %s %dx%d (rough %v) on %s: %s", c.name, c.w, c.h, rough, a.Name(), firstDiffs(bytesOf(want), got, 2, c.w))
			}
		}
	}
}

// TestHostKernelEdgeCases compares the Go mirrors of the RBCDetection,
// MorphOpen, ReconToNuclei, PreWatershed, Watershed and FillHoles kernels
// with the CPU kernels on the edge cases (borders, empty, all foreground,
// 1-pixel shapes, noise).
func TestHostKernelEdgeCases(t *testing.T) {
	a := hostAccels(1)[0]
	for _, op := range kernelOpsUnderTest() {
		t.Run(op.name, func(t *testing.T) { checkKernelCases(t, a, op, false) })
	}
	t.Run("ReconToNuclei", func(t *testing.T) { checkReconToNucleiCases(t, a, false) })
	t.Run("Watershed", func(t *testing.T) { checkWatershedCases(t, a, false) })
}

// TestDiskTable checks the disk description patho_disk reads against the
// disk's half-widths.
func TestDiskTable(t *testing.T) {
	for r := range diskMaxR + 1 {
		d := diskTable(r)
		hw := diskHalfWidths(r)
		if int(d[0]) != r || int(d[1]) > diskWidx-2 {
			t.Fatalf("r %d: header %v", r, d[:2])
		}
		for dy, v := range hw {
			if got := d[2+d[diskWidx+dy]]; int(got) != v {
				t.Errorf("r %d: row %d: half-width %d, want %d", r, dy-r, got, v)
			}
		}
	}
}
