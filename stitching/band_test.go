package stitching

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/synth"
	"github.com/gohtgs/htgs/stitching/tileio"
)

// bandRegister returns a RegisterFunc that registers the grid band by band
// with RegisterBand, passing the flat field through its binary form as a
// remote worker receives it, and checks that the bands compute every pair
// exactly once.
func bandRegister(t *testing.T, bands [][2]int, gotFF **align.FlatField) RegisterFunc {
	return func(ctx context.Context, src tileio.TileSource, ff *align.FlatField) (*align.Translations, error) {
		*gotFF = ff
		var wire *align.FlatField
		if ff != nil {
			data, err := ff.MarshalBinary()
			if err != nil {
				return nil, err
			}
			wire = new(align.FlatField)
			if err := wire.UnmarshalBinary(data); err != nil {
				return nil, err
			}
		}
		rel := align.NewTranslations(src.Rows(), src.Cols())
		seen := map[align.Pair]bool{}
		for _, b := range bands {
			pts, err := RegisterBand(ctx, src, b[0], b[1], wire, align.Options{}, GraphOptions{Workers: 2})
			if err != nil {
				return nil, err
			}
			for _, pt := range pts {
				if seen[pt.Pair] {
					t.Errorf("band %v: pair %v registered twice", b, pt.Pair)
				}
				if pt.Pair.Row < b[0] || pt.Pair.Row >= b[1] {
					t.Errorf("band %v returned pair %v of another band", b, pt.Pair)
				}
				seen[pt.Pair] = true
				rel.Set(pt.Pair, pt.Translation)
			}
		}
		if want := len(align.Pairs(src.Rows(), src.Cols())); len(seen) != want {
			t.Errorf("the bands registered %d pairs, the grid has %d", len(seen), want)
		}
		return rel, nil
	}
}

// Stitching with the registration done band by band (bands of 2, 1 and 2
// rows, the flat field through its binary form) gives exactly Stitch's
// result, with a significant flat field.
func TestStitchRegisteredByBandsMatchesStitch(t *testing.T) {
	cfg := synth.ConfigFor(synth.Hard) // strong vignetting: a flat field that matters
	cfg.Rows, cfg.Cols, cfg.TileWidth, cfg.TileHeight, cfg.Seed = 5, 4, 256, 192, 1
	cfg.Overlap = 0.25
	src := synthGrid(t, cfg).source(t)
	ctx := context.Background()
	want, err := Stitch(ctx, src, align.Options{}, GraphOptions{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if want.FlatField == nil || want.FlatField.Identity() {
		t.Fatal("the test grid needs a significant flat field")
	}
	var ff *align.FlatField
	got, err := StitchRegistered(ctx, src, align.Options{}, GraphOptions{Workers: 2}, bandRegister(t, [][2]int{{0, 2}, {2, 3}, {3, 5}}, &ff))
	if err != nil {
		t.Fatal(err)
	}
	if ff != got.FlatField {
		t.Error("the RegisterFunc did not receive the result's flat field")
	}
	sameTranslations(t, "relative", got.Relative, want.Relative)
	sameTranslations(t, "optimized", got.Optimized, want.Optimized)
	for i := range want.Positions {
		if got.Positions[i] != want.Positions[i] {
			t.Fatalf("tile %d: by bands %+v, Stitch %+v", i, got.Positions[i], want.Positions[i])
		}
	}
	if got.Model.West != want.Model.West || got.Model.North != want.Model.North || got.Model.Repeatability != want.Model.Repeatability {
		t.Errorf("stage model: by bands %+v, Stitch %+v", *got.Model, *want.Model)
	}

	// Without a flat field the RegisterFunc gets nil.
	if _, err := StitchRegistered(ctx, src, align.Options{NoFlatField: true}, GraphOptions{Workers: 2}, bandRegister(t, [][2]int{{0, 5}}, &ff)); err != nil || ff != nil {
		t.Errorf("NoFlatField: flat field %v, err %v", ff, err)
	}
}

func TestRegisterBandErrors(t *testing.T) {
	src := smallSynth(t, 3, 2, 1).source(t)
	ctx := context.Background()
	for _, b := range [][2]int{{-1, 1}, {1, 1}, {2, 1}, {0, 4}} {
		if _, err := RegisterBand(ctx, src, b[0], b[1], nil, align.Options{}, GraphOptions{}); err == nil || !strings.Contains(err.Error(), "band of rows") {
			t.Errorf("band %v: err = %v, want a band error", b, err)
		}
	}
	boom := errors.New("boom")
	_, err := StitchRegistered(ctx, src, align.Options{}, GraphOptions{}, func(context.Context, tileio.TileSource, *align.FlatField) (*align.Translations, error) {
		return nil, boom
	})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "registration") {
		t.Errorf("failing RegisterFunc: %v", err)
	}
	_, err = StitchRegistered(ctx, src, align.Options{}, GraphOptions{}, func(context.Context, tileio.TileSource, *align.FlatField) (*align.Translations, error) {
		return align.NewTranslations(2, 2), nil
	})
	if err == nil || !strings.Contains(err.Error(), "another grid") {
		t.Errorf("translations of another size: %v", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := RegisterBand(ctx, src, 1, 3, nil, align.Options{}, GraphOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled band: %v", err)
	}
}
