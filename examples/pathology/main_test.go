package main

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gohtgs/htgs/pathology"
	"github.com/gohtgs/htgs/region"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(envTestProcess) != "" {
		os.Exit(testProcessMain()) // the test binary as the program: -cluster tests' workers
	}
	goleak.VerifyTestMain(withNATSServer{m}, natsLeak())
}

// withNATSServer runs the tests with the nats-server executable of
// -cluster built and first in $PATH (see setupNATSServer).
type withNATSServer struct{ m *testing.M }

// Run builds nats-server, runs the tests and removes it.
func (w withNATSServer) Run() int {
	remove := setupNATSServer()
	defer remove()
	return w.m.Run()
}

// TestEstimates: the paper's error pattern of the sensitivity experiment.
func TestEstimates(t *testing.T) {
	w := pathology.NewWorkload(5, 9)
	// The paper's error pattern raises the four low operations and lowers
	// the others; at 100% the others vanish.
	e60 := estimates(w, 60)
	near := func(a, b float64) bool { return a > b-1e-9 && a < b+1e-9 }
	if !near(e60["AreaThreshold"], 2.4) || !near(e60["FeatGradient"], 8) || !near(e60["RBCDetection"], 3.6) {
		t.Errorf("60%% estimates wrong: %v", e60)
	}
	if e100 := estimates(w, 100); e100["BWLabel"] != 4 || e100["PreWatershed"] > 1e-6 {
		t.Errorf("100%% estimates wrong: %v", e100)
	}
}

// TestExperimentReproducesFindings runs the experiments on one small image
// and checks the seeds' qualitative findings. The simulation is
// deterministic, so these are exact properties of the model, not timings.
func TestExperimentReproducesFindings(t *testing.T) {
	e := &experiments{images: []image{{"a", 80, 11}, {"b", 80, 12}, {"c", 80, 13}}, machine: pathology.ReferenceMachine(), window: 24, out: t.TempDir()}
	res, err := e.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for name := range res.figures {
		if !slices.Contains(experimentFiles(), name) {
			t.Errorf("figure %s is not in experimentFiles: its stale temporary files would not be removed", name)
		}
	}
	if r := mean(res.patsOverFCFS); r < 1.3 {
		t.Errorf("PATS over FCFS %.2fx, want >= 1.3x (paper: 1.33x)", r)
	}
	for _, r := range res.monoPATSOverFCFS {
		if r < 0.97 || r > 1.03 {
			t.Errorf("non-pipelined PATS over FCFS %.2fx, want about 1 (no choice to make)", r)
		}
	}
	if res.windowRatio[4] > 1.15 || res.windowRatio[24] < 1.3 {
		t.Errorf("window: PATS/FCFS %.2f at 4, %.2f at 24; want little gain with few instances, >= 1.3 with many", res.windowRatio[4], res.windowRatio[24])
	}
	if l := max(res.lossAt[50], res.lossAt[60]); l > 0.12 {
		t.Errorf("50-60%% estimate error costs %.1f%%, want about 10%% at most", 100*l)
	}
	if res.lossAt[100] < 0.2 {
		t.Errorf("100%% estimate error costs only %.1f%%: the error model has no effect", 100*res.lossAt[100])
	}
	if res.fcfsDLGain < 1.04 {
		t.Errorf("FCFS + DL gains %.3fx, want about 1.1x", res.fcfsDLGain)
	}
	if res.learnedLoss > 0.15 || res.learnedMaxErr > 0.5 {
		t.Errorf("learned speedups: makespan %+.1f%% vs given, max error %.0f%%", 100*res.learnedLoss, 100*res.learnedMaxErr)
	}
	if res.dfMemoryCut["FCFS"] < 2 {
		t.Errorf("depth-first cuts FCFS memory only %.1fx", res.dfMemoryCut["FCFS"])
	}
	for _, f := range []string{"results.md", "arch.svg", "fig-compare.svg", "fig-window.svg", "fig-sensitivity.svg", "fig-locality.svg", "fig-learn.svg", "fig-depthfirst.svg", "fig-profile.svg"} {
		b, err := os.ReadFile(filepath.Join(e.out, f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, ".svg") && (!bytes.HasPrefix(b, []byte("<svg")) || !bytes.HasSuffix(b, []byte("</svg>\n"))) {
			t.Errorf("%s is not an SVG document", f)
		}
	}
}

func TestRunCommand(t *testing.T) {
	ctx := context.Background()
	var out, errOut bytes.Buffer
	if err := run(ctx, []string{"-sim", "-tiles", "20", "-policy", "fcfs", "-locality"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "simulated 20 4K tiles") || !strings.Contains(out.String(), "fcfs+dl") {
		t.Errorf("-sim output: %s", out.String())
	}
	out.Reset()
	dir := t.TempDir()
	if err := run(ctx, []string{"-tiles", "4", "-tile-size", "48", "-scale", "0.001", "-storage", "disk", "-dir", dir, "-policy", "pats"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "processed 4 tiles") {
		t.Errorf("real run output: %s", out.String())
	}
	if ids, _ := (func() ([]region.ID, error) { d, _ := region.NewDisk(dir); return d.List(ctx) })(); len(ids) != 6 {
		t.Errorf("disk storage holds %v, want the RGB input, the labels, three feature tables and the nuclei polygons", ids)
	}
	for _, bad := range [][]string{{"-policy", "lifo"}, {"-storage", "tape", "-tiles", "1"}, {"extra"}, {"-nosuchflag"}} {
		if err := run(ctx, bad, &out, &errOut); err == nil {
			t.Errorf("run %v succeeded", bad)
		}
	}
}

// TestExperimentWritesOnlyWhereTold runs -experiment from a folder that
// looks like the repository root: with no -out it must not touch
// docs/pats there, but write into a new temporary folder and print its
// path.
func TestExperimentWritesOnlyWhereTold(t *testing.T) {
	root, tmp := t.TempDir(), t.TempDir()
	t.Setenv("TMPDIR", tmp)
	committed := filepath.Join(root, "docs", "pats", "results.md")
	if err := os.MkdirAll(filepath.Dir(committed), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(committed, []byte("committed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	var out, errOut bytes.Buffer
	if code := realMain(context.Background(), []string{"-experiment", "-quick"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if b, _ := os.ReadFile(committed); string(b) != "committed\n" {
		t.Errorf("docs/pats/results.md was overwritten")
	}
	if ents, _ := os.ReadDir(filepath.Dir(committed)); len(ents) != 1 {
		t.Errorf("docs/pats holds %d files, want only the committed one", len(ents))
	}
	ents, err := os.ReadDir(tmp)
	if err != nil || len(ents) != 1 {
		t.Fatalf("temporary folder holds %v (%v), want one new folder", ents, err)
	}
	dir := filepath.Join(tmp, ents[0].Name())
	if !strings.Contains(out.String(), "results and figures written to "+dir+"\n") {
		t.Errorf("output does not name the folder %s:\n%s", dir, out.String())
	}
	md, err := os.ReadFile(filepath.Join(dir, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(md, []byte("Generated by `go run ./examples/pathology -experiment -quick`")) {
		t.Errorf("results.md names the wrong command: %.200s", md)
	}
}

// TestExperimentWritesAtomically checks that the experiment's files replace
// the old ones by renaming a new file onto them: a file linked to an old
// output keeps its content, which an in-place write would change, and no
// temporary file is left behind.
func TestExperimentWritesAtomically(t *testing.T) {
	dir := t.TempDir()
	keep := filepath.Join(dir, "keep")
	if err := os.WriteFile(keep, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"results.md", "arch.svg"} {
		if err := os.Link(keep, filepath.Join(dir, f)); err != nil {
			t.Skip("no hard links here:", err)
		}
	}
	e := &experiments{out: dir}
	res := &results{figures: map[string]string{"arch.svg": "<svg></svg>\n"}}
	res.md.WriteString("# new\n")
	if err := e.write(res); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(keep); string(b) != "old\n" {
		t.Errorf("an output was written in place: the file linked to it now holds %q", b)
	}
	for f, want := range map[string]string{"results.md": "# new\n", "arch.svg": "<svg></svg>\n"} {
		if b, _ := os.ReadFile(filepath.Join(dir, f)); string(b) != want {
			t.Errorf("%s holds %q, want %q", f, b, want)
		}
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 3 {
		t.Errorf("folder holds %d files, want keep, results.md and arch.svg", len(ents))
	}
}

// TestFlagHandling checks the behaviour common to the programs: -h prints
// a synopsis to stdout and exits 0, a bad command line prints one error
// and a hint naming the program and exits 2, a failing run exits 1.
func TestFlagHandling(t *testing.T) {
	ctx := context.Background()
	var out, errOut bytes.Buffer
	if code := realMain(ctx, []string{"-h"}, &out, &errOut); code != 0 || errOut.Len() != 0 {
		t.Errorf("-h: exit %d, stderr %q", code, errOut.String())
	}
	for _, want := range []string{"usage:", "pathology -sim", "pathology -experiment", "modelled", "not measured", "n/a", "-profile DIR", "-out folder"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("-h output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := realMain(ctx, []string{"-nosuchflag"}, &out, &errOut); code != 2 || out.Len() != 0 {
		t.Errorf("unknown flag: exit %d, stdout %q", code, out.String())
	}
	if want := "pathology: flag provided but not defined: -nosuchflag\nRun 'pathology -h' for usage.\n"; errOut.String() != want {
		t.Errorf("unknown flag: stderr\n%q\nwant\n%q", errOut.String(), want)
	}
	for _, bad := range [][]string{{"-policy", "lifo"}, {"-storage", "tape"}, {"extra"}, {"-tiles", "0"},
		{"-cpus", "0", "-gpus", "0"}, {"-out", "x"}, {"-sim", "-profile", "x"}, {"-scale", "0"}, {"-ti", "2"}} {
		errOut.Reset()
		if code := realMain(ctx, bad, &out, &errOut); code != 2 || strings.Count(errOut.String(), "\n") != 2 || strings.Contains(errOut.String(), "go run") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one error line plus the hint", bad, code, errOut.String())
		}
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	errOut.Reset()
	if code := realMain(ctx, []string{"-tiles", "1", "-storage", "disk", "-dir", file}, &out, &errOut); code != 1 || strings.Count(errOut.String(), "\n") != 1 {
		t.Errorf("disk storage on a file: exit %d, stderr %q; want 1 and one line", code, errOut.String())
	}
}

// TestReportUnknowns checks that the report calls its transfer and memory
// figures modelled and prints n/a, not 0.00, for the speedups nobody knows:
// no estimate given (-learn) and no time statistics on one kind of unit.
func TestReportUnknowns(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := realMain(context.Background(), []string{"-sim", "-learn", "-tiles", "8"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "modelled, not measured: transfers") {
		t.Errorf("report does not say its transfer and memory figures are modelled:\n%s", out.String())
	}
	oneKind := 0
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.Fields(line)
		if len(f) != 6 || f[0] == "operation" {
			continue
		}
		if f[4] != "n/a" {
			t.Errorf("%s: given speedup %s with -learn, want n/a", f[0], f[4])
		}
		if (f[1] == "0" || f[2] == "0") && f[5] != "n/a" {
			t.Errorf("%s ran on one kind of unit only but prints learned speedup %s, want n/a", f[0], f[5])
		}
		if f[1] == "0" || f[2] == "0" {
			oneKind++
		}
		if f[5] == "0.00" || strings.Contains(line, "NaN") {
			t.Errorf("report prints an unknown as a number: %q", line)
		}
	}
	if oneKind == 0 {
		t.Errorf("no operation ran on one kind only; the test checks nothing:\n%s", out.String())
	}
	for v, want := range map[float64]string{0: "n/a", math.NaN(): "n/a", math.Inf(1): "n/a", 2.5: "2.50"} {
		if got := fmtSpeedup(v); got != want {
			t.Errorf("fmtSpeedup(%v) = %q, want %q", v, got, want)
		}
	}
}

// TestProfile checks that -profile writes the real run's task-graph
// profile, as in the other programs.
func TestProfile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "prof")
	var out, errOut bytes.Buffer
	if code := realMain(context.Background(), []string{"-tiles", "3", "-tile-size", "32", "-scale", "0.001", "-profile", dir}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, f := range []string{"pathology.dot", "pathology-stats.json", "pathology-trace.json"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if !strings.Contains(out.String(), "profile written to "+dir) {
		t.Errorf("output does not name the profile folder:\n%s", out.String())
	}
}

// TestLearnTableUnknowns checks the experiment's learned-speedup table on a
// run so short that some operations never run on one kind of unit: their
// learned speedup and its error are n/a, not 0.00 and -100%.
func TestLearnTableUnknowns(t *testing.T) {
	e := &experiments{images: []image{{"tiny", 8, 1}}, machine: pathology.ReferenceMachine(), window: 16}
	res := &results{figures: map[string]string{}}
	e.learn(res)
	if res.learnedUnknown == 0 {
		t.Fatalf("every operation ran on both kinds; the test checks nothing:\n%s", res.md.String())
	}
	md := res.md.String()
	if strings.Contains(md, "-100%") || strings.Contains(md, "| 0.00 |") || strings.Contains(md, "NaN") {
		t.Errorf("learned-speedup table prints unknowns as numbers:\n%s", md)
	}
	if strings.Count(md, "| n/a | n/a |") != res.learnedUnknown {
		t.Errorf("want %d rows with n/a learned speedup and error:\n%s", res.learnedUnknown, md)
	}
}

func TestRunCommandDynamic(t *testing.T) {
	ctx := context.Background()
	var out, errOut bytes.Buffer
	if err := run(ctx, []string{"-sim", "-dynamic", "-tiles", "10"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "20 flows (0 failed)") {
		t.Errorf("-sim -dynamic output: %s", out.String())
	}
	out.Reset()
	if err := run(ctx, []string{"-dynamic", "-tiles", "4", "-tile-size", "48", "-scale", "0.001"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "of 4 tiles (flows spawned at run time)") {
		t.Errorf("-dynamic output: %s", out.String())
	}
	if err := run(ctx, []string{"-dynamic", "-experiment"}, &out, &errOut); err == nil {
		t.Error("-dynamic -experiment accepted")
	}
}
