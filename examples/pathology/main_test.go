package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gohtgs/htgs/pats"
	"github.com/gohtgs/htgs/region"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestWorkloadFlows(t *testing.T) {
	w := newWorkload(5, 9)
	fs := w.flows(w.givenSpeedups())
	if len(fs) != 5 || fs[0].Len() != len(pipeline()) {
		t.Fatalf("%d flows of %d steps", len(fs), fs[0].Len())
	}
	for _, f := range fs {
		if f.Err() != nil {
			t.Fatal(f.Err())
		}
	}
	// Costs are deterministic and the true speedups follow the specs.
	if w.tileCost(3, pipeline()[2]) != newWorkload(5, 9).tileCost(3, pipeline()[2]) {
		t.Error("tile costs are not deterministic")
	}
	for name, s := range newWorkload(200, 1).trueSpeedups() {
		if g := w.givenSpeedups()[name]; s < 0.95*g || s > 1.05*g {
			t.Errorf("%s: true speedup %.2f far from the spec's %.1f", name, s, g)
		}
	}
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
	e := &experiments{images: []image{{"a", 80, 11}, {"b", 80, 12}, {"c", 80, 13}}, machine: referenceMachine(), window: 24, out: t.TempDir()}
	res, err := e.run(context.Background())
	if err != nil {
		t.Fatal(err)
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

// TestRealRun runs the real pipeline (kernels, region templates, task
// graph, manager with simulated units) and checks that the results do not
// depend on the scheduling and reach the output storage.
func TestRealRun(t *testing.T) {
	ctx := context.Background()
	w := newWorkload(6, 3)
	var counts [][]int
	for _, cfg := range []pats.Config{
		{Policy: pats.FCFS, Window: 3},
		{Policy: pats.PATS, Window: 4, Locality: true, TransferImpact: 0.16, Prefetch: true},
		{Policy: pats.PATS, Learn: true, DepthFirst: true},
	} {
		in, out := region.NewMemory(), region.NewMemory()
		s, err := newSlide(ctx, 6, 64, 3, in, out)
		if err != nil {
			t.Fatal(err)
		}
		res, rep, err := runReal(ctx, s, w, cfg, pats.Machine{CPUs: 2, GPUs: 1, Bandwidth: 5e9}.Units(0.001), w.givenSpeedups())
		if err != nil {
			t.Fatal(err)
		}
		if rep.Flows != 6 || rep.Failed != 0 {
			t.Errorf("%v: %d flows, %d failed", cfg, rep.Flows, rep.Failed)
		}
		var c []int
		for _, r := range res {
			c = append(c, r.nuclei)
		}
		counts = append(counts, c)
		// The labels of every tile were committed to the output storage.
		labels, err := region.OpenDense[uint16](ctx, out, labelsID(), region.Box{})
		if err != nil {
			t.Fatal(err)
		}
		data, err := labels.Data(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 6 {
			b := s.box(i)
			maxLabel := uint16(0)
			for y := b.Lo[1]; y < b.Hi[1]; y++ {
				for x := b.Lo[0]; x < b.Hi[0]; x++ {
					maxLabel = max(maxLabel, data[y*s.cols*s.size+x])
				}
			}
			if int(maxLabel) != res[i].nuclei {
				t.Errorf("%v: tile %d stored labels up to %d, found %d nuclei", cfg, i, maxLabel, res[i].nuclei)
			}
		}
		feats, err := region.OpenDense[float64](ctx, out, featIDs()["featIntensity"], region.Box{})
		if err != nil {
			t.Fatal(err)
		}
		fd, _ := feats.Data(ctx)
		if fd[featArea] <= 0 {
			t.Errorf("%v: first object of tile 0 has area %v", cfg, fd[featArea])
		}
	}
	for i := 1; i < len(counts); i++ {
		for j := range counts[0] {
			if counts[i][j] != counts[0][j] {
				t.Errorf("nuclei per tile differ between schedules: %v vs %v", counts[0], counts[i])
			}
		}
	}
	if counts[0][0] == 0 {
		t.Error("no nuclei found")
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
	if ids, _ := (func() ([]region.ID, error) { d, _ := region.NewDisk(dir); return d.List(ctx) })(); len(ids) != 5 {
		t.Errorf("disk storage holds %v, want the RGB input, the labels and three feature tables", ids)
	}
	for _, bad := range [][]string{{"-policy", "lifo"}, {"-storage", "tape", "-tiles", "1"}, {"extra"}, {"-nosuchflag"}} {
		if err := run(ctx, bad, &out, &errOut); err == nil {
			t.Errorf("run %v succeeded", bad)
		}
	}
}
