package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/gohtgs/htgs/region"

	"github.com/gohtgs/htgs/cluster/natsserver"
)

func newRegions(t testing.TB, s *natsserver.Server, opts ...Option) *Regions {
	t.Helper()
	r, err := NewRegions(context.Background(), connect(t, s), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// randBox returns a random non-empty box inside bounds.
func randBox(rng *rand.Rand, bounds region.Box) region.Box {
	b := bounds
	for d := range bounds.Dims {
		lo := bounds.Lo[d] + rng.IntN(bounds.Hi[d]-bounds.Lo[d])
		hi := lo + 1 + rng.IntN(bounds.Hi[d]-lo)
		b.Lo[d], b.Hi[d] = lo, hi
	}
	return b
}

// The JetStream storage reads back what the in-memory one does, for random
// writes and reads of 2-D and 3-D regions whose boxes straddle chunks.
func TestRegionsMatchMemory(t *testing.T) {
	s := startServer(t)
	js := newRegions(t, s, RegionChunk(7, 5, 2))
	mem := region.NewMemory()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	metas := []region.Meta{
		{ID: region.ID{Name: "slide::rgb", Type: region.Dense2D}, Elem: region.Uint16, Bounds: region.Rect(-3, 2, 27, 21)},
		{ID: region.ID{Name: "vol", Type: region.Dense3D, Version: 1}, Elem: region.Float32, Bounds: region.Cube(0, 0, 0, 9, 8, 5)},
	}
	for _, m := range metas {
		for range 25 {
			box := randBox(rng, m.Bounds)
			data := make([]byte, box.Len()*m.Elem.Size())
			for i := range data {
				data[i] = byte(rng.IntN(256))
			}
			for _, st := range []region.Storage{js, mem} {
				if err := st.Write(ctx, m, box, data); err != nil {
					t.Fatal(err)
				}
			}
			roi := randBox(rng, m.Bounds)
			got := make([]byte, roi.Len()*m.Elem.Size())
			want := make([]byte, len(got))
			if err := js.Read(ctx, m.ID, roi, got); err != nil {
				t.Fatal(err)
			}
			if err := mem.Read(ctx, m.ID, roi, want); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%v: read %v after writing %v differs from memory storage", m.ID, roi, box)
			}
		}
		got, err := js.Stat(ctx, m.ID)
		if err != nil || got != m {
			t.Errorf("Stat = %+v, %v", got, err)
		}
	}
	ids, err := js.List(ctx)
	if err != nil || len(ids) != 2 || ids[0] != metas[0].ID || ids[1] != metas[1].ID {
		t.Errorf("List = %v, %v", ids, err)
	}

	// Errors.
	m := metas[0]
	if err := js.Read(ctx, region.ID{Name: "none", Type: region.Dense2D}, region.Rect(0, 0, 1, 1), make([]byte, 2)); !errors.Is(err, region.ErrNotFound) {
		t.Errorf("read of a missing region: %v", err)
	}
	if err := js.Read(ctx, m.ID, region.Rect(0, 0, 40, 1), make([]byte, 80)); !errors.Is(err, region.ErrOutOfBounds) {
		t.Errorf("read outside bounds: %v", err)
	}
	other := m
	other.Bounds = region.Rect(0, 0, 5, 5)
	if err := js.Write(ctx, other, region.Rect(0, 0, 1, 1), make([]byte, 2)); !errors.Is(err, region.ErrExists) {
		t.Errorf("write with other bounds: %v", err)
	}
	if err := js.Delete(ctx, m.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Stat(ctx, m.ID); !errors.Is(err, region.ErrNotFound) {
		t.Errorf("Stat after Delete: %v", err)
	}
	if err := js.Delete(ctx, m.ID); !errors.Is(err, region.ErrNotFound) {
		t.Errorf("second Delete: %v", err)
	}
}

// Writes of disjoint boxes that share chunks, from several processes'
// connections at once, all land (compare-and-swap on the chunks).
func TestRegionsConcurrentDisjointWrites(t *testing.T) {
	s := startServer(t)
	stores := []*Regions{newRegions(t, s, RegionChunk(16, 16, 1)), newRegions(t, s, RegionChunk(16, 16, 1))}
	m := region.Meta{ID: region.ID{Name: "mask", Type: region.Dense2D}, Elem: region.Uint8, Bounds: region.Rect(0, 0, 16, 16)}
	ctx := context.Background()
	var wg sync.WaitGroup
	for x := range 16 { // one column each: every write touches the one chunk
		wg.Add(1)
		go func() {
			defer wg.Done()
			col := bytes.Repeat([]byte{byte(x + 1)}, 16)
			if err := stores[x%2].Write(ctx, m, region.Rect(x, 0, x+1, 16), col); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got := make([]byte, 256)
	if err := stores[0].Read(ctx, m.ID, m.Bounds, got); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if int(v) != i%16+1 {
			t.Fatalf("element %d = %d, want %d: a concurrent write was lost", i, v, i%16+1)
		}
	}
}

// UpdateObject is atomic across connections, and polygon sets commit to
// and reopen from the object store.
func TestRegionsObjects(t *testing.T) {
	s := startServer(t)
	a, b := newRegions(t, s), newRegions(t, s)
	ctx := context.Background()
	id := region.ID{Name: "counter", Type: region.Sparse2D}
	if _, err := a.ReadObject(ctx, id); !errors.Is(err, region.ErrNotFound) {
		t.Fatalf("missing object: %v", err)
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := []*Regions{a, b}[i%2]
			err := st.UpdateObject(ctx, id, func(old []byte) ([]byte, error) {
				var n uint64
				if old != nil {
					n = binary.LittleEndian.Uint64(old)
				}
				return binary.LittleEndian.AppendUint64(nil, n+1), nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got, err := b.ReadObject(ctx, id)
	if err != nil || binary.LittleEndian.Uint64(got) != 20 {
		t.Fatalf("counter = %v, %v; want 20", got, err)
	}

	pid := region.ID{Name: "slide::nuclei", Type: region.Polygons}
	set, err := region.NewPolygonSet(pid, region.Rect(0, 0, 100, 100), region.Box{})
	if err != nil {
		t.Fatal(err)
	}
	set.SetOutput(a)
	sq := region.Polygon{ID: 7, Ring: []region.Point{{X: 10, Y: 10}, {X: 20, Y: 10}, {X: 20, Y: 20}, {X: 10, Y: 20}}}
	if err := set.Add(ctx, sq); err != nil {
		t.Fatal(err)
	}
	if err := set.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	back, err := region.OpenPolygonSet(ctx, b, pid, region.Rect(0, 0, 50, 50))
	if err != nil {
		t.Fatal(err)
	}
	ps, err := back.Polygons(ctx)
	if err != nil || len(ps) != 1 || ps[0].ID != 7 {
		t.Fatalf("reopened polygons %v, %v", ps, err)
	}
}

// A region object larger than the reader's MaxPayload is refused before
// it is read (it used to be read whole with GetBytes, whatever its size).
func TestRegionsObjectOverMaxPayload(t *testing.T) {
	s := startServer(t)
	ctx := context.Background()
	w := newRegions(t, s)
	id := region.ID{Name: "big", Type: region.Sparse2D}
	if err := w.UpdateObject(ctx, id, func([]byte) ([]byte, error) { return make([]byte, 4096), nil }); err != nil {
		t.Fatal(err)
	}
	if b, err := w.ReadObject(ctx, id); err != nil || len(b) != 4096 {
		t.Fatalf("within the limit: %d bytes, %v", len(b), err)
	}
	r := newRegions(t, s, MaxPayload(1024))
	if b, err := r.ReadObject(ctx, id); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "MaxPayload") {
		t.Fatalf("over the limit: %d bytes, %v; want ErrMalformed naming MaxPayload", len(b), err)
	}
}
