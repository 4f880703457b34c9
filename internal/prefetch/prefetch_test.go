package prefetch

import (
	"context"
	"errors"
	"image"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Ordered gives the items in order, loads at most par ahead of the
// consumer, and stops cleanly when the consumer gives up early.
func TestOrdered(t *testing.T) {
	var mu sync.Mutex
	loaded, taken, ahead := 0, 0, 0
	load := func(j int) (*image.Gray16, error) {
		mu.Lock()
		loaded++
		ahead = max(ahead, loaded-taken)
		mu.Unlock()
		if j == 7 {
			return nil, errors.New("tile 7 unreadable")
		}
		return image.NewGray16(image.Rect(0, 0, j+1, 1)), nil
	}
	get, stop := Ordered(context.Background(), 20, 3, load)
	for j := range 7 {
		img, err := get(j)
		if err != nil || img.Bounds().Dx() != j+1 {
			t.Fatalf("item %d: %v, %v", j, img.Bounds(), err)
		}
		mu.Lock()
		taken++
		mu.Unlock()
	}
	if _, err := get(7); err == nil {
		t.Fatal("item 7: no error")
	}
	stop()
	// get frees its slot just before it returns, before the test counts
	// the item taken: par + 1 ahead at most, as the test sees it.
	if ahead > 4 {
		t.Fatalf("loaded %d items ahead of the consumer, want at most 3 (+1)", ahead)
	}
	if loaded > 8+3 {
		t.Fatalf("%d items loaded after giving up at 7, want at most 11", loaded)
	}
}
