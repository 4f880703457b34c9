package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gohtgs/htgs/examples/internal/cli"
)

// A flat field saved by one run and given to another corrects the tiles
// as the estimate did: the same outputs, byte for byte; without a
// correction (none) the mosaic differs.
func TestFlatFieldFile(t *testing.T) {
	ctx := context.Background()
	grid := generated(t, 3, 4, 8, nil)
	args := []string{"-dir", grid, "-rows", "3", "-cols", "4", "-workers", "2"}
	ffFile := filepath.Join(t.TempDir(), "flat.bin")
	estimated, given, none := t.TempDir(), t.TempDir(), t.TempDir()
	r := runArgs(t, ctx, append(args, "-out", estimated, "-save-flat-field", ffFile)...)
	if r.code != 0 || !strings.Contains(r.stdout, "fall-off to") {
		t.Fatalf("estimate: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := runArgs(t, ctx, append(args, "-out", given, "-flat-field", ffFile)...); r.code != 0 {
		t.Fatalf("-flat-field FILE: exit %d\n%s", r.code, r.stderr)
	}
	sameOutputs(t, estimated, given)
	if r := runArgs(t, ctx, append(args, "-out", none, "-flat-field", "none")...); r.code != 0 {
		t.Fatalf("-flat-field none: exit %d\n%s", r.code, r.stderr)
	}
	a, _ := os.ReadFile(filepath.Join(estimated, defNames.mosaic))
	b, _ := os.ReadFile(filepath.Join(none, defNames.mosaic))
	if len(a) == 0 || bytes.Equal(a, b) {
		t.Error("the mosaic without a correction is the corrected one")
	}
	// A flat field of another tile size is refused, naming the file.
	other := filepath.Join(t.TempDir(), "other")
	if r := runArgs(t, ctx, "-generate", other, "-rows", "2", "-cols", "2", "-tile", "200x150"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	r = runArgs(t, ctx, "-dir", other, "-rows", "2", "-cols", "2", "-out", t.TempDir(), "-flat-field", ffFile)
	if r.code != 1 || !strings.Contains(r.stderr, ffFile) {
		t.Errorf("a flat field of another size: exit %d, %q", r.code, r.stderr)
	}
	// What is not a flat field is refused at once.
	bad := filepath.Join(t.TempDir(), "bad.bin")
	os.WriteFile(bad, []byte("not a flat field"), 0o644)
	r = runArgs(t, ctx, append(args, "-out", t.TempDir(), "-flat-field", bad)...)
	if r.code != 1 || !strings.Contains(r.stderr, "-save-flat-field") {
		t.Errorf("a file that is no flat field: exit %d, %q", r.code, r.stderr)
	}
	for _, bad := range [][]string{
		{"-flat-field", ""},
		{"-flat-field", "none", "-save-flat-field", "f"},
	} {
		var out, errw bytes.Buffer
		err := run(ctx, append(args, append([]string{"-out", "o"}, bad...)...), &out, &errw)
		var ue cli.UsageError
		if !errors.As(err, &ue) {
			t.Errorf("%q: err = %v, want a usage error", bad, err)
		}
	}
}
