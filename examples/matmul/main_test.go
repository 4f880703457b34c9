package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/gohtgs/htgs/matmul"
	"github.com/gohtgs/htgs/matmul/npy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func runArgs(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(context.Background(), args, &o, &e)
	return code, o.String(), e.String()
}

func TestRandomVerify(t *testing.T) {
	for _, args := range [][]string{
		{"-n", "300", "-block", "64", "-verify"},
		{"-n", "300", "-block", "64", "-threads", "3", "-verify", "-mem", "1MiB", "-tmp", t.TempDir()}, // out of core
		{"-n", "200", "-block", "64", "-verify", "-op", "hadamard"},
		{"-n", "200", "-block", "64", "-verify", "-op", "hadamard", "-mem", "600KiB", "-tmp", t.TempDir()},
	} {
		code, out, errOut := runArgs(t, args...)
		if code != 0 || !strings.Contains(out, "PASS") || !strings.Contains(out, "GFLOP/s") {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
		if slicesContain(args, "-mem") && !strings.Contains(out, "out of core") {
			t.Errorf("%v: not out of core:\n%s", args, out)
		}
		if errOut != "" && !strings.HasPrefix(errOut, "out of core: writing random") {
			t.Errorf("%v: unexpected stderr %q (no progress bar without a terminal)", args, errOut)
		}
	}
}

func slicesContain(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestFiles(t *testing.T) {
	dir := t.TempDir()
	a, b := matmul.Random(130, 70, 1), matmul.Random(70, 90, 2)
	ap, bp := filepath.Join(dir, "a.npy"), filepath.Join(dir, "b.npy")
	if err := npy.Write(ap, a.R, a.C, a.Data); err != nil {
		t.Fatal(err)
	}
	if err := npy.Write(bp, b.R, b.C, b.Data); err != nil {
		t.Fatal(err)
	}
	want := matmul.NewDense(130, 90)
	if err := matmul.Gonum().(matmul.Gemmer).Gemm(0, a, b, want); err != nil {
		t.Fatal(err)
	}
	for _, mem := range []string{"", "150KiB"} {
		cp := filepath.Join(dir, "c"+mem+".npy")
		args := []string{"-a", ap, "-b", bp, "-o", cp, "-block", "32", "-verify", "-progress", "-profile", filepath.Join(dir, "prof"+mem)}
		if mem != "" {
			args = append(args, "-mem", mem)
		}
		code, out, errOut := runArgs(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
		if !strings.Contains(errOut, "15/15 blocks of C") {
			t.Errorf("-progress drew no complete bar: %q", errOut)
		}
		r, c, data, err := npy.Read(cp)
		if err != nil {
			t.Fatal(err)
		}
		cmp, err := matmul.Compare(a, b, &matmul.Dense{R: r, C: c, Stride: c, Data: data}, want)
		if err != nil || !cmp.OK {
			t.Errorf("%v: C differs from the reference: %+v %v", args, cmp, err)
		}
		var rep struct{ Plan struct{ Order string } }
		readJSON(t, filepath.Join(dir, "prof"+mem, "matmul-report.json"), &rep)
		var stats struct{ Tasks []struct{ Name string } }
		readJSON(t, filepath.Join(dir, "prof"+mem, "matmul-stats.json"), &stats)
		if rep.Plan.Order == "" || len(stats.Tasks) < 6 {
			t.Errorf("profile lacks the plan or the task statistics: %+v %+v", rep, stats)
		}
	}
}

func readJSON(t *testing.T, name string, v any) {
	t.Helper()
	raw, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func TestUsageErrors(t *testing.T) {
	// -kernel cuda is a usage error unless a GPU is usable here: the kernel
	// is either not built in or cannot run.
	cudaWant := ""
	if _, err := matmul.LookupKernel("cuda"); errors.Is(err, matmul.ErrNotBuilt) {
		cudaWant = "not built with -tags cuda"
	} else if errors.Is(err, matmul.ErrUnavailable) {
		cudaWant = "unavailable on this machine"
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "nothing to multiply"},
		{[]string{"-n", "10", "-a", "x.npy"}, "not both"},
		{[]string{"-a", "x.npy", "-o", "c.npy"}, "go together"},
		{[]string{"-a", "x.npy", "-b", "y.npy"}, "-o C.npy is required"},
		{[]string{"-n", "-3"}, "positive size"},
		{[]string{"-n", "10", "-block", "0"}, "positive block size"},
		{[]string{"-n", "10", "-threads", "-1"}, "positive count"},
		{[]string{"-n", "10", "-mem", "lots"}, "-mem"},
		{[]string{"-n", "10", "-mem", "0"}, "positive size"},
		{[]string{"-n", "10", "-kernel", "cuda"}, cudaWant},
		{[]string{"-n", "10", "-kernel", "fortran"}, "unknown kernel"},
		{[]string{"-n", "10", "-op", "divide"}, "want mul or hadamard"},
		{[]string{"-n", "10", "extra"}, "unexpected arguments"},
		{[]string{"-bogus"}, "not defined"},
		{[]string{"-n", "10", "-host-copy", "osmosis"}, "want staging, register or pipelined"},
		{[]string{"-n", "10", "-kernel", "gonum", "-host-copy", "staging"}, "need -kernel cuda"},
		{[]string{"-n", "10", "-kernel", "gonum", "-compare-xt"}, "need -kernel cuda"},
		{[]string{"-n", "10", "-xt-block", "0"}, "positive tile side"},
	} {
		if tc.want == "" {
			continue // the cuda kernel runs here
		}
		code, _, errOut := runArgs(t, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
	if code, _, _ := runArgs(t, "-h"); code != 0 {
		t.Errorf("-h: exit %d", code)
	}
}

func TestBadFiles(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.npy")
	if err := npy.Write(good, 3, 4, make([]float64, 12)); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.npy")
	if err := os.WriteFile(bad, []byte("\x93NUMPY\x01\x00garbage"), 0o666); err != nil {
		t.Fatal(err)
	}
	c := filepath.Join(dir, "c.npy")
	for _, tc := range []struct {
		a, b, want string
	}{
		{bad, good, "bad.npy"},
		{good, filepath.Join(dir, "none.npy"), "none.npy"},
		{good, good, "inner dimensions differ: A is 3x4, B is 3x4"},
	} {
		code, _, errOut := runArgs(t, "-a", tc.a, "-b", tc.b, "-o", c)
		if code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("-a %s -b %s: exit %d, stderr %q; want 1 and %q", filepath.Base(tc.a), filepath.Base(tc.b), code, errOut, tc.want)
		}
	}
	if _, err := os.Stat(c); err == nil {
		t.Error("a failed run left C behind")
	}
}

func TestCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var o, e bytes.Buffer
	if code := run(ctx, []string{"-n", "200", "-block", "32"}, &o, &e); code != 1 || !strings.Contains(e.String(), "canceled") {
		t.Errorf("cancelled run: exit %d, stderr %q", code, e.String())
	}
}
