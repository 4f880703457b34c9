package stitching

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/synth"
)

// noiseParams is a synth scene without any specimen: flat background and
// read noise, so overlapping tiles share nothing but their mean.
func noiseParams() *synth.Params {
	p := synth.LevelParams(synth.Realistic)
	p.ColonyDensity, p.IsolatedCells, p.Debris, p.BackgroundTexture = 0, 0, 0, 0
	p.Vignetting, p.TileBrightness, p.Photons, p.ReadNoise = 0, 0, 0, 100
	return &p
}

func qualitySynth(rows, cols int, seed uint64, noise bool) synth.Config {
	cfg := synth.DefaultConfig()
	cfg.Rows, cfg.Cols, cfg.TileWidth, cfg.TileHeight, cfg.Seed = rows, cols, 256, 192, seed
	if noise {
		cfg.Params = noiseParams()
	}
	return cfg
}

// Grids too small for the stage model and pure noise used to give
// positions tens to hundreds of pixels off without a word; their quality
// measures now say so.
func TestQualityWarnsOnSmallAndNoiseGrids(t *testing.T) {
	for _, c := range []struct {
		name  string
		cfg   synth.Config
		check func(t *testing.T, q Quality)
	}{
		{"2x2", qualitySynth(2, 2, 2, false), func(t *testing.T, q Quality) {
			if q.West.Valid >= MinModelTranslations && q.North.Valid >= MinModelTranslations {
				t.Errorf("valid %d / %d, want fewer than %d", q.West.Valid, q.North.Valid, MinModelTranslations)
			}
		}},
		{"1x3", qualitySynth(1, 3, 1, false), func(t *testing.T, q Quality) {
			if q.North.Pairs != 0 || !math.IsNaN(q.North.Overlap) {
				t.Errorf("north: %+v, want no pairs and a NaN overlap", q.North)
			}
		}},
		{"2x3", qualitySynth(2, 3, 3, false), nil},
		{"noise 4x4", qualitySynth(4, 4, 1, true), func(t *testing.T, q Quality) {
			if !(q.MedianCorr < LowCorrelation) || q.LowCorrTiles == 0 {
				t.Errorf("median corr %.3f, %d low tiles; want below %v and some", q.MedianCorr, q.LowCorrTiles, LowCorrelation)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := synthGrid(t, c.cfg)
			res, err := Stitch(context.Background(), g.source(t), align.Options{}, GraphOptions{Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			q := res.Quality()
			if q.Pairs != len(align.Pairs(c.cfg.Rows, c.cfg.Cols)) {
				t.Errorf("Pairs = %d", q.Pairs)
			}
			if c.check != nil {
				c.check(t, q)
			}
			ws := res.Warnings()
			if len(ws) == 0 {
				t.Fatalf("no warnings; quality %+v (accuracy %+v)", q, measure(g, res))
			}
			t.Logf("%+v\n%s", q, strings.Join(ws, "\n"))
		})
	}
}

// Grids the stitcher handles give no warning: the measures must not cry
// wolf on good data.
func TestQualityQuietOnGoodGrids(t *testing.T) {
	for _, cfg := range []synth.Config{qualitySynth(3, 4, 1, false), qualitySynth(4, 5, 2, false)} {
		g := synthGrid(t, cfg)
		res, err := Stitch(context.Background(), g.source(t), align.Options{}, GraphOptions{Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		if a := measure(g, res); a.MaxTileError > 1 {
			t.Fatalf("%dx%d: the grid itself failed: %+v", cfg.Rows, cfg.Cols, a)
		}
		q := res.Quality()
		if ws := q.Warnings(); len(ws) != 0 {
			t.Errorf("%dx%d: warnings on a good grid: %q (%+v)", cfg.Rows, cfg.Cols, ws, q)
		}
		if !(q.MedianCorr > 0.5) || q.LowCorrTiles != 0 || q.West.OverlapGiven {
			t.Errorf("%dx%d: %+v", cfg.Rows, cfg.Cols, q)
		}
	}
}

// Each warning comes from its own measure.
func TestQualityWarnings(t *testing.T) {
	good := Quality{Pairs: 17, MedianCorr: 0.9,
		West:  DirectionQuality{Pairs: 9, Valid: 8, Overlap: 10},
		North: DirectionQuality{Pairs: 8, Valid: 7, Overlap: 11}}
	if ws := good.Warnings(); ws != nil {
		t.Fatalf("good: %q", ws)
	}
	for _, c := range []struct {
		name string
		edit func(q *Quality)
		want string
	}{
		{"low correlation", func(q *Quality) { q.MedianCorr = 0.05 }, "median correlation"},
		{"NaN correlation", func(q *Quality) { q.MedianCorr = math.NaN() }, "median correlation"},
		{"NaN overlap", func(q *Quality) { q.North.Overlap = math.NaN() }, "vertical (north pairs) overlap estimate NaN% is impossible"},
		{"implausible overlap", func(q *Quality) { q.West.Overlap, q.West.Valid = 98.4, 7 }, "98.40% is implausible (above 90%) and only 7 of 9"},
		{"near-zero shifts", func(q *Quality) { q.West.Overlap = 99.6 }, "99.60% means the tiles barely move"},
		{"few valid", func(q *Quality) { q.West.Valid = 2 }, "rests on 2 valid"},
		{"low tiles", func(q *Quality) { q.LowCorrTiles = 3 }, "3 tile(s)"},
	} {
		q := good
		c.edit(&q)
		ws := q.Warnings()
		if len(ws) != 1 || !strings.Contains(ws[0], c.want) {
			t.Errorf("%s: %q, want one warning with %q", c.name, ws, c.want)
		}
	}
	// A high overlap that the translations confirm (8 of 9 valid) is
	// believed: grids are acquired with 95% overlap too.
	q95 := good
	q95.West.Overlap = 95
	if ws := q95.Warnings(); ws != nil {
		t.Errorf("95%% overlap confirmed by 8 of 9 translations: %q", ws)
	}
	// A given overlap is not an estimate; with the repeatability given too,
	// the model estimates nothing from the translations.
	q := good
	q.West = DirectionQuality{Pairs: 2, Valid: 0, Overlap: 95, OverlapGiven: true}
	q.RepeatabilityGiven = true
	if ws := q.Warnings(); ws != nil {
		t.Errorf("given overlap and repeatability: %q", ws)
	}
	q.RepeatabilityGiven = false
	if ws := q.Warnings(); len(ws) != 1 || !strings.Contains(ws[0], "rests on 0 valid") {
		t.Errorf("given overlap, estimated repeatability: %q", ws)
	}
}
