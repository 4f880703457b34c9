package cap

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gohtgs/htgs/tiled"
)

func TestPredict(t *testing.T) {
	m := Terms{Td: 3 * time.Millisecond, Tp: 10 * time.Millisecond, Tn: time.Millisecond, Tm: 2 * time.Millisecond}
	// 3 + ceil(10/4)*10 + 4*1 + 2 ms.
	if got, want := m.Predict(10, 4), 39*time.Millisecond; got != want {
		t.Fatalf("Predict(10, 4) = %v, want %v", got, want)
	}
	// Two processors: equation (1) with 2 workers (3 + 50 + 2 + 2 = 57 ms)
	// against all work over 2 processors (10 * 18 / 2 = 90 ms).
	if got, want := m.PredictShared(10, 4, 2), 90*time.Millisecond; got != want {
		t.Fatalf("PredictShared(10, 4, 2) = %v, want %v", got, want)
	}
	// A slow write stage bounds the pipeline: 10 * 20 + 10 ms.
	m.Tm = 20 * time.Millisecond
	if got, want := m.PredictShared(10, 8, 8), 210*time.Millisecond; got != want {
		t.Fatalf("PredictShared with slow writes = %v, want %v", got, want)
	}
	m.Ts = 5 * time.Millisecond
	if got, want := m.PredictShared(10, 8, 8), 215*time.Millisecond; got != want {
		t.Fatalf("PredictShared with start cost = %v, want %v", got, want)
	}
}

// With the overhead terms, each tile's own cost in the construct adds to
// equation (1), bounded below by all processor time over c processors and
// by a Gather's one-thread merge.
func TestPredictOverhead(t *testing.T) {
	us := time.Microsecond
	m := Terms{Td: 10 * us, Tp: 10 * us, Tn: us, Tm: 20 * us, To: 25 * us, Uo: 40 * us}
	// 1000 * 25 us + equation (1) with 2 workers (10 + 500 * 10 + 2 + 20
	// us) = 30.032 ms against processor time (40 + 10) * 1000 / 2 = 25 ms.
	if got, want := m.PredictShared(1000, 4, 2), 30032*us; got != want {
		t.Fatalf("overhead plus equation (1) = %v, want %v", got, want)
	}
	// One processor: (40 + 10) * 1000 us = 50 ms against 25 + 10.032 ms.
	if got, want := m.PredictShared(1000, 1, 1), 50*time.Millisecond; got != want {
		t.Fatalf("processor bound = %v, want %v", got, want)
	}
	// A Gather's merge is work the overhead leaves out: processor time
	// (40 + 10 + 20) * 1000 / 2 = 35 ms; its one thread 20.01 ms.
	m.Gather = true
	if got, want := m.PredictShared(1000, 2, 2), 35*time.Millisecond; got != want {
		t.Fatalf("Gather = %v, want %v", got, want)
	}
	m.Tm, m.Ts = 100*us, time.Millisecond
	if got, want := m.PredictShared(1000, 4, 2), time.Millisecond+100010*us; got != want {
		t.Fatalf("merge bound = %v, want %v", got, want)
	}
}

// MeasureOverhead and MeasureGatherOverhead give a start-up time and
// positive per-tile times, and run every tile.
func TestMeasureOverhead(t *testing.T) {
	src, _ := image(t, 70, 50, 16, 16, 64)
	if err := src.Flush(); err != nil {
		t.Fatal(err)
	}
	dstPath := filepath.Join(t.TempDir(), "dst.raw")
	var dst *tiled.Image
	open := func() (*tiled.Image, *tiled.Image, error) {
		s, err := tiled.Open(src.Path(), 70, 50, 16, 16, 64*16*16*2)
		if err != nil {
			return nil, nil, err
		}
		dst, err = tiled.Create(dstPath, 70, 50, 16, 16, 4*16*16*2)
		if err != nil {
			s.Close()
			return nil, nil, err
		}
		return s, dst, nil
	}
	for _, p := range []int{1, 3} {
		ts, to, uo, err := MeasureOverhead(context.Background(), open, 1, Options{Copies: p})
		if err != nil || ts <= 0 || to < 0 || uo < 0 || to+uo == 0 {
			t.Fatalf("P=%d: MeasureOverhead = %v, %v, %v, %v", p, ts, to, uo, err)
		}
		if st := dst.CacheStats(); st.Writes < 20 {
			t.Fatalf("P=%d: not every tile written: %+v", p, st)
		}
		ts, to, uo, err = MeasureGatherOverhead(context.Background(), func() (*tiled.Image, error) {
			return tiled.Open(src.Path(), 70, 50, 16, 16, 64*16*16*2)
		}, Options{Copies: p})
		if err != nil || ts <= 0 || to < 0 || uo < 0 || to+uo == 0 {
			t.Fatalf("P=%d: MeasureGatherOverhead = %v, %v, %v, %v", p, ts, to, uo, err)
		}
	}
	if _, _, _, err := MeasureGatherOverhead(context.Background(), func() (*tiled.Image, error) {
		return nil, os.ErrNotExist
	}, Options{}); err == nil {
		t.Fatal("open error not returned")
	}
}

// MeasureTerms gives positive terms and leaves dst as the construct would.
func TestMeasureTerms(t *testing.T) {
	src, px := image(t, 70, 50, 16, 16, 64)
	if err := src.Flush(); err != nil {
		t.Fatal(err)
	}
	dstPath := filepath.Join(t.TempDir(), "dst.raw")
	open := func() (*tiled.Image, *tiled.Image, error) {
		s, err := tiled.Open(src.Path(), 70, 50, 16, 16, 64*16*16*2)
		if err != nil {
			return nil, nil, err
		}
		d, err := tiled.Create(dstPath, 70, 50, 16, 16, 4*16*16*2)
		if err != nil {
			s.Close()
			return nil, nil, err
		}
		return s, d, nil
	}
	s, d, err := open()
	if err != nil {
		t.Fatal(err)
	}
	ts, err := MeasureStart(context.Background(), s, d, 1, Options{Copies: 2}, MedianFunc(1))
	s.Close()
	d.Close()
	if err != nil || ts <= 0 {
		t.Fatalf("MeasureStart = %v, %v", ts, err)
	}
	m, err := MeasureTerms(context.Background(), open, 1, MedianFunc(1))
	if err != nil {
		t.Fatal(err)
	}
	if m.Td <= 0 || m.Tp <= 0 || m.Tn <= 0 || m.Tm <= 0 {
		t.Fatalf("terms %+v", m)
	}
	d, err = tiled.Open(dstPath, 70, 50, 16, 16, 64*16*16*2)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := readAll(t, d); !slices.Equal(got, MedianInMemory(px, 70, 50, 1)) {
		t.Fatal("MeasureTerms' output differs from the in-memory median")
	}
}

// MeasureGatherTerms gives positive terms and merges every tile once.
func TestMeasureGatherTerms(t *testing.T) {
	src, _ := image(t, 70, 50, 16, 16, 64)
	if err := src.Flush(); err != nil {
		t.Fatal(err)
	}
	var merged uint64
	open := func() (*tiled.Image, error) { return tiled.Open(src.Path(), 70, 50, 16, 16, 64*16*16*2) }
	merge := func(part *[65536]uint64) error {
		hist := make([]uint64, 65536)
		MergeHistogram(hist, part)
		for _, n := range hist {
			merged += n
		}
		return nil
	}
	m, err := MeasureGatherTerms(context.Background(), open, HistogramTile, merge)
	if err != nil {
		t.Fatal(err)
	}
	if m.Td <= 0 || m.Tp <= 0 || m.Tm <= 0 || merged != 70*50 {
		t.Fatalf("terms %+v, %d pixels merged", m, merged)
	}
	s, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ts, err := MeasureGatherStart(context.Background(), s, Options{Copies: 2}, HistogramTile, merge); err != nil || ts <= 0 || merged != 70*50 {
		t.Fatalf("MeasureGatherStart = %v, %v (%d merged)", ts, err, merged)
	}
}
