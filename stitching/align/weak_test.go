package align

import (
	"image"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// noiseLimitedPairs returns n noise-limited pairs of w x h tiles (see
// smoothPair) with their true displacements, of several sizes of
// overlap.
func noiseLimitedPairs(n, w, h int) (t1s, t2s []*image.Gray16, truth [][2]int) {
	for seed := uint64(1); seed <= uint64(n); seed++ {
		dx, dy := w-w/8-5*int(seed), int(seed%3)-1
		t1, t2 := smoothPair(seed, w, h, dx, dy, 45)
		t1s, t2s = append(t1s, t1), append(t2s, t2)
		truth = append(truth, [2]int{dx, dy})
	}
	return t1s, t2s, truth
}

// The translations of noise-limited pairs do not depend on the scratch
// they are computed in: a fresh one per call (ChoosePeak), an Aligner's
// own, kept from pair to pair, or a space of a pool shared by goroutines
// that handle pairs of other sizes at the same time. The same holds for
// RefineDenoised.
func TestWeakPairsSameResults(t *testing.T) {
	const w, h = 240, 180
	t1s, t2s, truth := noiseLimitedPairs(6, w, h)
	if c := NoiseCeiling(t1s[0], t2s[0]); c >= ConfidentCorr {
		t.Fatalf("noise ceiling %.3f: the case is not noise-limited", c)
	}
	peaks := []Peak{{X: 5, Y: 7, Value: 0.1}, {X: 100, Y: 50, Value: 0.05}}
	f := NewTileFFT(w, h, Options{})
	spec := func(t *image.Gray16) []complex128 {
		s := make([]complex128, f.SpectrumLen())
		f.Forward(t, s)
		return s
	}
	own := NewAligner(w, h, Options{})
	ref := NewRefiner()
	want := make([]Translation, len(t1s))
	wantAlign := make([]Translation, len(t1s))
	wantRefine := make([]Translation, len(t1s))
	// The spectra are computed here, once: a TileFFT is one goroutine's.
	spec1 := make([][]complex128, len(t1s))
	spec2 := make([][]complex128, len(t1s))
	for i := range t1s {
		spec1[i], spec2[i] = spec(t1s[i]), spec(t2s[i])
		want[i] = ChoosePeak(t1s[i], t2s[i], West, peaks, Options{})
		if abs(want[i].X-truth[i][0]) > 1 || abs(want[i].Y-truth[i][1]) > 1 {
			t.Errorf("pair %d: %+v, truth %v", i, want[i], truth[i])
		}
		wantAlign[i] = own.Align(t1s[i], t2s[i], slices.Clone(spec1[i]), slices.Clone(spec2[i]), West)
		start := Translation{X: truth[i][0] + 3, Y: truth[i][1] - 2}
		wantRefine[i] = ref.RefineDenoised(t1s[i], t2s[i], start, 6, 8, 8)
	}

	// Other pairs, of another tile size, run at the same time in the
	// same pool, so that spaces hold buffers and plans of other sizes.
	o1s, o2s, _ := noiseLimitedPairs(3, 300, 160)
	pool := NewWeakPairs(2)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := NewAligner(w, h, Options{})
			a.SetWeakPairs(pool)
			r := NewRefiner()
			r.SetWeakPairs(pool)
			for k := range t1s {
				i := (k + g) % len(t1s)
				if g%2 == 1 {
					o := i % len(o1s)
					pool.ChoosePeak(o1s[o], o2s[o], West, peaks, Options{})
				}
				if got := pool.ChoosePeak(t1s[i], t2s[i], West, peaks, Options{}); got != want[i] {
					t.Errorf("goroutine %d, pair %d: pooled ChoosePeak %+v, alone %+v", g, i, got, want[i])
				}
				if got := a.Align(t1s[i], t2s[i], slices.Clone(spec1[i]), slices.Clone(spec2[i]), West); got != wantAlign[i] {
					t.Errorf("goroutine %d, pair %d: pooled Align %+v, own scratch %+v", g, i, got, wantAlign[i])
				}
				start := Translation{X: truth[i][0] + 3, Y: truth[i][1] - 2}
				if got := r.RefineDenoised(t1s[i], t2s[i], start, 6, 8, 8); got != wantRefine[i] {
					t.Errorf("goroutine %d, pair %d: pooled RefineDenoised %+v, own scratch %+v", g, i, got, wantRefine[i])
				}
			}
		}()
	}
	wg.Wait()
	if got := len(pool.free); got != pool.Size() {
		t.Errorf("%d of %d spaces back in the pool", got, pool.Size())
	}
	for range pool.Size() {
		r, done := pool.take()
		if len(r.plans) > spacePlans {
			t.Errorf("a space keeps %d plans, want at most %d", len(r.plans), spacePlans)
		}
		defer done()
	}
}

// A noise-limited pair waits for a free space of the pool: with the only
// space of a pool of one taken, RefineDenoised and Align do not return
// until it is given back.
func TestWeakPairsBound(t *testing.T) {
	const w, h = 240, 180
	t1s, t2s, truth := noiseLimitedPairs(1, w, h)
	pool := NewWeakPairs(0)
	if pool.Size() != 1 {
		t.Fatalf("NewWeakPairs(0).Size() = %d, want 1", pool.Size())
	}
	r := NewRefiner()
	r.SetWeakPairs(pool)
	a := NewAligner(w, h, Options{})
	a.SetWeakPairs(pool)
	f := NewTileFFT(w, h, Options{})
	s1, s2 := make([]complex128, f.SpectrumLen()), make([]complex128, f.SpectrumLen())
	f.Forward(t1s[0], s1)
	f.Forward(t2s[0], s2)
	for name, call := range map[string]func(){
		"RefineDenoised": func() { r.RefineDenoised(t1s[0], t2s[0], Translation{X: truth[0][0], Y: truth[0][1]}, 3, 8, 8) },
		"Align":          func() { a.Align(t1s[0], t2s[0], s1, s2, West) },
	} {
		_, done := pool.take()
		finished := make(chan struct{})
		go func() {
			call()
			close(finished)
		}()
		select {
		case <-finished:
			t.Errorf("%s returned while the pool's only space was taken", name)
		case <-time.After(100 * time.Millisecond):
		}
		done()
		select {
		case <-finished:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s did not return after the space was given back", name)
		}
	}
	// A pair that is not noise-limited does not need a space.
	c1, c2 := smoothPair(1, w, h, truth[0][0], truth[0][1], 0)
	f.Forward(c1, s1)
	f.Forward(c2, s2)
	_, done := pool.take()
	defer done()
	finished := make(chan Translation, 1)
	go func() { finished <- a.Align(c1, c2, s1, s2, West) }()
	select {
	case got := <-finished:
		if got.X != truth[0][0] || got.Y != truth[0][1] {
			t.Errorf("clean pair: %+v, truth %v", got, truth[0])
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a clean pair waited for a space of the pool")
	}
}

// A Refiner keeps the plans of its last maxPlans sizes only, and a plan
// made again gives the same results.
func TestRefinerPlanCache(t *testing.T) {
	const w, h = 240, 180
	t1, t2 := smoothPair(4, w, h, 200, 1, 10)
	fresh := func(radius int) Translation {
		return NewRefiner().Refine(t1, t2, Translation{X: 201, Y: 0}, radius, 8, 8)
	}
	r := NewRefiner()
	sizes := map[[2]int]bool{}
	for pass := 0; pass < 2; pass++ {
		for radius := 2; radius <= 12; radius++ {
			got := r.Refine(t1, t2, Translation{X: 201, Y: 0}, radius, 8, 8)
			if want := fresh(radius); got != want {
				t.Errorf("pass %d, radius %d: %+v, a fresh Refiner %+v", pass, radius, got, want)
			}
			last := r.plans[len(r.plans)-1]
			sizes[[2]int{last.nw, last.nh}] = true
			if len(r.plans) > maxPlans {
				t.Fatalf("%d plans kept, want at most %d", len(r.plans), maxPlans)
			}
		}
	}
	if len(sizes) <= maxPlans {
		t.Errorf("%d sizes of plans: the case does not exercise the eviction", len(sizes))
	}
	seen := map[[2]int]bool{}
	for _, c := range r.plans {
		if seen[[2]int{c.nw, c.nh}] {
			t.Errorf("plan %dx%d cached twice", c.nw, c.nh)
		}
		seen[[2]int{c.nw, c.nh}] = true
	}
}

// What a space of the pool keeps after noise-limited pairs, searched and
// refined, is within DenoiseScratch.
func TestDenoiseScratchCoversASpace(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the heap")
	}
	const w, h = 480, 360
	t1s, t2s, truth := noiseLimitedPairs(2, w, h)
	peaks := []Peak{{X: 5, Y: 7, Value: 0.1}}
	pool := NewWeakPairs(1)
	r := NewRefiner()
	r.SetWeakPairs(pool)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range t1s {
		pool.ChoosePeak(t1s[i], t2s[i], West, peaks, Options{})
		r.RefineDenoised(t1s[i], t2s[i], Translation{X: truth[i][0], Y: truth[i][1]}, 8, 8, 8)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	kept := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	est := DenoiseScratch(w, h)
	t.Logf("kept %d KB, DenoiseScratch %d KB", kept>>10, est>>10)
	if kept > est {
		t.Errorf("a space keeps %d KB, DenoiseScratch says %d KB", kept>>10, est>>10)
	}
	if kept < est/4 {
		t.Errorf("a space keeps %d KB, DenoiseScratch says %d KB: the estimate is far off", kept>>10, est>>10)
	}
	runtime.KeepAlive(pool)
	runtime.KeepAlive(r)
}
