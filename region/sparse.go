package region

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"unsafe"
)

// Entry is one element of a sparse region: its coordinates (Z = 0 in 2-D)
// and value.
type Entry[T Elem] struct {
	X, Y, Z int
	V       T
}

// Sparse is a sparse 2-D or 3-D data region (kind Sparse2D or Sparse3D): a
// coordinate list of the elements that are set, with values of type T.
// Elements not set read as absent. Its ROI holds the entries inside it;
// Commit replaces the stored entries inside the ROI and keeps the others,
// so stage instances with disjoint ROIs may each commit their part.
//
// Its storage is an [ObjectStorage]; objects are kept in a versioned binary
// format (magic "RTOB", version, kind, element type, identifier, bounds,
// entry count, the entries sorted in row-major order, CRC-32) shared with
// [PolygonSet]. A Sparse is safe for concurrent use.
type Sparse[T Elem] struct {
	mu      sync.Mutex
	id      ID
	bounds  Box
	roi     Box
	in, out ObjectStorage
	m       map[[3]int]T
	loaded  bool
}

// Compile-time check that Sparse implements Region.
var _ Region = (*Sparse[float32])(nil)

// NewSparse returns an empty in-memory sparse region over bounds (2-D or
// 3-D) with roi as its region of interest (a zero roi means bounds). A zero
// id.Type is set to Sparse2D or Sparse3D from the dimensionality.
func NewSparse[T Elem](id ID, bounds, roi Box) (*Sparse[T], error) {
	id, roi, err := checkObjectRegion(id, bounds, roi, Sparse2D, Sparse3D)
	if err != nil {
		return nil, err
	}
	return &Sparse[T]{id: id, bounds: bounds, roi: roi, m: map[[3]int]T{}, loaded: true}, nil
}

// OpenSparse binds a sparse region to the region id stored in in, taking
// its bounds from the storage; only the entries inside roi (a zero roi
// means the whole bounds) are kept, read lazily on first access or by
// Stage. The stored element type must be T ([ErrType]).
func OpenSparse[T Elem](ctx context.Context, in ObjectStorage, id ID, roi Box) (*Sparse[T], error) {
	id, bounds, roi, err := openObject(ctx, in, id, roi, ElemOf[T](), Sparse2D, Sparse3D)
	if err != nil {
		return nil, err
	}
	return &Sparse[T]{id: id, bounds: bounds, roi: roi, in: in}, nil
}

// ID implements Region.
func (s *Sparse[T]) ID() ID { return s.id }

// Elem implements Region.
func (s *Sparse[T]) Elem() ElemType { return ElemOf[T]() }

// Bounds implements Region.
func (s *Sparse[T]) Bounds() Box { return s.bounds }

// ROI implements Region.
func (s *Sparse[T]) ROI() Box { return s.roi }

// Bytes implements Region: the size of the entries in memory, as stored
// (coordinates and value).
func (s *Sparse[T]) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.m)) * int64(24+unsafe.Sizeof(T(0)))
}

// Loaded implements Region.
func (s *Sparse[T]) Loaded() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loaded
}

// SetOutput sets the storage Commit writes to.
func (s *Sparse[T]) SetOutput(out ObjectStorage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.out = out
}

// Stage implements Region: it reads the entries inside the ROI unless they
// are in memory already.
func (s *Sparse[T]) Stage(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loadLocked(ctx)
}

func (s *Sparse[T]) loadLocked(ctx context.Context) error {
	if s.loaded {
		return nil
	}
	o, err := readObject(ctx, s.in, s.id, ElemOf[T](), s.bounds, s.roi)
	if err != nil {
		return err
	}
	s.m = map[[3]int]T{}
	es := int(unsafe.Sizeof(T(0)))
	for i, c := range o.coords {
		if s.roi.ContainsPoint(c[0], c[1], c[2]) {
			var v [1]T
			decode(v[:], o.vals[i*es:(i+1)*es])
			s.m[c] = v[0]
		}
	}
	s.loaded = true
	return nil
}

func (s *Sparse[T]) check(x, y, z int) error {
	if !s.roi.ContainsPoint(x, y, z) {
		return fmt.Errorf("region: point (%d,%d,%d) outside the ROI %v of %v: %w", x, y, z, s.roi, s.id, ErrOutOfBounds)
	}
	return nil
}

// Set sets the element at (x, y, z) (z = 0 in 2-D), which must lie in the
// ROI ([ErrOutOfBounds]).
func (s *Sparse[T]) Set(ctx context.Context, x, y, z int, v T) error {
	if err := s.check(x, y, z); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.loadLocked(ctx); err != nil {
		return err
	}
	s.m[[3]int{x, y, z}] = v
	return nil
}

// Unset removes the element at (x, y, z), if set.
func (s *Sparse[T]) Unset(ctx context.Context, x, y, z int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.loadLocked(ctx); err != nil {
		return err
	}
	delete(s.m, [3]int{x, y, z})
	return nil
}

// Get returns the element at (x, y, z) and whether it is set. Points outside
// the ROI give [ErrOutOfBounds].
func (s *Sparse[T]) Get(ctx context.Context, x, y, z int) (T, bool, error) {
	if err := s.check(x, y, z); err != nil {
		return 0, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.loadLocked(ctx); err != nil {
		return 0, false, err
	}
	v, ok := s.m[[3]int{x, y, z}]
	return v, ok, nil
}

// Len returns the number of entries in memory, reading them first if
// needed.
func (s *Sparse[T]) Len(ctx context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.loadLocked(ctx); err != nil {
		return 0, err
	}
	return len(s.m), nil
}

// Query returns the entries in memory inside box, in row-major order (x
// fastest, then y, then z). Only the entries inside the ROI are in memory.
func (s *Sparse[T]) Query(ctx context.Context, box Box) ([]Entry[T], error) {
	if err := box.Validate(); err != nil {
		return nil, fmt.Errorf("region: query %v: %w", s.id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.loadLocked(ctx); err != nil {
		return nil, err
	}
	var out []Entry[T]
	for c, v := range s.m {
		if box.Dims == s.bounds.Dims && box.ContainsPoint(c[0], c[1], c[2]) {
			out = append(out, Entry[T]{c[0], c[1], c[2], v})
		}
	}
	slices.SortFunc(out, func(a, b Entry[T]) int {
		return cmpCoord([3]int{a.X, a.Y, a.Z}, [3]int{b.X, b.Y, b.Z})
	})
	return out, nil
}

// Commit implements Region: in the output storage, the entries inside the
// ROI are replaced by those in memory; the others are kept. A stored region
// with another element type or bounds gives [ErrExists].
func (s *Sparse[T]) Commit(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.out == nil {
		return fmt.Errorf("region: commit %v: %w", s.id, ErrNoStorage)
	}
	if err := s.loadLocked(ctx); err != nil {
		return err
	}
	elem := ElemOf[T]()
	es := elem.Size()
	return commitObject(ctx, s.out, s.id, elem, s.bounds, func(prev *object) (*object, error) {
		type kv struct {
			c [3]int
			v []byte
		}
		var all []kv
		if prev != nil {
			for i, c := range prev.coords {
				if !s.roi.ContainsPoint(c[0], c[1], c[2]) {
					all = append(all, kv{c, prev.vals[i*es : (i+1)*es]})
				}
			}
		}
		for c, v := range s.m {
			b := make([]byte, es)
			encode(b, []T{v})
			all = append(all, kv{c, b})
		}
		slices.SortFunc(all, func(a, b kv) int { return cmpCoord(a.c, b.c) })
		o := &object{id: s.id, elem: elem, bounds: s.bounds, coords: make([][3]int, len(all)), vals: make([]byte, 0, len(all)*es)}
		for i, e := range all {
			o.coords[i] = e.c
			o.vals = append(o.vals, e.v...)
		}
		return o, nil
	})
}
