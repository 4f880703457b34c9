package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gohtgs/htgs/pathology"
)

// TestHardwareHostGPUs runs the hardware experiment with host memory
// posing as a GPU.
func TestHardwareHostGPUs(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	args := []string{"-hardware", "-host-gpus", "1", "-cpus", "2", "-tiles", "5", "-tile-size", "48", "-out", dir}
	if code := realMain(context.Background(), args, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errOut.String())
	}
	md, err := os.ReadFile(filepath.Join(dir, "hardware.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"every GPU output equals the CPU's", "same nuclei in every tile", "| FCFS |",
		"PATS+DL+prefetch, 50% wrong", "| FillHoles |", "| Watershed |", "simulated, run's op times",
		"staged from storage from its admission into the window",
		"fit, lightest..heaviest tile", "dark-pixel share", "CPU time vs predicted"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("hardware.md lacks %q:\n%s", want, md)
		}
	}
	// Every operation has a GPU implementation: no row says CPU only.
	if strings.Contains(string(md), "CPU only") {
		t.Errorf("hardware.md has an operation on the CPU only:\n%s", md)
	}
}

// TestHardwareConfigsTrace runs chosen configurations, one twice, and
// checks the repeat is named apart and that trace.csv holds every
// operation instance of every run, each tile's staging, and GPU transfers.
func TestHardwareConfigsTrace(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	args := []string{"-hardware", "-host-gpus", "1", "-cpus", "2", "-tiles", "4", "-tile-size", "32", "-hw-configs", "fcfs,dl,fcfs", "-stage-on-first-use", "-sync-uploads", "-serial-commits", "-out", dir}
	if code := realMain(context.Background(), args, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"FCFS:", "PATS+DL+prefetch:", "FCFS #2:", "GPU computing or moving", "CPU time over the run: process", "Go scheduler: goroutines waited for a thread"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, errOut.String())
		}
	}
	if strings.Contains(errOut.String(), "PATS:") {
		t.Errorf("PATS ran without being asked:\n%s", errOut.String())
	}
	if md, err := os.ReadFile(filepath.Join(dir, "hardware.md")); err != nil || !strings.Contains(string(md), "-stage-on-first-use=true -sync-uploads=true -serial-commits=true`") || !strings.Contains(string(md), "staged from storage by the worker of its first reader") ||
		!strings.Contains(string(md), "an upload, a compute and a download goroutine") || !strings.Contains(string(md), "the storage writes one tile's outputs at a time (-serial-commits)") {
		t.Errorf("hardware.md does not say how the tiles were staged, the GPU worker ran and the storage wrote (%v):\n%s", err, md)
	}
	b, err := os.ReadFile(filepath.Join(dir, "trace.csv"))
	if err != nil {
		t.Fatal(err)
	}
	compute := map[string]map[string]bool{}
	stages, commits := map[string]int{}, map[string]int{}
	moves := 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n")[1:] {
		f := strings.Split(line, ",")
		if len(f) != 7 {
			t.Fatalf("trace line %q: %d fields", line, len(f))
		}
		switch f[2] {
		case "compute":
			if compute[f[0]] == nil {
				compute[f[0]] = map[string]bool{}
			}
			compute[f[0]][f[3]+"/"+f[4]] = true
		case "up", "down":
			moves++
		case "stage":
			stages[f[0]]++
		case "commit":
			commits[f[0]]++
		default:
			t.Errorf("trace line %q: unknown span %q", line, f[2])
		}
	}
	for _, run := range []string{"FCFS", "PATS+DL+prefetch", "FCFS #2"} {
		if got, want := len(compute[run]), 4*len(pathology.Operations()); got != want {
			t.Errorf("%s: %d instances traced, want %d", run, got, want)
		}
		if stages[run] != 4 {
			t.Errorf("%s: %d stagings traced, want one per tile (4)", run, stages[run])
		}
		if commits[run] != 4*4 {
			t.Errorf("%s: %d commits traced, want the labels and 3 feature tables of each tile (16)", run, commits[run])
		}
	}
	if moves == 0 {
		t.Error("no GPU transfer traced")
	}
}

func TestHardwareFlags(t *testing.T) {
	for _, args := range [][]string{{"-hardware", "-sim"}, {"-host-gpus", "1"}, {"-hardware", "-host-gpus", "-1"}, {"-hardware", "-quick"}, {"-order-only=false"},
		{"-hw-configs", "fcfs"}, {"-hardware", "-hw-configs", "fcfs,nope"}, {"-hardware", "-hw-configs", ""}, {"-go-memory"}, {"-stage-on-first-use"}} {
		var out, errOut bytes.Buffer
		if code := realMain(context.Background(), args, &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// TestHardwareWithoutCUDA: without the cuda tag (or a GPU), -hardware
// without -host-gpus fails and says what to do.
func TestHardwareWithoutCUDA(t *testing.T) {
	if g, err := pathology.CUDAGPUs(0); err == nil {
		_ = g.Close()
		t.Skip("a CUDA device is present")
	}
	var out, errOut bytes.Buffer
	if code := realMain(context.Background(), []string{"-hardware", "-tiles", "1"}, &out, &errOut); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if !strings.Contains(errOut.String(), "-host-gpus") {
		t.Errorf("error does not mention -host-gpus: %s", errOut.String())
	}
}
