package main

import (
	"strings"
	"testing"
	"time"

	"github.com/gohtgs/htgs/matmul"
)

// gpuLine reports the rate in TFLOP/s, the bytes each way against the
// minimum, the disk rate and each GPU's busy fraction.
func TestGPULine(t *testing.T) {
	const n = 1024
	c := int64(8 * n * n)
	rep := &matmul.Report{
		Plan: matmul.Plan{M: n, K: n, N: n, Flops: 2 * n * n * n, UploadBytes: 3 * c, DownloadBytes: c},
		// 2.147 GFLOP in 1 ms: 2.15 TFLOP/s.
		Elapsed: time.Millisecond, UploadBytes: 3 * c, DownloadBytes: c, BytesRead: 2 * c,
		DeviceBusy: []float64{0.9, 0.5},
	}
	got := gpuLine(rep)
	for _, want := range []string{"2.15 TFLOP/s", "to GPUs 24 MiB", "from GPUs 8 MiB", "bus 1.33x the minimum 24 MiB", "disk 16.78 GB/s", "GPU 0 90%", "GPU 1 50%"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
}

// touchPages writes zeros on every page, in bands, and nothing else.
func TestTouchPages(t *testing.T) {
	for _, n := range []int{0, 1, 511, 512, 513, 100000} {
		d := make([]float64, n)
		touchPages(d)
		for i, v := range d {
			if v != 0 {
				t.Fatalf("n=%d: d[%d] = %v", n, i, v)
			}
		}
	}
}
