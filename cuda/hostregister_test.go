//go:build cuda

package cuda

import (
	"testing"
	"time"
)

// TestRegisterHost2D page-locks Go slices, copies a strided block to the
// device and back with 2-D copies, ordered by a blocking event, and times
// the registration of 256 MiB (logged, for choosing the offload mode).
func TestRegisterHost2D(t *testing.T) {
	d := gpu(t)
	const rows, cols, ld = 300, 200, 333
	src := make([]float64, rows*ld)
	for i := range src {
		src[i] = float64(i)
	}
	dst := make([]float64, rows*ld)
	rs, err := RegisterHost(d, src)
	must(t, err)
	defer func() { must(t, rs.Unregister()) }()
	rd, err := RegisterHost(d, dst)
	must(t, err)
	defer func() { must(t, rd.Unregister()) }()
	if _, err := RegisterHost(d, src[10:20]); err == nil {
		t.Errorf("registering registered memory again succeeded")
	}
	m, err := d.Alloc(8 * rows * cols)
	must(t, err)
	defer m.Free()
	s, err := d.NewStream()
	must(t, err)
	defer s.Close()
	ev, err := d.NewBlockingEvent()
	must(t, err)
	defer ev.Close()
	must(t, CopyToDevice2D(s, m, cols, src[ld+1:], ld, rows-1, cols))
	must(t, CopyFromDevice2D(s, dst[ld+1:], ld, m, cols, rows-1, cols))
	must(t, ev.Record(s))
	must(t, ev.Synchronize())
	for r := 1; r < rows; r++ {
		for c := range ld {
			want := 0.0
			if c >= 1 && c < 1+cols && r*ld+c < len(dst) {
				want = src[r*ld+c]
			}
			if r*ld+c < len(dst) && dst[r*ld+c] != want {
				t.Fatalf("(%d,%d) = %v, want %v", r, c, dst[r*ld+c], want)
			}
		}
	}
	if err := CopyToDevice2D(s, m, cols, src, ld, rows+1, cols); err == nil {
		t.Errorf("2-D copy past the end of the slice succeeded")
	}

	big := make([]float64, 32<<20) // 256 MiB
	for i := 0; i < len(big); i += 512 {
		big[i] = 1
	}
	t0 := time.Now()
	r, err := RegisterHost(d, big)
	must(t, err)
	reg := time.Since(t0)
	t0 = time.Now()
	must(t, r.Unregister())
	t.Logf("register 256 MiB: %v (%.1f GB/s), unregister %v", reg, 256*(1<<20)/reg.Seconds()/1e9, time.Since(t0))
}

// TestTimingEvents times a 256 MiB upload between two timing events: the
// GPU time is positive, no longer than the host saw, and gives a bus rate
// within reason; events without timing are refused.
func TestTimingEvents(t *testing.T) {
	d := gpu(t)
	const n = 32 << 20 // float64s: 256 MiB
	h, err := d.AllocHost(8 * n)
	must(t, err)
	defer h.Free()
	m, err := d.Alloc(8 * n)
	must(t, err)
	defer m.Free()
	s, err := d.NewStream()
	must(t, err)
	defer s.Close()
	start, err := d.NewTimingEvent()
	must(t, err)
	defer start.Close()
	end, err := d.NewTimingEvent()
	must(t, err)
	defer end.Close()
	t0 := time.Now()
	must(t, start.Record(s))
	must(t, CopyHtoD(s, m, h))
	must(t, end.Record(s))
	must(t, end.Synchronize())
	host := time.Since(t0)
	gpu, err := end.Since(start)
	must(t, err)
	if gpu <= 0 || gpu > host {
		t.Fatalf("GPU time %v, host saw %v", gpu, host)
	}
	if back, err := start.Since(end); err != nil || (back+gpu).Abs() > time.Microsecond {
		t.Errorf("start.Since(end) = %v, %v; want %v", back, err, -gpu)
	}
	rate := 8 * n / gpu.Seconds() / 1e9
	t.Logf("256 MiB upload: %v on the GPU (%.1f GB/s), %v seen by the host", gpu, rate, host)
	if rate < 1 || rate > 1000 {
		t.Errorf("bus rate %.1f GB/s", rate)
	}
	plain, err := d.NewEvent()
	must(t, err)
	defer plain.Close()
	must(t, plain.Record(s))
	must(t, plain.Synchronize())
	if _, err := plain.Since(start); err == nil {
		t.Errorf("Since on an event without timing succeeded")
	}
}
