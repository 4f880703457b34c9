package stitching

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/synth"
	"github.com/gohtgs/htgs/stitching/tileio"
)

// arrivingTiles is a tile source whose tiles can be loaded only once they
// have arrived, as a folder being filled by an acquisition.
type arrivingTiles struct {
	*tileio.MemoryTiles
	mu      sync.Mutex
	arrived map[[2]int]bool
}

func (a *arrivingTiles) arrive(r, c int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.arrived[[2]int{r, c}] = true
}

func (a *arrivingTiles) Load(r, c int) (*image.Gray16, error) {
	a.mu.Lock()
	ok := a.arrived[[2]int{r, c}]
	a.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("tile (%d, %d) loaded before it arrived", r, c)
	}
	return a.MemoryTiles.Load(r, c)
}

// liveRun is the outcome of a StitchLive run started by goLive.
type liveRun struct {
	res *Result
	err error
}

// goLive runs StitchLive on its own goroutine, the tiles announced on the
// channel it returns, and sends its outcome on done.
func goLive(src tileio.TileSource, opt align.Options, gopt GraphOptions, lopt LiveOptions) (arrivals chan<- tileio.Arrival, done <-chan liveRun) {
	ch, d := make(chan tileio.Arrival), make(chan liveRun, 1)
	go func() {
		res, err := StitchLive(context.Background(), src, ch, opt, gopt, lopt)
		d <- liveRun{res, err}
	}()
	return ch, d
}

// acquisitionOrder returns the tiles of a rows x cols grid in the order
// of a layout's sequential index.
func acquisitionOrder(rows, cols int, l tileio.Layout) []tileio.Arrival {
	out := make([]tileio.Arrival, rows*cols)
	for r := range rows {
		for c := range cols {
			out[l.Index(r, c, rows, cols)] = tileio.Arrival{Row: r, Col: c}
		}
	}
	return out
}

// feed announces the tiles of order on a channel, each once it can be
// loaded, and closes the channel after the first n of them.
func feed(src *arrivingTiles, order []tileio.Arrival, n int, pause time.Duration) <-chan tileio.Arrival {
	ch := make(chan tileio.Arrival)
	go func() {
		defer close(ch)
		for _, a := range order[:n] {
			src.arrive(a.Row, a.Col)
			ch <- a
			time.Sleep(pause)
		}
	}()
	return ch
}

// A live stitch computes what Stitch computes on the finished grid,
// whatever the order the tiles arrive in, holding no more spectra than
// the pool has slots.
func TestStitchLiveMatchesStitch(t *testing.T) {
	// With a flat field, a grid of more than 64 tiles: its flat field is
	// known before the last tile, and the final registration runs live.
	cfg := synth.ConfigFor(synth.Realistic)
	cfg.Rows, cfg.Cols, cfg.TileWidth, cfg.TileHeight, cfg.Seed = 9, 8, 192, 144, 3
	big, small := synthGrid(t, cfg), smallSynth(t, 3, 4, 8)
	gopt := GraphOptions{Workers: 2}
	for _, noFF := range []bool{false, true} {
		g := small
		if !noFF {
			g = big
		}
		mem := g.source(t)
		opt := align.Options{NoFlatField: noFF}
		want, err := Stitch(context.Background(), mem, opt, gopt)
		if err != nil {
			t.Fatal(err)
		}
		if !noFF && want.FlatField.Identity() {
			t.Fatal("the grid's flat field is the identity: the comparison would not test the correction")
		}
		_, _, slots := gopt.sizes(g.rows, g.cols)
		random := acquisitionOrder(g.rows, g.cols, tileio.Layout{})
		rand.New(rand.NewPCG(1, 2)).Shuffle(len(random), func(i, j int) { random[i], random[j] = random[j], random[i] })
		orders := map[string][]tileio.Arrival{
			"rows":    acquisitionOrder(g.rows, g.cols, tileio.Layout{}),
			"snake":   acquisitionOrder(g.rows, g.cols, tileio.Layout{Numbering: tileio.HorizontalContinuous, Origin: tileio.LowerRight}),
			"columns": acquisitionOrder(g.rows, g.cols, tileio.Layout{Numbering: tileio.VerticalCombing, Origin: tileio.UpperRight}),
			"random":  random,
		}
		for name, order := range orders {
			if !noFF && name != "rows" && name != "random" {
				continue // the flat field's wait is the same in every order
			}
			t.Run(fmt.Sprintf("%s/noFlatField=%v", name, noFF), func(t *testing.T) {
				src := &arrivingTiles{MemoryTiles: mem, arrived: map[[2]int]bool{}}
				var spectra atomic.Int64
				var last LiveState
				lopt := LiveOptions{Every: time.Millisecond, spectra: &spectra, Update: func(s LiveState) {
					if s.Placed != len(s.Positions) {
						t.Errorf("update: %d placed, %d positions", s.Placed, len(s.Positions))
					}
					last = s
					last.Positions = slices.Clone(s.Positions)
				}}
				res, err := StitchLive(context.Background(), src, feed(src, order, len(order), 0), opt, gopt, lopt)
				if err != nil {
					t.Fatal(err)
				}
				sameTranslations(t, "relative", res.Relative, want.Relative)
				sameTranslations(t, "optimized", res.Optimized, want.Optimized)
				if !slices.Equal(res.Positions, want.Positions) {
					t.Errorf("positions %v, Stitch's %v", res.Positions, want.Positions)
				}
				if !sameFlatField(res.FlatField, want.FlatField) {
					t.Error("the flat field differs from Stitch's")
				}
				n := g.rows * g.cols
				if last.Arrived != n || last.Registered != last.Pairs || last.Placed != n || last.Provisional != 0 {
					t.Errorf("last update %d of %d tiles, %d of %d pairs (%d provisional), %d placed",
						last.Arrived, last.Tiles, last.Registered, last.Pairs, last.Provisional, last.Placed)
				}
				if got := spectra.Load(); got > int64(slots) {
					t.Errorf("%d spectra allocated, the pool has %d slots", got, slots)
				}
			})
		}
	}
}

// The pairs are registered as their tiles arrive once the flat field is
// known: from the start without one, and with one estimated once its
// sample tiles are in (on 6 x 8 tiles, every tile but the last acquired
// line: when that line starts, by rows from the upper left or by columns
// from the lower right; on 9 x 8 the first half). Before the last line
// (the last tile on 9 x 8), every pair of the tiles in is final and the
// provisional positions place them; the Result is Stitch's.
func TestStitchLiveRegistersBeforeTheLastTile(t *testing.T) {
	cfg := synth.ConfigFor(synth.Realistic)
	cfg.Rows, cfg.Cols, cfg.TileWidth, cfg.TileHeight, cfg.Seed = 9, 8, 192, 144, 3
	cfg48 := cfg
	cfg48.Rows, cfg48.Cols = 6, 8
	g48 := synthGrid(t, cfg48)
	byCols := tileio.Layout{Numbering: tileio.VerticalContinuous, Origin: tileio.LowerRight}
	for _, tc := range []struct {
		name   string
		g      *testGrid
		opt    align.Options
		order  tileio.Layout
		before int // the tiles in when every pair between them is final
	}{
		{"no flat field", smallSynth(t, 3, 4, 5), align.Options{NoFlatField: true}, tileio.Layout{}, 11},
		{"72 tiles", synthGrid(t, cfg), align.Options{}, tileio.Layout{}, 71},
		{"48 tiles", g48, align.Options{}, tileio.Layout{}, 48 - 8},
		{"48 tiles by columns from the lower right", g48, align.Options{}, byCols, 48 - 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "72 tiles" {
				skipUnderRace(t, "the 48-tile cases run the same pipeline")
			}
			g := tc.g
			arriving := &arrivingTiles{MemoryTiles: g.source(t), arrived: map[[2]int]bool{}}
			src := tileio.WithAcquisition(arriving, tc.order)
			order := acquisitionOrder(g.rows, g.cols, tc.order)
			states := make(chan LiveState, 1000)
			ch, done := goLive(src, tc.opt, GraphOptions{Workers: 2},
				LiveOptions{Every: time.Millisecond, Update: func(s LiveState) { s.Positions = slices.Clone(s.Positions); states <- s }})
			n, k := len(order), tc.before
			in := map[tileio.Arrival]bool{}
			for _, a := range order[:k] {
				arriving.arrive(a.Row, a.Col)
				ch <- a
				in[a] = true
			}
			// The pairs between the tiles in are final.
			wantPairs := pairsWithin(g.rows, g.cols, in)
			timeout := time.After(60 * time.Second)
			for s := (LiveState{}); s.Registered < wantPairs; {
				select {
				case s = <-states:
					if s.Registered == wantPairs && (s.Placed != k || s.Arrived != k || s.FlatFieldArrived != s.FlatFieldTiles) {
						t.Errorf("with %d of %d tiles in: %d placed, %d arrived, %d of %d flat-field samples; want %d, %d and all",
							k, n, s.Placed, s.Arrived, s.FlatFieldArrived, s.FlatFieldTiles, k, k)
					}
				case <-timeout:
					t.Fatalf("with %d of %d tiles in: %d of %d pairs registered", k, n, s.Registered, wantPairs)
				}
			}
			for _, a := range order[k:] {
				arriving.arrive(a.Row, a.Col)
				ch <- a
			}
			close(ch)
			o := <-done
			if o.err != nil {
				t.Fatal(o.err)
			}
			want, err := Stitch(context.Background(), tileio.WithAcquisition(g.source(t), tc.order), tc.opt, GraphOptions{Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			if !tc.opt.NoFlatField && want.FlatField.Identity() {
				t.Fatal("the grid's flat field is the identity: the test would not test the correction")
			}
			sameTranslations(t, "relative", o.res.Relative, want.Relative)
			sameTranslations(t, "optimized", o.res.Optimized, want.Optimized)
			if !slices.Equal(o.res.Positions, want.Positions) {
				t.Errorf("positions %v, Stitch's %v", o.res.Positions, want.Positions)
			}
		})
	}
}

// Tiles that stop coming end the run with an error naming the missing
// ones, after an update with what had arrived.
func TestStitchLiveIncomplete(t *testing.T) {
	g := smallSynth(t, 3, 3, 7)
	order := acquisitionOrder(g.rows, g.cols, tileio.Layout{})
	for _, cancel := range []bool{false, true} {
		t.Run(fmt.Sprintf("cancel=%v", cancel), func(t *testing.T) {
			src := &arrivingTiles{MemoryTiles: g.source(t), arrived: map[[2]int]bool{}}
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			fed := feed(src, order, 6, 0)
			arrivals := fed
			if cancel {
				ch := make(chan tileio.Arrival)
				go func() {
					for a := range fed {
						ch <- a
					}
					stop() // the tiles stop coming; the channel stays open
				}()
				arrivals = ch
			}
			var last LiveState
			_, err := StitchLive(ctx, src, arrivals, align.Options{}, GraphOptions{Workers: 2},
				LiveOptions{Update: func(s LiveState) { last = s }})
			var inc *IncompleteError
			if !errors.As(err, &inc) {
				t.Fatalf("error %v, want an IncompleteError", err)
			}
			if cancel != errors.Is(err, context.Canceled) {
				t.Errorf("error %v: cancelled %v", err, cancel)
			}
			if len(inc.Missing) != 3 || inc.Missing[0] != (tileio.Arrival{Row: 2, Col: 0}) || !strings.Contains(err.Error(), "3 of 9 tiles missing: tile_r2_c0, tile_r2_c1, tile_r2_c2") {
				t.Errorf("error %q, missing %v", err, inc.Missing)
			}
			// Cancelled, the run ends at once; else the pairs in flight
			// are waited for and place the 6 tiles.
			if last.Arrived != 6 || (!cancel && last.Placed != 6) {
				t.Errorf("last update: %d arrived, %d placed; want 6 and 6", last.Arrived, last.Placed)
			}
		})
	}
	src := &arrivingTiles{MemoryTiles: g.source(t), arrived: map[[2]int]bool{}}
	ch := make(chan tileio.Arrival, 1)
	ch <- tileio.Arrival{Row: 3, Col: 0}
	if _, err := StitchLive(context.Background(), src, ch, align.Options{}, GraphOptions{}, LiveOptions{}); err == nil || !strings.Contains(err.Error(), "outside the 3x3 grid") {
		t.Errorf("arrival outside the grid: error %v", err)
	}
}

// The flat field of a grid of up to 64 tiles is estimated from every
// tile but those of the line its acquisition ends with (in each of MIST's
// 16 orders: the bottom or top row, the right or left column), or every
// tile when fewer than 16 remain; that of a larger grid from 64 tiles
// spread over the first half of its acquisition.
func TestFlatFieldSample(t *testing.T) {
	for _, g := range [][2]int{{1, 1}, {1, 2}, {1, 30}, {2, 30}, {30, 2}, {4, 4}, {4, 5}, {5, 4}, {5, 5}, {3, 18}, {4, 10}, {6, 6}, {6, 8}, {8, 6}, {8, 8}, {5, 13}, {10, 10}, {8, 16}, {16, 8}, {43, 3}, {42, 59}} {
		rows, cols := g[0], g[1]
		n := rows * cols
		for num := range 4 {
			for org := range 4 {
				l := tileio.Layout{Numbering: tileio.Numbering(num), Origin: tileio.Origin(org)}
				name := fmt.Sprintf("%dx%d, %v from %v", rows, cols, l.Numbering, l.Origin)
				s := flatFieldSample(rows, cols, l)
				in := make([]bool, n)
				for j, i := range s {
					if i < 0 || i >= n || (j > 0 && i <= s[j-1]) {
						t.Fatalf("%s: sample %v not ascending within the grid", name, s)
					}
					in[i] = true
				}
				byRows := l.Numbering == tileio.HorizontalCombing || l.Numbering == tileio.HorizontalContinuous
				// The line the acquisition ends with: the row or column
				// farthest from the origin.
				lastRow, lastCol := rows-1, cols-1
				if l.Origin == tileio.LowerLeft || l.Origin == tileio.LowerRight {
					lastRow = 0
				}
				if l.Origin == tileio.UpperRight || l.Origin == tileio.LowerRight {
					lastCol = 0
				}
				line := cols
				if !byRows {
					line = rows
				}
				switch {
				case n <= flatFieldTiles && n-line < flatFieldMinSample:
					if len(s) != n {
						t.Errorf("%s: %d sample tiles, want every tile", name, len(s))
					}
				case n <= flatFieldTiles:
					for r := range rows {
						for c := range cols {
							if last := (byRows && r == lastRow) || (!byRows && c == lastCol); in[r*cols+c] == last {
								t.Fatalf("%s: tile (%d, %d) in the sample %v, of the last line %v", name, r, c, in[r*cols+c], last)
							}
						}
					}
					// Every sample has come when the last line starts.
					last := 0
					for _, i := range s {
						last = max(last, l.Index(i/cols, i%cols, rows, cols))
					}
					if last != n-line-1 {
						t.Errorf("%s: the last sample tile is number %d of %d, want %d", name, last, n, n-line-1)
					}
				default:
					span := max(flatFieldTiles, (n+1)/2)
					if len(s) != flatFieldTiles {
						t.Errorf("%s: %d sample tiles, want %d", name, len(s), flatFieldTiles)
					}
					// In the first half of the acquisition, spread over it:
					// the last sample lies in its last 64th.
					last := 0
					for _, i := range s {
						last = max(last, l.Index(i/cols, i%cols, rows, cols))
					}
					if last >= span || span-last > span/len(s)+1 {
						t.Errorf("%s: the last sample tile is number %d: not spread over the first %d", name, last, span)
					}
					if l == (tileio.Layout{}) {
						// Row by row from the upper left, as before the
						// order was known: tiles j*span/64, row-major.
						for j, i := range s {
							if i != j*span/len(s) {
								t.Fatalf("%s: sample %v, want tile %d at %d", name, s, j*span/len(s), j)
							}
						}
					}
				}
			}
		}
	}
}

// The flat field of a grid of more than 64 tiles is estimated from 64
// tiles of the first half of its acquisition, so that a live stitch
// registers the final pairs of that half while the second half arrives:
// here acquired column by column from the upper right (row by row from
// the upper left, the 72 tiles of TestStitchLiveRegistersBeforeTheLastTile
// have their samples in the first 64).
func TestStitchLiveFlatFieldByMidPlate(t *testing.T) {
	cfg := synth.ConfigFor(synth.Realistic)
	cfg.Rows, cfg.Cols, cfg.TileWidth, cfg.TileHeight, cfg.Seed = 12, 11, 192, 144, 5
	g := synthGrid(t, cfg)
	layout := tileio.Layout{Numbering: tileio.VerticalCombing, Origin: tileio.UpperRight}
	arriving := &arrivingTiles{MemoryTiles: g.source(t), arrived: map[[2]int]bool{}}
	src := tileio.WithAcquisition(arriving, layout)
	order := acquisitionOrder(g.rows, g.cols, layout)
	n := len(order)
	half := (n + 1) / 2
	// The pairs whose two tiles are among the first half.
	first := map[tileio.Arrival]bool{}
	for _, a := range order[:half] {
		first[a] = true
	}
	wantPairs := pairsWithin(g.rows, g.cols, first)
	states := make(chan LiveState, 10000)
	ch, done := goLive(src, align.Options{}, GraphOptions{Workers: 2},
		LiveOptions{Every: time.Millisecond, Update: func(s LiveState) { s.Positions = nil; states <- s }})
	for _, a := range order[:half] {
		arriving.arrive(a.Row, a.Col)
		ch <- a
	}
	timeout := time.After(60 * time.Second)
	for s := (LiveState{}); s.Registered < wantPairs; {
		select {
		case s = <-states:
			if s.FlatFieldTiles != flatFieldTiles {
				t.Fatalf("%d flat-field samples, want %d", s.FlatFieldTiles, flatFieldTiles)
			}
		case <-timeout:
			t.Fatalf("with the first %d of %d tiles in: %d of %d pairs final", half, n, s.Registered, wantPairs)
		}
	}
	for _, a := range order[half:] {
		arriving.arrive(a.Row, a.Col)
		ch <- a
	}
	close(ch)
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	want, err := Stitch(context.Background(), tileio.WithAcquisition(g.source(t), layout), align.Options{}, GraphOptions{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if want.FlatField.Identity() {
		t.Fatal("the grid's flat field is the identity: the test would not test the correction")
	}
	sameTranslations(t, "relative", o.res.Relative, want.Relative)
	if !slices.Equal(o.res.Positions, want.Positions) {
		t.Errorf("positions %v, Stitch's %v", o.res.Positions, want.Positions)
	}
}

// Pairs are refined as they are registered, with a stage model estimated
// from the pairs so far: when the tiles come at an acquisition's pace,
// the end of the run refines few pairs again (those whose start or model
// parameters changed), and the Result is still Stitch's.
func TestStitchLiveRefinesAhead(t *testing.T) {
	for _, tc := range []struct {
		name string
		seed uint64
		opt  align.Options
	}{
		{"flat field given", 1, align.Options{NoFlatField: true}},
		{"no flat field", 2, align.Options{NoFlatField: true}},
		{"repeatability given", 3, align.Options{NoFlatField: true, Repeatability: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.seed != 1 {
				skipUnderRace(t, `"flat field given" runs the same pipeline`)
			}
			cfg := synth.ConfigFor(synth.Realistic)
			cfg.Rows, cfg.Cols, cfg.TileWidth, cfg.TileHeight, cfg.Seed = 5, 6, 512, 384, tc.seed
			g := synthGrid(t, cfg)
			gopt := GraphOptions{Workers: 2}
			src := &arrivingTiles{MemoryTiles: g.source(t), arrived: map[[2]int]bool{}}
			var tiles, live tileio.TileSource = g.source(t), src
			if tc.seed == 1 {
				// The microscope's flat field, known beforehand.
				ff, err := EstimateFlatField(context.Background(), tiles)
				if err != nil || ff.Identity() {
					t.Fatalf("flat field: %v (identity: the test would not test it)", err)
				}
				tiles, live = CorrectedSource(tiles, ff), CorrectedSource(src, ff)
			}
			want, err := Stitch(context.Background(), tiles, tc.opt, gopt)
			if err != nil {
				t.Fatal(err)
			}
			order := acquisitionOrder(g.rows, g.cols, tileio.Layout{})
			pairs := len(align.Pairs(g.rows, g.cols))
			var again atomic.Int64
			type counts struct{ refined, final int }
			ahead := make(chan counts, 10*pairs)
			ch, done := goLive(live, tc.opt, gopt, LiveOptions{refinedAgain: &again, ahead: func(r, f int) { ahead <- counts{r, f} }})
			n := len(order)
			for _, a := range order[:n-1] {
				src.arrive(a.Row, a.Col)
				ch <- a
			}
			// Before the last tile (2 pairs): every other pair is final and
			// refined ahead, however slow the machine.
			timeout := time.After(60 * time.Second)
			for c := (counts{}); c.final < pairs-2 || c.refined < c.final; {
				select {
				case c = <-ahead:
				case <-timeout:
					t.Fatalf("before the last tile: %d final pairs, %d refined ahead", c.final, c.refined)
				}
			}
			last := order[n-1]
			src.arrive(last.Row, last.Col)
			ch <- last
			close(ch)
			go func() {
				for range ahead {
				}
			}()
			o := <-done
			close(ahead)
			res, err := o.res, o.err
			if err != nil {
				t.Fatal(err)
			}
			sameTranslations(t, "relative", res.Relative, want.Relative)
			sameTranslations(t, "optimized", res.Optimized, want.Optimized)
			if !slices.Equal(res.Positions, want.Positions) {
				t.Errorf("positions %v, Stitch's %v", res.Positions, want.Positions)
			}
			t.Logf("%d of %d pairs refined again at the end (final model %+v)", again.Load(), pairs, want.Model.RefineParams())
			if n := again.Load(); 4*n > int64(pairs) {
				t.Errorf("%d of %d pairs refined again at the end: the refinement ahead did not serve", n, pairs)
			}
		})
	}
}

// The Tile option hands over every tile of the grid as the final
// registration loads it, corrected as a mosaic of the Result corrects it:
// with the estimated flat field, and uncorrected without one.
func TestStitchLiveTiles(t *testing.T) {
	cfg := synth.ConfigFor(synth.Realistic)
	cfg.Rows, cfg.Cols, cfg.TileWidth, cfg.TileHeight, cfg.Seed = 6, 8, 192, 144, 3
	for _, tc := range []struct {
		name string
		g    *testGrid
		opt  align.Options
	}{
		{"estimated flat field", synthGrid(t, cfg), align.Options{}},
		{"no flat field", smallSynth(t, 3, 4, 5), align.Options{NoFlatField: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.g
			mem := g.source(t)
			src := &arrivingTiles{MemoryTiles: mem, arrived: map[[2]int]bool{}}
			var mu sync.Mutex
			got := map[[2]int][]*image.Gray16{}
			lopt := LiveOptions{Tile: func(r, c int, img *image.Gray16) {
				cp := image.NewGray16(img.Rect)
				copy(cp.Pix, img.Pix)
				mu.Lock()
				got[[2]int{r, c}] = append(got[[2]int{r, c}], cp)
				mu.Unlock()
			}}
			order := acquisitionOrder(g.rows, g.cols, tileio.Layout{})
			res, err := StitchLive(context.Background(), src, feed(src, order, len(order), 0), tc.opt, GraphOptions{Workers: 2}, lopt)
			if err != nil {
				t.Fatal(err)
			}
			var want tileio.TileSource = mem
			if res.FlatField != nil && !res.FlatField.Identity() {
				want = CorrectedSource(mem, res.FlatField)
			} else if !tc.opt.NoFlatField {
				t.Fatal("the grid's flat field is the identity: the test would not test the correction")
			}
			for r := range g.rows {
				for c := range g.cols {
					imgs := got[[2]int{r, c}]
					if len(imgs) == 0 {
						t.Errorf("tile (%d, %d) not handed over", r, c)
						continue
					}
					w, err := want.Load(r, c)
					if err != nil {
						t.Fatal(err)
					}
					for _, img := range imgs {
						if !bytes.Equal(img.Pix, w.Pix) || img.Rect != w.Rect {
							t.Errorf("tile (%d, %d) handed over differs from the corrected tile", r, c)
						}
					}
				}
			}
		})
	}
}

// pairsWithin counts the pairs of a rows x cols grid whose two tiles are
// both in in.
func pairsWithin(rows, cols int, in map[tileio.Arrival]bool) int {
	n := 0
	for _, p := range align.Pairs(rows, cols) {
		other := tileio.Arrival{Row: p.Row - 1, Col: p.Col}
		if p.Dir == align.West {
			other = tileio.Arrival{Row: p.Row, Col: p.Col - 1}
		}
		if in[tileio.Arrival{Row: p.Row, Col: p.Col}] && in[other] {
			n++
		}
	}
	return n
}

// With GPU, the pairs are registered on the CPU as the tiles come; the
// GPUs stitch the finished grid only when, at the last tile, the cores
// have fallen behind (more than a tenth of the pairs wait). The Result is
// Stitch's either way.
func TestStitchLiveGPU(t *testing.T) {
	cfg := synth.ConfigFor(synth.Realistic)
	cfg.Rows, cfg.Cols, cfg.TileWidth, cfg.TileHeight, cfg.Seed = 9, 8, 192, 144, 3
	for _, tc := range []struct {
		name   string
		g      *testGrid
		opt    align.Options
		behind bool // the CPU workers are held until the last tile
	}{
		{"keeping up, no flat field", smallSynth(t, 3, 4, 5), align.Options{NoFlatField: true}, false},
		{"keeping up, flat field by mid-plate", synthGrid(t, cfg), align.Options{}, false},
		{"behind, no flat field", smallSynth(t, 3, 4, 5), align.Options{NoFlatField: true}, true},
		{"behind, flat field by mid-plate", synthGrid(t, cfg), align.Options{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.opt.NoFlatField {
				skipUnderRace(t, "the no-flat-field cases run the same pipeline, keeping up and behind,")
			}
			g := tc.g
			mem := g.source(t)
			want, err := Stitch(context.Background(), mem, tc.opt, GraphOptions{Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			arriving := &arrivingTiles{MemoryTiles: mem, arrived: map[[2]int]bool{}}
			// Held, the workers stop at their first final tile: the
			// final pairs wait.
			gate := make(chan struct{})
			var once sync.Once
			open := func() { once.Do(func() { close(gate) }) }
			if !tc.behind {
				open()
			}
			fake := newFakeGPUs(1)
			type decision struct {
				backlog int
				gpu     bool
			}
			decided := make(chan decision, 1)
			states := make(chan LiveState, 10000)
			lopt := LiveOptions{Every: time.Millisecond,
				Update: func(s LiveState) { s.Positions = nil; states <- s },
				Tile:   func(int, int, *image.Gray16) { <-gate },
				toGPU: func(backlog int, gpu bool) {
					decided <- decision{backlog, gpu}
					open()
				}}
			ch, done := goLive(arriving, tc.opt, GraphOptions{Workers: 2, GPU: true, gpu: fake}, lopt)
			order := acquisitionOrder(g.rows, g.cols, tileio.Layout{})
			in := map[tileio.Arrival]bool{}
			for _, a := range order[:len(order)-1] {
				arriving.arrive(a.Row, a.Col)
				ch <- a
				in[a] = true
			}
			if !tc.behind {
				// Every pair among the tiles in is registered (final once
				// the flat field is known) before the last tile comes.
				wantPairs := pairsWithin(g.rows, g.cols, in)
				timeout := time.After(60 * time.Second)
				for s := (LiveState{}); s.Registered < wantPairs; {
					select {
					case s = <-states:
					case <-timeout:
						t.Fatalf("%d of %d pairs registered before the last tile", s.Registered, wantPairs)
					}
				}
			}
			last := order[len(order)-1]
			arriving.arrive(last.Row, last.Col)
			ch <- last
			close(ch)
			o := <-done
			if o.err != nil {
				t.Fatal(o.err)
			}
			d := <-decided
			pairs := len(align.Pairs(g.rows, g.cols))
			if d.gpu != tc.behind {
				t.Errorf("%d of %d pairs waited at the last tile; to the GPU: %v, want %v", d.backlog, pairs, d.gpu, tc.behind)
			}
			if !tc.behind && d.backlog > 2 {
				t.Errorf("%d pairs waited at the last tile, want only its own (at most 2)", d.backlog)
			}
			var lastState LiveState
			for len(states) > 0 {
				lastState = <-states
			}
			if lastState.OnGPU != tc.behind || lastState.Registered != pairs {
				t.Errorf("the last update: OnGPU %v, %d of %d pairs registered; want OnGPU %v and every pair", lastState.OnGPU, lastState.Registered, pairs, tc.behind)
			}
			if got := fake.devs[0].transforms.Load(); (got > 0) != tc.behind {
				t.Errorf("%d tiles transformed on the GPU (behind: %v)", got, tc.behind)
			}
			sameTranslations(t, "relative", o.res.Relative, want.Relative)
			sameTranslations(t, "optimized", o.res.Optimized, want.Optimized)
			if !slices.Equal(o.res.Positions, want.Positions) {
				t.Errorf("positions %v, Stitch's %v", o.res.Positions, want.Positions)
			}
		})
	}
}
