package region

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
)

func TestDense1D(t *testing.T) {
	ctx := context.Background()
	d, err := NewDense[float32](ID{Name: "signal"}, Span(0, 10))
	if err != nil {
		t.Fatal(err)
	}
	if d.ID().Type != Dense1D || d.ID().String() != "signal/dense1d/t0/v0" {
		t.Fatalf("id %v", d.ID())
	}
	if id, err := ParseID(d.ID().String()); err != nil || id != d.ID() {
		t.Fatalf("ParseID: %v %v", id, err)
	}
	for x := range 10 {
		d.Set1(x, float32(x))
	}
	for _, s := range []Storage{NewMemory(), mustDisk(t)} {
		d.SetOutput(s)
		if err := d.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		r, err := OpenDense[float32](ctx, s, d.ID(), Span(3, 6))
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.Data(ctx)
		if err != nil || len(got) != 3 || got[0] != 3 || got[2] != 5 || r.At1(4) != 4 {
			t.Fatalf("%T: %v %v", s, got, err)
		}
	}
	if err := (Box{Dims: 1, Hi: [3]int{4, 2, 1}}).Validate(); !errors.Is(err, ErrBadBox) {
		t.Fatalf("1-D box with y extent: %v", err)
	}
}

func mustDisk(t *testing.T) *Disk {
	d, err := NewDisk(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func square(id int64, x, y, s float64) Polygon {
	return Polygon{ID: id, Ring: []Point{{x, y}, {x + s, y}, {x + s, y + s}, {x, y + s}}}
}

func TestPolygonIntersects(t *testing.T) {
	tri := Polygon{ID: 1, Ring: []Point{{20, 0}, {30, 0}, {0, 30}}}
	ring := Polygon{ID: 2, Ring: []Point{{0, 0}, {100, 0}, {100, 100}, {0, 100}}}
	for _, c := range []struct {
		p    Polygon
		b    Box
		want bool
	}{
		{tri, Rect(20, 20, 45, 45), false},                 // bbox overlaps, polygon does not
		{tri, Rect(12, 12, 45, 45), true},                  // hypotenuse crosses
		{tri, Rect(22, 1, 23, 2), true},                    // box inside the polygon
		{ring, Rect(40, 40, 50, 50), true},                 // box inside, no edge crossing
		{square(3, 10, 10, 5), Rect(15, 15, 20, 20), true}, // touching corner
		{square(3, 10, 10, 5), Rect(16, 10, 20, 20), false},
		{square(3, 10, 10, 5), Rect(11, 11, 12, 12), true},
		{square(3, 10, 10, 5), Rect(0, 0, 100, 100), true}, // polygon inside box
		{square(3, 10, 10, 5), Cube(0, 0, 0, 100, 100, 1), false},
	} {
		if got := c.p.Intersects(c.b); got != c.want {
			t.Errorf("polygon %d ∩ %v = %v, want %v", c.p.ID, c.b, got, c.want)
		}
	}
}

func TestPolygonSetStorage(t *testing.T) {
	ctx := context.Background()
	bounds := Rect(0, 0, 100, 100)
	for _, s := range []interface {
		Storage
		ObjectStorage
	}{NewMemory(), mustDisk(t)} {
		id := ID{Name: "slide::nuclei", Type: Polygons, Version: 1}
		parts, err := Grid(bounds, [3]int{50, 100}, 5)
		if err != nil {
			t.Fatal(err)
		}
		// Two partitions commit their own polygons.
		for i, p := range parts {
			ps, err := NewPolygonSet(id, bounds, p.Core)
			if err != nil {
				t.Fatal(err)
			}
			ps.SetOutput(s)
			if err := ps.Add(ctx, square(int64(10+i), float64(p.Core.Hi[0])+1, 10, 2)); err == nil {
				t.Fatalf("partition %d accepted a polygon outside its bounds or anchor", i)
			}
			if err := ps.Add(ctx, square(int64(i), float64(p.Core.Lo[0])+40, 10, 9.5)); err != nil {
				t.Fatal(err)
			}
			if err := ps.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
		ids, err := s.List(ctx)
		if err != nil || len(ids) != 1 || ids[0] != id {
			t.Fatalf("List = %v, %v", ids, err)
		}
		m, err := s.Stat(ctx, id)
		if err != nil || m.Bounds != bounds || m.Elem != Float64 {
			t.Fatalf("Stat = %+v, %v", m, err)
		}
		// Partition 1 with its ghost border sees polygon 0 (x 40..49.5).
		ps, err := OpenPolygonSet(ctx, s, id, parts[1].ROI)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ps.Polygons(ctx)
		if err != nil || len(got) != 2 || got[0].ID != 0 || got[1].ID != 1 {
			t.Fatalf("ROI %v polygons %v, %v", parts[1].ROI, got, err)
		}
		// Committing the right half again (polygon 1 removed) keeps 0.
		ps.SetOutput(s)
		if ok, _ := ps.Remove(ctx, 1); !ok {
			t.Fatal("Remove(1) found nothing")
		}
		if err := ps.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		all, _ := OpenPolygonSet(ctx, s, id, Box{})
		got, _ = all.Polygons(ctx)
		if len(got) != 1 || got[0].ID != 0 {
			t.Fatalf("after commit: %v", got)
		}
		if err := s.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenPolygonSet(ctx, s, id, Box{}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("after delete: %v", err)
		}
	}
}

func TestSparseStorage(t *testing.T) {
	ctx := context.Background()
	bounds := Cube(0, 0, 0, 10, 10, 4)
	for _, s := range []interface {
		Storage
		ObjectStorage
	}{NewMemory(), mustDisk(t)} {
		a, err := NewSparse[uint16](ID{Name: "cells"}, bounds, Cube(0, 0, 0, 5, 10, 4))
		if err != nil {
			t.Fatal(err)
		}
		if a.ID().Type != Sparse3D {
			t.Fatalf("kind %v", a.ID().Type)
		}
		b, _ := NewSparse[uint16](a.ID(), bounds, Cube(5, 0, 0, 10, 10, 4))
		a.Set(ctx, 1, 2, 3, 7)
		a.Set(ctx, 4, 0, 0, 8)
		b.Set(ctx, 9, 9, 0, 9)
		if err := a.Set(ctx, 5, 0, 0, 1); !errors.Is(err, ErrOutOfBounds) {
			t.Fatalf("Set outside ROI: %v", err)
		}
		for _, r := range []*Sparse[uint16]{a, b} {
			r.SetOutput(s)
			if err := r.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := OpenSparse[float32](ctx, s, a.ID(), Box{}); !errors.Is(err, ErrType) {
			t.Fatalf("open as float32: %v", err)
		}
		r, err := OpenSparse[uint16](ctx, s, a.ID(), Box{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.Query(ctx, Cube(0, 0, 0, 10, 10, 1))
		want := []Entry[uint16]{{4, 0, 0, 8}, {9, 9, 0, 9}}
		if err != nil || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Fatalf("Query = %v, %v", got, err)
		}
		if v, ok, err := r.Get(ctx, 1, 2, 3); v != 7 || !ok || err != nil {
			t.Fatalf("Get = %v %v %v", v, ok, err)
		}
		// A stored region with other bounds refuses the commit.
		c, _ := NewSparse[uint16](a.ID(), Cube(0, 0, 0, 20, 10, 4), Box{})
		c.SetOutput(s)
		if err := c.Commit(ctx); !errors.Is(err, ErrExists) {
			t.Fatalf("commit with other bounds: %v", err)
		}
	}
}

func TestDecodeObjectErrors(t *testing.T) {
	o := &object{id: ID{Name: "s", Type: Sparse2D}, elem: Int32, bounds: Rect(0, 0, 4, 4),
		coords: [][3]int{{1, 0, 0}, {2, 3, 0}}, vals: []byte{1, 0, 0, 0, 2, 0, 0, 0}}
	good := encodeObject(o)
	if back, err := decodeObject(good); err != nil || !equalObjects(encodeObject(back), good) {
		t.Fatalf("round trip: %v", err)
	}
	reseal := func(b []byte) []byte {
		b = b[:len(b)-4]
		return binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	}
	huge := append([]byte(nil), good[:len(good)-4-2*20]...) // up to the count
	binary.LittleEndian.PutUint64(huge[len(huge)-8:], 1<<62)
	huge = reseal(append(huge, 0, 0, 0, 0))
	badVer := append([]byte(nil), good...)
	badVer[4] = 9
	for name, b := range map[string][]byte{
		"empty":     nil,
		"truncated": good[:len(good)-1],
		"flipped":   append(append([]byte(nil), good[:20]...), append([]byte{good[20] ^ 1}, good[21:]...)...),
		"version":   reseal(badVer),
		"huge":      huge,
		"trailing":  reseal(append(append([]byte(nil), good...), 0)),
	} {
		if _, err := decodeObject(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

func TestPartitions(t *testing.T) {
	parts, err := Grid(Span(0, 10), [3]int{4}, 1)
	if err != nil || len(parts) != 3 || parts[2].Core != Span(8, 10) || parts[1].ROI != Span(3, 9) {
		t.Fatalf("1-D grid %v %v", parts, err)
	}
	parts, err = Grid(Cube(0, 0, 0, 10, 10, 10), [3]int{5, 10, 5}, 0)
	if err != nil || len(parts) != 4 {
		t.Fatalf("3-D grid %v %v", parts, err)
	}
	if _, err := Grid(Rect(0, 0, 10, 10), [3]int{0, 5}, 0); !errors.Is(err, ErrBadBox) {
		t.Fatalf("zero tile: %v", err)
	}
	dom := Rect(0, 0, 100, 100)
	ir, err := Irregular(dom, []Box{Rect(0, 0, 70, 100), Rect(70, 0, 100, 30), Rect(70, 30, 100, 100)}, 3)
	if err != nil || ir[1].ROI != Rect(67, 0, 100, 33) {
		t.Fatalf("irregular %v %v", ir, err)
	}
	if _, err := Irregular(dom, []Box{Rect(0, 0, 70, 100), Rect(60, 0, 100, 30)}, 0); !errors.Is(err, ErrBadBox) {
		t.Fatalf("overlap: %v", err)
	}
	if _, err := Irregular(dom, []Box{Rect(0, 0, 170, 100)}, 0); !errors.Is(err, ErrOutOfBounds) {
		t.Fatalf("outside: %v", err)
	}
	cm, err := SplitChunks(ID{Name: "rgb", Type: Dense2D}, dom, [3]int{50, 50}, 2)
	if err != nil || len(cm.Chunks) != 4 || cm.Resolution != 2 {
		t.Fatalf("chunks %v %v", cm, err)
	}
	hit := cm.Lookup(Rect(40, 60, 60, 70))
	if len(hit) != 2 || hit[0].Key != "rgb/dense2d/t0/v0#2" || hit[1].Box != Rect(50, 50, 100, 100) {
		t.Fatalf("Lookup = %v", hit)
	}
	if err := cm.Add(Rect(0, 0, 1, 1), "rgb/dense2d/t0/v0#2"); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate key: %v", err)
	}
}
