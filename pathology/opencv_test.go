package pathology

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var (
	opencvSize   = flag.Int("opencv-size", 0, "TestOpenCVComparison: also time the operations against OpenCV on a tile of this edge (4096 for the issue's comparison)")
	opencvRounds = flag.Int("opencv-rounds", 5, "TestOpenCVComparison: interleaved rounds (pathology, OpenCV, pathology, ...)")
	opencvWall   = flag.Bool("opencv-wall", false, "TestOpenCVComparison: compare wall times instead of the threads' CPU times")
)

// debianPython is the Python with Debian's python3-opencv (the python3 on
// PATH may be another one).
const debianPython = "/usr/bin/python3"

// opencvOps are the operations testdata/opencv_ops.py does: pipeline
// operations, and Canny (FeatGradient's edges, timed alone: opTileCanny).
func opencvOps() []string {
	return []string{"MorphOpen", "AreaThreshold", "FillHoles", "PreWatershed", "Watershed", "BWLabel", "Canny"}
}

// opTileCanny returns the Canny edges of t's grey image as a cpuOp, and
// the edges it writes.
func opTileCanny(t *OpTile) (cpuOp, []uint8) {
	n := t.w * t.h
	grey, edges := make([]uint8, n), make([]uint8, n)
	greyImage(t.rgb, grey, n)
	return cpuOp{"Canny", func() { canny(grey, edges, t.w, t.h) }}, edges
}

// needOpenCV skips the test unless Debian's Python has OpenCV and NumPy.
func needOpenCV(t *testing.T) {
	t.Helper()
	if err := exec.Command(debianPython, "-c", "import cv2, numpy").Run(); err != nil {
		t.Skipf("skipped: %s cannot import cv2 and numpy (%v): apt-get install python3-opencv", debianPython, err)
	}
}

// readNPY reads a .npy file written by NumPy (format 1.x or 2.x): its
// dtype, shape and data.
func readNPY(path string) (string, []int, []byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", nil, nil, err
	}
	if len(b) < 12 || string(b[:6]) != "\x93NUMPY" {
		return "", nil, nil, fmt.Errorf("%s: not a .npy file", path)
	}
	var hl, start int
	if b[6] == 1 {
		hl, start = int(binary.LittleEndian.Uint16(b[8:])), 10
	} else {
		hl, start = int(binary.LittleEndian.Uint32(b[8:])), 12
	}
	hdr := string(b[start : start+hl])
	m := regexp.MustCompile(`'descr': '([^']+)'.*'shape': \(([^)]*)\)`).FindStringSubmatch(hdr)
	if m == nil || strings.Contains(hdr, "'fortran_order': True") {
		return "", nil, nil, fmt.Errorf("%s: header %q", path, hdr)
	}
	var shape []int
	for _, f := range strings.Split(m[2], ",") {
		if f = strings.TrimSpace(f); f != "" {
			v, err := strconv.Atoi(f)
			if err != nil {
				return "", nil, nil, fmt.Errorf("%s: shape %q", path, m[2])
			}
			shape = append(shape, v)
		}
	}
	return m[1], shape, b[start+hl:], nil
}

// parseOpLines parses "op NAME: MS ms" lines.
func parseOpLines(out string) map[string]float64 {
	times := map[string]float64{}
	for _, m := range regexp.MustCompile(`(?m)^op (\w+): ([0-9.]+) ms$`).FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		times[m[1]] = v
	}
	return times
}

// TestOpenCVComparison runs testdata/opencv_ops.py on the inputs
// `pathology -cpu-ops -out` writes for a small tile and checks that
// OpenCV's outputs are pathology's where the definitions are the same:
// the opening by the 19x19 disk, the area threshold, the filled holes, the
// Euclidean distance (in eighths of a pixel) and the 4-connected labels.
// With -opencv-size N it then times the operations on an N x N tile,
// pathology and OpenCV interleaved for -opencv-rounds rounds, and logs
// the medians, their ratios and the machine's load.
func TestOpenCVComparison(t *testing.T) {
	needOpenCV(t)
	const size = 256
	dir := t.TempDir()
	tile := NewOpTile(size, 1)
	if err := writeOpInputs(dir, tile); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join("testdata", "opencv_ops.py")
	cv, err := exec.Command(debianPython, script, dir, "--save", "--rounds", "1").CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, cv)
	}
	if got := parseOpLines(string(cv)); len(got) != len(opencvOps()) {
		t.Errorf("%s printed %d operations, want %d:\n%s", script, len(got), len(opencvOps()), cv)
	}
	load := func(name, dtype string) []byte {
		dt, shape, data, err := readNPY(filepath.Join(dir, "cv_"+name+".npy"))
		if err != nil {
			t.Fatal(err)
		}
		if dt != dtype || !slices.Equal(shape, []int{size, size}) {
			t.Fatalf("cv_%s.npy: %s %v, want %s %dx%d", name, dt, shape, dtype, size, size)
		}
		return data
	}
	for _, c := range []struct {
		name string
		want []uint8
	}{{"MorphOpen", tile.opened}, {"AreaThreshold", tile.area}, {"FillHoles", tile.filled}} {
		if got := load(c.name, "|u1"); !bytes.Equal(got, c.want) {
			t.Errorf("%s: OpenCV's output differs from pathology's", c.name)
		}
	}
	dist := make([]uint16, size*size)
	distanceTransform(tile.filled, dist, size, size)
	cvDist := load("PreWatershed", "<f4")
	for i := range dist {
		d := math.Float32frombits(binary.LittleEndian.Uint32(cvDist[4*i:]))
		if uint16(math.Round(distScale*float64(d))) != dist[i] {
			t.Fatalf("PreWatershed: pixel %d: OpenCV's distance %v, pathology's %v/%d", i, d, dist[i], distScale)
		}
	}
	cop, edges := opTileCanny(tile)
	cop.run()
	if got := load("Canny", "|u1"); !bytes.Equal(got, edges) {
		t.Errorf("Canny: OpenCV's edges differ from pathology's: %s", firstDiffs(got, edges, 1, size))
	}
	cvLab := load("BWLabel", "<i4")
	for i, l := range tile.labels {
		if int32(binary.LittleEndian.Uint32(cvLab[4*i:])) != int32(l) {
			t.Fatalf("BWLabel: pixel %d: OpenCV's label %d, pathology's %d", i, int32(binary.LittleEndian.Uint32(cvLab[4*i:])), l)
		}
	}
	if *opencvSize > 0 {
		compareWithOpenCV(t, *opencvSize, *opencvRounds, !*opencvWall)
	}
}

// compareWithOpenCV times the operations OpenCV can do on a size x size
// tile, pathology (on one core) and OpenCV (one thread) interleaved for
// rounds rounds, each side the median of 3 runs after a warm-up, and logs
// the medians over the rounds with their ratios and the load averages.
func compareWithOpenCV(t *testing.T, size, rounds int, cpuTime bool) {
	loadavg := func() string {
		b, _ := os.ReadFile("/proc/loadavg")
		return strings.Join(strings.Fields(string(b))[:min(3, len(strings.Fields(string(b))))], " ")
	}
	dir := t.TempDir()
	tile := NewOpTile(size, 1)
	if err := writeOpInputs(dir, tile); err != nil {
		t.Fatal(err)
	}
	var ops []cpuOp
	for _, op := range tile.ops() {
		if slices.Contains(opencvOps(), op.name) {
			ops = append(ops, op)
		}
	}
	cop, _ := opTileCanny(tile)
	ops = append(ops, cop)
	args := []string{filepath.Join("testdata", "opencv_ops.py"), dir, "--rounds", "3"}
	clock := "wall"
	if cpuTime {
		args, clock = append(args, "--cpu-time"), "thread CPU"
	}
	ours, theirs := map[string][]float64{}, map[string][]float64{}
	start, loadStart := time.Now(), loadavg()
	for range rounds {
		med, err := timeOps(ops, 3, cpuTime)
		if err != nil {
			t.Fatal(err)
		}
		for k, op := range ops {
			ours[op.name] = append(ours[op.name], float64(med[k])/1e6)
		}
		cv, err := exec.Command(debianPython, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("opencv_ops.py: %v\n%s", err, cv)
		}
		for name, v := range parseOpLines(string(cv)) {
			theirs[name] = append(theirs[name], v)
		}
	}
	median := func(v []float64) float64 {
		v = slices.Clone(v)
		slices.Sort(v)
		return v[len(v)/2]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%dx%d tile, %d interleaved rounds, %s time, medians; load average %s at the start, %s at the end (%d CPUs), %v\n",
		size, size, rounds, clock, loadStart, loadavg(), runtime.NumCPU(), time.Since(start).Round(time.Second))
	fmt.Fprintf(&b, "| operation | pathology ms | OpenCV ms | ratio |\n|---|---:|---:|---:|\n")
	logSum, k := 0.0, 0
	for _, op := range ops {
		o, c := median(ours[op.name]), median(theirs[op.name])
		fmt.Fprintf(&b, "| %s | %.1f | %.1f | %.2f |\n", op.name, o, c, o/c)
		if op.name != "Canny" { // the six segmentation operations
			logSum += math.Log(o / c)
			k++
		}
	}
	fmt.Fprintf(&b, "geometric mean of the ratios but Canny's: %.2f\n", math.Exp(logSum/float64(k)))
	t.Log("\n" + b.String())
}
