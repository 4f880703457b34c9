package align

import (
	"bytes"
	"context"
	"errors"
	"image"
	"strings"
	"testing"

	"github.com/gohtgs/htgs/stitching/synth"
)

func TestEstimateFlatField(t *testing.T) {
	ctx := context.Background()
	// Strong vignetting: the flat field is significant and flattens it.
	cfg := synthConfig(synth.Hard, 1, 3, 4, 256, 192)
	cfg.Overlap = 0.25
	g := synthGrid(t, cfg)
	ff, err := EstimateFlatField(ctx, 256, 192, len(g.tiles), g.tile)
	if err != nil {
		t.Fatal(err)
	}
	if ff.Identity() || ff.Falloff() > 0.8 {
		t.Errorf("hard vignetting: identity %v, falloff %.2f, significance %.1f", ff.Identity(), ff.Falloff(), ff.Significance())
	}
	got := ff.Apply(g.tiles[0])
	if bytes.Equal(got.Pix, g.tiles[0].Pix) {
		t.Error("significant flat field left a tile unchanged")
	}
	// In place gives Apply's pixels, also for a tile whose bounds do not
	// start at the origin.
	own := image.NewGray16(image.Rect(5, 7, 5+256, 7+192))
	for y := range 192 {
		copy(own.Pix[own.PixOffset(5, 7+y):own.PixOffset(5+256, 7+y)], g.tiles[0].Pix[g.tiles[0].PixOffset(0, y):])
	}
	ff.ApplyInPlace(own)
	for y := range 192 {
		if !bytes.Equal(own.Pix[own.PixOffset(5, 7+y):own.PixOffset(5+256, 7+y)], got.Pix[got.PixOffset(0, y):got.PixOffset(256, y)]) {
			t.Fatalf("ApplyInPlace row %d differs from Apply", y)
		}
	}

	// Even illumination (cutTiles has no vignetting): identity.
	var pos [][2]int
	for r := range 4 {
		for c := range 5 {
			pos = append(pos, [2]int{c * 100, r * 75})
		}
	}
	tiles := cutTiles(2, 128, 96, pos, 50)
	load := func(i int) (*image.Gray16, error) { return tiles[i], nil }
	ff, err = EstimateFlatField(ctx, 128, 96, len(tiles), load)
	if err != nil {
		t.Fatal(err)
	}
	if !ff.Identity() {
		t.Errorf("flat illumination judged uneven: falloff %.3f, significance %.1f", ff.Falloff(), ff.Significance())
	}
	if got := ff.Apply(tiles[0]); !bytes.Equal(got.Pix, tiles[0].Pix) {
		t.Error("identity flat field changed a tile")
	}
	// Fewer than 3 tiles: identity.
	if ff, err := EstimateFlatField(ctx, 256, 192, 2, g.tile); err != nil || !ff.Identity() {
		t.Errorf("2 tiles: identity %v, %v", ff != nil && ff.Identity(), err)
	}
}

func TestEstimateFlatFieldErrors(t *testing.T) {
	ctx := context.Background()
	tiles := cutTiles(3, 64, 48, [][2]int{{0, 0}, {50, 0}, {0, 40}}, 10)
	load := func(i int) (*image.Gray16, error) { return tiles[i], nil }
	if _, err := EstimateFlatField(ctx, 64, 48, 0, load); err == nil {
		t.Error("no tiles accepted")
	}
	if _, err := EstimateFlatField(ctx, 64, 40, 3, load); err == nil || !strings.Contains(err.Error(), "64x48") {
		t.Errorf("tile of another size: %v", err)
	}
	boom := errors.New("boom")
	if _, err := EstimateFlatField(ctx, 64, 48, 3, func(i int) (*image.Gray16, error) {
		if i == 1 {
			return nil, boom
		}
		return tiles[i], nil
	}); !errors.Is(err, boom) {
		t.Errorf("loader error: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := EstimateFlatField(cancelled, 64, 48, 3, load); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}
