package compose

import (
	"bytes"
	"context"
	"errors"
	"image"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// A prefetched loader gives the same BigTIFF, with loads running at once
// and never more than par tiles ahead of the sweep.
func TestPrefetchComposeBigTIFF(t *testing.T) {
	slots, imgs := benchGrid(4, 8, 150, 130)
	dir := t.TempDir()
	compose := func(name string, load func(int) (*image.Gray16, error)) []byte {
		out := testStream(t, slots, dir, name)
		closeStream(t, out, ComposeBigTIFF(context.Background(), slots, load, Linear, out))
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	want := compose("plain.tif", func(i int) (*image.Gray16, error) { return imgs[i], nil })

	const par = 3
	var (
		mu                      sync.Mutex
		inFlight, most, started int
		taken, aheadMost        int
	)
	slow := func(i int) (*image.Gray16, error) {
		mu.Lock()
		inFlight++
		started++
		most = max(most, inFlight)
		aheadMost = max(aheadMost, started-taken)
		mu.Unlock()
		time.Sleep(2 * time.Millisecond)
		mu.Lock()
		inFlight--
		mu.Unlock()
		return imgs[i], nil
	}
	loader, stop := Prefetch(context.Background(), slots, slow, par)
	counted := func(i int) (*image.Gray16, error) {
		img, err := loader(i)
		mu.Lock()
		taken++
		mu.Unlock()
		return img, err
	}
	got := compose("prefetched.tif", counted)
	stop()
	if !bytes.Equal(got, want) {
		t.Fatal("the prefetched BigTIFF differs from the plain one")
	}
	if most < 2 {
		t.Errorf("at most %d load at once, want up to %d", most, par)
	}
	if most > par || aheadMost > par+1 {
		t.Errorf("%d loads at once, %d started ahead of the sweep; want at most %d (+1 ahead)", most, aheadMost, par)
	}
}

// Out of order, or after an error, the prefetched loader says so and
// stops without leaking its goroutines (goleak checks the package).
func TestPrefetchOrderAndErrors(t *testing.T) {
	slots, imgs := benchGrid(3, 3, 40, 30)
	order := sweepOrder(slots)
	loader, stop := Prefetch(context.Background(), slots, func(i int) (*image.Gray16, error) { return imgs[i], nil }, 2)
	if _, err := loader(order[1]); err == nil {
		t.Error("a tile asked for out of order: no error")
	}
	stop()

	boom := errors.New("unreadable")
	bad := order[4]
	loader, stop = Prefetch(context.Background(), slots, func(i int) (*image.Gray16, error) {
		if i == bad {
			return nil, boom
		}
		return imgs[i], nil
	}, 2)
	defer stop()
	mw, mh, _ := MosaicSize(slots)
	_, err := ComposeFunc(context.Background(), slots, loader, Average)
	if !errors.Is(err, boom) {
		t.Fatalf("ComposeFunc of a %dx%d mosaic: err %v, want the loader's", mw, mh, err)
	}
}
