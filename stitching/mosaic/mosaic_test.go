package mosaic

import (
	"bytes"
	"context"
	"errors"
	"image"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/gohtgs/htgs/stitching/compose"
	"github.com/gohtgs/htgs/stitching/tileio"
	"github.com/gohtgs/htgs/tiled"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// grid is a rows x cols grid of w x h tiles of noise on a ramp, and their
// slots at a regular step with a few pixels of jitter.
func grid(t testing.TB, rows, cols, w, h int, seed uint64) (*tileio.MemoryTiles, []compose.Slot) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	tiles := make([]*image.Gray16, rows*cols)
	var pos []tileio.GlobalPosition
	for r := range rows {
		for c := range cols {
			img := image.NewGray16(image.Rect(0, 0, w, h))
			for y := range h {
				for x := range w {
					v := uint16(1000 + 20*x + 10*y + rng.IntN(500))
					img.Pix[y*img.Stride+2*x], img.Pix[y*img.Stride+2*x+1] = byte(v>>8), byte(v)
				}
			}
			tiles[r*cols+c] = img
			pos = append(pos, tileio.GlobalPosition{Row: r, Col: c, X: c*(w*3/4) + rng.IntN(3), Y: r*(h*3/4) + rng.IntN(3)})
		}
	}
	src, err := tileio.NewMemoryTiles(rows, cols, tiles, nil)
	if err != nil {
		t.Fatal(err)
	}
	return src, Slots(pos, w, h)
}

// write writes the mosaic of src at slots into dir/name (a new folder)
// with plan and opt, and returns the file's bytes (nil for a folder) and
// the preview.
func write(t *testing.T, dir, name string, slots []compose.Slot, chans []Channel, plan Plan, opt Options) ([]byte, *image.Gray) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	prev, err := Write(context.Background(), path, name, slots, chans, plan, opt)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if opt.Format.Kind.Folder() {
		return nil, prev
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b, prev
}

// A mosaic that fits in the budget and is at most two bands tall is
// composed in memory; a taller one, or one over the budget, out of core,
// with a tile cache within the budget and a need below the in-memory one.
func TestNewPlan(t *testing.T) {
	_, slots := grid(t, 2, 3, 64, 48, 1)
	opt := Options{Memory: 1 << 30}
	p := NewPlan(slots, opt)
	wantW, wantH, err := compose.MosaicSize(slots)
	if err != nil {
		t.Fatal(err)
	}
	if p.Width != wantW || p.Height != wantH || p.OutOfCore || p.Need != p.InMemory || p.InMemory <= 2*int64(wantW*wantH) {
		t.Errorf("small mosaic: %+v, want %d x %d in memory, needing more than its pixels", p, wantW, wantH)
	}
	tall := GridSlots(30, 1, 64, 48, 0.25) // 30*36+12 = 1092 rows
	if p := NewPlan(tall, opt); !p.OutOfCore || p.Height <= inMemoryRows {
		t.Errorf("%d rows: %+v, want out of core", p.Height, p)
	}
	big := GridSlots(20, 40, 1000, 1000, 0.1)
	opt.Memory = 256 << 20
	p = NewPlan(big, opt)
	if !p.OutOfCore || p.Cache < 4*2*band*band || p.Need >= p.InMemory {
		t.Errorf("over the budget: %+v, want out of core within %d bytes", p, opt.Memory)
	}
	opt.Memory = 1 << 30
	opt.Format.Kind = OMEZarr04
	if p := NewPlan(slots, opt); p.OutOfCore || p.Cache != p.InMemory {
		t.Errorf("OME-Zarr 0.4 within the budget: %+v, want the whole in-memory need as tile cache", p)
	}
	if DefaultMemory(0) != 1<<30 || DefaultMemory(8<<30) != 2<<30 {
		t.Errorf("DefaultMemory: %d, %d", DefaultMemory(0), DefaultMemory(8<<30))
	}
}

func TestGridSlots(t *testing.T) {
	s := GridSlots(2, 3, 10, 8, 0.2)
	if len(s) != 6 || s[5] != (compose.Slot{X: 16, Y: 6, Width: 10, Height: 8}) || s[1].X != 8 || s[3].Y != 6 {
		t.Errorf("GridSlots = %v", s)
	}
	if s := GridSlots(1, 2, 10, 10, 1); s[1].X != 1 {
		t.Errorf("full overlap: %v, want a step of at least 1", s)
	}
}

// The in-memory and the out-of-core paths write the same OME-TIFF byte
// for byte, of every channel, and previews of the mosaic's size; Progress
// counts every tile of every channel.
func TestWriteBothPathsSameFile(t *testing.T) {
	src, slots := grid(t, 3, 4, 96, 80, 2)
	src2, _ := grid(t, 3, 4, 96, 80, 3)
	chans := []Channel{{Tiles: src}, {Tiles: src2}}
	dir := t.TempDir()
	var calls, last int
	opt := Options{Format: Format{TileSize: 64, Channels: []string{"a", "b"}}, Blend: compose.Linear, Workers: 3,
		Progress: func(done, total int) {
			calls++
			if done != last+1 || total != 2*len(slots) {
				t.Errorf("progress %d of %d after %d", done, total, last)
			}
			last = done
		}}
	plan := NewPlan(slots, opt)
	if plan.OutOfCore {
		t.Fatalf("plan %+v: want in memory", plan)
	}
	mem, memPrev := write(t, filepath.Join(dir, "mem"), "m.ome.tif", slots, chans, plan, opt)
	if calls != 2*len(slots) {
		t.Errorf("%d progress calls, want %d", calls, 2*len(slots))
	}
	opt.Progress = nil
	plan.OutOfCore = true
	plan.Cache = 64 << 20
	streamed, streamedPrev := write(t, filepath.Join(dir, "streamed"), "m.ome.tif", slots, chans, plan, opt)
	if !bytes.Equal(mem, streamed) {
		t.Fatalf("in memory %d bytes, out of core %d bytes, not the same", len(mem), len(streamed))
	}
	f, err := tiled.OpenBigTIFF(filepath.Join(dir, "mem", "m.ome.tif"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Levels[0].W != plan.Width || f.Levels[0].H != plan.Height {
		t.Errorf("file of %d x %d, plan %d x %d", f.Levels[0].W, f.Levels[0].H, plan.Width, plan.Height)
	}
	for _, p := range []*image.Gray{memPrev, streamedPrev} {
		if p == nil || p.Bounds().Dx() != plan.Width || p.Bounds().Dy() != plan.Height {
			t.Errorf("preview %v, want the mosaic's size %d x %d", p.Bounds(), plan.Width, plan.Height)
		}
	}
	var buf bytes.Buffer
	if err := EncodePreview(&buf, memPrev); err != nil || !bytes.HasPrefix(buf.Bytes(), []byte("\x89PNG")) {
		t.Errorf("EncodePreview: %v, %q", err, buf.Bytes()[:min(8, buf.Len())])
	}
}

// The OME-Zarr kinds write folders that read back at the mosaic's size,
// NGFF 0.4 through a temporary tiled image that is removed afterwards.
func TestWriteOMEZarr(t *testing.T) {
	src, slots := grid(t, 2, 3, 80, 64, 4)
	for _, kind := range []Kind{OMEZarr, OMEZarr04} {
		dir := t.TempDir()
		opt := Options{Format: Format{Kind: kind, TileSize: 32}, Blend: compose.Average}
		plan := NewPlan(slots, opt)
		_, prev := write(t, dir, "m.ome.zarr", slots, []Channel{{Tiles: src}}, plan, opt)
		z, err := tiled.OpenOMEZarr(filepath.Join(dir, "m.ome.zarr"))
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if lv := z.Levels[0]; lv.W != plan.Width || lv.H != plan.Height || len(z.Levels) < 2 {
			t.Errorf("%s: level 0 %d x %d of %d levels, want %d x %d and a pyramid", kind, lv.W, lv.H, len(z.Levels), plan.Width, plan.Height)
		}
		if prev == nil || prev.Bounds().Dx() != plan.Width {
			t.Errorf("%s: preview %v", kind, prev)
		}
		es, _ := os.ReadDir(dir)
		if len(es) != 1 {
			t.Errorf("%s: %d entries in the folder, want the mosaic alone", kind, len(es))
		}
	}
}

// countingTiles counts the loads of each tile.
type countingTiles struct {
	tileio.TileSource
	mu    sync.Mutex
	loads map[[2]int]int
	fail  error
}

func (c *countingTiles) Load(row, col int) (*image.Gray16, error) {
	c.mu.Lock()
	c.loads[[2]int{row, col}]++
	c.mu.Unlock()
	if c.fail != nil {
		return nil, c.fail
	}
	return c.TileSource.Load(row, col)
}

// Write refuses no channel, and several for an OME-Zarr, before writing
// anything; a load error and a cancelled context end Write with an error wrapping
// them, leaving no goroutine behind (goleak checks the package).
func TestWriteErrors(t *testing.T) {
	src, slots := grid(t, 2, 2, 48, 48, 5)
	boom := errors.New("boom")
	bad := &countingTiles{TileSource: src, loads: map[[2]int]int{}, fail: boom}
	for _, kind := range []Kind{OMETIFF, OMEZarr} {
		chans := []Channel{{Tiles: src}, {Tiles: src}}[:map[Kind]int{OMETIFF: 0, OMEZarr: 2}[kind]]
		path := filepath.Join(t.TempDir(), "m")
		if _, err := Write(context.Background(), path, "m", slots, chans, NewPlan(slots, Options{}), Options{Format: Format{Kind: kind}}); err == nil {
			t.Errorf("%s: %d channels accepted", kind, len(chans))
		}
		if _, err := os.Stat(path); err == nil {
			t.Errorf("%s: %d channels: %s written", kind, len(chans), path)
		}
	}
	for _, outOfCore := range []bool{false, true} {
		opt := Options{Workers: 2}
		plan := NewPlan(slots, opt)
		plan.OutOfCore = outOfCore
		path := filepath.Join(t.TempDir(), "m.ome.tif")
		if _, err := Write(context.Background(), path, "m", slots, []Channel{{Tiles: bad}}, plan, opt); !errors.Is(err, boom) {
			t.Errorf("out of core %v: load error: %v", outOfCore, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := Write(ctx, path, "m", slots, []Channel{{Tiles: src}}, plan, opt); !errors.Is(err, context.Canceled) {
			t.Errorf("out of core %v: cancelled: %v", outOfCore, err)
		}
	}
}

// The live preview loads each tile once, however often it is drawn, and
// grows as tiles are placed.
func TestLivePreview(t *testing.T) {
	src, slots := grid(t, 2, 2, 40, 30, 6)
	cnt := &countingTiles{TileSource: src, loads: map[[2]int]int{}}
	p := NewLivePreview(cnt, 2, 2, 40, 30)
	if img, err := p.Draw(nil, 40, 30); img != nil || err != nil {
		t.Fatalf("nothing placed: %v, %v", img, err)
	}
	pos := []tileio.GlobalPosition{{Row: 0, Col: 0, X: slots[0].X, Y: slots[0].Y}}
	one, err := p.Draw(pos, 40, 30)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 4; i++ {
		pos = append(pos, tileio.GlobalPosition{Row: i / 2, Col: i % 2, X: slots[i].X, Y: slots[i].Y})
	}
	all, err := p.Draw(pos, 40, 30)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Draw(pos, 40, 30); err != nil {
		t.Fatal(err)
	}
	if one.Bounds().Dx() > 42 || all.Bounds().Dx() <= 40 || all.Bounds().Dy() <= 30 {
		t.Errorf("previews %v then %v: want one tile, then the grid", one.Bounds(), all.Bounds())
	}
	for k, n := range cnt.loads {
		if n != 1 {
			t.Errorf("tile %v loaded %d times", k, n)
		}
	}
	if len(cnt.loads) != 4 {
		t.Errorf("%d tiles loaded, want 4", len(cnt.loads))
	}
}

// Out of core, the preview of a mosaic more than twice PreviewSide wide
// comes from the pyramid level the stream kept as it wrote it: the bytes
// of the preview read back from the file's level, for an OME-TIFF of two
// channels (the first one's) and an OME-Zarr.
func TestStreamedPreviewFromKeptLevel(t *testing.T) {
	src, slots := grid(t, 2, 22, 256, 40, 5)
	src2, _ := grid(t, 2, 22, 256, 40, 6)
	if w, _, _ := compose.MosaicSize(slots); w < 2*PreviewSide || previewLevel(w, 80, 64) != 1 {
		t.Fatalf("mosaic %d wide, preview level %d: want more than %d and level 1", w, previewLevel(w, 80, 64), 2*PreviewSide)
	}
	for _, tc := range []struct {
		kind  Kind
		chans []Channel
		names []string
	}{{OMETIFF, []Channel{{Tiles: src}, {Tiles: src2}}, []string{"a", "b"}}, {OMEZarr, []Channel{{Tiles: src}}, nil}} {
		dir := t.TempDir()
		opt := Options{Format: Format{Kind: tc.kind, TileSize: 64, Channels: tc.names}, Blend: compose.Linear, Workers: 2}
		plan := NewPlan(slots, opt)
		plan.OutOfCore = true
		plan.Cache = 64 << 20
		_, prev := write(t, dir, "m", slots, tc.chans, plan, opt)
		want, err := filePreview(filepath.Join(dir, "m"), tc.kind)
		if err != nil {
			t.Fatal(err)
		}
		if prev == nil || prev.Rect != want.Rect || !bytes.Equal(prev.Pix, want.Pix) {
			t.Errorf("%s: preview %v differs from the one read from the file's level (%v)", tc.kind, prev.Rect, want.Rect)
		}
		if prev.Rect.Dx() != PreviewSide {
			t.Errorf("%s: preview %v, want %d wide", tc.kind, prev.Rect, PreviewSide)
		}
	}
}

// previewLevel picks the level filePreview picks among a file's levels.
func TestPreviewLevel(t *testing.T) {
	for _, tc := range []struct{ w, h, tile, want int }{
		{4678, 2650, 512, 1}, {1999, 1500, 512, 0}, {2000, 10, 512, 0}, {4000, 10, 512, 1}, {3999, 10, 512, 1}, {3998, 10, 512, 0},
		{16000, 9000, 512, 3}, {16000, 9000, 8192, 1}, {16000, 9000, 16384, 0}, {8001, 100, 64, 2},
	} {
		if got := previewLevel(tc.w, tc.h, tc.tile); got != tc.want {
			t.Errorf("previewLevel(%d, %d, %d) = %d, want %d", tc.w, tc.h, tc.tile, got, tc.want)
		}
	}
}
