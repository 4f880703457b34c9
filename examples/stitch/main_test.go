package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gohtgs/htgs/stitching"
)

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-rows", "3"}, // no -dir
		{"-dir", "x", "-rows", "0", "-cols", "2", "-out", "o"}, // bad size
		{"-dir", "x", "-rows", "2", "-cols", "2"},              // no -out
		{"-start", "7"},
		{"-blend", "sharpen"},
		{"-overlap", "120"},
		{"-generate", "d", "-tile", "big"},
		{"stray"},
	} {
		var out, errw bytes.Buffer
		err := run(context.Background(), args, &out, &errw)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("%q: err = %v, want a usage error", args, err)
		}
	}
}

func TestGenerateThenStitch(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	var stdout, stderr bytes.Buffer
	gen := []string{"-generate", dir, "-rows", "3", "-cols", "4", "-tile", "256x192", "-seed", "5"}
	if err := run(context.Background(), gen, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	args := []string{"-dir", dir, "-rows", "3", "-cols", "4", "-out", out, "-workers", "2", "-profile"}
	if err := run(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "17 of 17 pairs exact after optimization") {
		t.Errorf("accuracy line missing or wrong:\n%s", stdout.String())
	}
	f, err := os.Open(filepath.Join(out, "global-positions.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pos, err := stitching.ReadGlobalPositions(f)
	if err != nil || len(pos) != 12 || pos[0].Name != "img_r001_c001.tif" {
		t.Fatalf("global positions: %v, %+v", err, pos)
	}
	for _, name := range []string{"relative-positions.txt", "relative-positions-no-optimization.txt", "mosaic.tif",
		"mosaic-preview.png", "registration.dot", "registration-trace.json", "refinement.dot"} {
		if st, err := os.Stat(filepath.Join(out, name)); err != nil || st.Size() == 0 {
			t.Errorf("output %s: %v", name, err)
		}
	}

	// A missing tile is reported by name.
	if err := os.Remove(filepath.Join(dir, "img_r002_c003.tif")); err != nil {
		t.Fatal(err)
	}
	err = run(context.Background(), args, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "img_r002_c003.tif") {
		t.Fatalf("missing tile: %v", err)
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
