package main

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestCPUOps: -cpu-ops prints exactly one line "op NAME: MS ms" per
// operation, in pipeline order, by either clock; -out writes the inputs
// as .npy files of the tile's shape.
func TestCPUOps(t *testing.T) {
	line := regexp.MustCompile(`^op (\w+): [0-9]+\.[0-9]{2} ms$`)
	var want []string
	for _, o := range pipeline() {
		want = append(want, o.name)
	}
	dir := t.TempDir()
	for _, args := range [][]string{{"-cpu-ops", "-tile-size", "40", "-out", dir}, {"-cpu-ops", "-tile-size", "40", "-cpu-time"}} {
		code, out, errOut := runArgs(t, args...)
		if code != 0 {
			if _, ok := threadCPUTime(); !ok && slices.Contains(args, "-cpu-time") {
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
	for _, args := range [][]string{{"-cpu-ops", "-sim"}, {"-cpu-ops", "-hardware"}, {"-cpu-time"}, {"-cpu-ops", "-nuclei", "x.json"}} {
		if code, _, _ := runArgs(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
