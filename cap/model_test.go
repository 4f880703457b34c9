package cap

import (
	"context"
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
	ts, err := MeasureStart(context.Background(), s, d, 1, Options{Workers: 2}, MedianFunc(1))
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
	if ts, err := MeasureGatherStart(context.Background(), s, Options{Workers: 2}, HistogramTile, merge); err != nil || ts <= 0 || merged != 70*50 {
		t.Fatalf("MeasureGatherStart = %v, %v (%d merged)", ts, err, merged)
	}
}
