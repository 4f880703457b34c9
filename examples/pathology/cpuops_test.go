package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gohtgs/htgs/pathology"
)

// TestCPUOps: -cpu-ops prints exactly one line "op NAME: MS ms" per
// operation, in pipeline order, by either clock; -out writes the inputs
// as .npy files.
func TestCPUOps(t *testing.T) {
	line := regexp.MustCompile(`^op (\w+): [0-9]+\.[0-9]{2} ms$`)
	var want []string
	for _, o := range pathology.Operations() {
		want = append(want, o.Name)
	}
	dir := t.TempDir()
	for _, args := range [][]string{{"-cpu-ops", "-tile-size", "40", "-out", dir}, {"-cpu-ops", "-tile-size", "40", "-cpu-time"}} {
		code, out, errOut := runArgs(t, args...)
		if code != 0 {
			if strings.Contains(errOut, "not available on this platform") && slices.Contains(args, "-cpu-time") {
				continue // no thread CPU time on this platform
			}
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			m := line.FindStringSubmatch(l)
			if m == nil {
				t.Fatalf("%v: line %q is not \"op NAME: MS ms\"", args, l)
			}
			got = append(got, m[1])
		}
		if !slices.Equal(got, want) {
			t.Errorf("%v: operations %v, want %v", args, got, want)
		}
	}
	for _, name := range []string{"rgb", "dark", "markers", "ws"} { // their shapes: pathology's TestOpTileWriteInputs
		if st, err := os.Stat(filepath.Join(dir, name+".npy")); err != nil || st.Size() == 0 {
			t.Errorf("-out: %s.npy not written (%v)", name, err)
		}
	}
	for _, args := range [][]string{{"-cpu-ops", "-sim"}, {"-cpu-ops", "-hardware"}, {"-cpu-time"}, {"-cpu-ops", "-nuclei", "x.json"}} {
		if code, _, _ := runArgs(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
