//go:build unix

package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/gohtgs/htgs/stitching/synth"
	"github.com/gohtgs/htgs/stitching/tileio"
)

// BenchmarkWatchDelay measures, on the 6 x 8 grid of 640 x 480
// tiles with 2 workers, the delay from the moment the last tile's file is
// closed to the end of stitch -watch (every output written), against the
// time of stitch on the finished folder, the two runs interleaved. The
// tiles come one per -watch.pace (100 ms). Variants: the flat field
// estimated (the default: on this grid from every tile but the last row,
// all in when the last row starts), given (-flat-field
// FILE) or none, with and without the mosaic. Metrics: offline-ms,
// delay-ms, delay-% (delay over offline), result-ms (the part of the
// delay until the Result, before the outputs and the mosaic) and load1 (the machine's load
// average, sampled at each iteration).
//
//	go test -run '^$' -bench 'WatchDelay$' -benchtime 5x ./examples/stitch
func BenchmarkWatchDelay(b *testing.B) {
	watchDelay(b, 6, 8, []string{"default", "flat-field=file", "flat-field=file,mosaic=false", "flat-field=none", "flat-field=none,mosaic=false", "mosaic=false"})
}

// BenchmarkWatchDelayLarge is BenchmarkWatchDelay on a grid of more than
// 64 tiles (12 x 11 of 640 x 480), where the estimated flat field's
// sample tiles are all in by mid-plate, with the default flags, without
// the mosaic, and with the flat field given and no mosaic.
//
//	go test -run '^$' -bench WatchDelayLarge -benchtime 3x ./examples/stitch
func BenchmarkWatchDelayLarge(b *testing.B) {
	watchDelay(b, 12, 11, []string{"default", "mosaic=false", "flat-field=file,mosaic=false"})
}

// watchDelay runs BenchmarkWatchDelay's variants (by name) on a
// generated grid of rows x cols tiles of 640 x 480.
func watchDelay(b *testing.B, rows, cols int, variants []string) {
	grid := b.TempDir()
	cfg := synth.ConfigFor(synth.Realistic)
	cfg.Rows, cfg.Cols, cfg.TileWidth, cfg.TileHeight, cfg.Seed = rows, cols, 640, 480, 1
	if err := synth.GenerateToDir(context.Background(), cfg, grid, synth.DefaultName); err != nil {
		b.Fatal(err)
	}
	pat, _ := tileio.ParsePattern("img_r{rrr}_c{ccc}.tif", 1)
	var files [][]byte
	for r := range rows {
		for c := range cols {
			data, err := os.ReadFile(filepath.Join(grid, pat.Name(r, c, rows, cols)))
			if err != nil {
				b.Fatal(err)
			}
			files = append(files, data)
		}
	}
	// The microscope's flat field, as an earlier run saved it.
	ffFile := filepath.Join(b.TempDir(), "flat.bin")
	var o, e bytes.Buffer
	if code := runMain(context.Background(), []string{"-dir", grid, "-rows", fmt.Sprint(rows), "-cols", fmt.Sprint(cols),
		"-out", b.TempDir(), "-mosaic=false", "-save-flat-field", ffFile}, &o, &e); code != 0 {
		b.Fatalf("-save-flat-field: exit %d: %s", code, e.String())
	}
	args := map[string][]string{
		"default":                      nil,
		"flat-field=file":              {"-flat-field", ffFile},
		"flat-field=file,mosaic=false": {"-flat-field", ffFile, "-mosaic=false"},
		"flat-field=none":              {"-flat-field", "none"},
		"flat-field=none,mosaic=false": {"-flat-field", "none", "-mosaic=false"},
		"mosaic=false":                 {"-mosaic=false"},
	}
	for _, name := range variants {
		v := struct {
			name string
			args []string
		}{name, args[name]}
		b.Run(v.name, func(b *testing.B) {
			args := append([]string{"-rows", fmt.Sprint(rows), "-cols", fmt.Sprint(cols), "-workers", "2"}, v.args...)
			var offline, delay, result time.Duration
			var load float64
			for i := 0; i < b.N; i++ {
				load += loadAverage()
				ctx := context.Background()
				t0 := time.Now()
				var o, e bytes.Buffer
				if code := runMain(ctx, append(args, "-dir", grid, "-out", b.TempDir()), &o, &e); code != 0 {
					b.Fatalf("offline: exit %d: %s", code, e.String())
				}
				offline += time.Since(t0)

				watched := b.TempDir()
				done := make(chan int)
				var wout bytes.Buffer
				go func() {
					var e bytes.Buffer
					done <- runMain(ctx, append(args, "-watch", "-dir", watched, "-out", b.TempDir()), &wout, &e)
				}()
				var last time.Time
				for k, data := range files {
					if err := os.WriteFile(filepath.Join(watched, pat.Name(k/cols, k%cols, rows, cols)), data, 0o644); err != nil {
						b.Fatal(err)
					}
					last = time.Now()
					if k < len(files)-1 {
						time.Sleep(*watchPace)
					}
				}
				if code := <-done; code != 0 {
					b.Fatalf("-watch: exit %d", code)
				}
				delay += time.Since(last)
				// The program's own count, from the last tile's arrival to
				// the Result (before the outputs).
				m := stitchedAfter.FindStringSubmatch(wout.String())
				if m == nil {
					b.Fatalf("no %q in %s", stitchedAfter, wout.String())
				}
				d, err := time.ParseDuration(m[1])
				if err != nil {
					b.Fatal(err)
				}
				result += d
			}
			b.ReportMetric(float64(offline.Milliseconds())/float64(b.N), "offline-ms")
			b.ReportMetric(float64(delay.Milliseconds())/float64(b.N), "delay-ms")
			b.ReportMetric(float64(result.Milliseconds())/float64(b.N), "result-ms")
			b.ReportMetric(100*float64(delay)/float64(offline), "delay-%")
			if load > 0 {
				b.ReportMetric(load/float64(b.N), "load1")
			}
		})
	}
}

// stitchedAfter finds the time -watch reports from the last tile to the
// Result.
var stitchedAfter = regexp.MustCompile(`stitched (\S+) after it`)

// watchPace is the interval between two tiles of BenchmarkWatchDelay: by
// default a fast microscope (the GPU case feeds one per 50 ms; on
// 2 shared cores the registration of 640 x 480 tiles does not keep up
// with that once the machine is loaded, and the delay would measure the
// backlog). A slower pace (-watch.pace 300ms) shows the delay where the
// machine keeps up.
var watchPace = flag.Duration("watch.pace", 100*time.Millisecond, "BenchmarkWatchDelay: the interval between two tiles")

// loadAverage is the machine's 1-minute load average (0 where
// /proc/loadavg cannot be read): the machine the benchmarks run on is
// shared.
func loadAverage() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var l float64
	fmt.Sscan(string(data), &l)
	return l
}

// BenchmarkWatchIdleCPU measures the CPU time stitch -watch uses while it
// waits on an empty folder, with inotify and polling every 100 ms, in
// milliseconds of CPU per second of waiting (cpu-ms/s).
//
//	go test -run '^$' -bench WatchIdleCPU -benchtime 1x ./examples/stitch
func BenchmarkWatchIdleCPU(b *testing.B) {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	for _, v := range []struct {
		name string
		args []string
	}{{"inotify", nil}, {"polling-100ms", []string{"-watch-poll", "100ms"}}} {
		b.Run(v.name, func(b *testing.B) {
			var used, waited time.Duration
			for i := 0; i < b.N; i++ {
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() {
					var o, e bytes.Buffer
					runMain(ctx, append([]string{"-watch", "-dir", b.TempDir(), "-rows", "6", "-cols", "8", "-out", b.TempDir()}, v.args...), &o, &e)
					close(done)
				}()
				time.Sleep(200 * time.Millisecond) // started
				c0, t0 := cpu(), time.Now()
				time.Sleep(3 * time.Second)
				used += cpu() - c0
				waited += time.Since(t0)
				cancel()
				<-done
			}
			b.ReportMetric(float64(used.Microseconds())/1000/waited.Seconds(), "cpu-ms/s")
		})
	}
}
