package region

import (
	"context"
	"fmt"
	"math"
	"sync"
)

// Point is a vertex of a polygon in template coordinates. The pixel (x, y)
// of a dense region covers the unit square [x, x+1) x [y, y+1); integer
// outlines (pixel coordinates) are exact as float64.
type Point struct{ X, Y float64 }

// Polygon is a closed ring of at least 3 points — a nucleus outline, say —
// with an identifier unique in its set. The ring closes by itself: the last
// point connects to the first and is not repeated.
type Polygon struct {
	ID   int64   // identifier, unique in a PolygonSet
	Ring []Point // vertices, in order
}

// Extent returns the smallest rectangle [minX, maxX] x [minY, maxY]
// containing the polygon.
func (p Polygon) Extent() (minX, minY, maxX, maxY float64) {
	minX, minY = math.Inf(1), math.Inf(1)
	maxX, maxY = math.Inf(-1), math.Inf(-1)
	for _, q := range p.Ring {
		minX, maxX = min(minX, q.X), max(maxX, q.X)
		minY, maxY = min(minY, q.Y), max(maxY, q.Y)
	}
	return
}

// Bounds returns the bounding box of the polygon in pixels: the smallest 2-D
// Box whose pixels cover it.
func (p Polygon) Bounds() Box {
	x0, y0, x1, y1 := p.Extent()
	return Rect(int(math.Floor(x0)), int(math.Floor(y0)), int(math.Floor(x1))+1, int(math.Floor(y1))+1)
}

// anchor returns the pixel holding the polygon's lower-left extent corner:
// the polygon belongs to the partition (ROI) that contains it.
func (p Polygon) anchor() (x, y int) {
	x0, y0, _, _ := p.Extent()
	return int(math.Floor(x0)), int(math.Floor(y0))
}

// Intersects reports whether the polygon (its boundary or interior) and the
// area covered by the 2-D box b, the closed rectangle [Lo, Hi], share a
// point; touching counts. It tests the bounding boxes first, then each
// edge against the rectangle, and finally whether the rectangle lies
// inside the polygon.
func (p Polygon) Intersects(b Box) bool {
	if b.Dims != 2 || b.Empty() || len(p.Ring) == 0 {
		return false
	}
	rx0, ry0 := float64(b.Lo[0]), float64(b.Lo[1])
	rx1, ry1 := float64(b.Hi[0]), float64(b.Hi[1])
	x0, y0, x1, y1 := p.Extent()
	if x1 < rx0 || x0 > rx1 || y1 < ry0 || y0 > ry1 {
		return false // bounding-box prefilter
	}
	for i, a := range p.Ring {
		c := p.Ring[(i+1)%len(p.Ring)]
		if segmentHitsRect(a, c, rx0, ry0, rx1, ry1) {
			return true
		}
	}
	// No edge meets the rectangle: it is wholly inside or outside.
	return p.Contains(Point{rx0, ry0})
}

// segmentHitsRect reports whether segment a–c meets the closed rectangle
// (Liang–Barsky clipping).
func segmentHitsRect(a, c Point, x0, y0, x1, y1 float64) bool {
	t0, t1 := 0.0, 1.0
	dx, dy := c.X-a.X, c.Y-a.Y
	clip := func(p, q float64) bool {
		if p == 0 {
			return q >= 0
		}
		r := q / p
		if p < 0 {
			if r > t1 {
				return false
			}
			t0 = max(t0, r)
		} else {
			if r < t0 {
				return false
			}
			t1 = min(t1, r)
		}
		return true
	}
	return clip(-dx, a.X-x0) && clip(dx, x1-a.X) && clip(-dy, a.Y-y0) && clip(dy, y1-a.Y) && t0 <= t1
}

// Contains reports whether q lies inside the polygon (even-odd rule; points
// on the boundary may go either way).
func (p Polygon) Contains(q Point) bool {
	in := false
	n := len(p.Ring)
	for i, j := 0, n-1; i < n; j, i = i, i+1 {
		a, c := p.Ring[i], p.Ring[j]
		if (a.Y > q.Y) != (c.Y > q.Y) && q.X < (c.X-a.X)*(q.Y-a.Y)/(c.Y-a.Y)+a.X {
			in = !in
		}
	}
	return in
}

// checkPolygon validates a polygon of set id with the given bounds: at least
// 3 finite points, each inside bounds (Lo <= x < Hi on both axes).
func checkPolygon(id ID, bounds Box, p Polygon) error {
	if len(p.Ring) < 3 {
		return fmt.Errorf("region: %v: polygon %d has %d points, want at least 3: %w", id, p.ID, len(p.Ring), ErrBadBox)
	}
	lx, ly := float64(bounds.Lo[0]), float64(bounds.Lo[1])
	hx, hy := float64(bounds.Hi[0]), float64(bounds.Hi[1])
	for _, q := range p.Ring {
		if math.IsNaN(q.X) || math.IsNaN(q.Y) || q.X < lx || q.X >= hx || q.Y < ly || q.Y >= hy {
			return fmt.Errorf("region: %v: polygon %d has point (%g,%g) outside bounds %v: %w", id, p.ID, q.X, q.Y, bounds, ErrOutOfBounds)
		}
	}
	return nil
}

// PolygonSet is a data region holding a set of 2-D polygons (kind
// Polygons), such as the nuclei outlines a segmentation stage produces. Its
// ROI holds the polygons that intersect it (see [Polygon.Intersects]),
// including those reaching in from neighbouring partitions; a polygon
// belongs to the partition containing its anchor, the pixel of the lower
// corner of its extent, and only polygons anchored in the ROI are
// committed.
//
// Its storage is an [ObjectStorage]; the element type reported is Float64,
// the coordinate type. A PolygonSet is safe for concurrent use.
type PolygonSet struct {
	mu      sync.Mutex
	id      ID
	bounds  Box
	roi     Box
	in, out ObjectStorage
	polys   map[int64]Polygon
	loaded  bool
}

// Compile-time check that PolygonSet implements Region.
var _ Region = (*PolygonSet)(nil)

// checkObjectRegion checks an object region's id, bounds and roi (a zero
// roi means bounds) for kinds (the 2-D kind, then any 3-D one), returning
// the id with a zero Type set from the dimensionality, and the ROI.
func checkObjectRegion(id ID, bounds, roi Box, kinds ...Kind) (ID, Box, error) {
	if roi.Dims == 0 {
		roi = bounds
	}
	if err := bounds.Validate(); err != nil {
		return id, roi, fmt.Errorf("region: %q: %w", id.Name, err)
	}
	if id.Type == 0 {
		id.Type = kinds[0]
		if bounds.Dims == 3 && len(kinds) > 1 {
			id.Type = kinds[1]
		}
	}
	if err := id.Validate(); err != nil {
		return id, roi, err
	}
	want := kinds[0]
	if bounds.Dims == 3 && len(kinds) > 1 {
		want = kinds[1]
	}
	if id.Type != want || bounds.Dims == 1 || len(kinds) == 1 && bounds.Dims != 2 {
		return id, roi, fmt.Errorf("region: %v with %d-D bounds %v is not %v: %w", id, bounds.Dims, bounds, want, ErrType)
	}
	return id, roi, checkROI(id, bounds, roi)
}

// NewPolygonSet returns an empty in-memory polygon set over the 2-D box
// bounds, with roi as its region of interest (a zero roi means bounds). A
// zero id.Type is set to Polygons.
func NewPolygonSet(id ID, bounds, roi Box) (*PolygonSet, error) {
	id, roi, err := checkObjectRegion(id, bounds, roi, Polygons)
	if err != nil {
		return nil, err
	}
	return &PolygonSet{id: id, bounds: bounds, roi: roi, polys: map[int64]Polygon{}, loaded: true}, nil
}

// OpenPolygonSet binds a polygon set to the set id stored in in, taking its
// bounds from the storage; only the polygons intersecting roi (a zero roi
// means the whole bounds) are read, lazily on first access or by Stage.
func OpenPolygonSet(ctx context.Context, in ObjectStorage, id ID, roi Box) (*PolygonSet, error) {
	id, bounds, roi, err := openObject(ctx, in, id, roi, 0, Polygons)
	if err != nil {
		return nil, err
	}
	return &PolygonSet{id: id, bounds: bounds, roi: roi, in: in}, nil
}

// ID implements Region.
func (s *PolygonSet) ID() ID { return s.id }

// Elem implements Region: the coordinate type, Float64.
func (s *PolygonSet) Elem() ElemType { return Float64 }

// Bounds implements Region.
func (s *PolygonSet) Bounds() Box { return s.bounds }

// ROI implements Region.
func (s *PolygonSet) ROI() Box { return s.roi }

// Bytes implements Region: the size of the polygons in memory (16 bytes a
// point, 32 a polygon).
func (s *PolygonSet) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, p := range s.polys {
		n += 32 + 16*int64(len(p.Ring))
	}
	return n
}

// Loaded implements Region.
func (s *PolygonSet) Loaded() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loaded
}

// SetOutput sets the storage Commit writes to.
func (s *PolygonSet) SetOutput(out ObjectStorage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.out = out
}

// Stage implements Region: it reads the polygons intersecting the ROI
// unless they are in memory already.
func (s *PolygonSet) Stage(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loadLocked(ctx)
}

func (s *PolygonSet) loadLocked(ctx context.Context) error {
	if s.loaded {
		return nil
	}
	o, err := readObject(ctx, s.in, s.id, Float64, s.bounds, s.roi)
	if err != nil {
		return err
	}
	s.polys = map[int64]Polygon{}
	for _, p := range o.polys {
		if p.Intersects(s.roi) {
			s.polys[p.ID] = p
		}
	}
	s.loaded = true
	return nil
}

// Add inserts p, replacing a polygon with the same ID. The polygon must lie
// inside the bounds and be anchored in the ROI ([ErrOutOfBounds]).
func (s *PolygonSet) Add(ctx context.Context, p Polygon) error {
	if err := checkPolygon(s.id, s.bounds, p); err != nil {
		return err
	}
	if x, y := p.anchor(); !s.roi.ContainsPoint(x, y, 0) {
		return fmt.Errorf("region: %v: polygon %d anchored at (%d,%d), outside the ROI %v: %w", s.id, p.ID, x, y, s.roi, ErrOutOfBounds)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.loadLocked(ctx); err != nil {
		return err
	}
	s.polys[p.ID] = Polygon{ID: p.ID, Ring: append([]Point(nil), p.Ring...)}
	return nil
}

// Remove deletes the polygon with the given ID, reporting whether it was
// there.
func (s *PolygonSet) Remove(ctx context.Context, id int64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.loadLocked(ctx); err != nil {
		return false, err
	}
	_, ok := s.polys[id]
	delete(s.polys, id)
	return ok, nil
}

// Polygons returns the polygons in memory (those intersecting the ROI),
// sorted by ID. The rings are shared with the set: do not modify them.
func (s *PolygonSet) Polygons(ctx context.Context) ([]Polygon, error) {
	return s.Query(ctx, s.roi)
}

// Query returns the polygons in memory that intersect box (see
// [Polygon.Intersects]), sorted by ID: a bounding-box prefilter, then the
// exact polygon–rectangle test. Only polygons intersecting the ROI are in
// memory, so box should lie inside it. The rings are shared with the set:
// do not modify them.
func (s *PolygonSet) Query(ctx context.Context, box Box) ([]Polygon, error) {
	if err := box.Validate(); err != nil {
		return nil, fmt.Errorf("region: query %v: %w", s.id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.loadLocked(ctx); err != nil {
		return nil, err
	}
	var out []Polygon
	for _, p := range s.polys {
		if p.Intersects(box) {
			out = append(out, p)
		}
	}
	sortPolygons(out)
	return out, nil
}

// Commit implements Region: in the output storage, the polygons anchored in
// the ROI are replaced by those in memory anchored in the ROI; the others
// are kept. A stored set with other bounds gives [ErrExists].
func (s *PolygonSet) Commit(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.out == nil {
		return fmt.Errorf("region: commit %v: %w", s.id, ErrNoStorage)
	}
	if err := s.loadLocked(ctx); err != nil {
		return err
	}
	owned := func(p Polygon) bool { x, y := p.anchor(); return s.roi.ContainsPoint(x, y, 0) }
	return commitObject(ctx, s.out, s.id, Float64, s.bounds, func(prev *object) (*object, error) {
		o := &object{id: s.id, elem: Float64, bounds: s.bounds}
		if prev != nil {
			for _, p := range prev.polys {
				if !owned(p) {
					o.polys = append(o.polys, p)
				}
			}
		}
		for _, p := range s.polys {
			if owned(p) {
				o.polys = append(o.polys, p)
			}
		}
		sortPolygons(o.polys)
		for i := 1; i < len(o.polys); i++ {
			if o.polys[i].ID == o.polys[i-1].ID {
				return nil, fmt.Errorf("region: commit %v: polygon %d is stored in another partition: %w", s.id, o.polys[i].ID, ErrExists)
			}
		}
		return o, nil
	})
}
