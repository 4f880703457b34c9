package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// The constructs' graphs and the parallelism probe start goroutines; none
// may outlive a run.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A small model run writes a well-formed figure; a small throughput run
// completes.
func TestSmallRuns(t *testing.T) {
	dir := t.TempDir()
	spinIters = 1_000_000
	svg := filepath.Join(dir, "m.svg")
	if err := run(256, 192, []int{64, 128}, []int{1, 2}, 1, svg, "", 0, dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.HasPrefix(s, "<svg") || !strings.HasSuffix(s, "</svg>\n") || strings.Count(s, "<circle") < 2*2*2 {
		t.Fatalf("figure malformed:\n%s", s)
	}
	if err := run(0, 0, nil, nil, 1, "", "2x2", 16<<20, dir); err != nil {
		t.Fatal(err)
	}
}
