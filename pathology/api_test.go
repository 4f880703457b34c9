package pathology

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gohtgs/htgs/pats"
	"github.com/gohtgs/htgs/region"
)

// TestTileRunnerMatchesRun runs the tiles of a slide one by one on a
// TileRunner, two at a time on one manager, and reads them back with
// ReadTileResult: the same nuclei, polygons and feature rows as a Run of
// the same slide, every operation counted once where it ran.
func TestTileRunnerMatchesRun(t *testing.T) {
	ctx := context.Background()
	const tiles, size, seed = 4, 64, 3
	units := func() []pats.Unit { return pats.Machine{CPUs: 2, GPUs: 1, Bandwidth: 5e9}.Units(0.001) }
	cfg := pats.Config{Policy: pats.PATS, Window: 2}
	w := NewWorkload(tiles, seed)
	ref, err := NewSlide(ctx, tiles, size, seed, region.NewMemory(), region.NewMemory())
	if err != nil {
		t.Fatal(err)
	}
	want, err := Run(ctx, ref, w, RunOptions{Config: cfg, Units: units(), Speedups: w.GivenSpeedups()})
	if err != nil {
		t.Fatal(err)
	}

	store := region.NewMemory()
	if _, err := NewSlide(ctx, tiles, size, seed, store, store); err != nil {
		t.Fatal(err)
	}
	m, err := pats.Start(ctx, cfg, units()...)
	if err != nil {
		t.Fatal(err)
	}
	r := NewTileRunner(m, w.GivenSpeedups())
	s := OpenSlide(tiles, size, seed, store, store)
	reps := make([]TileReport, tiles)
	errs := make([]error, tiles)
	var wg sync.WaitGroup
	for i := range tiles {
		wg.Go(func() { reps[i], errs[i] = r.Run(ctx, s, i, i%2 == 1) })
	}
	wg.Wait()
	if _, err := r.Run(ctx, s, tiles, false); err == nil {
		t.Error("tile past the slide: no error")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range tiles {
		if errs[i] != nil {
			t.Fatalf("tile %d: %v", i, errs[i])
		}
		rep, ref := reps[i], want.Tiles[i]
		if rep.Nuclei != ref.Nuclei() || rep.Nuclei == 0 {
			t.Errorf("tile %d: %d nuclei, Run found %d", i, rep.Nuclei, ref.Nuclei())
		}
		if rep.Spawned != (i%2 == 1) {
			t.Errorf("tile %d: spawned %v", i, rep.Spawned)
		}
		for _, op := range Operations() {
			if n := rep.CPU[op.Name] + rep.GPU[op.Name]; n != 1 {
				t.Errorf("tile %d: %s ran %d times", i, op.Name, n)
			}
		}
		got, err := ReadTileResult(ctx, s, i, rep.Nuclei)
		if err != nil {
			t.Fatal(err)
		}
		if got.Tile() != i || got.Nuclei() != rep.Nuclei {
			t.Errorf("tile %d: read back tile %d with %d nuclei", i, got.Tile(), got.Nuclei())
		}
		polys, err := got.outlines.Polygons(ctx)
		if err != nil {
			t.Fatal(err)
		}
		refPolys, err := ref.outlines.Polygons(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(polys) != rep.Nuclei || len(refPolys) != rep.Nuclei {
			t.Errorf("tile %d: %d polygons read back, %d from Run, want %d", i, len(polys), len(refPolys), rep.Nuclei)
		}
		if !slices.Equal(got.feats, ref.feats) {
			t.Errorf("tile %d: feature rows differ from Run's", i)
		}
	}
	if _, err := ReadTileResult(ctx, s, -1, 0); err == nil {
		t.Error("tile -1: no error")
	}
}

// TestHardwareRun runs a small hardware experiment with host memory
// posing as a GPU through the package's API: the chosen configurations
// in order (a repeat named apart), the tables, the trace file and the
// check of the results.
func TestHardwareRun(t *testing.T) {
	dir := t.TempDir()
	gpus := HostGPUs(1)
	defer func() {
		if err := gpus.Close(); err != nil {
			t.Error(err)
		}
	}()
	var log bytes.Buffer
	h := Hardware{CPUs: 2, GPUs: gpus, Tiles: 4, TileSize: 32, Window: 6, Seed: 1, Configs: []string{"fcfs", "dl", "patsx", "fcfs"}, TraceDir: dir, Log: &log}
	res, err := h.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Err(); err != nil {
		t.Error(err)
	}
	var md strings.Builder
	if err := res.WriteMarkdown(&md, "TestHardwareRun"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"`TestHardwareRun`: 4 tiles of 32x32 px", "host accelerators", "every GPU output equals the CPU's",
		"| FCFS |", "| PATS+DL+prefetch |", "| PATS+xfer |", "| FCFS #2 |", "| FillHoles |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("tables lack %q:\n%s", want, md.String())
		}
	}
	if strings.Contains(md.String(), "| PATS |") {
		t.Errorf("PATS ran without being asked:\n%s", md.String())
	}
	if b, err := os.ReadFile(filepath.Join(dir, "trace.csv")); err != nil || !bytes.Contains(b, []byte("FCFS #2")) {
		t.Errorf("trace.csv: %v, %d bytes without the runs", err, len(b))
	} else if n := bytes.Count(b, []byte(",storage,commit,")); n != 4*4*4 { // 4 runs x 4 tiles x (labels + 3 feature tables)
		t.Errorf("trace.csv has %d commits, want %d", n, 4*4*4)
	}
	if !regexp.MustCompile(`outputs are committed to storage at [0-9.]+ GB/s alone, [0-9.]+ GB/s under load`).MatchString(md.String()) {
		t.Errorf("tables lack the commit rates:\n%s", md.String())
	}
	// Both GPU workers of the prefetching configuration (copies queued
	// from one goroutine by default; SyncUploads: three goroutines)
	// compute what the CPU does and trace their uploads.
	// So does the prefetching configuration with the storage on the cores.
	for _, v := range []struct{ sync, cores bool }{{false, false}, {true, false}, {false, true}} {
		sync := v.sync
		dir := t.TempDir()
		h := Hardware{CPUs: 2, GPUs: gpus, Tiles: 4, TileSize: 32, Window: 6, Seed: 1, Configs: []string{"dl"}, TraceDir: dir, SyncUploads: sync, StorageOnCores: v.cores}
		res, err := h.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := res.Err(); err != nil {
			t.Errorf("SyncUploads=%v: %v", sync, err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "trace.csv"))
		if n := regexp.MustCompile(`(?m)^PATS\+DL\+prefetch,[^,]+,up,-1,tile\d+/rgb,`).FindAll(b, -1); err != nil || len(n) == 0 {
			t.Errorf("SyncUploads=%v: trace.csv (%v) has %d uploads of a tile's RGB, want some", sync, err, len(n))
		}
		if n := bytes.Count(b, []byte(",storage,commit,")); n != 4*4 {
			t.Errorf("%+v: trace.csv has %d commits, want %d", v, n, 4*4)
		}
	}
	for _, bad := range []Hardware{{CPUs: 0, Tiles: 1, TileSize: 8}, {CPUs: 1, Tiles: 1, TileSize: 8, Configs: []string{"nope"}}} {
		if _, err := bad.Run(context.Background()); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

// TestOpTile: Time returns the operations in pipeline order, WriteInputs
// the .npy files of the tile's shape.
func TestOpTile(t *testing.T) {
	tile := NewOpTile(40, 1)
	times, err := tile.Time(1, false)
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, o := range times {
		got = append(got, o.Op)
	}
	for _, o := range Operations() {
		want = append(want, o.Name)
	}
	if !slices.Equal(got, want) {
		t.Errorf("timed %v, want %v", got, want)
	}
	if _, err := tile.Time(0, false); err == nil {
		t.Error("0 rounds: no error")
	}
	dir := t.TempDir()
	if err := tile.WriteInputs(dir); err != nil {
		t.Fatal(err)
	}
	for name, shape := range map[string][]int{"rgb": {3, 40, 40}, "dark": {40, 40}, "markers": {40, 40}, "ws": {40, 40}} {
		_, got, data, err := readNPY(filepath.Join(dir, name+".npy"))
		if err != nil {
			t.Fatal(err)
		}
		size := 1
		for _, s := range shape {
			size *= s
		}
		if name == "markers" {
			size *= 4
		}
		if !slices.Equal(got, shape) || len(data) != size {
			t.Errorf("%s.npy: shape %v, %d bytes; want %v, %d", name, got, len(data), shape, size)
		}
	}
}
