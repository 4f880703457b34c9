package region

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"slices"
	"testing"

	"github.com/gohtgs/htgs/internal/fuzzrun"
)

// FuzzParseID checks that ParseID accepts exactly the strings ID.String
// writes: whatever it accepts is a valid identifier that formats back to the
// same string, and whatever it rejects is rejected with ErrBadID.
func FuzzParseID(f *testing.F) {
	fuzzrun.Prepare(f)
	for _, s := range []string{
		"slide::mask/dense2d/t4/v2", "a/dense3d/t0/v0", "x.y-z_1/polygons/t12/v345",
		"", "a/dense2d/t1", "a/cube/t1/v1", "a/dense2d/x1/v1", "a/dense2d/t1/vX",
		"a b/dense2d/t0/v0", "a/dense2d/t-1/v0", "a::b::c/dense2d/t0/v0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseID(s)
		if err != nil {
			if !errors.Is(err, ErrBadID) {
				t.Fatalf("ParseID(%q) = %v, want an error wrapping ErrBadID", s, err)
			}
			return
		}
		if verr := id.Validate(); verr != nil {
			t.Fatalf("ParseID(%q) = %+v, which does not validate: %v", s, id, verr)
		}
		if got := id.String(); got != s {
			t.Fatalf("ParseID(%q) = %+v, which formats as %q: two spellings of one identifier", s, id, got)
		}
		again, err := ParseID(id.String())
		if err != nil || again != id {
			t.Fatalf("ParseID(%q) = %+v, %v; want %+v", id.String(), again, err, id)
		}
	})
}

// FuzzDecodeObject checks that the decoder of the sparse and polygon
// on-disk format never panics, reports every rejection as ErrCorrupt, and
// accepts only canonical encodings: whatever decodes encodes back to the
// same bytes.
func FuzzDecodeObject(f *testing.F) {
	fuzzrun.Prepare(f)
	f.Add(encodeObject(&object{id: ID{Name: "s", Type: Sparse2D}, elem: Uint16, bounds: Rect(0, 0, 4, 4),
		coords: [][3]int{{1, 0, 0}, {2, 3, 0}}, vals: []byte{1, 0, 2, 0}}))
	f.Add(encodeObject(&object{id: ID{Name: "v", Type: Sparse3D}, elem: Float64, bounds: Cube(0, 0, 0, 2, 2, 2),
		coords: [][3]int{{1, 1, 1}}, vals: make([]byte, 8)}))
	f.Add(encodeObject(&object{id: ID{Name: "n::p", Type: Polygons}, elem: Float64, bounds: Rect(0, 0, 100, 100),
		polys: []Polygon{{ID: 3, Ring: []Point{{1, 1}, {5, 1}, {3, 4}}}}}))
	f.Add([]byte("RTOB"))
	check := func(t *testing.T, b []byte) {
		o, err := decodeObject(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decodeObject: %v, want an error wrapping ErrCorrupt", err)
			}
			return
		}
		if again := encodeObject(o); !equalObjects(again, b) {
			t.Fatalf("decoded object re-encodes differently:\n%x\n%x", b, again)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		check(t, b)
		// The checksum stops most mutations at the door: also decode the
		// input with a valid checksum appended, to reach the parser.
		check(t, binary.LittleEndian.AppendUint32(slices.Clone(b), crc32.ChecksumIEEE(b)))
	})
}
