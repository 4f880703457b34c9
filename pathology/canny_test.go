package pathology

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestCannyMatchesOpenCV compares canny with OpenCV's cv2.Canny (L1,
// aperture 3) on grey images of every kind: noise, steps, ramps, a
// generated tile's grey, and sizes from 1 x 1.
func TestCannyMatchesOpenCV(t *testing.T) {
	needOpenCV(t)
	r := rand.New(rand.NewPCG(31, 32))
	type img struct {
		name string
		w, h int
		g    []uint8
	}
	var imgs []img
	for _, s := range [][2]int{{1, 1}, {1, 9}, {9, 1}, {2, 2}, {3, 5}, {17, 13}, {64, 48}, {200, 150}} {
		g := make([]uint8, s[0]*s[1])
		for i := range g {
			g[i] = uint8(r.IntN(256))
		}
		imgs = append(imgs, img{"noise", s[0], s[1], g})
		sm := make([]uint8, len(g))
		for i := range sm {
			x, y := i%s[0], i/s[0]
			sm[i] = uint8(128 + 100*math.Sin(float64(x)/5+float64(y)/7) + float64(r.IntN(20)))
		}
		imgs = append(imgs, img{"waves", s[0], s[1], sm})
	}
	for _, span := range []int{13, 30, 40, 60} { // magnitudes all about the thresholds
		g := make([]uint8, 240*180)
		for i := range g {
			g[i] = uint8(100 + r.IntN(span))
		}
		imgs = append(imgs, img{fmt.Sprintf("noise of %d levels", span), 240, 180, g})
	}
	steps := make([]uint8, 80*60)
	for i := range steps {
		x, y := i%80, i/80
		if (x-40)*(x-40)+(y-30)*(y-30) < 400 || x > 70 || y < 5 {
			steps[i] = 200
		} else {
			steps[i] = 30
		}
	}
	imgs = append(imgs, img{"disc and bars", 80, 60, steps})
	tile := NewOpTile(512, 1)
	grey := make([]uint8, 512*512)
	greyImage(tile.rgb, grey, 512*512)
	imgs = append(imgs, img{"generated tile", 512, 512, grey})
	dir := t.TempDir()
	for k, c := range imgs {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("g%d.npy", k)))
		if err != nil {
			t.Fatal(err)
		}
		if err := writeNPY(f, "|u1", []int{c.h, c.w}, c.g); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	script := `import sys, cv2, numpy as np
cv2.setNumThreads(1)
for k in range(int(sys.argv[2])):
    g = np.load(f"{sys.argv[1]}/g{k}.npy")
    np.save(f"{sys.argv[1]}/e{k}.npy", (cv2.Canny(g, 50, 150, apertureSize=3, L2gradient=False) != 0).astype(np.uint8))`
	if b, err := exec.Command(debianPython, "-c", script, dir, fmt.Sprint(len(imgs))).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	for k, c := range imgs {
		_, _, want, err := readNPY(filepath.Join(dir, fmt.Sprintf("e%d.npy", k)))
		if err != nil {
			t.Fatal(err)
		}
		got := make([]uint8, c.w*c.h)
		canny(c.g, got, c.w, c.h)
		if !bytes.Equal(got, want) {
			t.Errorf("%d %s %dx%d: %s", k, c.name, c.w, c.h, firstDiffs(want, got, 1, c.w))
		}
	}
}

// BenchmarkCanny times canny alone on the grey image of a generated tile
// (-cpu-ops-size, 1024 by default; TestOpenCVComparison sets it beside
// OpenCV's).
func BenchmarkCanny(b *testing.B) {
	t := NewOpTile(*benchTileSize, 1)
	n := t.w * t.h
	grey, edges := make([]uint8, n), make([]uint8, n)
	greyImage(t.rgb, grey, n)
	onOneCore(func() {
		canny(grey, edges, t.w, t.h) // warm-up
		b.ResetTimer()
		for b.Loop() {
			canny(grey, edges, t.w, t.h)
		}
	})
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/px")
}
