package cap

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gohtgs/htgs/tiled"
	"go.uber.org/goleak"
)

// The constructs' graphs start goroutines; none may outlive a run.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func image(t *testing.T, w, h, tw, th int, budgetTiles int64) (*tiled.Image, []uint16) {
	t.Helper()
	im, err := tiled.CreateTemp(t.TempDir(), w, h, tw, th, budgetTiles*int64(tw*th*2))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { im.Close() })
	r := rand.New(rand.NewPCG(7, 7))
	px := make([]uint16, w*h)
	for i := range px {
		px[i] = uint16(r.UintN(4096))
	}
	if err := im.WriteRect(0, 0, w, h, px); err != nil {
		t.Fatal(err)
	}
	return im, px
}

func readAll(t *testing.T, im *tiled.Image) []uint16 {
	got := make([]uint16, im.W*im.H)
	if err := im.ReadRect(0, 0, im.W, im.H, got, tiled.Zero); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestMedianEqualsInMemory(t *testing.T) {
	for _, r := range []int{1, 2} {
		src, px := image(t, 83, 57, 16, 16, 6)
		dst, _ := image(t, 83, 57, 16, 16, 3)
		if err := Median(context.Background(), src, dst, r, Options{Copies: 2}); err != nil {
			t.Fatal(err)
		}
		want := MedianInMemory(px, 83, 57, r)
		if got := readAll(t, dst); !slices.Equal(got, want) {
			t.Fatalf("r=%d: tiled median differs from the in-memory median", r)
		}
		for _, im := range []*tiled.Image{src, dst} {
			if st := im.CacheStats(); st.Peak > st.Capacity {
				t.Fatalf("cache over budget %+v", st)
			}
		}
	}
}

func TestProcessAndHistogram(t *testing.T) {
	src, px := image(t, 70, 45, 16, 16, 2)
	dst, _ := image(t, 70, 45, 16, 16, 2)
	g := Process(src, dst, Options{Copies: 3, Slots: 3}, func(_ context.Context, tl *Tile, out []uint16) error {
		for y := 0; y < tl.H; y++ {
			for x := 0; x < tl.W; x++ {
				out[y*16+x] = 4095 - tl.In[y*tl.Stride+x]
			}
		}
		return nil
	})
	if err := Run(context.Background(), g, src.Tiles()); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, dst)
	for i := range px {
		if got[i] != 4095-px[i] {
			t.Fatalf("pixel %d", i)
		}
	}
	h, err := Histogram(context.Background(), src, Options{Copies: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]uint64, 65536)
	for _, v := range px {
		want[v]++
	}
	if !slices.Equal(h, want) {
		t.Fatal("histogram differs")
	}
	s := slices.Clone(px)
	slices.Sort(s)
	if p := Percentile(h, 0.5); p != s[(len(s)+1)/2-1] {
		t.Fatalf("median %d want %d", p, s[(len(s)+1)/2-1])
	}
}
