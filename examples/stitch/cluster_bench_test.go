package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gohtgs/htgs/stitching/synth"
)

// registered is the client's line with the registration's time (from the
// start of the registration, putting the tiles in the store included).
var registered = regexp.MustCompile(`(?m)^registered \d+ pairs in \d+ bands on \d+ worker\(s\) in (\S+):`)

// BenchmarkClusterTilesVia measures what -tiles-via store costs against
// the shared folder: stitch -cluster 2 -mosaic=false on a generated 8 x 10
// grid of 512 x 384 tiles (the demo's), each op one run of each mode, in
// alternating order (store first on even ops), after one warm-up run of
// each. It reports the medians of the whole runs (store-s, folder-s) and
// of their registrations (store-reg-s, folder-reg-s: from the start of the
// registration, the store's puts included, to its last band), the median
// of the pairs' ratios (store/folder, store/folder-reg), and the 1-minute
// load average at the end (load1; the machine is shared). Run it with
//
//	go test -run '^$' -bench ClusterTilesVia -benchtime 7x ./examples/stitch/
func BenchmarkClusterTilesVia(b *testing.B) {
	needNATSServer(b)
	ctx := context.Background()
	cfg := synth.DefaultConfig()
	cfg.Rows, cfg.Cols = 8, 10
	dir := b.TempDir()
	if err := synth.GenerateToDir(ctx, cfg, dir, synth.DefaultName); err != nil {
		b.Fatal(err)
	}
	outs := map[string]string{viaStore: b.TempDir(), viaFolder: b.TempDir()}
	run := func(via string) (whole, reg time.Duration) {
		var out, errw bytes.Buffer
		t0 := time.Now()
		code := runMain(ctx, []string{"-dir", dir, "-rows", "8", "-cols", "10", "-out", outs[via], "-cluster", "2", "-mosaic=false", "-tiles-via", via}, &out, &errw)
		whole = time.Since(t0)
		m := registered.FindStringSubmatch(out.String())
		if code != 0 || m == nil {
			b.Fatalf("-tiles-via %s: exit %d\n%s%s", via, code, out.String(), errw.String())
		}
		reg, err := time.ParseDuration(m[1])
		if err != nil {
			b.Fatal(err)
		}
		return whole, reg
	}
	run(viaStore) // warm-up: page cache, FFTW plans' wisdom
	run(viaFolder)
	var st, fo, stReg, foReg, ratio, ratioReg []float64
	b.ResetTimer()
	for i := range b.N {
		order := []string{viaStore, viaFolder}
		if i%2 == 1 {
			order = []string{viaFolder, viaStore}
		}
		got := map[string][2]time.Duration{}
		for _, via := range order {
			w, r := run(via)
			got[via] = [2]time.Duration{w, r}
		}
		s, f := got[viaStore], got[viaFolder]
		st, fo = append(st, s[0].Seconds()), append(fo, f[0].Seconds())
		stReg, foReg = append(stReg, s[1].Seconds()), append(foReg, f[1].Seconds())
		ratio = append(ratio, s[0].Seconds()/f[0].Seconds())
		ratioReg = append(ratioReg, s[1].Seconds()/f[1].Seconds())
	}
	b.StopTimer()
	med := func(v []float64) float64 {
		v = slices.Clone(v)
		slices.Sort(v)
		return v[len(v)/2]
	}
	b.ReportMetric(med(st), "store-s")
	b.ReportMetric(med(fo), "folder-s")
	b.ReportMetric(med(stReg), "store-reg-s")
	b.ReportMetric(med(foReg), "folder-reg-s")
	b.ReportMetric(med(ratio), "store/folder")
	b.ReportMetric(med(ratioReg), "store/folder-reg")
	if la, err := os.ReadFile(filepath.Join("/proc", "loadavg")); err == nil {
		if f := strings.Fields(string(la)); len(f) > 0 {
			if v, err := strconv.ParseFloat(f[0], 64); err == nil {
				b.ReportMetric(v, "load1")
			}
		}
	}
}
