package region

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"os"
	"slices"
	"testing"

	"github.com/gohtgs/htgs/internal/fuzzrun"
)

// A dense region whose metadata claims bounds its array file does not hold
// (2^40 uint16 elements over 16 bytes) is refused by OpenDense as
// ErrCorrupt, instead of opening and then sizing a read of 2 TiB.
func TestDiskRefusesBoundsLargerThanFile(t *testing.T) {
	dir := t.TempDir()
	d, err := NewDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	id := ID{Name: "a", Type: Dense2D}
	mp, rp := d.paths(id)
	meta, _ := json.Marshal(diskMeta{ID: id.String(), Elem: Uint16, Bounds: Rect(0, 0, 1<<20, 1<<20)})
	if err := os.WriteFile(mp, meta, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rp, make([]byte, 16), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenDense[uint16](context.Background(), d, id, Box{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("OpenDense: %v, want ErrCorrupt", err)
	}
	// The bounds the file holds open and read.
	meta, _ = json.Marshal(diskMeta{ID: id.String(), Elem: Uint16, Bounds: Rect(0, 0, 4, 2)})
	if err := os.WriteFile(mp, meta, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := OpenDense[uint16](context.Background(), d, id, Box{})
	if err != nil {
		t.Fatal(err)
	}
	if data, err := r.Data(context.Background()); err != nil || len(data) != 8 {
		t.Fatalf("Data: %d elements, %v", len(data), err)
	}
}

// A box whose extent or element count overflows an int is invalid (its
// Len wrapped around, to a small or negative count).
func TestBoxValidateRefusesOverflow(t *testing.T) {
	const big = 1 << 62
	for _, b := range []Box{
		Span(-big, big),                    // extent overflows
		Rect(0, 0, 1<<32, 1<<32),           // 2^64 elements
		Cube(0, 0, 0, 1<<20, 1<<20, 1<<20), // 2^60 elements
	} {
		if err := b.Validate(); !errors.Is(err, ErrBadBox) {
			t.Errorf("%v: %v, want ErrBadBox", b, err)
		}
	}
	if err := Cube(0, 0, 0, 1<<19, 1<<20, 1<<20).Validate(); err != nil {
		t.Errorf("a box of 2^59 elements: %v", err)
	}
}

// fuzzBox makes a box of dims 1 to 3 from fuzz integers.
func fuzzBox(dims uint8, x0, y0, x1, y1 int16) Box {
	switch dims % 3 {
	case 0:
		return Span(int(x0), int(x1))
	case 1:
		return Rect(int(x0), int(y0), int(x1), int(y1))
	}
	return Cube(int(x0), int(y0), 0, int(x1), int(y1), 2)
}

// regionErr reports whether err is one of the errors a hostile store may
// give: corrupt data or metadata, a bad box, a type or bounds mismatch.
func regionErr(err error) bool {
	for _, e := range []error{ErrCorrupt, ErrBadBox, ErrType, ErrOutOfBounds, ErrNotFound, ErrBadID} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// FuzzOpenDense stores fuzzed metadata and an array file of fuzzed length
// in a Disk storage and opens them with OpenDense: it never panics, every
// refusal is one of the package's errors, and a region that opens reads
// exactly its ROI's elements, no more than the array file holds (bounded
// allocation), equal to the file's bytes.
func FuzzOpenDense(f *testing.F) {
	fuzzrun.Prepare(f)
	id := ID{Name: "d", Type: Dense2D}
	for _, b := range []Box{Rect(0, 0, 4, 3), Rect(-2, 5, 3, 7), Rect(0, 0, 1<<20, 1<<20), {Dims: 2, Lo: [3]int{0, 0, 0}, Hi: [3]int{1 << 62, 4, 1}}} {
		meta, _ := json.Marshal(diskMeta{ID: id.String(), Elem: Uint16, Bounds: b})
		f.Add(meta, uint16(2*b.Len()), uint8(0), int16(0), int16(0), int16(0), int16(0))
	}
	f.Add([]byte(`{"ID":"d/dense2d/t0/v0","Elem":2,"Bounds":{"Dims":2,"Lo":[0,0,0],"Hi":[3,3,1]}}`), uint16(18), uint8(1), int16(1), int16(1), int16(2), int16(3))
	dir := f.TempDir()
	d, err := NewDisk(dir)
	if err != nil {
		f.Fatal(err)
	}
	mp, rp := d.paths(id)
	f.Fuzz(func(t *testing.T, meta []byte, rawLen uint16, dims uint8, x0, y0, x1, y1 int16) {
		meta = meta[:min(len(meta), 512)] // inputs stay small, so minimizing is fast
		raw := make([]byte, rawLen)
		for i := range raw {
			raw[i] = byte(i * 7)
		}
		if err := os.WriteFile(mp, meta, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(rp, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		var roi Box
		if dims != 0 {
			roi = fuzzBox(dims, x0, y0, x1, y1)
		}
		r, err := OpenDense[uint16](context.Background(), d, id, roi)
		if err != nil {
			if !regionErr(err) {
				t.Fatalf("OpenDense: %v wraps none of the package's errors", err)
			}
			return
		}
		b, roi := r.Bounds(), r.ROI()
		if b.Validate() != nil || !b.Contains(roi) || int64(b.Len())*2 != int64(len(raw)) {
			t.Fatalf("opened bounds %v, ROI %v over %d bytes", b, roi, len(raw))
		}
		data, err := r.Data(context.Background())
		if err != nil {
			t.Fatalf("Data of an opened region: %v", err)
		}
		if len(data) != roi.Len() {
			t.Fatalf("ROI %v: %d elements", roi, len(data))
		}
		w := b.Hi[0] - b.Lo[0]
		i := 0
		for y := roi.Lo[1]; y < roi.Hi[1]; y++ {
			for x := roi.Lo[0]; x < roi.Hi[0]; x++ {
				off := 2 * ((y-b.Lo[1])*w + x - b.Lo[0])
				if want := binary.LittleEndian.Uint16(raw[off:]); data[i] != want {
					t.Fatalf("element (%d, %d) is %d, the file holds %d", x, y, data[i], want)
				}
				i++
			}
		}
	})
}

// fuzzObjectSeeds are encoded sparse and polygon objects.
func fuzzObjectSeeds() [][]byte {
	return [][]byte{
		encodeObject(&object{id: ID{Name: "s", Type: Sparse2D}, elem: Uint16, bounds: Rect(0, 0, 4, 4),
			coords: [][3]int{{1, 0, 0}, {2, 3, 0}}, vals: []byte{1, 0, 2, 0}}),
		encodeObject(&object{id: ID{Name: "s", Type: Sparse3D}, elem: Uint16, bounds: Cube(0, 0, 0, 2, 2, 2),
			coords: [][3]int{{1, 1, 1}}, vals: []byte{9, 9}}),
		encodeObject(&object{id: ID{Name: "p", Type: Polygons}, elem: Float64, bounds: Rect(0, 0, 100, 100),
			polys: []Polygon{{ID: 3, Ring: []Point{{1, 1}, {5, 1}, {3, 4}}}, {ID: 4, Ring: []Point{{50, 50}, {60, 55}, {52, 70}}}}}),
	}
}

// withChecksum returns b, with a valid checksum appended if fix: the
// checksum stops most mutations at the door.
func withChecksum(b []byte, fix bool) []byte {
	if !fix {
		return b
	}
	return binary.LittleEndian.AppendUint32(slices.Clone(b), crc32.ChecksumIEEE(b))
}

// FuzzOpenSparse stores a fuzzed object file (with a valid checksum
// appended if fix) in a Disk storage and opens it with OpenSparse (2-D or
// 3-D): it never panics, every refusal is one
// of the package's errors, and the entries read lie in the ROI, each once.
func FuzzOpenSparse(f *testing.F) {
	fuzzrun.Prepare(f)
	for _, s := range fuzzObjectSeeds() {
		f.Add(s, false, false, uint8(1), int16(0), int16(0), int16(3), int16(4))
		f.Add(s, false, true, uint8(2), int16(0), int16(0), int16(3), int16(4))
	}
	d, err := NewDisk(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, obj []byte, fix, is3D bool, dims uint8, x0, y0, x1, y1 int16) {
		obj = obj[:min(len(obj), 1024)] // inputs stay small, so minimizing is fast
		kind := Sparse2D
		if is3D {
			kind = Sparse3D
		}
		id := ID{Name: "s", Type: kind}
		if err := os.WriteFile(d.objPath(id), withChecksum(obj, fix), 0o644); err != nil {
			t.Fatal(err)
		}
		var roi Box
		if dims != 0 {
			roi = fuzzBox(dims, x0, y0, x1, y1)
		}
		s, err := OpenSparse[uint16](context.Background(), d, id, roi)
		if err == nil {
			roi = s.ROI()
			if !s.Bounds().Contains(roi) {
				t.Fatalf("ROI %v outside bounds %v", roi, s.Bounds())
			}
			var es []Entry[uint16]
			if es, err = s.Query(context.Background(), roi); err == nil {
				seen := map[[3]int]bool{}
				for _, e := range es {
					if !roi.ContainsPoint(e.X, e.Y, e.Z) || seen[[3]int{e.X, e.Y, e.Z}] {
						t.Fatalf("entry %+v outside ROI %v or twice", e, roi)
					}
					seen[[3]int{e.X, e.Y, e.Z}] = true
				}
			}
		}
		if err != nil && !regionErr(err) {
			t.Fatalf("%v: %v wraps none of the package's errors", kind, err)
		}
	})
}

// FuzzOpenPolygonSet is FuzzOpenSparse for polygon sets: the polygons read
// intersect the ROI, lie in the bounds and have distinct IDs.
func FuzzOpenPolygonSet(f *testing.F) {
	fuzzrun.Prepare(f)
	for _, s := range fuzzObjectSeeds() {
		f.Add(s, false, uint8(1), int16(0), int16(0), int16(55), int16(60))
	}
	d, err := NewDisk(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	id := ID{Name: "p", Type: Polygons}
	f.Fuzz(func(t *testing.T, obj []byte, fix bool, dims uint8, x0, y0, x1, y1 int16) {
		obj = obj[:min(len(obj), 1024)] // inputs stay small, so minimizing is fast
		if err := os.WriteFile(d.objPath(id), withChecksum(obj, fix), 0o644); err != nil {
			t.Fatal(err)
		}
		var roi Box
		if dims != 0 {
			roi = Rect(int(x0), int(y0), int(x1), int(y1))
		}
		s, err := OpenPolygonSet(context.Background(), d, id, roi)
		if err == nil {
			var ps []Polygon
			if ps, err = s.Polygons(context.Background()); err == nil {
				seen := map[int64]bool{}
				for _, p := range ps {
					if !p.Intersects(s.ROI()) || checkPolygon(id, s.Bounds(), p) != nil || seen[p.ID] {
						t.Fatalf("polygon %+v: outside ROI %v or bounds %v, or twice", p, s.ROI(), s.Bounds())
					}
					seen[p.ID] = true
				}
			}
		}
		if err != nil && !regionErr(err) {
			t.Fatalf("%v wraps none of the package's errors", err)
		}
	})
}
