package pathology

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDeviceScriptsReadAHardwareRun runs the analyses that
// scripts/device/pats.sh and patsab.sh run after a GPU machine's
// experiment (testdata/*.py) on a small run with host memory posing as
// the GPU, laid out as patsab.sh leaves it, so that a change to the
// logs or the trace that breaks them shows here and not on a GPU
// machine's borrowed minutes.
func TestDeviceScriptsReadAHardwareRun(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3: the device scripts' analyses are not checked")
	}
	run := filepath.Join(t.TempDir(), "patsab", "a1", "pats")
	if err := os.MkdirAll(filepath.Join(run, "hw"), 0o755); err != nil {
		t.Fatal(err)
	}
	gpus := HostGPUs(1)
	defer func() {
		if err := gpus.Close(); err != nil {
			t.Error(err)
		}
	}()
	var log bytes.Buffer
	h := Hardware{CPUs: 2, GPUs: gpus, Tiles: 4, TileSize: 32, Window: 6, Seed: 1, Configs: []string{"fcfs", "pats", "dl"},
		TraceDir: filepath.Join(run, "hw"), Log: &log}
	res, err := h.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := res.WriteMarkdown(&log, "TestDeviceScriptsReadAHardwareRun"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(run, "hardware.log"), log.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	script := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(py, append([]string{filepath.Join("testdata", name)}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		return string(out)
	}
	trace := filepath.Join(run, "hw", "trace.csv")
	idle := script("trace_idle.py", trace)
	if err := os.WriteFile(filepath.Join(run, "idle.txt"), []byte(idle), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"FCFS", "PATS", "PATS+DL+prefetch"} {
		line := ""
		for _, l := range strings.Split(idle, "\n") {
			if strings.HasPrefix(l, name+": ") {
				line = l
			}
		}
		for _, want := range []string{"cores idle", "idle with an instance ready", "begun by a core while it was idle"} {
			if !strings.Contains(line, want) {
				t.Errorf("trace_idle.py: %s's line lacks %q:\n%s", name, want, idle)
			}
		}
	}
	rates := script("run_rates.py", trace, "32")
	if err := os.WriteFile(filepath.Join(run, "rates.txt"), []byte(rates), 0o644); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rates, "PATS+DL+prefetch:") {
		t.Errorf("run_rates.py prints no PATS+DL+prefetch line:\n%s", rates)
	}
	script("gpu_overlap.py", trace)
	sum := script("patsab_summary.py", filepath.Dir(filepath.Dir(run)))
	for _, want := range []string{"a1  default", "FCFS ", "PATS+DL+prefetch ", "GPU worker woken", "GPU idle with one ready", "medians per arm"} {
		if !strings.Contains(sum, want) {
			t.Errorf("patsab_summary.py lacks %q:\n%s", want, sum)
		}
	}
}
