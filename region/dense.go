package region

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"unsafe"
)

// Region is a data region: a dense array, a sparse array or a polygon set
// covering a bounding box of a region template, of which only the region
// of interest (ROI) is held in memory. A region is bound to an
// input storage it is read from and an output storage its result is written
// to; either may be nil.
//
// Dense (dense 2-D and 3-D arrays), Sparse (sparse arrays) and PolygonSet
// (sets of polygons) implement it.
type Region interface {
	// ID returns the region's identifier.
	ID() ID
	// Elem returns the element type.
	Elem() ElemType
	// Bounds returns the region's bounding box: the extent of the stored
	// array, in template coordinates.
	Bounds() Box
	// ROI returns the region of interest: the part of Bounds held in memory.
	ROI() Box
	// Bytes returns the in-memory size of the ROI's data.
	Bytes() int64
	// Loaded reports whether the ROI's data is in memory.
	Loaded() bool
	// Stage reads the ROI from the input storage unless it is already in
	// memory. It is the eager read; the accessors of a region do the same
	// lazily on first use.
	Stage(ctx context.Context) error
	// Commit writes the ROI to the output storage.
	Commit(ctx context.Context) error
}

// Dense is a dense 1-D, 2-D or 3-D data region with elements of type T, stored
// row-major over its ROI (x fastest, then y, then z).
//
// Its data can also live on devices (GPUs) while operations there reuse
// it: Upload makes it resident on a device, DeviceWrote records that an
// operation there changed it, Download (or any host accessor) brings the
// current value back, Where tells where it is.
//
// A Dense is safe for concurrent use by readers. Writers must be ordered
// with readers by the dataflow: the stages that declare a region as an
// output run before those that read it.
type Dense[T Elem] struct {
	mu      sync.Mutex
	id      ID
	bounds  Box
	roi     Box
	in, out Storage
	data    []T
	buf     []T // the caller's memory for the ROI (NewDenseIn, BindDenseIn), nil if none
	loaded  bool
	stale   bool       // the current value is on a device only (see resident.go)
	copies  []*devCopy // device copies
}

// Compile-time check that Dense implements Region.
var _ Region = (*Dense[uint8])(nil)

// checkDense validates id and bounds for a dense region, filling the kind
// (Dense1D, Dense2D or Dense3D) from the dimensionality when id.Type is
// zero.
func checkDense(id ID, bounds Box) (ID, error) {
	if err := bounds.Validate(); err != nil {
		return id, fmt.Errorf("region: %q: %w", id.Name, err)
	}
	want := denseKind(bounds.Dims)
	if id.Type == 0 {
		id.Type = want
	}
	if err := id.Validate(); err != nil {
		return id, err
	}
	if id.Type != want {
		return id, fmt.Errorf("region: %v with %d-D bounds %v is not %v: %w", id, bounds.Dims, bounds, want, ErrType)
	}
	return id, nil
}

// NewDense returns an in-memory dense region over bounds, zero-filled, with
// the ROI equal to the bounds. A zero id.Type is set to Dense1D, Dense2D or
// Dense3D according to the dimensionality of bounds.
func NewDense[T Elem](id ID, bounds Box) (*Dense[T], error) {
	id, err := checkDense(id, bounds)
	if err != nil {
		return nil, err
	}
	return &Dense[T]{id: id, bounds: bounds, roi: bounds, data: make([]T, bounds.Len()), loaded: true}, nil
}

// NewDenseROI returns an in-memory dense region over bounds that holds only
// roi, zero-filled: the partition of a larger region that one stage
// instance produces and commits. roi must lie inside bounds
// ([ErrOutOfBounds]).
func NewDenseROI[T Elem](id ID, bounds, roi Box) (*Dense[T], error) {
	id, err := checkDense(id, bounds)
	if err != nil {
		return nil, err
	}
	if err := checkROI(id, bounds, roi); err != nil {
		return nil, err
	}
	return &Dense[T]{id: id, bounds: bounds, roi: roi, data: make([]T, roi.Len()), loaded: true}, nil
}

// NewDenseIn is NewDenseROI on memory the caller provides: the ROI's
// elements live in buf, which must hold exactly roi.Len() of them, and
// start as buf's current contents (not zeroed). It is for memory with
// properties Go's heap has not, such as page-locked host memory, from
// which devices copy at the bus's full speed. The caller must not use
// buf otherwise, nor free or reuse it, while the region is in use.
// SetROI moves the data to memory of the region's own.
func NewDenseIn[T Elem](id ID, bounds, roi Box, buf []T) (*Dense[T], error) {
	id, err := checkDense(id, bounds)
	if err != nil {
		return nil, err
	}
	if err := checkROI(id, bounds, roi); err != nil {
		return nil, err
	}
	if err := checkBuf(id, roi, len(buf)); err != nil {
		return nil, err
	}
	return &Dense[T]{id: id, bounds: bounds, roi: roi, data: buf, buf: buf, loaded: true}, nil
}

// checkBuf checks that a caller's buffer of n elements holds roi exactly.
func checkBuf(id ID, roi Box, n int) error {
	if n != roi.Len() {
		return fmt.Errorf("region: %v: a buffer of %d elements for a ROI of %d: %w", id, n, roi.Len(), ErrOutOfBounds)
	}
	return nil
}

// BindDense returns a dense region over bounds whose data lives in storage
// in; only the ROI is read, lazily on first access or eagerly by Stage. The
// ROI must lie inside bounds ([ErrOutOfBounds]).
func BindDense[T Elem](id ID, bounds, roi Box, in Storage) (*Dense[T], error) {
	id, err := checkDense(id, bounds)
	if err != nil {
		return nil, err
	}
	if in == nil {
		return nil, fmt.Errorf("region: bind %v: %w", id, ErrNoStorage)
	}
	if err := checkROI(id, bounds, roi); err != nil {
		return nil, err
	}
	return &Dense[T]{id: id, bounds: bounds, roi: roi, in: in}, nil
}

// BindDenseIn is BindDense on memory the caller provides: the ROI is read
// into buf, which must hold exactly roi.Len() elements, under the same
// terms as NewDenseIn's.
func BindDenseIn[T Elem](id ID, bounds, roi Box, in Storage, buf []T) (*Dense[T], error) {
	d, err := BindDense[T](id, bounds, roi, in)
	if err != nil {
		return nil, err
	}
	if err := checkBuf(d.id, roi, len(buf)); err != nil {
		return nil, err
	}
	d.buf = buf
	return d, nil
}

// OpenDense binds a dense region to the region id already in storage in,
// taking its bounds from the storage. A zero roi means the whole bounds.
// The stored element type must be T ([ErrType]).
func OpenDense[T Elem](ctx context.Context, in Storage, id ID, roi Box) (*Dense[T], error) {
	if err := id.Validate(); err != nil {
		return nil, err
	}
	m, err := in.Stat(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("region: open: %w", err)
	}
	if m.Elem != ElemOf[T]() {
		return nil, fmt.Errorf("region: open %v: stored as %v, opened as %v: %w", id, m.Elem, ElemOf[T](), ErrType)
	}
	if roi.Dims == 0 {
		roi = m.Bounds
	}
	return BindDense[T](id, m.Bounds, roi, in)
}

func checkROI(id ID, bounds, roi Box) error {
	if err := roi.Validate(); err != nil {
		return fmt.Errorf("region: ROI of %v: %w", id, err)
	}
	if !bounds.Contains(roi) {
		return fmt.Errorf("region: ROI %v of %v is outside its bounds %v: %w", roi, id, bounds, ErrOutOfBounds)
	}
	return nil
}

// ID implements Region.
func (d *Dense[T]) ID() ID { return d.id }

// Elem implements Region.
func (d *Dense[T]) Elem() ElemType { return ElemOf[T]() }

// Bounds implements Region.
func (d *Dense[T]) Bounds() Box { return d.bounds }

// ROI implements Region.
func (d *Dense[T]) ROI() Box {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.roi
}

// Bytes implements Region.
func (d *Dense[T]) Bytes() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return int64(d.roi.Len()) * int64(unsafe.Sizeof(T(0)))
}

// Loaded implements Region: it reports whether host memory holds the
// ROI's current data (false while the current value is on a device only).
func (d *Dense[T]) Loaded() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.loaded && !d.stale
}

// Input returns the storage the region is read from (nil if none).
func (d *Dense[T]) Input() Storage { return d.in }

// Output returns the storage Commit writes to (nil if none).
func (d *Dense[T]) Output() Storage {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.out
}

// SetOutput sets the storage Commit writes to.
func (d *Dense[T]) SetOutput(s Storage) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.out = s
}

// Meta returns the region's storage metadata.
func (d *Dense[T]) Meta() Meta { return Meta{ID: d.id, Elem: ElemOf[T](), Bounds: d.bounds} }

// SetROI changes the region of interest. The new ROI must lie inside the
// bounds ([ErrOutOfBounds]). If the data is in memory and the new ROI lies
// inside the old one, the data is cropped (shrinking a ROI to drop ghost
// cells, say); otherwise the data is dropped and read again on next access,
// which needs an input storage ([ErrNoStorage]). Device copies are freed;
// if only devices hold the current value, Download first
// ([ErrNotResident]).
func (d *Dense[T]) SetROI(roi Box) error {
	if err := checkROI(d.id, d.bounds, roi); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stale {
		return fmt.Errorf("region: ROI of %v: its data is on %d device(s) only, download it first: %w", d.id, d.validCopies(), ErrNotResident)
	}
	if err := d.dropCopies(); err != nil {
		return err
	}
	switch {
	case !d.loaded:
		d.roi = roi
	case d.roi.Contains(roi):
		cropped := make([]T, roi.Len())
		s := d.roi.Shape()
		n := roi.Shape()
		for z := range n[2] {
			for y := range n[1] {
				src := ((roi.Lo[2]-d.roi.Lo[2]+z)*s[1]+roi.Lo[1]-d.roi.Lo[1]+y)*s[0] + roi.Lo[0] - d.roi.Lo[0]
				copy(cropped[(z*n[1]+y)*n[0]:][:n[0]], d.data[src:src+n[0]])
			}
		}
		d.roi, d.data, d.buf = roi, cropped, nil
	case d.in != nil:
		d.roi, d.data, d.buf, d.loaded = roi, nil, nil, false
	default:
		return fmt.Errorf("region: ROI %v of in-memory %v extends its ROI %v: %w", roi, d.id, d.roi, ErrNoStorage)
	}
	return nil
}

// Stage implements Region: it reads the ROI from the input storage unless
// the data is already in memory, and downloads it if its current value is
// on a device only.
func (d *Dense[T]) Stage(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.loadLocked(ctx)
}

func (d *Dense[T]) loadLocked(ctx context.Context) error {
	if d.loaded {
		return d.downloadLocked(ctx)
	}
	if d.in == nil {
		return fmt.Errorf("region: read %v: %w", d.id, ErrNoStorage)
	}
	data := d.hostMemory()
	buf, native := littleEndianBytes(data)
	if !native {
		buf = make([]byte, len(data)*int(unsafe.Sizeof(T(0))))
	}
	if err := d.in.Read(ctx, d.id, d.roi, buf); err != nil {
		return fmt.Errorf("region: read ROI %v: %w", d.roi, err)
	}
	if !native {
		decodeEach(data, buf)
	}
	d.data, d.loaded = data, true
	return nil
}

// hostMemory returns the memory the ROI's data is to be read into: the
// caller's buffer, else a new one.
func (d *Dense[T]) hostMemory() []T {
	if d.buf != nil {
		return d.buf
	}
	return make([]T, d.roi.Len())
}

// Commit implements Region: it writes the ROI to the output storage.
func (d *Dense[T]) Commit(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.out == nil {
		return fmt.Errorf("region: commit %v: %w", d.id, ErrNoStorage)
	}
	if err := d.loadLocked(ctx); err != nil {
		return err
	}
	buf, native := littleEndianBytes(d.data) // Write copies it, under d.mu
	if !native {
		buf = make([]byte, len(d.data)*int(unsafe.Sizeof(T(0))))
		encodeEach(buf, d.data)
	}
	if err := d.out.Write(ctx, d.Meta(), d.roi, buf); err != nil {
		return fmt.Errorf("region: commit: %w", err)
	}
	return nil
}

// Data returns the ROI's elements, row-major, reading them from the input
// storage first if they are not in memory (the lazy read), or downloading
// them if their current value is on a device only. The slice is the
// region's own storage: writes to it change the region (call HostWrote
// after changing a region that has device copies).
func (d *Dense[T]) Data(ctx context.Context) ([]T, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.loadLocked(ctx); err != nil {
		return nil, err
	}
	return d.data, nil
}

// index returns the offset of (x, y, z) in the ROI's data.
func (d *Dense[T]) index(x, y, z int) int {
	if !d.loaded || d.stale {
		panic(fmt.Sprintf("region: %v accessed before its data was read or downloaded (call Data or Stage first)", d.id))
	}
	if !d.roi.ContainsPoint(x, y, z) {
		panic(fmt.Sprintf("region: point (%d,%d,%d) outside the ROI %v of %v", x, y, z, d.roi, d.id))
	}
	s := d.roi.Shape()
	return ((z-d.roi.Lo[2])*s[1]+y-d.roi.Lo[1])*s[0] + x - d.roi.Lo[0]
}

// At returns the element at (x, y) of a 2-D region, in template
// coordinates. It panics, like a slice index, if the point lies outside the
// ROI or the data has not been read, or its current value is on a device
// only (call Data or Stage first).
func (d *Dense[T]) At(x, y int) T { return d.data[d.index(x, y, 0)] }

// Set sets the element at (x, y) of a 2-D region; it panics like At.
func (d *Dense[T]) Set(x, y int, v T) { d.data[d.index(x, y, 0)] = v }

// At1 returns the element at x of a 1-D region; it panics like At.
func (d *Dense[T]) At1(x int) T { return d.data[d.index(x, 0, 0)] }

// Set1 sets the element at x of a 1-D region; it panics like At.
func (d *Dense[T]) Set1(x int, v T) { d.data[d.index(x, 0, 0)] = v }

// At3 returns the element at (x, y, z); it panics like At.
func (d *Dense[T]) At3(x, y, z int) T { return d.data[d.index(x, y, z)] }

// Set3 sets the element at (x, y, z); it panics like At.
func (d *Dense[T]) Set3(x, y, z int, v T) { d.data[d.index(x, y, z)] = v }

// littleEndian reports whether this machine stores numbers little-endian
// (amd64, arm64 and most others): then the bytes of a []T are already
// those storages move.
func littleEndian() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}

// littleEndianBytes returns the memory of s as bytes, and true, when it
// already holds s's little-endian encoding (a little-endian machine);
// otherwise nil and false.
func littleEndianBytes[T Elem](s []T) ([]byte, bool) {
	if !littleEndian() {
		return nil, false
	}
	if len(s) == 0 {
		return []byte{}, true
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(T(0)))), true
}

// encode writes src as little-endian bytes into dst.
func encode[T Elem](dst []byte, src []T) {
	if b, ok := littleEndianBytes(src); ok {
		copy(dst, b)
		return
	}
	encodeEach(dst, src)
}

// encodeEach is encode element by element, on any machine.
func encodeEach[T Elem](dst []byte, src []T) {
	switch unsafe.Sizeof(T(0)) {
	case 1:
		for i := range src {
			dst[i] = *(*uint8)(unsafe.Pointer(&src[i]))
		}
	case 2:
		for i := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], *(*uint16)(unsafe.Pointer(&src[i])))
		}
	case 4:
		for i := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], *(*uint32)(unsafe.Pointer(&src[i])))
		}
	case 8:
		for i := range src {
			binary.LittleEndian.PutUint64(dst[8*i:], *(*uint64)(unsafe.Pointer(&src[i])))
		}
	}
}

// decode reads little-endian bytes from src into dst.
func decode[T Elem](dst []T, src []byte) {
	if b, ok := littleEndianBytes(dst); ok {
		copy(b, src)
		return
	}
	decodeEach(dst, src)
}

// decodeEach is decode element by element, on any machine.
func decodeEach[T Elem](dst []T, src []byte) {
	switch unsafe.Sizeof(T(0)) {
	case 1:
		for i := range dst {
			*(*uint8)(unsafe.Pointer(&dst[i])) = src[i]
		}
	case 2:
		for i := range dst {
			*(*uint16)(unsafe.Pointer(&dst[i])) = binary.LittleEndian.Uint16(src[2*i:])
		}
	case 4:
		for i := range dst {
			*(*uint32)(unsafe.Pointer(&dst[i])) = binary.LittleEndian.Uint32(src[4*i:])
		}
	case 8:
		for i := range dst {
			*(*uint64)(unsafe.Pointer(&dst[i])) = binary.LittleEndian.Uint64(src[8*i:])
		}
	}
}
