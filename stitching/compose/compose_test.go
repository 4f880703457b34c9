package compose

import (
	"context"
	"errors"
	"image"
	"image/color"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/image/tiff"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// constTile returns a w x h tile filled with v.
func constTile(w, h int, v uint16) *image.Gray16 {
	img := image.NewGray16(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetGray16(x, y, color.Gray16{Y: v})
		}
	}
	return img
}

// rows returns the pixel values of img row by row.
func rows(img *image.Gray16) [][]uint16 {
	b := img.Bounds()
	out := make([][]uint16, b.Dy())
	for y := range out {
		out[y] = make([]uint16, b.Dx())
		for x := range out[y] {
			out[y][x] = img.Gray16At(b.Min.X+x, b.Min.Y+y).Y
		}
	}
	return out
}

func equalRows(t *testing.T, got *image.Gray16, want [][]uint16) {
	t.Helper()
	g := rows(got)
	if len(g) != len(want) {
		t.Fatalf("got %d rows, want %d:\n%v", len(g), len(want), g)
	}
	for y := range want {
		if len(g[y]) != len(want[y]) {
			t.Fatalf("row %d: got %d columns, want %d", y, len(g[y]), len(want[y]))
		}
		for x := range want[y] {
			if g[y][x] != want[y][x] {
				t.Fatalf("pixel (%d, %d) = %d, want %d\ngot  %v\nwant %v", x, y, g[y][x], want[y][x], g, want)
			}
		}
	}
}

func TestTwoConstantTiles(t *testing.T) {
	// Two 4 x 1 tiles, the second shifted right by 2: columns 2 and 3 overlap.
	tiles := []Placement{{constTile(4, 1, 100), 0, 0}, {constTile(4, 1, 201), 2, 0}}
	ctx := context.Background()
	cases := []struct {
		mode Blend
		want []uint16
	}{
		{Overlay, []uint16{100, 100, 201, 201, 201, 201}},
		// (100+201)/2 = 150.5 rounds half up to 151.
		{Average, []uint16{100, 100, 151, 151, 201, 201}},
		// Weights along x: tile 1 [1 2 2 1], tile 2 [1 2 2 1]; along y 1.
		// Column 2: (2*100 + 1*201)/3 = 133.67 -> 134.
		// Column 3: (1*100 + 2*201)/3 = 167.33 -> 167.
		{Linear, []uint16{100, 100, 134, 167, 201, 201}},
	}
	for _, c := range cases {
		t.Run(c.mode.String(), func(t *testing.T) {
			got, err := Compose(ctx, tiles, c.mode)
			if err != nil {
				t.Fatal(err)
			}
			equalRows(t, got, [][]uint16{c.want})
		})
	}
}

func TestOverlayOrderAndOffsets(t *testing.T) {
	// Later tiles win; placement at a non-zero offset leaves uncovered zeros.
	tiles := []Placement{
		{constTile(2, 2, 7), 1, 1},
		{constTile(2, 2, 9), 2, 2},
	}
	got, err := Compose(context.Background(), tiles, Overlay)
	if err != nil {
		t.Fatal(err)
	}
	equalRows(t, got, [][]uint16{
		{0, 0, 0, 0},
		{0, 7, 7, 0},
		{0, 7, 9, 9},
		{0, 0, 9, 9},
	})
	// Reversed order: the 7-tile is now on top.
	got, err = Compose(context.Background(), []Placement{tiles[1], tiles[0]}, Overlay)
	if err != nil {
		t.Fatal(err)
	}
	equalRows(t, got, [][]uint16{
		{0, 0, 0, 0},
		{0, 7, 7, 0},
		{0, 7, 7, 9},
		{0, 0, 9, 9},
	})
}

func TestAverageThreeTilesAndOffsets(t *testing.T) {
	tiles := []Placement{
		{constTile(2, 2, 10), 1, 0},
		{constTile(2, 2, 20), 2, 0},
		{constTile(1, 3, 40), 2, 0},
	}
	got, err := Compose(context.Background(), tiles, Average)
	if err != nil {
		t.Fatal(err)
	}
	// Column 2 rows 0-1: (10+20+40)/3 = 23.33 -> 23; row 2: only 40.
	equalRows(t, got, [][]uint16{
		{0, 10, 23, 20},
		{0, 10, 23, 20},
		{0, 0, 40, 0},
	})
}

func TestLinear2D(t *testing.T) {
	// A 3 x 3 tile has weights
	//   1 2 1
	//   2 4 2
	//   1 2 1
	// Overlapping a 3 x 3 tile of 0 at (0,0) with one of 900 at (1,1):
	// pixel (1,1): (4*0 + 1*900)/5 = 180; (2,2): (1*0 + 4*900)/5 = 720;
	// (2,1): (2*0 + 2*900)/4 = 450; (1,2) likewise.
	tiles := []Placement{{constTile(3, 3, 0), 0, 0}, {constTile(3, 3, 900), 1, 1}}
	got, err := Compose(context.Background(), tiles, Linear)
	if err != nil {
		t.Fatal(err)
	}
	equalRows(t, got, [][]uint16{
		{0, 0, 0, 0},
		{0, 180, 450, 900},
		{0, 450, 720, 900},
		{0, 900, 900, 900},
	})
}

func TestSubImageTiles(t *testing.T) {
	// Tiles whose bounds do not start at (0, 0) are read correctly.
	big := image.NewGray16(image.Rect(0, 0, 5, 5))
	for y := range 5 {
		for x := range 5 {
			big.SetGray16(x, y, color.Gray16{Y: uint16(10*y + x)})
		}
	}
	sub := big.SubImage(image.Rect(1, 2, 4, 4)).(*image.Gray16)
	for _, mode := range []Blend{Overlay, Average, Linear} {
		got, err := Compose(context.Background(), []Placement{{sub, 1, 0}}, mode)
		if err != nil {
			t.Fatal(err)
		}
		equalRows(t, got, [][]uint16{{0, 21, 22, 23}, {0, 31, 32, 33}})
	}
}

func TestErrors(t *testing.T) {
	ctx := context.Background()
	tile := constTile(2, 2, 1)
	cases := []struct {
		name  string
		tiles []Placement
		mode  Blend
		want  string
	}{
		{"empty", nil, Overlay, "no tiles"},
		{"negative x", []Placement{{tile, -1, 0}}, Overlay, "negative position"},
		{"negative y", []Placement{{tile, 0, -3}}, Linear, "negative position"},
		{"nil image", []Placement{{nil, 0, 0}}, Average, "no image"},
		{"empty image", []Placement{{image.NewGray16(image.Rect(0, 0, 0, 3)), 0, 0}}, Average, "empty"},
		{"bad mode", []Placement{{tile, 0, 0}}, Blend(7), "unknown blend"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Compose(ctx, c.tiles, c.mode)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestParseBlend(t *testing.T) {
	for _, m := range []Blend{Overlay, Average, Linear} {
		got, err := ParseBlend(strings.ToUpper(m.String()))
		if err != nil || got != m {
			t.Fatalf("ParseBlend(%q) = %v, %v", m, got, err)
		}
		var u Blend
		text, err := m.MarshalText()
		if err != nil || u.UnmarshalText(text) != nil || u != m {
			t.Fatalf("text round trip of %v failed: %q %v", m, text, err)
		}
	}
	if _, err := ParseBlend("feather"); err == nil {
		t.Fatal("ParseBlend accepted an unknown mode")
	}
	if s := Blend(9).String(); s != "Blend(9)" {
		t.Fatalf("String of unknown mode = %q", s)
	}
}

// randomTiles places n random tiles of random sizes.
func randomTiles(rng *rand.Rand, n int) []Placement {
	tiles := make([]Placement, n)
	for i := range tiles {
		w, h := 5+rng.IntN(40), 5+rng.IntN(40)
		img := image.NewGray16(image.Rect(0, 0, w, h))
		for k := range img.Pix {
			img.Pix[k] = byte(rng.IntN(256))
		}
		tiles[i] = Placement{img, rng.IntN(300), rng.IntN(700)}
	}
	return tiles
}

// naive composes pixel by pixel, as a reference.
func naive(tiles []Placement, mode Blend) [][]uint16 {
	mw, mh := 0, 0
	for _, t := range tiles {
		mw, mh = max(mw, t.X+t.Image.Bounds().Dx()), max(mh, t.Y+t.Image.Bounds().Dy())
	}
	out := make([][]uint16, mh)
	for y := range out {
		out[y] = make([]uint16, mw)
		for x := range out[y] {
			var sum, wt uint64
			for _, t := range tiles {
				b := t.Image.Bounds()
				i, j := x-t.X, y-t.Y
				if i < 0 || j < 0 || i >= b.Dx() || j >= b.Dy() {
					continue
				}
				v := uint64(t.Image.Gray16At(b.Min.X+i, b.Min.Y+j).Y)
				switch mode {
				case Overlay:
					sum, wt = v, 1
				case Average:
					sum, wt = sum+v, wt+1
				case Linear:
					w := uint64(min(i+1, b.Dx()-i) * min(j+1, b.Dy()-j))
					sum, wt = sum+w*v, wt+w
				}
			}
			if wt > 0 {
				out[y][x] = uint16((2*sum + wt) / (2 * wt))
			}
		}
	}
	return out
}

func TestAgainstNaiveAndLazy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tiles := randomTiles(rng, 40)
	slots := make([]Slot, len(tiles))
	for i, p := range tiles {
		slots[i] = Slot{p.X, p.Y, p.Image.Bounds().Dx(), p.Image.Bounds().Dy()}
	}
	for _, mode := range []Blend{Overlay, Average, Linear} {
		want := naive(tiles, mode)
		got, err := Compose(context.Background(), tiles, mode)
		if err != nil {
			t.Fatal(err)
		}
		equalRows(t, got, want)

		loaded := make([]int, len(tiles))
		lastY := -1
		lazy, err := ComposeFunc(context.Background(), slots, func(i int) (*image.Gray16, error) {
			loaded[i]++
			if tiles[i].Y < lastY {
				t.Errorf("tile %d loaded out of Y order", i)
			}
			lastY = tiles[i].Y
			return tiles[i].Image, nil
		}, mode)
		if err != nil {
			t.Fatal(err)
		}
		equalRows(t, lazy, want)
		for i, n := range loaded {
			if n != 1 {
				t.Fatalf("%v: tile %d loaded %d times", mode, i, n)
			}
		}
	}
}

func TestComposeFuncErrors(t *testing.T) {
	ctx := context.Background()
	slots := []Slot{{0, 0, 2, 2}, {1, 300, 2, 2}}
	boom := errors.New("boom")
	_, err := ComposeFunc(ctx, slots, func(i int) (*image.Gray16, error) {
		if i == 1 {
			return nil, boom
		}
		return constTile(2, 2, 1), nil
	}, Average)
	if !errors.Is(err, boom) {
		t.Fatalf("loader error not propagated: %v", err)
	}
	_, err = ComposeFunc(ctx, slots, func(int) (*image.Gray16, error) { return constTile(3, 2, 1), nil }, Linear)
	if err == nil || !strings.Contains(err.Error(), "slot says") {
		t.Fatalf("size mismatch not reported: %v", err)
	}
	if _, err := ComposeFunc(ctx, slots, nil, Linear); err == nil {
		t.Fatal("nil loader accepted")
	}
	if _, err := ComposeFunc(ctx, nil, func(int) (*image.Gray16, error) { return nil, nil }, Linear); err == nil {
		t.Fatal("empty slots accepted")
	}
}

func TestCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Compose(ctx, []Placement{{constTile(4, 4, 1), 0, 0}}, Linear)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

func TestTIFFRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	img := image.NewGray16(image.Rect(0, 0, 37, 23))
	for i := range img.Pix {
		img.Pix[i] = byte(rng.IntN(256))
	}
	path := filepath.Join(t.TempDir(), "m.tif")
	if err := WriteTIFF(path, img); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	back, err := tiff.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	g, ok := back.(*image.Gray16)
	if !ok {
		t.Fatalf("decoded %T, want *image.Gray16", back)
	}
	equalRows(t, g, rows(img))
}

func TestPreview(t *testing.T) {
	// A 1000 x 400 ramp with an uncovered (zero) border.
	img := image.NewGray16(image.Rect(0, 0, 1000, 400))
	for y := 10; y < 390; y++ {
		for x := 10; x < 990; x++ {
			img.SetGray16(x, y, color.Gray16{Y: uint16(1000 + 3*x)})
		}
	}
	p := Preview(img, 250)
	if b := p.Bounds(); b.Dx() != 250 || b.Dy() != 100 {
		t.Fatalf("preview is %v, want 250 x 100", b)
	}
	lo, hi := uint8(255), uint8(0)
	for y := 5; y < 95; y++ {
		for x := 5; x < 245; x++ {
			v := p.GrayAt(x, y).Y
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	if lo > 10 || hi < 245 {
		t.Fatalf("interior range [%d, %d], want stretched to about [0, 255]", lo, hi)
	}
	if l, r := p.GrayAt(30, 50).Y, p.GrayAt(220, 50).Y; l >= r {
		t.Fatalf("ramp not increasing in preview: %d >= %d", l, r)
	}
	// No downscaling when small enough.
	if b := Preview(img, 0).Bounds(); b.Dx() != 1000 || b.Dy() != 400 {
		t.Fatalf("maxSide 0 gave %v", b)
	}
	if b := Preview(constTile(30, 60, 5), 1000).Bounds(); b.Dx() != 30 || b.Dy() != 60 {
		t.Fatalf("small image resized to %v", b)
	}
	// Tall image keeps its aspect ratio.
	if b := Preview(constTile(30, 600, 5), 100).Bounds(); b.Dx() != 5 || b.Dy() != 100 {
		t.Fatalf("tall preview is %v, want 5 x 100", b)
	}
	path := filepath.Join(t.TempDir(), "p.png")
	if err := WritePNG(path, p); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		t.Fatalf("png not written: %v", err)
	}
}

// divRound is the integer (2s + n) / 2n wherever its float path applies
// and beyond, around exact halves and at the limits.
func TestDivRound(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	check := func(s, n uint64) {
		if got, want := divRound(s, n), (2*s+n)/(2*n); got != want {
			t.Fatalf("divRound(%d, %d) = %d, want %d", s, n, got, want)
		}
	}
	for range 1_000_000 {
		n := 1 + r.Uint64N(1<<uint(1+r.IntN(34)))
		v := r.Uint64N(65536)
		s := v*n + r.Uint64N(n) // a mean of v and a fraction
		check(s, n)
		if n%2 == 0 {
			check(v*n+n/2, n)   // exactly half: rounds up
			check(v*n+n/2-1, n) // just below half
		}
	}
	for _, c := range [][2]uint64{{0, 1}, {65535, 1}, {1<<51 - 1, 1<<33 - 1}, {1 << 51, 1 << 33}, {1 << 60, 3}, {65535 << 32, 1 << 32}} {
		check(c[0], c[1])
	}
}

// TestBlendPaths checks both divisions of blended spans against the
// naive reference: float64 (spans whose total weight is below
// fastWeights) and integer (set fastWeights to 0), with tiles piled up to
// many deep.
func TestBlendPaths(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	tiles := randomTiles(rng, 60)
	for i := range tiles {
		tiles[i].X, tiles[i].Y = rng.IntN(60), rng.IntN(200)
	}
	defer func(v uint64) { fastWeights = v }(fastWeights)
	for _, limit := range []uint64{fastWeights, 0} {
		fastWeights = limit
		for _, mode := range []Blend{Average, Linear} {
			got, err := Compose(context.Background(), tiles, mode)
			if err != nil {
				t.Fatal(err)
			}
			equalRows(t, got, naive(tiles, mode))
		}
	}
}
