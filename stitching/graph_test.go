package stitching

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gohtgs/htgs/bookkeeper"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/synth"
	"github.com/gohtgs/htgs/stitching/tileio"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func smallSynth(t testing.TB, rows, cols int, seed uint64) *testGrid {
	cfg := synth.ConfigFor(synth.Realistic)
	cfg.Rows, cfg.Cols, cfg.TileWidth, cfg.TileHeight, cfg.Seed = rows, cols, 256, 192, seed
	return synthGrid(t, cfg)
}

func sameTranslations(t *testing.T, what string, a, b *align.Translations) {
	t.Helper()
	for _, p := range align.Pairs(a.Rows, a.Cols) {
		if a.At(p) != b.At(p) {
			t.Fatalf("%s: pair %v: graph %+v, sequential %+v", what, p, a.At(p), b.At(p))
		}
	}
}

// The graph stitcher computes exactly what the sequential one does.
func TestStitchMatchesSequential(t *testing.T) {
	g := smallSynth(t, 4, 5, 3)
	src := g.source(t)
	seq, err := Sequential(context.Background(), src, align.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if seq.FlatField == nil || seq.FlatField.Identity() {
		t.Fatal("the grid's flat field is the identity: the comparison would not test the correction")
	}
	seqFF, err := seq.FlatField.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	for _, workers := range []int{1, 3} {
		res, err := Stitch(context.Background(), src, align.Options{}, GraphOptions{Workers: workers})
		if err != nil {
			t.Fatal(err)
		}
		// The flat field is fitted by workers goroutines here, by one in
		// Sequential: the same bits.
		if ff, err := res.FlatField.MarshalBinary(); err != nil || !bytes.Equal(ff, seqFF) {
			t.Fatalf("workers %d: flat field differs from Sequential's (%v)", workers, err)
		}
		sameTranslations(t, "relative", res.Relative, seq.Relative)
		sameTranslations(t, "optimized", res.Optimized, seq.Optimized)
		for i := range res.Positions {
			if res.Positions[i] != seq.Positions[i] {
				t.Fatalf("tile %d: graph %+v, sequential %+v", i, res.Positions[i], seq.Positions[i])
			}
		}
		checkBar(t, "graph", g, res)
	}
}

// With the smallest pool that cannot deadlock, every grid shape completes
// and the number of tile slots (spectra) alive never exceeds the pool.
func TestStitchSmallestPoolAllShapes(t *testing.T) {
	for _, sz := range [][2]int{{1, 1}, {1, 4}, {4, 1}, {2, 6}, {6, 2}, {3, 3}} {
		g := blobGrid(uint64(sz[0]*10+sz[1]), sz[0], sz[1], 128, 96, 0.2, 3, 50)
		src := g.source(t)
		readers := 2
		pool := newWalker(sz[0], sz[1]).lineLen() + 1
		var peaks []int
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		res, err := Stitch(ctx, src, align.Options{NoFlatField: true}, GraphOptions{Workers: 2, Readers: readers, PoolSize: pool,
			Observe: func(_ string, r *graph.Execution) {
				for _, p := range r.Stats().Pools {
					peaks = append(peaks, p.Peak)
					if p.Capacity != pool || p.InUse != 0 {
						t.Errorf("%v: pool capacity %d in use %d at the end", sz, p.Capacity, p.InUse)
					}
				}
			}})
		cancel()
		if err != nil {
			t.Fatalf("%v grid, pool %d: %v", sz, pool, err)
		}
		for _, p := range peaks {
			if p > pool {
				t.Fatalf("%v grid: %d slots alive, pool %d", sz, p, pool)
			}
		}
		if len(peaks) != 2 || len(res.Positions) != sz[0]*sz[1] {
			t.Fatalf("%v grid: %d phases observed, %d positions", sz, len(peaks), len(res.Positions))
		}
	}
}

func TestStitchErrors(t *testing.T) {
	g := smallSynth(t, 3, 3, 1)
	src := g.source(t)
	_, err := Stitch(context.Background(), src, align.Options{}, GraphOptions{PoolSize: 3, Readers: 2})
	if err == nil || !strings.Contains(err.Error(), "deadlock") {
		t.Fatalf("tiny pool: %v", err)
	}

	// A missing tile on disk: the error names the file.
	dir := t.TempDir()
	name := func(r, c int) string { return filepath.Join(dir, synth.DefaultName(r, c)) }
	for r := range 3 {
		for c := range 3 {
			if err := synth.WriteTIFF(name(r, c), g.tiles[r*3+c]); err != nil {
				t.Fatal(err)
			}
		}
	}
	pat, err := tileio.ParsePattern("img_r{rrr}_c{ccc}.tif", 1)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := tileio.OpenTileSet(dir, pat, 3, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(name(2, 1)); err != nil { // disappears after the headers were checked
		t.Fatal(err)
	}
	_, err = Stitch(context.Background(), ts, align.Options{NoFlatField: true}, GraphOptions{})
	var te interface{ Unwrap() error }
	if err == nil || !strings.Contains(err.Error(), "img_r003_c002.tif") || !errors.As(err, &te) {
		t.Fatalf("missing tile: %v", err)
	}
}

func TestStitchCancel(t *testing.T) {
	g := smallSynth(t, 4, 5, 2)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{}, 1)
	go func() { <-started; cancel() }()
	_, err := Stitch(ctx, g.source(t), align.Options{NoFlatField: true}, GraphOptions{
		Progress: func(string, int, int) {
			select {
			case started <- struct{}{}:
			default:
			}
		},
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	cancel()
}

// At most Workers transforms and pairs compute at once, though each of the
// two tasks has Workers copies; with several workers they do overlap.
func TestPairGraphAdmitsWorkers(t *testing.T) {
	src := smallSynth(t, 4, 5, 1).source(t)
	for _, workers := range []int{1, 2, 3} {
		var busy, peak atomic.Int32
		compute := func() {
			n := busy.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			time.Sleep(time.Millisecond)
			busy.Add(-1)
		}
		wk, rd, sl := GraphOptions{Workers: workers}.sizes(4, 5)
		g, _ := pairGraph("admission", src, sl, rd, wk,
			func() (slotData, error) { return slotData{}, nil },
			func() func(*loaded) { return func(*loaded) { compute() } },
			func() func(pairJob) align.Translation {
				return func(pairJob) align.Translation { compute(); return align.Translation{} }
			})
		if _, err := runPairs(context.Background(), "admission", g, 4, 5, GraphOptions{}); err != nil {
			t.Fatal(err)
		}
		if p := int(peak.Load()); p > workers || (workers > 1 && p < 2) {
			t.Errorf("workers %d: %d transforms and pairs computed at once", workers, p)
		}
	}
}

// TestPairRuleForgetsPairedTiles feeds every tile of several grids to the
// pairing rule in the graphs' traversal order and checks that every pair is
// emitted once and that the rule never holds more tiles than one line of
// the traversal plus one: tile images are bounded by the pool, not the grid.
func TestPairRuleForgetsPairedTiles(t *testing.T) {
	for _, sz := range [][2]int{{1, 1}, {1, 5}, {5, 1}, {2, 2}, {3, 7}, {7, 3}, {6, 6}, {12, 9}} {
		rows, cols := sz[0], sz[1]
		r := newPairRule(rows, cols, nil)
		var got []align.Pair
		out := emitterFunc[pairJob](func(j pairJob) error {
			got = append(got, j.pair)
			return nil
		})
		peak := 0
		for _, ref := range traversal(rows, cols) {
			if err := r.Apply(context.Background(), &loaded{row: ref.row, col: ref.col}, out); err != nil {
				t.Fatal(err)
			}
			peak = max(peak, heldTiles(r))
		}
		want := align.Pairs(rows, cols)
		if len(got) != len(want) {
			t.Errorf("%dx%d: %d pairs emitted, want %d", rows, cols, len(got), len(want))
		}
		seen := map[align.Pair]bool{}
		for _, p := range got {
			if seen[p] {
				t.Errorf("%dx%d: pair %v emitted twice", rows, cols, p)
			}
			seen[p] = true
		}
		if bound := min(rows, cols) + 1; peak > bound {
			t.Errorf("%dx%d: the rule held %d tiles at once, want at most %d", rows, cols, peak, bound)
		}
		if r.Len() != 0 {
			t.Errorf("%dx%d: %d tiles still held after the last pair", rows, cols, heldTiles(r))
		}
	}
}

// heldTiles returns the number of distinct tiles the pairing join holds.
func heldTiles(r *bookkeeper.Join[*loaded, align.Pair, pairJob]) int {
	held := map[*loaded]bool{}
	for _, got := range r.Pending() {
		for _, t := range got {
			held[t] = true
		}
	}
	return len(held)
}

// emitterFunc adapts a function to task.Emitter.
type emitterFunc[T any] func(T) error

func (f emitterFunc[T]) Emit(v T) error { return f(v) }
