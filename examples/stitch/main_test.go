package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/image/tiff"

	"encoding/json"
	"github.com/gohtgs/htgs/examples/internal/cli"
	"github.com/gohtgs/htgs/stitching"
	"github.com/gohtgs/htgs/stitching/synth"
	"github.com/gohtgs/htgs/stitching/tileio"
	"github.com/gohtgs/htgs/tiled"
	"slices"
)

// outputNames are the files a run with the mosaic writes into -out.
var (
	defNames    = sliceNames(defaultPrefix, 1, 1)
	outputNames = defNames.list()
)

// generated returns a folder holding a synthetic rows x cols grid of
// 256 x 192 tiles (see synth), generated once per configuration.
var (
	genMu    sync.Mutex
	genCache = map[string]string{}
	genRoot  string
)

func generated(t *testing.T, rows, cols int, seed uint64, params *synth.Params) string {
	t.Helper()
	genMu.Lock()
	defer genMu.Unlock()
	key := fmt.Sprintf("%dx%d-seed%d-scene", rows, cols, seed)
	if params != nil {
		key = fmt.Sprintf("%dx%d-seed%d-noise", rows, cols, seed)
	}
	if d, ok := genCache[key]; ok {
		return d
	}
	if genRoot == "" {
		var err error
		if genRoot, err = os.MkdirTemp("", "stitch-test-grids-"); err != nil {
			t.Fatal(err)
		}
	}
	cfg := synth.DefaultConfig()
	cfg.Rows, cfg.Cols, cfg.TileWidth, cfg.TileHeight, cfg.Seed, cfg.Params = rows, cols, 256, 192, seed, params
	dir := filepath.Join(genRoot, key)
	if err := synth.GenerateToDir(context.Background(), cfg, dir, synth.DefaultName); err != nil {
		t.Fatal(err)
	}
	genCache[key] = dir
	return dir
}

func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		main() // a local worker of -cluster, started from the test binary
	}
	removeNATSServer := setupNATSServer()
	code := m.Run()
	removeNATSServer()
	if genRoot != "" {
		os.RemoveAll(genRoot)
	}
	// No goroutine outlives the package's tests (the cluster tests check
	// their own too, around each embedded server).
	if code == 0 {
		if err := goleak.Find(natsLeak); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// result is one run of the program.
type result struct {
	code           int
	stdout, stderr string
}

func runArgs(t *testing.T, ctx context.Context, args ...string) result {
	t.Helper()
	var out, errw bytes.Buffer
	code := runMain(ctx, args, &out, &errw)
	return result{code, out.String(), errw.String()}
}

// warnings returns the WARNING lines of stderr.
func (r result) warnings() []string {
	var w []string
	for _, l := range strings.Split(r.stderr, "\n") {
		if strings.HasPrefix(l, prog+": WARNING: ") {
			w = append(w, l)
		}
	}
	return w
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-rows", "3"}, // no -dir
		{"-dir", "x", "-rows", "0", "-cols", "2", "-out", "o"}, // bad size
		{"-dir", "x", "-rows", "2", "-cols", "2"},              // no -out
		{"-start", "7"},
		{"-blend", "sharpen"},
		{"-overlap", "120"},
		{"-generate", "d", "-tile", "big"},
		{"-max-tile-pixels", "-5"},
		{"-mem", "lots"},
		{"-mem", "0"},
		{"-dir", "x", "-rows", "2", "-cols", "2", "-out", "o", "-keep"},
		{"-profile"},
		{"stray"},
	} {
		var out, errw bytes.Buffer
		err := run(context.Background(), args, &out, &errw)
		var ue cli.UsageError
		if !errors.As(err, &ue) {
			t.Errorf("%q: err = %v, want a usage error", args, err)
		}
	}
}

// -h prints the synopsis on stdout and exits 0; an unknown flag gives one
// error line and a hint, exit status 2 (it used to print the error and the
// whole usage, twice the error with main's own line).
func TestHelpAndBadFlag(t *testing.T) {
	for _, h := range []string{"-h", "-help", "--help"} {
		r := runArgs(t, context.Background(), h)
		if r.code != 0 || !strings.Contains(r.stdout, "Usage:") || !strings.Contains(r.stdout, "-max-tile-pixels") || r.stderr != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want the usage on stdout and 0", h, r.code, r.stdout, r.stderr)
		}
	}
	r := runArgs(t, context.Background(), "-bogus")
	want := "stitch: flag provided but not defined: -bogus\nRun 'stitch -h' for usage.\n"
	if r.code != 2 || r.stderr != want || r.stdout != "" {
		t.Errorf("-bogus: exit %d, stderr %q, stdout %q; want 2 and %q", r.code, r.stderr, r.stdout, want)
	}
}

// The hint after -generate names the program, not "go run ./examples/stitch".
func TestGenerateHintNamesTheProgram(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiles")
	r := runArgs(t, context.Background(), "-generate", dir, "-rows", "2", "-cols", "2", "-tile", "256x192")
	if r.code != 0 || !strings.Contains(r.stdout, "stitch with: stitch -dir "+dir+" -rows 2 -cols 2 -out OUT") || strings.Contains(r.stdout, "go run") {
		t.Errorf("exit %d, stdout %q", r.code, r.stdout)
	}
}

// noTemp fails when dir holds temporary files left by an output.
func noTemp(t *testing.T, dir string) {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left in %s", e.Name(), dir)
		}
	}
}

func TestGenerateThenStitch(t *testing.T) {
	dir := t.TempDir()
	out, prof := filepath.Join(t.TempDir(), "out"), filepath.Join(t.TempDir(), "prof")
	r := runArgs(t, context.Background(), "-generate", dir, "-rows", "3", "-cols", "4", "-tile", "256x192", "-seed", "5")
	if r.code != 0 {
		t.Fatalf("generate: %+v", r)
	}
	args := []string{"-dir", dir, "-rows", "3", "-cols", "4", "-out", out, "-workers", "2", "-profile", prof}
	r = runArgs(t, context.Background(), args...)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "17 of 17 pairs exact after optimization") {
		t.Errorf("accuracy line missing or wrong:\n%s", r.stdout)
	}
	for _, w := range r.warnings() {
		if !strings.Contains(w, "-profile") { // no Graphviz here is fine
			t.Errorf("warning on a good grid: %s", w)
		}
	}
	f, err := os.Open(filepath.Join(out, defNames.global))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pos, err := tileio.ReadGlobalPositions(f)
	if err != nil || len(pos) != 12 || pos[0].Name != "img_r001_c001.tif" {
		t.Fatalf("global positions: %v, %+v", err, pos)
	}
	for _, name := range outputNames {
		if st, err := os.Stat(filepath.Join(out, name)); err != nil || st.Size() == 0 {
			t.Errorf("output %s: %v", name, err)
		}
	}
	for _, phase := range phases {
		for _, suffix := range []string{".dot", "-trace.json", "-stats.json"} {
			if st, err := os.Stat(filepath.Join(prof, phase+suffix)); err != nil || st.Size() == 0 {
				t.Errorf("profile %s%s: %v", phase, suffix, err)
			}
		}
		if !strings.Contains(r.stdout, "profile of the "+phase+" graph") || !strings.Contains(r.stdout, filepath.Join(prof, phase)) {
			t.Errorf("the run does not say where the %s profile is:\n%s", phase, r.stdout)
		}
		if _, err := os.Stat(filepath.Join(out, phase+".dot")); err == nil {
			t.Errorf("profile written into -out")
		}
	}
	// phases.json covers the whole run: the graph phases and the rest,
	// one after the other.
	b, err := os.ReadFile(filepath.Join(prof, "phases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var spans []phaseSpan
	if err := json.Unmarshal(b, &spans); err != nil {
		t.Fatal(err)
	}
	var got []string
	end := 0.0
	for _, s := range spans {
		got = append(got, s.Phase)
		if s.StartMS < end-1 || s.MS < 0 {
			t.Errorf("phase %q starts at %.1f ms, before the previous one ends (%.1f ms)", s.Phase, s.StartMS, end)
		}
		end = s.StartMS + s.MS
	}
	want := []string{"flat field and set-up", "registration", "stage model and repair", "refinement", "global optimization", "outputs and mosaic"}
	if !slices.Equal(got, want) {
		t.Errorf("phases.json lists %q, want %q", got, want)
	}
	if !strings.Contains(r.stdout, filepath.Join(prof, "phases.json")) {
		t.Errorf("the run does not say where phases.json is")
	}
	noTemp(t, out)
	noTemp(t, prof)

	// A missing tile is reported by name.
	if err := os.Remove(filepath.Join(dir, "img_r002_c003.tif")); err != nil {
		t.Fatal(err)
	}
	r = runArgs(t, context.Background(), args...)
	if r.code != 1 || !strings.Contains(r.stderr, "img_r002_c003.tif") {
		t.Fatalf("missing tile: %+v", r)
	}
}

// cancelOn is a stderr that cancels a run when a text appears on it.
type cancelOn struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	text   string
	cancel context.CancelFunc
}

func (c *cancelOn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	if strings.Contains(c.buf.String(), c.text) {
		c.cancel()
	}
	return len(p), nil
}

// A run that fails after the positions are known (here: interrupted while
// composing the mosaic) leaves the outputs and profile of an earlier run as
// they were, and no temporary files (the positions files used to be
// overwritten before the mosaic was made).
func TestFailedRunKeepsEarlierOutputs(t *testing.T) {
	dir := generated(t, 3, 3, 1, nil)
	out, prof := t.TempDir(), t.TempDir()
	old := map[string]string{}
	for _, name := range outputNames {
		old[filepath.Join(out, name)] = "earlier run: " + name
	}
	for _, phase := range phases {
		old[filepath.Join(prof, phase+"-trace.json")] = "earlier trace"
	}
	for p, s := range old {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &cancelOn{text: "mosaic", cancel: cancel}
	var stdout bytes.Buffer
	err := run(ctx, []string{"-dir", dir, "-rows", "3", "-cols", "3", "-out", out, "-profile", prof, "-progress", "-workers", "2"}, &stdout, stderr)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want the run cancelled while composing the mosaic\n%s", err, stderr.buf.String())
	}
	for p, s := range old {
		if got, err := os.ReadFile(p); err != nil || string(got) != s {
			t.Errorf("%s: %q (err %v), want the earlier run's %q", filepath.Base(p), got, err, s)
		}
	}
	noTemp(t, out)
	noTemp(t, prof)
}

// fakeDot puts a "dot" on PATH that runs script.
func fakeDot(t *testing.T, script string) {
	t.Helper()
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "dot"), []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// -profile DIR writes the trace, statistics and DOT files even when
// Graphviz's dot fails (the trace used to be lost), warns once, and exits 0.
func TestProfileSurvivesFailingDot(t *testing.T) {
	dir := generated(t, 3, 3, 1, nil)
	fakeDot(t, "echo 'dot: broken install' >&2; exit 3")
	prof := filepath.Join(t.TempDir(), "prof")
	r := runArgs(t, context.Background(), "-dir", dir, "-rows", "3", "-cols", "3", "-out", t.TempDir(), "-profile", prof, "-mosaic=false", "-workers", "2")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for _, phase := range phases {
		for _, suffix := range []string{"-trace.json", "-stats.json", ".dot"} {
			if st, err := os.Stat(filepath.Join(prof, phase+suffix)); err != nil || st.Size() == 0 {
				t.Errorf("%s%s: %v", phase, suffix, err)
			}
		}
		if _, err := os.Stat(filepath.Join(prof, phase+".svg")); err == nil {
			t.Errorf("%s.svg written by a failing dot", phase)
		}
	}
	ws := r.warnings()
	if len(ws) != 1 || !strings.Contains(ws[0], "broken install") {
		t.Errorf("warnings %q, want one about dot", ws)
	}

	// With a working dot, the pictures are there too.
	fakeDot(t, "cat >/dev/null; echo '<svg/>'")
	r = runArgs(t, context.Background(), "-dir", dir, "-rows", "3", "-cols", "3", "-out", t.TempDir(), "-profile", prof, "-mosaic=false", "-workers", "2")
	if r.code != 0 || len(r.warnings()) != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for _, phase := range phases {
		if b, err := os.ReadFile(filepath.Join(prof, phase+".svg")); err != nil || string(b) != "<svg/>\n" {
			t.Errorf("%s.svg: %q, %v", phase, b, err)
		}
	}
}

// A truth.csv describing another grid gets a warning and exit status 0 (it
// used to fail the run after every output was written).
func TestTruthOfAnotherGridWarns(t *testing.T) {
	dir := generated(t, 3, 3, 1, nil) // truth.csv has 9 tiles
	out := t.TempDir()
	r := runArgs(t, context.Background(), "-dir", dir, "-rows", "2", "-cols", "3", "-out", out, "-workers", "2")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	found := false
	for _, w := range r.warnings() {
		found = found || strings.Contains(w, "truth.csv describes 9 tiles, the grid has 6")
	}
	if !found || strings.Contains(r.stdout, "accuracy") {
		t.Errorf("stdout %q\nstderr %q", r.stdout, r.stderr)
	}
	for _, name := range outputNames {
		if _, err := os.Stat(filepath.Join(out, name)); err != nil {
			t.Errorf("output %s: %v", name, err)
		}
	}
}

// unwritable returns a folder in which no file can be created.
func unwritable(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		d := t.TempDir()
		if err := os.Chmod(d, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(d, 0o755) })
		return d
	}
	// root may write anywhere permissions allow; /sys refuses new files.
	if f, err := os.CreateTemp("/sys", ".probe-*"); err == nil {
		os.Remove(f.Name())
		t.Skip("no unwritable folder available")
	}
	return "/sys"
}

// Unwritable -out and -profile folders are refused before any work (the
// run used to stitch the whole grid, then fail writing).
func TestUnwritableFoldersRefusedFirst(t *testing.T) {
	dir := generated(t, 3, 3, 1, nil)
	bad := unwritable(t)
	for _, c := range []struct{ name, out, prof string }{
		{"-out", bad, t.TempDir()},
		{"-profile", t.TempDir(), bad},
	} {
		r := runArgs(t, context.Background(), "-dir", dir, "-rows", "3", "-cols", "3", "-out", c.out, "-profile", c.prof)
		if r.code != 1 || !strings.Contains(r.stderr, c.name) || !strings.Contains(r.stderr, "not writable") {
			t.Errorf("%s unwritable: exit %d, stderr %q", c.name, r.code, r.stderr)
		}
		if strings.Contains(r.stdout, "stitching") {
			t.Errorf("%s unwritable: the run started before the check:\n%s", c.name, r.stdout)
		}
	}
}

// hugeTIFF is a 1 x 1 16-bit TIFF whose header claims w x h pixels.
func hugeTIFF(t *testing.T, w, h uint16) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := tiff.Encode(&buf, image.NewGray16(image.Rect(0, 0, 1, 1)), nil); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	le := binary.LittleEndian
	ifd := int(le.Uint32(b[4:]))
	for k := range int(le.Uint16(b[ifd:])) {
		e := b[ifd+2+12*k:]
		v := map[uint16]uint16{256: w, 257: h, 278: h}[le.Uint16(e)]
		if v == 0 {
			continue
		}
		if le.Uint16(e[2:]) == 3 {
			le.PutUint16(e[8:], v)
		} else {
			le.PutUint32(e[8:], uint32(v))
		}
	}
	return b
}

// Nine tiny TIFFs whose headers claim 60000 x 60000 pixels give an error
// naming a file (they used to kill the process with "fatal error: out of
// memory"); with the limit lifted, the memory estimate refuses the run.
func TestHugeTileHeadersRefused(t *testing.T) {
	dir := t.TempDir()
	data := hugeTIFF(t, 60000, 60000)
	for r := range 3 {
		for c := range 3 {
			if err := os.WriteFile(filepath.Join(dir, synth.DefaultName(r, c)), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	args := []string{"-dir", dir, "-rows", "3", "-cols", "3", "-out", t.TempDir()}
	r := runArgs(t, context.Background(), args...)
	if r.code != 1 || !strings.Contains(r.stderr, "img_r001_c001.tif") || !strings.Contains(r.stderr, "-max-tile-pixels") ||
		strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("exit %d, stderr %q; want one line naming the file and the flag", r.code, r.stderr)
	}
	old := availableMemory
	defer func() { availableMemory = old }()
	availableMemory = func() int64 { return 64 << 30 }
	r = runArgs(t, context.Background(), append(args, "-max-tile-pixels", "0")...)
	if r.code != 1 || !strings.Contains(r.stderr, "not enough memory") || strings.Contains(r.stdout, "stitching") {
		t.Errorf("no limit: exit %d, stderr %q, stdout %q; want the memory check to refuse", r.code, r.stderr, r.stdout)
	}
}

// A run that cannot fit in the available memory is refused before it
// starts; a mosaic found too large once the positions are known is refused
// with the positions written.
func TestMemoryCheck(t *testing.T) {
	dir := generated(t, 3, 3, 1, nil)
	old := availableMemory
	defer func() { availableMemory = old }()
	out := t.TempDir()
	args := []string{"-dir", dir, "-rows", "3", "-cols", "3", "-out", out, "-workers", "2"}

	availableMemory = func() int64 { return 1 << 20 }
	r := runArgs(t, context.Background(), args...)
	if r.code != 1 || !strings.Contains(r.stderr, "not enough memory") || strings.Contains(r.stdout, "stitching") {
		t.Errorf("1 MiB: exit %d, stderr %q, stdout %q", r.code, r.stderr, r.stdout)
	}

	calls := 0
	availableMemory = func() int64 {
		calls++
		if calls == 1 {
			return 1 << 40
		}
		return 1 << 20
	}
	r = runArgs(t, context.Background(), args...)
	if r.code != 1 || !strings.Contains(r.stderr, "not enough memory for the") || !strings.Contains(r.stderr, "-mosaic=false") {
		t.Errorf("mosaic: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, name := range outputNames {
		_, err := os.Stat(filepath.Join(out, name))
		if want := name != defNames.mosaic && name != defNames.preview; (err == nil) != want {
			t.Errorf("%s written: %v, want %v", name, err == nil, want)
		}
	}
	noTemp(t, out)

	availableMemory = func() int64 { return 0 } // unknown: no check
	if r := runArgs(t, context.Background(), args...); r.code != 0 {
		t.Errorf("unknown memory: exit %d, %s", r.code, r.stderr)
	}
}

// noiseParams is a synth scene with no specimen: the tiles are noise.
func noiseParams() *synth.Params {
	p := synth.LevelParams(synth.Realistic)
	p.ColonyDensity, p.IsolatedCells, p.Debris, p.BackgroundTexture = 0, 0, 0, 0
	p.Vignetting, p.TileBrightness, p.Photons, p.ReadNoise = 0, 0, 0, 100
	return &p
}

// Grids too small to estimate the overlap from and pure noise used to exit
// 0 silently with positions far off (and a "NaN%" overlap); they now get
// WARNING lines, still with exit status 0.
func TestPoorQualityWarns(t *testing.T) {
	for _, c := range []struct {
		name       string
		rows, cols int
		seed       uint64
		params     *synth.Params
		want       string
	}{
		{"2x2", 2, 2, 2, nil, "stage model rests on"},
		{"1x3", 1, 3, 1, nil, "model skipped: too few pairs"},
		{"2x3", 2, 3, 3, nil, "stage model rests on"},
		{"noise", 4, 4, 1, noiseParams(), "median correlation"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := generated(t, c.rows, c.cols, c.seed, c.params)
			r := runArgs(t, context.Background(), "-dir", dir, "-rows", strconv.Itoa(c.rows), "-cols", strconv.Itoa(c.cols), "-out", t.TempDir(), "-workers", "2", "-mosaic=false")
			if r.code != 0 {
				t.Fatalf("exit %d\n%s", r.code, r.stderr)
			}
			ws := r.warnings()
			found := false
			for _, w := range ws {
				found = found || strings.Contains(w, c.want)
			}
			if !found {
				t.Errorf("no warning with %q:\nstdout %s\nstderr %s", c.want, r.stdout, r.stderr)
			}
			if strings.Contains(r.stdout, "NaN") {
				t.Errorf("NaN printed:\n%s", r.stdout)
			}
		})
	}
}

// The progress bars name their unit and cover every phase, the mosaic
// included.
func TestProgressShowsEveryPhase(t *testing.T) {
	dir := generated(t, 3, 3, 1, nil)
	r := runArgs(t, context.Background(), "-dir", dir, "-rows", "3", "-cols", "3", "-out", t.TempDir(), "-workers", "2", "-progress")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"registration", "12/12 pairs", "refinement", "mosaic", "9/9 tiles"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("progress lacks %q:\n%s", want, r.stderr)
		}
	}
}

// The demo removes its temporary folder at exit (57 MB used to stay in
// /tmp after every run) unless -keep, which says where it is.
func TestDemoRemovesItsFolder(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo takes a few seconds")
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	r := runArgs(t, context.Background(), "-tile", "256x192", "-workers", "2")
	if r.code != 0 || !strings.Contains(r.stdout, "of 142 pairs exact") {
		t.Fatalf("demo: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if es, _ := os.ReadDir(tmp); len(es) != 0 {
		t.Errorf("the demo left %v in the temporary folder", es)
	}
	r = runArgs(t, context.Background(), "-tile", "256x192", "-workers", "2", "-keep", "-mosaic=false")
	es, _ := os.ReadDir(tmp)
	if r.code != 0 || len(es) != 1 || !strings.Contains(r.stdout, filepath.Join(tmp, es[0].Name(), "tiles")) {
		t.Fatalf("demo -keep: exit %d, folder holds %v\n%s", r.code, es, r.stdout)
	}
	if _, err := os.Stat(filepath.Join(tmp, es[0].Name(), "out", defNames.global)); err != nil {
		t.Errorf("kept outputs: %v", err)
	}
}

// -gpu fails at once, before generating or reading anything, where GPU
// stitching cannot run (no cuda build tag, or no GPU), and says why.
func TestGPUUnavailable(t *testing.T) {
	if stitching.CheckGPU() == nil {
		t.Skip("a GPU is usable here")
	}
	dir := t.TempDir()
	var out, errw bytes.Buffer
	err := run(context.Background(), []string{"-gpu", "-generate", filepath.Join(dir, "tiles")}, &out, &errw)
	if err == nil || !(errors.Is(err, stitching.ErrNoGPUBuild) || errors.Is(err, stitching.ErrNoGPU)) || !strings.Contains(err.Error(), "-gpu") {
		t.Fatalf("err = %v, want a -gpu error wrapping ErrNoGPUBuild or ErrNoGPU", err)
	}
	if _, serr := os.Stat(filepath.Join(dir, "tiles")); !os.IsNotExist(serr) {
		t.Fatalf("tiles were generated before the GPU check failed (%v)", serr)
	}
}

// A mosaic larger than -mem is composed out of core into the same tiled
// pyramidal OME-TIFF, byte for byte, as the in-memory path writes, with a
// preview; nothing temporary is left in -out.
func TestTiledMosaic(t *testing.T) {
	dir := generated(t, 3, 4, 1, nil)
	for _, blend := range []string{"linear", "overlay"} {
		memOut, tiledOut := t.TempDir(), t.TempDir()
		args := []string{"-dir", dir, "-rows", "3", "-cols", "4", "-workers", "2", "-blend", blend}
		r := runArgs(t, context.Background(), append(args, "-out", memOut, "-mem", "4GiB")...)
		if r.code != 0 || !strings.Contains(r.stdout, ": in memory") {
			t.Fatalf("%s in memory: exit %d, stdout %q, stderr %q", blend, r.code, r.stdout, r.stderr)
		}
		r = runArgs(t, context.Background(), append(args, "-out", tiledOut, "-mem", "1MiB")...)
		if r.code != 0 || !strings.Contains(r.stdout, "out of core into a tiled (512 px) pyramidal OME-TIFF") {
			t.Fatalf("%s tiled: exit %d, stdout %q, stderr %q", blend, r.code, r.stdout, r.stderr)
		}
		for _, name := range []string{defNames.global, defNames.preview} {
			a, err1 := os.ReadFile(filepath.Join(memOut, name))
			b, err2 := os.ReadFile(filepath.Join(tiledOut, name))
			if err1 != nil || err2 != nil {
				t.Fatalf("%s: %v, %v", name, err1, err2)
			}
			if name == defNames.global && !bytes.Equal(a, b) {
				t.Fatalf("%s: the two runs found different positions", blend)
			}
		}
		// Both paths stream the mosaic through the same OME-TIFF writer:
		// the files are the same, byte for byte.
		a, err1 := os.ReadFile(filepath.Join(memOut, defNames.mosaic))
		b, err2 := os.ReadFile(filepath.Join(tiledOut, defNames.mosaic))
		if err1 != nil || err2 != nil {
			t.Fatalf("mosaic: %v, %v", err1, err2)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s: the out-of-core OME-TIFF (%d bytes) differs from the in-memory one (%d bytes)", blend, len(b), len(a))
		}
		bt, err := tiled.OpenBigTIFF(filepath.Join(tiledOut, defNames.mosaic))
		if err != nil {
			t.Fatal(err)
		}
		if len(bt.Levels) < 2 || !strings.Contains(bt.Description, "<OME ") {
			t.Errorf("%s: %d levels, description %.80q: want an OME-TIFF pyramid", blend, len(bt.Levels), bt.Description)
		}
		bt.Close()
		noTemp(t, tiledOut)
		es, _ := os.ReadDir(tiledOut)
		for _, e := range es {
			if strings.HasPrefix(e.Name(), ".") {
				t.Errorf("%s: %s left in -out", blend, e.Name())
			}
		}
	}
}

// A mosaic wider than 65535 px is never written as a classic TIFF (whose
// encoder stores the width modulo 65536), even when it fits in -mem: it
// goes to the tiled BigTIFF, whose header records its true size.
func TestWideMosaicNotClassicTIFF(t *testing.T) {
	dir := t.TempDir()
	r := runArgs(t, context.Background(), "-generate", dir, "-rows", "1", "-cols", "3", "-tile", "24000x200")
	if r.code != 0 {
		t.Fatalf("generate: exit %d, %s", r.code, r.stderr)
	}
	out := t.TempDir()
	r = runArgs(t, context.Background(), "-dir", dir, "-rows", "1", "-cols", "3", "-workers", "2", "-out", out, "-mem", "4GiB")
	if r.code != 0 {
		t.Fatalf("stitch: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	var w, h int
	if _, err := fmt.Sscanf(r.stdout[strings.Index(r.stdout, "mosaic "):], "mosaic %d x %d", &w, &h); err != nil || w <= 65535 {
		t.Fatalf("mosaic line: %d x %d, %v (want a width over 65535)\n%s", w, h, err, r.stdout)
	}
	bt, err := tiled.OpenBigTIFF(filepath.Join(out, defNames.mosaic))
	if err != nil {
		t.Fatalf("the %d x %d mosaic is not a BigTIFF: %v", w, h, err)
	}
	defer bt.Close()
	if lv := bt.Levels[0]; lv.W != w || lv.H != h {
		t.Fatalf("BigTIFF records %d x %d, the mosaic is %d x %d", lv.W, lv.H, w, h)
	}
	if !strings.Contains(bt.Description, fmt.Sprintf(`SizeX="%d" SizeY="%d"`, w, h)) || len(bt.Levels) < 2 {
		t.Fatalf("the %d x %d mosaic is not an OME-TIFF pyramid of its size: %d levels, OME-XML %.300s", w, h, len(bt.Levels), bt.Description)
	}
}

// nonFinite matches a NaN or infinity as Go and MIST print them.
var nonFinite = regexp.MustCompile(`\b(NaN|[-+]?Inf)\b`)

// All-zero tiles give no translation to measure: the statistics file used
// to hold "horizontalOverlap: NaN" even with -overlap 10. No output file
// holds NaN or Inf; the overlaps given are written as given.
func TestNoNaNInOutputs(t *testing.T) {
	dir := t.TempDir()
	pat, err := tileio.ParsePattern("img_r{rrr}_c{ccc}.tif", 1)
	if err != nil {
		t.Fatal(err)
	}
	for r := range 2 {
		for c := range 3 {
			if err := synth.WriteTIFF(filepath.Join(dir, pat.Name(r, c, 2, 3)), image.NewGray16(image.Rect(0, 0, 64, 48))); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, args := range [][]string{{"-overlap", "10"}, {"-horizontal-overlap", "12", "-vertical-overlap", "10"}} {
		out := t.TempDir()
		r := runArgs(t, context.Background(), append([]string{"-dir", dir, "-rows", "2", "-cols", "3", "-out", out, "-workers", "2"}, args...)...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, r.code, r.stderr)
		}
		es, err := os.ReadDir(out)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if !strings.HasSuffix(e.Name(), ".txt") {
				continue
			}
			b, err := os.ReadFile(filepath.Join(out, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			for i, l := range strings.Split(string(b), "\n") {
				if nonFinite.MatchString(l) {
					t.Errorf("%v: %s line %d: %q", args, e.Name(), i+1, l)
				}
			}
			if e.Name() == statsName(defaultPrefix) && len(args) > 0 {
				for _, want := range []string{"horizontalOverlap: 1", "verticalOverlap: 10\n", "overlapUncertainty: 5\n"} {
					if !strings.Contains(string(b), want) {
						t.Errorf("%s lacks %q:\n%s", e.Name(), want, b)
					}
				}
			}
		}
	}
}

// A run killed while writing its outputs leaves hidden temporary files;
// the next run into the same folder removes those whose writer is gone and
// says so, and keeps anything else.
func TestStaleTemporariesRemoved(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skipf("cannot start a process: %v", err)
	}
	dir := generated(t, 2, 2, 1, nil)
	out := t.TempDir()
	stale := filepath.Join(out, fmt.Sprintf(".%s.tmp-%d-42", defNames.global, dead.Process.Pid))
	mine := filepath.Join(out, ".notes.txt.tmp-1-1") // not an output of the run
	for _, p := range []string{stale, mine} {
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := runArgs(t, context.Background(), "-dir", dir, "-rows", "2", "-cols", "2", "-out", out, "-workers", "2", "-mosaic=false")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Errorf("%s left in place", stale)
	}
	if !strings.Contains(r.stdout, "removed "+stale) {
		t.Errorf("the run did not say it removed %s:\n%s", stale, r.stdout)
	}
	if _, err := os.Stat(mine); err != nil {
		t.Errorf("a file that is not the run's own was removed: %v", err)
	}
}

// stitch -h lists the program's flags first and MIST's names in a section
// of their own (they were mixed alphabetically, 200 lines).
func TestHelpGroupsMISTNames(t *testing.T) {
	r := runArgs(t, context.Background(), "-h")
	if r.code != 0 {
		t.Fatalf("exit %d", r.code)
	}
	out := r.stdout + r.stderr
	head := strings.Index(out, "\nMIST's headless option names (")
	if head < 0 {
		t.Fatalf("no MIST section:\n%s", out)
	}
	for _, f := range []string{"-dir", "-rows", "-compression", "-workers"} {
		if i := strings.Index(out, "\n  "+f+" "); i < 0 || i > head {
			t.Errorf("%s not among the program's flags before the MIST section", f)
		}
	}
	for _, f := range []string{"-gridWidth", "-imageDir", "-unitX", "-startTile"} {
		if i := strings.Index(out, "\n  "+f+" "); i < head {
			t.Errorf("%s not in the MIST section (at %d, section at %d)", f, i, head)
		}
	}
}

// A MIST option that has nothing to do with file names (--unitX) no longer
// switches the first tile number to MIST's 0: the tiles of a grid named
// from 001 are found.
func TestMISTOptionKeepsNumbering(t *testing.T) {
	dir := generated(t, 2, 2, 1, nil)
	r := runArgs(t, context.Background(), "-dir", dir, "-rows", "2", "-cols", "2", "-out", t.TempDir(), "-workers", "2", "-mosaic=false", "--unitX", "0.65")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
}

// A run that fails before writing anything leaves no empty output folder
// behind (it created -out, then failed on a missing tile folder).
func TestFailedRunLeavesNoEmptyFolder(t *testing.T) {
	base := t.TempDir()
	out, prof := filepath.Join(base, "out"), filepath.Join(base, "prof")
	r := runArgs(t, context.Background(), "-dir", filepath.Join(base, "missing"), "-rows", "2", "-cols", "2", "-out", out, "-profile", prof)
	if r.code == 0 {
		t.Fatal("stitching a missing folder succeeded")
	}
	for _, d := range []string{out, prof} {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("%s left behind by a failed run", d)
		}
	}
	// A folder that existed before is kept, empty or not.
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	runArgs(t, context.Background(), "-dir", filepath.Join(base, "missing"), "-rows", "2", "-cols", "2", "-out", out)
	if _, err := os.Stat(out); err != nil {
		t.Errorf("the user's own folder was removed: %v", err)
	}
}

// -spanning-tree places the tiles as MIST does; on a grid whose pairs all
// agree it gives the default solve's positions.
func TestSpanningTreeFlag(t *testing.T) {
	dir := generated(t, 3, 4, 1, nil)
	var files [][]byte
	for _, extra := range [][]string{nil, {"-spanning-tree"}} {
		out := t.TempDir()
		r := runArgs(t, context.Background(), append([]string{"-dir", dir, "-rows", "3", "-cols", "4", "-out", out, "-workers", "2", "-mosaic=false"}, extra...)...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d\n%s", extra, r.code, r.stderr)
		}
		b, err := os.ReadFile(filepath.Join(out, defNames.global))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, b)
		st, err := os.ReadFile(filepath.Join(out, statsName(defaultPrefix)))
		if err != nil {
			t.Fatal(err)
		}
		want := map[bool]string{false: "placement: global solve over every pair\n", true: "placement: maximum spanning tree (MIST's)\n"}[extra != nil]
		if !strings.Contains(string(st), want) {
			t.Errorf("%v: the statistics file lacks %q", extra, want)
		}
	}
	if !bytes.Equal(files[0], files[1]) {
		t.Errorf("a consistent grid placed differently by the solve and the tree:\n%s\n%s", files[0], files[1])
	}
}
