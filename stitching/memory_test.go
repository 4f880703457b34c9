package stitching

import (
	"context"
	"math"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gohtgs/htgs/stitching/align"
)

// The estimate grows with what Stitch allocates: the pool's tiles and
// spectra, readers and per-worker scratch.
func TestMemoryEstimate(t *testing.T) {
	gopt := GraphOptions{Workers: 2}
	demo := MemoryEstimate(8, 10, 512, 384, align.Options{}, gopt)
	// 12 slots of a tile (0.4 MB) and a spectrum (1.6 MB), scratch.
	if demo < 24<<20 || demo > 200<<20 {
		t.Errorf("8x10 of 512x384: %d MB", demo>>20)
	}
	if huge := MemoryEstimate(3, 3, 60000, 60000, align.Options{}, gopt); huge < 100<<30 {
		t.Errorf("3x3 of 60000x60000: %d GB", huge>>30)
	}
	if g := MemoryEstimate(8, 10, 512, 384, align.Options{}, GraphOptions{Workers: 2, GPU: true}); g >= demo {
		t.Errorf("GPU %d >= CPU %d: the spectra live on the GPUs", g, demo)
	}
	if p := MemoryEstimate(8, 10, 512, 384, align.Options{}, GraphOptions{Workers: 2, PoolSize: 40}); p <= demo {
		t.Errorf("a larger pool does not cost more: %d <= %d", p, demo)
	}
	if w := MemoryEstimate(8, 10, 512, 384, align.Options{}, GraphOptions{Workers: 8}); w <= demo {
		t.Errorf("more workers do not cost more: %d <= %d", w, demo)
	}
	if s := MemoryEstimate(1<<20, 1<<20, 1<<20, 1<<20, align.Options{}, gopt); s != math.MaxInt64 {
		t.Errorf("absurd sizes: %d, want saturation", s)
	}
	if MemoryEstimate(0, 3, 10, 10, align.Options{}, gopt) != 0 {
		t.Error("empty grid: want 0")
	}
}

// The estimate is not far below what a run really holds: the peak of the
// live heap, sampled while stitching with garbage collected eagerly.
func TestMemoryEstimateCoversARun(t *testing.T) {
	if testing.Short() {
		t.Skip("samples the heap during a run")
	}
	g := synthGrid(t, qualitySynth(4, 6, 1, false))
	src := g.source(t)
	w, h := src.TileSize()
	gopt := GraphOptions{Workers: 2}
	est := MemoryEstimate(src.Rows(), src.Cols(), w, h, align.Options{}, gopt)

	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > base.HeapAlloc && ms.HeapAlloc-base.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc - base.HeapAlloc)
			}
		}
	}()
	_, err := Stitch(context.Background(), src, align.Options{}, gopt)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	// HeapAlloc counts garbage not yet collected too (GOGC 10 keeps it
	// small), so the estimate of live memory may be a little under it.
	if p := int64(peak.Load()); p > 2*est {
		t.Errorf("estimate %d KB, heap peaked at %d KB", est>>10, p>>10)
	} else {
		t.Logf("estimate %d KB, heap peak %d KB", est>>10, p>>10)
	}
}
