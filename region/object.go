package region

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
)

// ErrCorrupt reports stored sparse-region or polygon-set data that does not
// decode: a bad header, a length that disagrees with the data, a checksum
// mismatch, or values the format does not allow.
var ErrCorrupt = errors.New("corrupt region data")

// ObjectStorage keeps the regions that are not dense arrays — sparse
// regions and polygon sets — as whole objects in the binary format of
// [Sparse] and [PolygonSet]. [Memory] and [Disk] implement it beside
// [Storage].
//
// Implementations are safe for concurrent use; UpdateObject is atomic with
// respect to the other calls on the same storage value.
type ObjectStorage interface {
	// ReadObject returns the encoded object id ([ErrNotFound] if absent).
	ReadObject(ctx context.Context, id ID) ([]byte, error)
	// UpdateObject replaces the object id by f(old), where old is the
	// stored encoding, or nil if there is none. If f fails nothing is
	// stored and its error is returned.
	UpdateObject(ctx context.Context, id ID, f func(old []byte) ([]byte, error)) error
}

// objMagic starts every encoded object; objVersion is the format version.
const (
	objMagic   = "RTOB"
	objVersion = 1
	// objHeaderMin is the size of the fixed part of the header: magic,
	// version, kind, elem, dims, name length.
	objHeaderMin = 4 + 2 + 1 + 1 + 1 + 2
	// maxPolyPoints bounds the vertices of one polygon.
	maxPolyPoints = 1 << 24
)

// object is the decoded form of a sparse region or a polygon set.
type object struct {
	id     ID
	elem   ElemType // sparse: element type; polygons: Float64
	bounds Box
	coords [][3]int  // sparse: sorted by (z, y, x), no duplicates
	vals   []byte    // sparse: len(coords) little-endian elements
	polys  []Polygon // polygons: sorted by ID, no duplicates
}

// encodeObject writes o in the format:
//
//	"RTOB" version:u16 kind:u8 elem:u8 dims:u8 namelen:u16 name
//	lo[dims]:i64 hi[dims]:i64 count:u64
//	sparse:   count x (coord[dims]:i64 value:elem)
//	polygons: count x (id:i64 n:u32 n x (x:f64 y:f64))
//	crc32(IEEE, everything before):u32
//
// all little-endian; name is ID.String. Entries are sorted (sparse by z,
// y, x; polygons by ID) with no duplicates, so an object has one encoding.
func encodeObject(o *object) []byte {
	var b []byte
	le := binary.LittleEndian
	b = append(b, objMagic...)
	b = le.AppendUint16(b, objVersion)
	b = append(b, byte(o.id.Type), byte(o.elem), byte(o.bounds.Dims))
	name := o.id.String()
	b = le.AppendUint16(b, uint16(len(name)))
	b = append(b, name...)
	for i := range o.bounds.Dims {
		b = le.AppendUint64(b, uint64(int64(o.bounds.Lo[i])))
	}
	for i := range o.bounds.Dims {
		b = le.AppendUint64(b, uint64(int64(o.bounds.Hi[i])))
	}
	if o.id.Type == Polygons {
		b = le.AppendUint64(b, uint64(len(o.polys)))
		for _, p := range o.polys {
			b = le.AppendUint64(b, uint64(p.ID))
			b = le.AppendUint32(b, uint32(len(p.Ring)))
			for _, q := range p.Ring {
				b = le.AppendUint64(b, math.Float64bits(q.X))
				b = le.AppendUint64(b, math.Float64bits(q.Y))
			}
		}
	} else {
		b = le.AppendUint64(b, uint64(len(o.coords)))
		es := o.elem.Size()
		for i, c := range o.coords {
			for j := range o.bounds.Dims {
				b = le.AppendUint64(b, uint64(int64(c[j])))
			}
			b = append(b, o.vals[i*es:(i+1)*es]...)
		}
	}
	return le.AppendUint32(b, crc32.ChecksumIEEE(b))
}

// reader decodes the fields of an object, failing once on short input.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = fmt.Errorf("region: object truncated (need %d bytes, have %d): %w", n, len(r.b), ErrCorrupt)
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

// uint reads an n-byte little-endian unsigned integer (0 after an error).
func (r *reader) uint(n int) uint64 {
	var x uint64
	for i, c := range r.take(n) {
		x |= uint64(c) << (8 * i)
	}
	return x
}

func (r *reader) u8() byte    { return byte(r.uint(1)) }
func (r *reader) u16() uint16 { return uint16(r.uint(2)) }
func (r *reader) u32() uint32 { return uint32(r.uint(4)) }
func (r *reader) u64() uint64 { return r.uint(8) }

// coord reads a coordinate, refusing values that do not fit an int on
// 32-bit machines or would overflow box arithmetic.
func (r *reader) coord() int {
	v := int64(r.u64())
	if r.err == nil && (v < math.MinInt32 || v > math.MaxInt32) {
		r.err = fmt.Errorf("region: object coordinate %d out of range: %w", v, ErrCorrupt)
	}
	return int(v)
}

// decodeObject parses the format written by encodeObject. It checks the
// checksum and every length against the input before allocating, so a
// corrupt, truncated or hostile input gives an error wrapping [ErrCorrupt]
// and allocates at most a small multiple of len(b).
func decodeObject(b []byte) (*object, error) {
	if len(b) < objHeaderMin+4 {
		return nil, fmt.Errorf("region: object of %d bytes is shorter than its header: %w", len(b), ErrCorrupt)
	}
	if string(b[:4]) != objMagic {
		return nil, fmt.Errorf("region: object does not start with %q: %w", objMagic, ErrCorrupt)
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if got := crc32.ChecksumIEEE(body); got != sum {
		return nil, fmt.Errorf("region: object checksum %08x, stored %08x: %w", got, sum, ErrCorrupt)
	}
	r := &reader{b: body[4:]}
	if v := r.u16(); v != objVersion {
		return nil, fmt.Errorf("region: object format version %d, want %d: %w", v, objVersion, ErrCorrupt)
	}
	o := &object{}
	kind, elem, dims := Kind(r.u8()), ElemType(r.u8()), int(r.u8())
	name := string(r.take(int(r.u16())))
	if r.err != nil {
		return nil, r.err
	}
	id, err := ParseID(name)
	if err != nil {
		return nil, fmt.Errorf("region: object header: %w: %w", err, ErrCorrupt)
	}
	if id.Type != kind {
		return nil, fmt.Errorf("region: object %v has kind byte %d: %w", id, int(kind), ErrCorrupt)
	}
	o.id, o.elem = id, elem
	var wantDims int
	switch kind {
	case Sparse2D, Polygons:
		wantDims = 2
	case Sparse3D:
		wantDims = 3
	default:
		return nil, fmt.Errorf("region: object %v: kind %v is not stored as an object: %w", id, kind, ErrCorrupt)
	}
	if dims != wantDims {
		return nil, fmt.Errorf("region: object %v has %d dimensions, want %d: %w", id, dims, wantDims, ErrCorrupt)
	}
	if kind == Polygons && elem != Float64 || elem.Size() == 0 {
		return nil, fmt.Errorf("region: object %v has element type %v: %w", id, elem, ErrCorrupt)
	}
	o.bounds = Box{Dims: dims, Hi: [3]int{1, 1, 1}}
	for i := range dims {
		o.bounds.Lo[i] = r.coord()
	}
	for i := range dims {
		o.bounds.Hi[i] = r.coord()
	}
	if r.err != nil {
		return nil, r.err
	}
	if err := o.bounds.Validate(); err != nil {
		return nil, fmt.Errorf("region: object %v: %w: %w", id, err, ErrCorrupt)
	}
	count := r.u64()
	if r.err != nil {
		return nil, r.err
	}
	if kind == Polygons {
		// Each polygon takes at least 12 + 3*16 bytes.
		if count > uint64(len(r.b))/60 {
			return nil, fmt.Errorf("region: object %v claims %d polygons in %d bytes: %w", id, count, len(r.b), ErrCorrupt)
		}
		o.polys = make([]Polygon, 0, count)
		for range count {
			p := Polygon{ID: int64(r.u64())}
			n := r.u32()
			if r.err != nil {
				return nil, r.err
			}
			if n < 3 || n > maxPolyPoints || uint64(n) > uint64(len(r.b))/16 {
				return nil, fmt.Errorf("region: object %v: polygon %d claims %d points in %d bytes: %w", id, p.ID, n, len(r.b), ErrCorrupt)
			}
			p.Ring = make([]Point, n)
			for j := range p.Ring {
				p.Ring[j] = Point{math.Float64frombits(r.u64()), math.Float64frombits(r.u64())}
			}
			if err := checkPolygon(id, o.bounds, p); err != nil {
				return nil, fmt.Errorf("%w: %w", err, ErrCorrupt)
			}
			if k := len(o.polys); k > 0 && o.polys[k-1].ID >= p.ID {
				return nil, fmt.Errorf("region: object %v: polygon IDs not increasing (%d after %d): %w", id, p.ID, o.polys[k-1].ID, ErrCorrupt)
			}
			o.polys = append(o.polys, p)
		}
	} else {
		es := elem.Size()
		rec := uint64(8*dims + es)
		if count > uint64(len(r.b))/rec {
			return nil, fmt.Errorf("region: object %v claims %d entries in %d bytes: %w", id, count, len(r.b), ErrCorrupt)
		}
		o.coords = make([][3]int, count)
		o.vals = make([]byte, 0, int(count)*es)
		for i := range o.coords {
			var c [3]int
			for j := range dims {
				c[j] = r.coord()
			}
			o.vals = append(o.vals, r.take(es)...)
			if r.err != nil {
				return nil, r.err
			}
			if !o.bounds.ContainsPoint(c[0], c[1], c[2]) {
				return nil, fmt.Errorf("region: object %v: entry %v outside bounds %v: %w", id, c[:dims], o.bounds, ErrCorrupt)
			}
			if i > 0 && cmpCoord(o.coords[i-1], c) >= 0 {
				return nil, fmt.Errorf("region: object %v: entries not in increasing (z, y, x) order at %v: %w", id, c[:dims], ErrCorrupt)
			}
			o.coords[i] = c
		}
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("region: object %v has %d trailing bytes: %w", id, len(r.b), ErrCorrupt)
	}
	return o, nil
}

// cmpCoord orders coordinates by z, then y, then x (row-major order).
func cmpCoord(a, b [3]int) int {
	for i := 2; i >= 0; i-- {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// objectMeta returns the identifier, element type and bounds stored in an
// encoded object.
func objectMeta(b []byte) (Meta, error) {
	o, err := decodeObject(b)
	if err != nil {
		return Meta{}, err
	}
	return Meta{ID: o.id, Elem: o.elem, Bounds: o.bounds}, nil
}

// sameObjectMeta checks that an update keeps the kind, element type and
// bounds of the stored object.
func sameObjectMeta(old *object, id ID, elem ElemType, bounds Box) error {
	if old.id != id || old.elem != elem || old.bounds != bounds {
		return fmt.Errorf("region: %v stored as %v %v, written as %v %v: %w", id, old.elem, old.bounds, elem, bounds, ErrExists)
	}
	return nil
}

// openObject reads the object id stored in in for an Open function and
// checks it: it must name id, have element type elem (any when elem is 0)
// and suit kinds with roi (see checkObjectRegion). It returns the completed
// id, the stored bounds and the ROI.
func openObject(ctx context.Context, in ObjectStorage, id ID, roi Box, elem ElemType, kinds ...Kind) (ID, Box, Box, error) {
	if in == nil {
		return id, Box{}, roi, fmt.Errorf("region: open %v: %w", id, ErrNoStorage)
	}
	if err := id.Validate(); err != nil {
		return id, Box{}, roi, err
	}
	b, err := in.ReadObject(ctx, id)
	if err != nil {
		return id, Box{}, roi, fmt.Errorf("region: open: %w", err)
	}
	m, err := objectMeta(b)
	if err != nil {
		return id, Box{}, roi, fmt.Errorf("region: open %v: %w", id, err)
	}
	if m.ID != id {
		return id, Box{}, roi, fmt.Errorf("region: open %v: stored object names %v: %w", id, m.ID, ErrCorrupt)
	}
	if elem != 0 && m.Elem != elem {
		return id, Box{}, roi, fmt.Errorf("region: open %v: stored as %v, opened as %v: %w", id, m.Elem, elem, ErrType)
	}
	id, roi, err = checkObjectRegion(id, m.Bounds, roi, kinds...)
	return id, m.Bounds, roi, err
}

// readObject reads the object id from in for a region's first access and
// checks that it keeps elem and bounds; errors name the roi being read.
func readObject(ctx context.Context, in ObjectStorage, id ID, elem ElemType, bounds, roi Box) (*object, error) {
	if in == nil {
		return nil, fmt.Errorf("region: read %v: %w", id, ErrNoStorage)
	}
	b, err := in.ReadObject(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("region: read ROI %v: %w", roi, err)
	}
	o, err := decodeObject(b)
	if err != nil {
		return nil, fmt.Errorf("region: read %v: %w", id, err)
	}
	if err := sameObjectMeta(o, id, elem, bounds); err != nil {
		return nil, err
	}
	return o, nil
}

// commitObject replaces the object id in out by the one merge builds from
// the stored object (nil when there is none), which must keep elem and
// bounds ([ErrExists]).
func commitObject(ctx context.Context, out ObjectStorage, id ID, elem ElemType, bounds Box, merge func(prev *object) (*object, error)) error {
	err := out.UpdateObject(ctx, id, func(old []byte) ([]byte, error) {
		var prev *object
		if old != nil {
			var err error
			if prev, err = decodeObject(old); err != nil {
				return nil, err
			}
			if err := sameObjectMeta(prev, id, elem, bounds); err != nil {
				return nil, err
			}
		}
		o, err := merge(prev)
		if err != nil {
			return nil, err
		}
		return encodeObject(o), nil
	})
	if err != nil {
		return fmt.Errorf("region: commit: %w", err)
	}
	return nil
}

// isObjectKind reports whether regions of kind k are stored as objects.
func isObjectKind(k Kind) bool { return k == Sparse2D || k == Sparse3D || k == Polygons }

// equalObjects reports whether two encodings are the same (for tests).
func equalObjects(a, b []byte) bool { return bytes.Equal(a, b) }

// sortPolygons sorts polygons by ID.
func sortPolygons(ps []Polygon) {
	slices.SortFunc(ps, func(a, b Polygon) int { return cmp.Compare(a.ID, b.ID) })
}
