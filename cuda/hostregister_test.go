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
