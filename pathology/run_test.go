package pathology

import (
	"context"
	"slices"
	"testing"

	"github.com/gohtgs/htgs/pats"
	"github.com/gohtgs/htgs/region"
)

func TestWorkloadFlows(t *testing.T) {
	w := NewWorkload(5, 9)
	fs := w.Flows(w.GivenSpeedups())
	if len(fs) != 5 || fs[0].Len() != len(Operations()) {
		t.Fatalf("%d flows of %d steps", len(fs), fs[0].Len())
	}
	for _, f := range fs {
		if f.Err() != nil {
			t.Fatal(f.Err())
		}
	}
	// Costs are deterministic and the true speedups follow the specs.
	if w.tileCost(3, Operations()[2]) != NewWorkload(5, 9).tileCost(3, Operations()[2]) {
		t.Error("tile costs are not deterministic")
	}
	for name, s := range NewWorkload(200, 1).TrueSpeedups() {
		if g := w.GivenSpeedups()[name]; s < 0.95*g || s > 1.05*g {
			t.Errorf("%s: true speedup %.2f far from the spec's %.1f", name, s, g)
		}
	}
}

// TestRealRun runs the real pipeline (kernels, region templates, task
// graph, manager with simulated units) and checks that the results do not
// depend on the scheduling and reach the output storage.
func TestRealRun(t *testing.T) {
	ctx := context.Background()
	w := NewWorkload(6, 3)
	var counts [][]int
	for _, cfg := range []pats.Config{
		{Policy: pats.FCFS, Window: 3},
		{Policy: pats.PATS, Window: 4, Locality: true, TransferImpact: 0.16, Prefetch: true},
		{Policy: pats.PATS, Learn: true, DepthFirst: true},
	} {
		in, out := region.NewMemory(), region.NewMemory()
		s, err := NewSlide(ctx, 6, 64, 3, in, out)
		if err != nil {
			t.Fatal(err)
		}
		res, rep, _, err := runReal(ctx, s, w, cfg, pats.Machine{CPUs: 2, GPUs: 1, Bandwidth: 5e9}.Units(0.001), w.GivenSpeedups(), false)
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
			b := s.Box(i)
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

// TestRealRunDynamic runs the features as a stage created at run time: a
// tile without nuclei (a blank one here) spawns no features flow, the
// others find the same nuclei and commit the same features as the static
// pipeline.
func TestRealRunDynamic(t *testing.T) {
	ctx := context.Background()
	w := NewWorkload(6, 3)
	const blank = 2
	var nuclei [2][]int
	var feats [2][]float64
	for k, dynamic := range []bool{false, true} {
		in, out := region.NewMemory(), region.NewMemory()
		s, err := NewSlide(ctx, 6, 64, 3, in, out)
		if err != nil {
			t.Fatal(err)
		}
		b := s.Box(blank)
		white := make([]byte, 3*64*64)
		for i := range white {
			white[i] = 255
		}
		meta := region.Meta{ID: rgbID(), Elem: region.Uint8, Bounds: region.Cube(0, 0, 0, s.cols*64, s.rows*64, 3)}
		if err := in.Write(ctx, meta, region.Cube(b.Lo[0], b.Lo[1], 0, b.Hi[0], b.Hi[1], 3), white); err != nil {
			t.Fatal(err)
		}
		cfg := pats.Config{Policy: pats.PATS, Window: 3, Locality: true, TransferImpact: 0.16, Prefetch: true}
		res, rep, _, err := runReal(ctx, s, w, cfg, pats.Machine{CPUs: 2, GPUs: 1, Bandwidth: 5e9}.Units(0.001), w.GivenSpeedups(), dynamic)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			nuclei[k] = append(nuclei[k], r.nuclei)
		}
		if nuclei[k][blank] != 0 {
			t.Fatalf("blank tile has %d nuclei", nuclei[k][blank])
		}
		wantSpawned := 0
		if dynamic {
			wantSpawned = 5
		}
		if rep.Spawned != wantSpawned || rep.Flows != 6+wantSpawned || rep.Failed != 0 || rep.PeakFlows > 3 {
			t.Errorf("dynamic=%v: %d flows, %d spawned, %d failed, peak %d", dynamic, rep.Flows, rep.Spawned, rep.Failed, rep.PeakFlows)
		}
		for _, o := range []string{"FeatIntensity", "FeatGradient", "FeatMorphometry"} {
			op, _ := rep.Op(o)
			if want := 6 - min(wantSpawned, 1); op.CPU+op.GPU != want {
				t.Errorf("%s ran %d times, want %d", o, op.CPU+op.GPU, want)
			}
		}
		fr, err := region.OpenDense[float64](ctx, out, featIDs()["featIntensity"], region.Box{})
		if err != nil {
			t.Fatal(err)
		}
		fd, err := fr.Data(ctx)
		if err != nil {
			t.Fatal(err)
		}
		feats[k] = fd
	}
	if !slices.Equal(nuclei[0], nuclei[1]) {
		t.Errorf("nuclei per tile: static %v, dynamic %v", nuclei[0], nuclei[1])
	}
	if !slices.Equal(feats[0], feats[1]) {
		t.Error("the dynamic pipeline committed other intensity features")
	}
}
