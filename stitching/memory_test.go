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
	// With as many scratch spaces for noise-limited pairs, a GPU run
	// costs less: the spectra live on the GPUs.
	cpu1 := MemoryEstimate(8, 10, 512, 384, align.Options{}, GraphOptions{Workers: 2, WeakPairs: 1})
	if g := MemoryEstimate(8, 10, 512, 384, align.Options{}, GraphOptions{Workers: 2, GPU: true, WeakPairs: 1}); g >= cpu1 {
		t.Errorf("GPU %d >= CPU %d: the spectra live on the GPUs", g, cpu1)
	}
	if p := MemoryEstimate(8, 10, 512, 384, align.Options{}, GraphOptions{Workers: 2, PoolSize: 40}); p <= demo {
		t.Errorf("a larger pool does not cost more: %d <= %d", p, demo)
	}
	if w := MemoryEstimate(8, 10, 512, 384, align.Options{}, GraphOptions{Workers: 8}); w <= demo {
		t.Errorf("more workers do not cost more: %d <= %d", w, demo)
	}
	// The scratch of noise-limited pairs is counted per space of the
	// shared pool, by default a quarter of the workers (at least one), not
	// per worker.
	one := align.DenoiseScratch(512, 384)
	for _, c := range []struct{ workers, weak, want int }{{2, 0, 1}, {7, 0, 1}, {8, 0, 2}, {16, 0, 4}, {16, 1, 1}, {2, 6, 6}} {
		if got := (GraphOptions{Workers: c.workers, WeakPairs: c.weak}).weakPairs(c.workers); got != c.want {
			t.Errorf("Workers %d, WeakPairs %d: %d spaces, want %d", c.workers, c.weak, got, c.want)
		}
	}
	// On GPUs, whose host cores are free for them, every worker has one
	// by default.
	for _, c := range []struct{ workers, weak, want int }{{2, 0, 2}, {16, 0, 16}, {16, 3, 3}} {
		if got := (GraphOptions{Workers: c.workers, WeakPairs: c.weak}).gpuWeakPairs(c.workers); got != c.want {
			t.Errorf("GPU, Workers %d, WeakPairs %d: %d spaces, want %d", c.workers, c.weak, got, c.want)
		}
	}
	g1 := MemoryEstimate(8, 10, 512, 384, align.Options{}, GraphOptions{Workers: 16, GPU: true, WeakPairs: 1})
	if d := MemoryEstimate(8, 10, 512, 384, align.Options{}, GraphOptions{Workers: 16, GPU: true}) - g1; d < 15*one-1 || d > 15*one+1 {
		t.Errorf("GPU, 16 workers: %d bytes more than with 1 scratch space, want 15 x DenoiseScratch = %d", d, 15*one)
	}
	for _, workers := range []int{2, 16} {
		base := MemoryEstimate(8, 10, 512, 384, align.Options{}, GraphOptions{Workers: workers, WeakPairs: 1})
		for _, n := range []int{2, 5} {
			got := MemoryEstimate(8, 10, 512, 384, align.Options{}, GraphOptions{Workers: workers, WeakPairs: n})
			if d := got - base; d < int64(n-1)*one-1 || d > int64(n-1)*one+1 {
				t.Errorf("Workers %d, WeakPairs %d: %d bytes more than with 1, want %d x DenoiseScratch = %d", workers, n, d, n-1, int64(n-1)*one)
			}
		}
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
	t.Run("clean", func(t *testing.T) {
		checkHeapPeak(t, synthGrid(t, qualitySynth(4, 6, 1, false)), GraphOptions{Workers: 2})
	})
	// Low contrast and read noise (TestRobustLowContrast): most pairs are
	// noise-limited and take a space of the pool, four workers sharing
	// one.
	t.Run("noise-limited", func(t *testing.T) {
		checkHeapPeak(t, phaseCellGrid(1, 4, 5, 400, 300, 0.1, 2, 29), GraphOptions{Workers: 4})
	})
}

// checkHeapPeak stitches g with gopt and asserts that the live heap did
// not peak above twice MemoryEstimate.
func checkHeapPeak(t *testing.T, g *testGrid, gopt GraphOptions) {
	src := g.source(t)
	w, h := src.TileSize()
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

// The soft memory limit of the paper-size grid (42 x 59 tiles of 1392 x
// 1040, 16 workers) stays within issue 15's bound, 1.5 x the pool bound
// (min(R,C)+2+workers slots of tile and spectrum, 1.39 GB) plus 300 MB,
// with the default scratch spaces for noise-limited pairs (or one); it
// always leaves room for the whole estimate, and grows when many spaces
// are asked for.
func TestSoftMemoryLimitPaperGrid(t *testing.T) {
	const w, h = 1392, 1040
	opt := align.Options{}
	var got []int64
	for _, weak := range []int{0, 1, 4, 16} {
		gopt := GraphOptions{Workers: 16, WeakPairs: weak}
		limit := SoftMemoryLimit(42, 59, w, h, opt, gopt)
		if bound := int64(1.5*1.39e9 + 300e6); weak <= 1 && limit > bound {
			t.Errorf("WeakPairs %d: soft limit %d bytes, over 1.5 x the pool bound + 300 MB (%d)", weak, limit, bound)
		}
		if full := MemoryEstimate(42, 59, w, h, opt, gopt); limit < full+300e6 {
			t.Errorf("WeakPairs %d: soft limit %d leaves no room above the whole estimate %d", weak, limit, full)
		}
		got = append(got, limit)
	}
	if got[0] != got[1] || got[3] <= got[0] {
		t.Errorf("soft limits %v: want the default's and one space's equal, 16 spaces' higher", got)
	}
}
