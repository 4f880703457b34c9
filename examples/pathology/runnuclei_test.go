package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunCommandNuclei writes the nuclei as GeoJSON and answers a ROI
// query from the command line.
func TestRunCommandNuclei(t *testing.T) {
	ctx := context.Background()
	var out, errOut bytes.Buffer
	file := filepath.Join(t.TempDir(), "nuclei.json")
	if err := run(ctx, []string{"-tiles", "4", "-tile-size", "48", "-scale", "0.001", "-nuclei", file, "-roi", "0,0,96,96"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	var nuclei, inROI int
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "processed ") {
			parseTail(t, line, ": %d nuclei", &nuclei)
		}
		if strings.HasPrefix(line, "ROI ") {
			parseTail(t, line, ": %d nuclei", &inROI)
		}
	}
	if nuclei == 0 || inROI != nuclei {
		t.Errorf("%d nuclei, %d in the ROI covering the slide:\n%s", nuclei, inROI, out.String())
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var fc struct {
		Type     string
		Features []struct {
			Geometry struct {
				Type        string
				Coordinates [][][2]float64
			}
			Properties map[string]float64
		}
	}
	if err := json.Unmarshal(data, &fc); err != nil {
		t.Fatal(err)
	}
	if fc.Type != "FeatureCollection" || len(fc.Features) != nuclei {
		t.Fatalf("GeoJSON %s with %d features, want %d", fc.Type, len(fc.Features), nuclei)
	}
	for _, f := range fc.Features {
		ring := f.Geometry.Coordinates[0]
		if f.Geometry.Type != "Polygon" || ring[0] != ring[len(ring)-1] || f.Properties["polygonArea"] < f.Properties["area"] {
			t.Errorf("feature %v", f)
		}
	}
	for _, bad := range [][]string{{"-roi", "1,2,3"}, {"-roi", "5,5,5,9"}, {"-sim", "-nuclei", file}, {"-nuclei", ""}} {
		if err := run(ctx, bad, &out, &errOut); err == nil {
			t.Errorf("run %v succeeded", bad)
		}
	}
}

// parseTail scans the first match of format at the end of s into v.
func parseTail(t *testing.T, s, format string, v *int) {
	t.Helper()
	i := strings.LastIndex(s, ": ")
	if i < 0 {
		t.Fatalf("no %q in %q", format, s)
	}
	if _, err := fmt.Sscanf(s[i:], format, v); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
}
