package synth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/image/tiff"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// smallConfig is a quick grid for tests.
func smallConfig() Config {
	c := DefaultConfig()
	c.Rows, c.Cols = 3, 4
	c.TileWidth, c.TileHeight = 160, 120
	c.Jitter, c.Drift = 2, 2
	return c
}

func pixels(img *image.Gray16) []uint16 {
	b := img.Bounds()
	out := make([]uint16, 0, b.Dx()*b.Dy())
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			out = append(out, img.Gray16At(x, y).Y)
		}
	}
	return out
}

func sameGrid(a, b *Grid) bool {
	if len(a.Tiles) != len(b.Tiles) {
		return false
	}
	for i := range a.Tiles {
		if a.X[i] != b.X[i] || a.Y[i] != b.Y[i] || !bytes.Equal(a.Tiles[i].Pix, b.Tiles[i].Pix) {
			return false
		}
	}
	return true
}

func TestDeterminism(t *testing.T) {
	ctx := context.Background()
	cfg := smallConfig()
	cfg.Workers = 1
	a, err := Generate(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Workers = 3 // the worker count must not change the pixels
	b, err := Generate(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !sameGrid(a, b) {
		t.Fatal("same seed gave different grids")
	}
	if len(a.Tiles) != cfg.Rows*cfg.Cols || a.Tile(2, 3) != a.Tiles[11] || a.Tile(3, 0) != nil || a.Tile(0, -1) != nil {
		t.Fatal("Tile indexing is wrong")
	}
	s, err := NewScene(cfg)
	if err != nil {
		t.Fatal(err)
	}
	one, err := s.RenderTile(ctx, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(one.Pix, a.Tile(1, 2).Pix) {
		t.Fatal("RenderTile differs from Generate")
	}
	cfg.Seed++
	c, err := Generate(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	differ := 0
	for i := range a.Tiles {
		if !bytes.Equal(a.Tiles[i].Pix, c.Tiles[i].Pix) {
			differ++
		}
	}
	if differ != len(a.Tiles) {
		t.Fatalf("different seeds: only %d of %d tiles differ", differ, len(a.Tiles))
	}
}

func TestPositions(t *testing.T) {
	for _, lvl := range []Level{Easy, Realistic, Hard} {
		cfg := ConfigFor(lvl)
		cfg.Rows, cfg.Cols = 12, 15
		s, err := NewScene(cfg)
		if err != nil {
			t.Fatal(err)
		}
		sx, sy := cfg.Step()
		if ox := cfg.TileWidth - sx; math.Abs(float64(ox)-cfg.Overlap*float64(cfg.TileWidth)) > 1 {
			t.Fatalf("x overlap %d px does not match %v", ox, cfg.Overlap)
		}
		dev := 2*cfg.Drift + 2*cfg.Jitter + 1
		perp := dev + math.Abs(cfg.Skew)
		pw, ph := s.PlaneSize()
		x, y := s.Positions()
		for r := range cfg.Rows {
			for c := range cfg.Cols {
				i := r*cfg.Cols + c
				if x[i] < 0 || y[i] < 0 || x[i]+cfg.TileWidth > pw || y[i]+cfg.TileHeight > ph {
					t.Fatalf("%v: tile (%d,%d) at (%d,%d) outside the %d x %d plane", lvl, r, c, x[i], y[i], pw, ph)
				}
				if px, py := s.Position(r, c); px != x[i] || py != y[i] {
					t.Fatal("Position and Positions disagree")
				}
				if c+1 < cfg.Cols {
					dx, dy := x[i+1]-x[i], y[i+1]-y[i]
					if math.Abs(float64(dx-sx)) > dev || math.Abs(float64(dy)) > perp {
						t.Fatalf("%v: west pair (%d,%d) translation (%d,%d), nominal (%d,0), bound %.1f", lvl, r, c, dx, dy, sx, dev)
					}
				}
				if r+1 < cfg.Rows {
					j := i + cfg.Cols
					dx, dy := x[j]-x[i], y[j]-y[i]
					if math.Abs(float64(dy-sy)) > dev || math.Abs(float64(dx)) > perp {
						t.Fatalf("%v: north pair (%d,%d) translation (%d,%d), nominal (0,%d), bound %.1f", lvl, r, c, dx, dy, sy, dev)
					}
				}
			}
		}
	}
	// Without stage errors the grid is exactly regular.
	cfg := smallConfig()
	cfg.Jitter, cfg.Drift, cfg.Skew = 0, 0, 0
	s, err := NewScene(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sx, sy := cfg.Step()
	x0, y0 := s.Position(0, 0)
	for r := range cfg.Rows {
		for c := range cfg.Cols {
			if x, y := s.Position(r, c); x != x0+c*sx || y != y0+r*sy {
				t.Fatalf("tile (%d,%d) at (%d,%d), want (%d,%d)", r, c, x, y, x0+c*sx, y0+r*sy)
			}
		}
	}
}

// pearson is the correlation coefficient of two equally long sequences.
func pearson(a, b []float64) float64 {
	var ma, mb float64
	for i := range a {
		ma += a[i]
		mb += b[i]
	}
	ma /= float64(len(a))
	mb /= float64(len(b))
	var sab, saa, sbb float64
	for i := range a {
		sab += (a[i] - ma) * (b[i] - mb)
		saa += (a[i] - ma) * (a[i] - ma)
		sbb += (b[i] - mb) * (b[i] - mb)
	}
	return sab / math.Sqrt(saa*sbb)
}

// overlap extracts the plane region shared by tiles i and j from both tiles.
func overlap(g *Grid, i, j int) (a, b []float64) {
	w, h := g.Config.TileWidth, g.Config.TileHeight
	x0, x1 := max(g.X[i], g.X[j]), min(g.X[i], g.X[j])+w
	y0, y1 := max(g.Y[i], g.Y[j]), min(g.Y[i], g.Y[j])+h
	for y := y0; y < y1; y++ {
		for x := x0; x < x1; x++ {
			a = append(a, float64(g.Tiles[i].Gray16At(x-g.X[i], y-g.Y[i]).Y))
			b = append(b, float64(g.Tiles[j].Gray16At(x-g.X[j], y-g.Y[j]).Y))
		}
	}
	return a, b
}

func TestOverlapsShowSameSpecimen(t *testing.T) {
	ctx := context.Background()
	cfg := smallConfig()
	noisy, err := Generate(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Before acquisition effects, shared regions are bit-identical because
	// the specimen is a function of plane coordinates only.
	p := cfg.EffectiveParams()
	p.Vignetting, p.TileBrightness, p.Photons, p.ReadNoise, p.Dust = 0, 0, 0, 0, 0
	clean := cfg
	clean.Params = &p
	ideal, err := Generate(ctx, clean)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ideal.X, noisy.X) || !slices.Equal(ideal.Y, noisy.Y) {
		t.Fatal("acquisition parameters changed the tile positions")
	}
	var minNoisy float64 = 1
	for r := range cfg.Rows {
		for c := range cfg.Cols {
			i := r*cfg.Cols + c
			for _, j := range []int{i + 1, i + cfg.Cols} {
				if (j == i+1 && c+1 == cfg.Cols) || j >= len(ideal.Tiles) {
					continue
				}
				a, b := overlap(ideal, i, j)
				for k := range a {
					if a[k] != b[k] {
						t.Fatalf("noise-free tiles %d and %d differ in their overlap", i, j)
					}
				}
				a, b = overlap(noisy, i, j)
				minNoisy = min(minNoisy, pearson(a, b))
			}
		}
	}
	if minNoisy < 0.3 {
		t.Fatalf("weakest overlap correlation of noisy neighbours is %.3f, want clearly positive", minNoisy)
	}
	t.Logf("weakest overlap correlation with noise: %.3f", minNoisy)
	// And the noise-free specimen matches Scene.Specimen, shifted.
	s, _ := NewScene(clean)
	x, y := s.Position(1, 1)
	spec, err := s.Specimen(ctx, image.Rect(x, y, x+cfg.TileWidth, y+cfg.TileHeight))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(spec.Pix, ideal.Tile(1, 1).Pix) {
		t.Fatal("Specimen differs from a noise-free, flat tile at the same place")
	}
}

func TestAcquisitionEffects(t *testing.T) {
	ctx := context.Background()
	// An empty specimen (flat background) shows the vignetting alone.
	cfg := smallConfig()
	p := LevelParams(Realistic)
	p.ColonyDensity, p.IsolatedCells, p.Debris, p.BackgroundTexture = 0, 0, 0, 0
	p.Photons, p.ReadNoise, p.TileBrightness = 0, 0, 0
	p.Vignetting = 0.3
	cfg.Params = &p
	s, err := NewScene(cfg)
	if err != nil {
		t.Fatal(err)
	}
	img, err := s.RenderTile(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	w, h := cfg.TileWidth, cfg.TileHeight
	dark := math.Round(p.DarkLevel * 4095)
	centre := float64(img.Gray16At(w/2, h/2).Y) - dark
	corner := float64(img.Gray16At(0, 0).Y) - dark
	if ratio := corner / centre; ratio < 0.6 || ratio > 0.8 {
		t.Fatalf("corner/centre = %.3f, want about 1 - 0.3", ratio)
	}

	// Noise: residuals against the noise-free tile have the predicted spread.
	cfg = smallConfig()
	p = LevelParams(Realistic)
	p.TileBrightness = 0
	cfg.Params = &p
	noisy, err := Generate(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	q := p
	q.Photons, q.ReadNoise = 0, 0
	cfg.Params = &q
	clean, err := Generate(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	maxDN := 4095.0
	scale := p.Exposure * (maxDN - dark)
	var z2 float64
	n := 0
	for i := range noisy.Tiles {
		a, b := pixels(noisy.Tiles[i]), pixels(clean.Tiles[i])
		for k := range a {
			sig := (float64(b[k]) - dark) / scale
			v := scale*scale*sig/p.Photons + p.ReadNoise*p.ReadNoise + 1.0/12
			d := float64(a[k]) - float64(b[k])
			z2 += d * d / v
			n++
		}
	}
	if rms := math.Sqrt(z2 / float64(n)); rms < 0.9 || rms > 1.1 {
		t.Fatalf("normalised noise rms %.3f, want about 1", rms)
	}

	// Bit depth: values never exceed the range, and bright scenes clip.
	cfg = smallConfig()
	cfg.BitDepth = 8
	p = LevelParams(Easy)
	p.Exposure, p.Background = 1, 1.5
	cfg.Params = &p
	g, err := Generate(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	saturated := 0
	for _, tile := range g.Tiles {
		for _, v := range pixels(tile) {
			if v > 255 {
				t.Fatalf("value %d exceeds 8 bits", v)
			}
			if v == 255 {
				saturated++
			}
		}
	}
	if saturated == 0 {
		t.Fatal("over-exposed 8-bit grid has no saturated pixels")
	}
}

func TestWriteDirAndReadTruth(t *testing.T) {
	ctx := context.Background()
	cfg := smallConfig()
	g, err := Generate(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := g.WriteDir(dir, nil); err != nil {
		t.Fatal(err)
	}
	entries, err := ReadTruth(filepath.Join(dir, TruthFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(g.Tiles) {
		t.Fatalf("%d truth entries, want %d", len(entries), len(g.Tiles))
	}
	for k, e := range entries {
		i := e.Row*cfg.Cols + e.Col
		if i != k || e.X != g.X[i] || e.Y != g.Y[i] || e.File != DefaultName(e.Row, e.Col) {
			t.Fatalf("entry %d = %+v, want tile %d at (%d,%d)", k, e, i, g.X[i], g.Y[i])
		}
		f, err := os.Open(filepath.Join(dir, e.File))
		if err != nil {
			t.Fatal(err)
		}
		img, err := tiff.Decode(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		g16, ok := img.(*image.Gray16)
		if !ok {
			t.Fatalf("%s decoded as %T", e.File, img)
		}
		if !bytes.Equal(g16.Pix, g.Tiles[i].Pix) {
			t.Fatalf("%s differs after the TIFF round trip", e.File)
		}
	}
	if DefaultName(0, 0) != "img_r001_c001.tif" {
		t.Fatalf("DefaultName(0,0) = %q", DefaultName(0, 0))
	}

	// Streaming generation writes the same files.
	dir2 := t.TempDir()
	name := func(r, c int) string { return "t_" + DefaultName(r, c) }
	if err := GenerateToDir(ctx, cfg, dir2, name); err != nil {
		t.Fatal(err)
	}
	for r := range cfg.Rows {
		for c := range cfg.Cols {
			a, err1 := os.ReadFile(filepath.Join(dir, DefaultName(r, c)))
			b, err2 := os.ReadFile(filepath.Join(dir2, name(r, c)))
			if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
				t.Fatalf("GenerateToDir file for (%d,%d) differs from WriteDir (%v, %v)", r, c, err1, err2)
			}
		}
	}

	// Bad names are refused before anything is written.
	for _, bad := range []func(int, int) string{
		func(int, int) string { return "same.tif" },
		func(r, c int) string { return "sub/" + DefaultName(r, c) },
		func(int, int) string { return "" },
		func(r, c int) string {
			if r == 0 && c == 0 {
				return TruthFile
			}
			return DefaultName(r, c)
		},
	} {
		if err := g.WriteDir(t.TempDir(), bad); err == nil {
			t.Fatal("bad tile names accepted")
		}
	}
}

func TestParseTruthErrors(t *testing.T) {
	cases := map[string]string{
		"":                                         "empty",
		"a,b,c,d,e\n":                              "header",
		"row,col,x,y,file\n":                       "no tiles",
		"row,col,x,y,file\n0,0,1,2\n":              "fields",
		"row,col,x,y,file\n0,0,1.5,2,f.tif\n":      "line 2: x",
		"row,col,x,y,file\n0,-1,1,2,f.tif\n":       "negative col",
		"row,col,x,y,file\n0,0,1,2,\n":             "empty file name",
		"row,col,x,y,file\n0,0,0,0,\"a\r\r\nb\"\n": "line 2: file name \"a\\r\\nb\" holds a line break",
		"row,col,x,y,file\n0,0,1,2,a\n0,0,3,4,b":   "line 3: tile (0, 0) already given on line 2",
	}
	for in, want := range cases {
		_, err := ParseTruth(strings.NewReader(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseTruth(%q): error %v, want one containing %q", in, err, want)
		}
	}
	got, err := ParseTruth(strings.NewReader("row,col,x,y,file\n1,2,-3,40,a b.tif\n"))
	if err != nil || len(got) != 1 || got[0] != (TruthEntry{1, 2, -3, 40, "a b.tif"}) {
		t.Fatalf("ParseTruth = %+v, %v", got, err)
	}
	if _, err := ReadTruth(filepath.Join(t.TempDir(), "missing.csv")); err == nil {
		t.Fatal("ReadTruth of a missing file succeeded")
	}
}

func TestValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	for _, l := range []Level{Easy, Realistic, Hard} {
		if err := ConfigFor(l).Validate(); err != nil {
			t.Fatalf("%v config invalid: %v", l, err)
		}
		c := ConfigFor(l)
		p := ModalityParams(l, Fluorescence)
		c.Params = &p
		if err := c.Validate(); err != nil {
			t.Fatalf("%v fluorescence config invalid: %v", l, err)
		}
	}
	mod := func(f func(*Config)) Config { c := DefaultConfig(); f(&c); return c }
	badParams := func(f func(*Params)) Config {
		c := DefaultConfig()
		p := c.EffectiveParams()
		f(&p)
		c.Params = &p
		return c
	}
	cases := []struct {
		cfg  Config
		want string
	}{
		{mod(func(c *Config) { c.Rows = 0 }), "at least 1 row"},
		{mod(func(c *Config) { c.TileWidth = 8 }), "tile size"},
		{mod(func(c *Config) { c.Overlap = 0 }), "overlap"},
		{mod(func(c *Config) { c.Overlap = math.NaN() }), "overlap"},
		{mod(func(c *Config) { c.Jitter = -1 }), "jitter"},
		{mod(func(c *Config) { c.Drift = math.Inf(1) }), "drift"},
		{mod(func(c *Config) { c.Jitter, c.Drift = 10, 10 }), "stage error too large"},
		{mod(func(c *Config) { c.Skew = 200 }), "skew"},
		{mod(func(c *Config) { c.BitDepth = 17 }), "bit depth"},
		{mod(func(c *Config) { c.Level = 9 }), "unknown level"},
		{mod(func(c *Config) { c.Workers = -2 }), "workers"},
		{mod(func(c *Config) { c.TileWidth, c.Overlap = 16, 0.05 }), "need at least 2 px"},
		{badParams(func(p *Params) { p.Vignetting = 1.5 }), "Vignetting"},
		{badParams(func(p *Params) { p.Exposure = 0 }), "Exposure"},
		{badParams(func(p *Params) { p.Photons = -1 }), "Photons"},
		{badParams(func(p *Params) { p.Modality = 5 }), "modality"},
	}
	for _, c := range cases {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.want, err, c.want)
		}
		if _, gerr := Generate(context.Background(), c.cfg); gerr == nil {
			t.Errorf("%s: Generate accepted an invalid config", c.want)
		}
	}
}

func TestLevelNames(t *testing.T) {
	for _, l := range []Level{Easy, Realistic, Hard} {
		got, err := ParseLevel(strings.ToUpper(l.String()))
		if err != nil || got != l {
			t.Fatalf("ParseLevel(%q) = %v, %v", l, got, err)
		}
	}
	if _, err := ParseLevel("insane"); err == nil {
		t.Fatal("unknown level accepted")
	}
	if Level(0) != Realistic {
		t.Fatal("zero Level is not Realistic")
	}
}

func TestCancellation(t *testing.T) {
	big := DefaultConfig()
	big.Rows, big.Cols, big.TileWidth, big.TileHeight = 42, 59, 1392, 1040

	// Already cancelled.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Generate(ctx, big); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	// Cancelled while rendering: returns promptly.
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Generate(ctx, big)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Generate took %v to notice cancellation", d)
	}
	// Same for streaming to disk.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if err := GenerateToDir(ctx2, big, t.TempDir(), nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("GenerateToDir: got %v, want context.DeadlineExceeded", err)
	}
}

func TestTilesIteratorBreak(t *testing.T) {
	cfg := smallConfig()
	s, err := NewScene(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for tile, err := range s.Tiles(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		if tile.Row != n/cfg.Cols || tile.Col != n%cfg.Cols {
			t.Fatalf("tile %d is (%d,%d): not row-major", n, tile.Row, tile.Col)
		}
		if x, y := s.Position(tile.Row, tile.Col); tile.X != x || tile.Y != y {
			t.Fatal("iterator position differs from Position")
		}
		n++
		if n == 5 {
			break // the workers must be joined; goleak checks at exit
		}
	}
	if n != 5 {
		t.Fatalf("iterated %d tiles", n)
	}
}

// A file name with a line break cannot round-trip through truth.csv (found
// by FuzzParseTruth: "\r\n" inside a quoted field reads back as "\n"), so
// WriteTruth and the generator refuse it.
func TestTruthRefusesLineBreaks(t *testing.T) {
	var buf bytes.Buffer
	for _, name := range []string{"a\nb.tif", "a\r\nb.tif", "a\rb.tif"} {
		if err := WriteTruth(&buf, []TruthEntry{{0, 0, 1, 2, name}}); err == nil || !strings.Contains(err.Error(), "line break") {
			t.Errorf("WriteTruth(%q): %v", name, err)
		}
	}
	cfg := ConfigFor(Easy)
	cfg.Rows, cfg.Cols, cfg.TileWidth, cfg.TileHeight = 1, 2, 64, 48
	err := GenerateToDir(context.Background(), cfg, t.TempDir(), func(r, c int) string { return fmt.Sprintf("t%d\n%d.tif", r, c) })
	if err == nil || !strings.Contains(err.Error(), "line break") {
		t.Errorf("GenerateToDir with line breaks in names: %v", err)
	}
}
