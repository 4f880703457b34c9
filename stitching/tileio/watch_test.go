package tileio

import (
	"bytes"
	"context"
	"image"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/image/tiff"
)

// watchModes are the ways a Watcher follows a folder: inotify where the
// system has it, and polling everywhere.
var watchModes = []struct {
	name string
	opt  WatchOptions
}{
	{"events", WatchOptions{}},
	{"polling", WatchOptions{Polling: true, Poll: 10 * time.Millisecond}},
}

// tileBytes returns a w x h 16-bit TIFF whose pixels depend on seed.
func tileBytes(t testing.TB, w, h int, seed uint64) []byte {
	t.Helper()
	img := image.NewGray16(image.Rect(0, 0, w, h))
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range img.Pix {
		img.Pix[i] = byte(r.Uint32())
	}
	var b bytes.Buffer
	if err := tiff.Encode(&b, img, nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// collect receives arrivals until the channel closes or d passes.
func collect(t *testing.T, ch <-chan Arrival, n int, d time.Duration) []Arrival {
	t.Helper()
	var got []Arrival
	timeout := time.After(d)
	for len(got) < n {
		select {
		case a, ok := <-ch:
			if !ok {
				return got
			}
			got = append(got, a)
		case <-timeout:
			t.Fatalf("%d of %d tiles arrived within %v", len(got), n, d)
		}
	}
	return got
}

func TestWatchTilesArriveOnceInAnyOrder(t *testing.T) {
	for _, m := range watchModes {
		t.Run(m.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			dir := t.TempDir()
			pat, err := ParsePattern("t_{r}_{c}.tif", 0)
			if err != nil {
				t.Fatal(err)
			}
			const rows, cols = 3, 4
			// Two tiles are there before the watch starts.
			for _, rc := range [][2]int{{2, 3}, {0, 1}} {
				if err := os.WriteFile(filepath.Join(dir, pat.Name(rc[0], rc[1], rows, cols)), tileBytes(t, 20, 10, uint64(rc[0]*cols+rc[1])), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			w, err := WatchTiles(context.Background(), dir, pat, rows, cols, m.opt)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if m.name == "polling" && !strings.HasPrefix(w.Mode(), "polling") {
				t.Errorf("mode %q, asked to poll", w.Mode())
			}
			if m.name == "events" && runtime.GOOS == "linux" && !strings.HasPrefix(w.Mode(), "inotify") {
				t.Errorf("mode %q on Linux, want inotify", w.Mode())
			}
			// An unrelated file and the others in a shuffled order.
			os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644)
			order := rand.New(rand.NewPCG(7, 7)).Perm(rows * cols)
			for _, i := range order {
				r, c := i/cols, i%cols
				if (r == 2 && c == 3) || (r == 0 && c == 1) {
					continue
				}
				if err := os.WriteFile(filepath.Join(dir, pat.Name(r, c, rows, cols)), tileBytes(t, 20, 10, uint64(i)), 0o644); err != nil {
					t.Fatal(err)
				}
				time.Sleep(2 * time.Millisecond)
			}
			got := collect(t, w.Arrivals(), rows*cols, 10*time.Second)
			seen := map[Arrival]bool{}
			for _, a := range got {
				if seen[a] {
					t.Errorf("tile %v arrived twice", a)
				}
				seen[a] = true
			}
			if len(seen) != rows*cols {
				t.Errorf("%d distinct tiles arrived, want %d", len(seen), rows*cols)
			}
			if _, ok := <-w.Arrivals(); ok {
				t.Error("Arrivals still open after every tile")
			}
			if miss := w.Missing(); len(miss) != 0 {
				t.Errorf("missing %v after every tile", miss)
			}
			if tw, th := w.TileSize(); tw != 20 || th != 10 {
				t.Errorf("tile size %dx%d, want 20x10", tw, th)
			}
			img, err := w.Load(1, 2)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := DecodeTile(bytes.NewReader(tileBytes(t, 20, 10, 1*cols+2)))
			if !bytes.Equal(img.Pix, want.Pix) {
				t.Error("Load(1, 2) is not the tile written")
			}
			if ch := w.Changed(); len(ch) != 0 {
				t.Errorf("changed %v, none was", ch)
			}
			// A tile acquired again after it arrived.
			if err := os.WriteFile(filepath.Join(dir, pat.Name(2, 0, rows, cols)), tileBytes(t, 20, 10, 99), 0o644); err != nil {
				t.Fatal(err)
			}
			if ch := w.Changed(); len(ch) != 1 || ch[0] != "t_2_0.tif" {
				t.Errorf("changed %v, want t_2_0.tif", ch)
			}
		})
	}
}

func TestWatchWaitsForATileWrittenInTwoHalves(t *testing.T) {
	for _, m := range watchModes {
		t.Run(m.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			dir := t.TempDir()
			pat, _ := ParsePattern("t_{i}.tif", 1)
			w, err := WatchTiles(context.Background(), dir, pat, 1, 2, m.opt)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			data := tileBytes(t, 30, 20, 3)
			path := filepath.Join(dir, "t_1.tif")
			if err := os.WriteFile(path, data[:len(data)/2], 0o644); err != nil {
				t.Fatal(err)
			}
			select {
			case a := <-w.Arrivals():
				t.Fatalf("tile %v arrived with half of its file", a)
			case <-time.After(300 * time.Millisecond):
			}
			miss := w.Missing()
			if len(miss) != 2 || miss[0].Name != "t_1.tif" || miss[0].Why == nil || miss[1].Why != nil {
				t.Errorf("missing %+v: want t_1.tif with a reason and t_2.tif without", miss)
			}
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(data[len(data)/2:]); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			got := collect(t, w.Arrivals(), 1, 10*time.Second)
			if got[0] != (Arrival{0, 0}) {
				t.Errorf("arrival %v, want tile (0, 0)", got[0])
			}
			if miss := w.Missing(); len(miss) != 1 || miss[0].Name != "t_2.tif" {
				t.Errorf("missing %+v, want t_2.tif", miss)
			}
		})
	}
}

// A tile written under another name and renamed into place arrives.
func TestWatchTileRenamedIntoPlace(t *testing.T) {
	for _, m := range watchModes {
		t.Run(m.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			dir := t.TempDir()
			pat, _ := ParsePattern("t_{i}.tif", 0)
			w, err := WatchTiles(context.Background(), dir, pat, 1, 2, m.opt)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			tmp := filepath.Join(dir, "t_1.tif.part")
			if err := os.WriteFile(tmp, tileBytes(t, 30, 20, 4), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(dir, "t_1.tif")); err != nil {
				t.Fatal(err)
			}
			if got := collect(t, w.Arrivals(), 1, 10*time.Second); got[0] != (Arrival{0, 1}) {
				t.Errorf("arrival %v, want (0, 1)", got[0])
			}
		})
	}
}

func TestWatchRefusesATileOfAnotherSize(t *testing.T) {
	for _, m := range watchModes {
		t.Run(m.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			dir := t.TempDir()
			pat, _ := ParsePattern("t_{i}.tif", 0)
			w, err := WatchTiles(context.Background(), dir, pat, 1, 3, m.opt)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			os.WriteFile(filepath.Join(dir, "t_0.tif"), tileBytes(t, 30, 20, 1), 0o644)
			collect(t, w.Arrivals(), 1, 10*time.Second)
			os.WriteFile(filepath.Join(dir, "t_2.tif"), tileBytes(t, 31, 20, 2), 0o644)
			if got := collect(t, w.Arrivals(), 1, 10*time.Second); len(got) != 0 {
				t.Fatalf("tile %v of another size arrived", got)
			}
			if err := w.Err(); err == nil || !strings.Contains(err.Error(), "t_2.tif is 31x20 but t_0.tif is 30x20") {
				t.Errorf("error %v, want one naming both tiles and sizes", err)
			}
		})
	}
}

func TestWatchStopsWithItsContext(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithCancel(context.Background())
	pat, _ := ParsePattern("t_{i}.tif", 0)
	w, err := WatchTiles(ctx, t.TempDir(), pat, 2, 2, WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if got := collect(t, w.Arrivals(), 1, 10*time.Second); len(got) != 0 {
		t.Errorf("arrivals %v from an empty folder", got)
	}
	w.Close()
	if n := len(w.Missing()); n != 4 {
		t.Errorf("%d tiles missing, want 4", n)
	}
	if _, err := WatchTiles(ctx, filepath.Join(t.TempDir(), "none"), pat, 2, 2, WatchOptions{}); err == nil {
		t.Error("watching a folder that does not exist: no error")
	}
}
