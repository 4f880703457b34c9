package region

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Meta describes a stored region: its identifier, element type and bounding
// box. A storage holds one array per identifier covering the whole bounds;
// writers and readers move sub-boxes of it (a stage instance typically
// reads and writes only its own partition, its ROI).
type Meta struct {
	ID     ID       // the region's identifier
	Elem   ElemType // its element type
	Bounds Box      // the extent of the stored array
}

// Validate checks the identifier, element type and bounds.
func (m Meta) Validate() error {
	if err := m.ID.Validate(); err != nil {
		return err
	}
	if m.Elem.Size() == 0 {
		return fmt.Errorf("region: %v has unknown element type %d: %w", m.ID, int(m.Elem), ErrType)
	}
	if err := m.Bounds.Validate(); err != nil {
		return fmt.Errorf("region: %v: %w", m.ID, err)
	}
	if want := denseKind(m.Bounds.Dims); m.ID.Type != want {
		return fmt.Errorf("region: %v has %d-D bounds %v but kind %v: %w", m.ID, m.Bounds.Dims, m.Bounds, m.ID.Type, ErrType)
	}
	return nil
}

// Bytes returns the size of the whole stored array.
func (m Meta) Bytes() int64 { return int64(m.Bounds.Len()) * int64(m.Elem.Size()) }

// Storage keeps data regions outside a running stage: the "global" storage
// through which stages exchange regions. Data move as little-endian element
// bytes of a box in row-major order (x fastest, then y, then z).
//
// Implementations are safe for concurrent use. Writes of disjoint boxes of
// one region may run concurrently; of overlapping boxes the last write wins.
type Storage interface {
	// Write stores data, the elements of box, into the region m.ID, creating
	// it (zero-filled over m.Bounds) if it does not exist. box must lie
	// inside m.Bounds ([ErrOutOfBounds]); a region stored earlier under the
	// same identifier with another element type or bounds gives [ErrExists].
	Write(ctx context.Context, m Meta, box Box, data []byte) error
	// Read copies the elements of box of region id into data, which must
	// hold exactly box.Len() elements. A missing region gives [ErrNotFound],
	// a box outside the stored bounds [ErrOutOfBounds].
	Read(ctx context.Context, id ID, box Box, data []byte) error
	// Stat returns the metadata of a stored region ([ErrNotFound] if absent).
	Stat(ctx context.Context, id ID) (Meta, error)
	// Delete removes a region ([ErrNotFound] if absent).
	Delete(ctx context.Context, id ID) error
	// List returns the identifiers of the stored regions, sorted.
	List(ctx context.Context) ([]ID, error)
}

// checkIO validates the common arguments of Storage.Read and Storage.Write.
func checkIO(m Meta, box Box, n int) error {
	if err := box.Validate(); err != nil {
		return fmt.Errorf("region: %v: %w", m.ID, err)
	}
	if !m.Bounds.Contains(box) {
		return fmt.Errorf("region: box %v of %v is outside its bounds %v: %w", box, m.ID, m.Bounds, ErrOutOfBounds)
	}
	if want := box.Len() * m.Elem.Size(); n != want {
		return fmt.Errorf("region: %v: %d bytes for box %v, want %d", m.ID, n, box, want)
	}
	return nil
}

// runs calls f for each maximal contiguous run of box inside a row-major
// array over bounds: f(offset in the array, offset in the box's own
// row-major buffer, length), all in elements.
func runs(bounds, box Box, f func(arrOff, boxOff, n int) error) error {
	bs, xs := bounds.Shape(), box.Shape()
	if box.Empty() {
		return nil
	}
	switch {
	case xs[0] == bs[0] && xs[1] == bs[1]: // whole planes: one run
		off := (box.Lo[2] - bounds.Lo[2]) * bs[0] * bs[1]
		return f(off, 0, box.Len())
	case xs[0] == bs[0]: // whole rows: one run per plane
		for z := range xs[2] {
			off := ((box.Lo[2]-bounds.Lo[2]+z)*bs[1] + box.Lo[1] - bounds.Lo[1]) * bs[0]
			if err := f(off, z*xs[0]*xs[1], xs[0]*xs[1]); err != nil {
				return err
			}
		}
		return nil
	}
	for z := range xs[2] {
		for y := range xs[1] {
			off := ((box.Lo[2]-bounds.Lo[2]+z)*bs[1]+box.Lo[1]-bounds.Lo[1]+y)*bs[0] + box.Lo[0] - bounds.Lo[0]
			if err := f(off, (z*xs[1]+y)*xs[0], xs[0]); err != nil {
				return err
			}
		}
	}
	return nil
}

// Memory is a Storage that keeps regions in process memory.
// The zero value is not usable; call NewMemory.
//
// Reads and writes copy their boxes outside any storage-wide lock: those
// of disjoint boxes of a region, and reads of overlapping ones, run at the
// same time (the tiles of a slide are committed in parallel); a write
// waits for the earlier reads and writes that overlap its box, and a read
// for the earlier overlapping writes, so overlapping writes land in the
// order they were called. A new region's array is allocated outside the
// lock too, so creating a large one holds up no other region.
type Memory struct {
	mu      sync.RWMutex // guards the maps, not the regions' arrays
	regions map[ID]*memRegion
	objects map[ID][]byte // sparse regions and polygon sets, encoded
}

type memRegion struct {
	meta  Meta
	ready chan struct{} // closed once buf is allocated
	buf   []byte
	boxes boxLock // orders the copies into and out of buf
}

// NewMemory returns an empty in-memory storage.
func NewMemory() *Memory { return &Memory{regions: map[ID]*memRegion{}, objects: map[ID][]byte{}} }

// ReadObject implements ObjectStorage.
func (s *Memory) ReadObject(ctx context.Context, id ID) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("region: read %v: %w", id, err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	b, ok := s.objects[id]
	if !ok {
		return nil, fmt.Errorf("region: read %v: %w", id, ErrNotFound)
	}
	return slices.Clone(b), nil
}

// checkObjectWrite checks, before an UpdateObject, that ctx is live and id
// valid.
func checkObjectWrite(ctx context.Context, id ID) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("region: write %v: %w", id, err)
	}
	return id.Validate()
}

// UpdateObject implements ObjectStorage.
func (s *Memory) UpdateObject(ctx context.Context, id ID, f func(old []byte) ([]byte, error)) error {
	if err := checkObjectWrite(ctx, id); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := f(slices.Clone(s.objects[id]))
	if err != nil {
		return err
	}
	s.objects[id] = slices.Clone(b)
	return nil
}

// Write implements Storage.
func (s *Memory) Write(ctx context.Context, m Meta, box Box, data []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("region: write %v: %w", m.ID, err)
	}
	if err := m.Validate(); err != nil {
		return err
	}
	if err := checkIO(m, box, len(data)); err != nil {
		return err
	}
	s.mu.Lock()
	r, ok := s.regions[m.ID]
	if !ok {
		r = &memRegion{meta: m, ready: make(chan struct{})}
		s.regions[m.ID] = r
		s.mu.Unlock()
		r.buf = make([]byte, m.Bytes())
		close(r.ready)
	} else {
		s.mu.Unlock()
		if r.meta != m {
			return fmt.Errorf("region: %v stored as %v %v, written as %v %v: %w", m.ID, r.meta.Elem, r.meta.Bounds, m.Elem, m.Bounds, ErrExists)
		}
	}
	if box.Empty() {
		return nil
	}
	op, err := r.hold(ctx, box, true)
	if err != nil {
		return fmt.Errorf("region: write %v: %w", m.ID, err)
	}
	defer r.boxes.unlock(op)
	es := m.Elem.Size()
	return runs(m.Bounds, box, func(a, b, n int) error {
		copy(r.buf[a*es:(a+n)*es], data[b*es:(b+n)*es])
		return nil
	})
}

// hold waits until r's array is allocated and box of it free for a read
// or a write (boxLock.lock).
func (r *memRegion) hold(ctx context.Context, box Box, write bool) (*boxOp, error) {
	select {
	case <-r.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return r.boxes.lock(ctx, box, write)
}

// Read implements Storage.
func (s *Memory) Read(ctx context.Context, id ID, box Box, data []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("region: read %v: %w", id, err)
	}
	s.mu.RLock()
	r, ok := s.regions[id]
	s.mu.RUnlock()
	if !ok {
		return fmt.Errorf("region: read %v: %w", id, ErrNotFound)
	}
	if err := checkIO(r.meta, box, len(data)); err != nil {
		return err
	}
	if box.Empty() {
		return nil
	}
	op, err := r.hold(ctx, box, false)
	if err != nil {
		return fmt.Errorf("region: read %v: %w", id, err)
	}
	defer r.boxes.unlock(op)
	es := r.meta.Elem.Size()
	return runs(r.meta.Bounds, box, func(a, b, n int) error {
		copy(data[b*es:(b+n)*es], r.buf[a*es:(a+n)*es])
		return nil
	})
}

// Stat implements Storage.
func (s *Memory) Stat(ctx context.Context, id ID) (Meta, error) {
	if err := ctx.Err(); err != nil {
		return Meta{}, fmt.Errorf("region: stat %v: %w", id, err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if b, ok := s.objects[id]; ok {
		return objectMeta(b)
	}
	r, ok := s.regions[id]
	if !ok {
		return Meta{}, fmt.Errorf("region: stat %v: %w", id, ErrNotFound)
	}
	return r.meta, nil
}

// Delete implements Storage.
func (s *Memory) Delete(ctx context.Context, id ID) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("region: delete %v: %w", id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.objects[id]; ok {
		delete(s.objects, id)
		return nil
	}
	if _, ok := s.regions[id]; !ok {
		return fmt.Errorf("region: delete %v: %w", id, ErrNotFound)
	}
	delete(s.regions, id)
	return nil
}

// List implements Storage.
func (s *Memory) List(ctx context.Context) ([]ID, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("region: list: %w", err)
	}
	s.mu.RLock()
	ids := make([]ID, 0, len(s.regions)+len(s.objects))
	for id := range s.regions {
		ids = append(ids, id)
	}
	for id := range s.objects {
		ids = append(ids, id)
	}
	s.mu.RUnlock()
	sortIDs(ids)
	return ids, nil
}

func sortIDs(ids []ID) {
	slices.SortFunc(ids, func(a, b ID) int {
		switch {
		case a.less(b):
			return -1
		case b.less(a):
			return 1
		}
		return 0
	})
}

// Disk is a Storage that keeps each region in a directory as two files:
// NAME.KIND.tT.vV.json with the metadata and NAME.KIND.tT.vV.raw with the
// whole array (little-endian, row-major), so that a box is read or written
// with positioned I/O without touching the rest of the array. Sparse regions
// and polygon sets are kept as one file each, NAME.KIND.tT.vV.rto, in the
// binary format described at [Sparse], replaced atomically on update.
type Disk struct {
	dir string
	mu  sync.Mutex // serializes region creation and deletion
}

// NewDisk returns a storage in directory dir, creating it if needed.
func NewDisk(dir string) (*Disk, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("region: disk storage: %w", err)
	}
	return &Disk{dir: dir}, nil
}

// Dir returns the storage directory.
func (s *Disk) Dir() string { return s.dir }

type diskMeta struct {
	ID     string   // ID.String of the region
	Elem   ElemType // element type
	Bounds Box      // extent of the array
}

func (s *Disk) paths(id ID) (meta, raw string) {
	b := filepath.Join(s.dir, id.fileBase())
	return b + ".json", b + ".raw"
}

func (s *Disk) objPath(id ID) string { return filepath.Join(s.dir, id.fileBase()) + ".rto" }

// ReadObject implements ObjectStorage.
func (s *Disk) ReadObject(ctx context.Context, id ID) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("region: read %v: %w", id, err)
	}
	if err := id.Validate(); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(s.objPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("region: %v in %s: %w", id, s.dir, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("region: read %v: %w", id, err)
	}
	return b, nil
}

// UpdateObject implements ObjectStorage. The new file replaces the old one
// by a rename, so readers see the old or the new object, never a mix.
func (s *Disk) UpdateObject(ctx context.Context, id ID, f func(old []byte) ([]byte, error)) error {
	if err := checkObjectWrite(ctx, id); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.objPath(id)
	old, err := os.ReadFile(p)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("region: write %v: %w", id, err)
	}
	b, err := f(old)
	if err != nil {
		return err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("region: write %v: %w", id, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("region: write %v: %w", id, err)
	}
	return nil
}

func (s *Disk) stat(id ID) (Meta, error) {
	if err := id.Validate(); err != nil {
		return Meta{}, err
	}
	if isObjectKind(id.Type) {
		b, err := s.ReadObject(context.Background(), id)
		if err != nil {
			return Meta{}, err
		}
		return objectMeta(b)
	}
	mp, _ := s.paths(id)
	b, err := os.ReadFile(mp)
	if errors.Is(err, fs.ErrNotExist) {
		return Meta{}, fmt.Errorf("region: %v in %s: %w", id, s.dir, ErrNotFound)
	}
	if err != nil {
		return Meta{}, fmt.Errorf("region: %v: %w", id, err)
	}
	var dm diskMeta
	if err := json.Unmarshal(b, &dm); err != nil {
		return Meta{}, fmt.Errorf("region: %v: corrupt metadata %s: %w: %w", id, mp, ErrCorrupt, err)
	}
	m := Meta{ID: id, Elem: dm.Elem, Bounds: dm.Bounds}
	if dm.ID != id.String() {
		return Meta{}, fmt.Errorf("region: metadata %s names %q, want %v: %w", mp, dm.ID, id, ErrCorrupt)
	}
	if err := m.Validate(); err != nil {
		return Meta{}, fmt.Errorf("region: corrupt metadata %s: %w", mp, err)
	}
	// The array file is created at its full size before the metadata: one
	// of another size does not hold these bounds (and sizing a read by
	// bounds the file does not hold would allocate without limit).
	_, rp := s.paths(id)
	fi, err := os.Stat(rp)
	if err != nil {
		return Meta{}, fmt.Errorf("region: %v: %w", id, err)
	}
	if fi.Size() != m.Bytes() {
		return Meta{}, fmt.Errorf("region: %v: array file %s holds %d bytes, its metadata's bounds %v of %v need %d: %w", id, rp, fi.Size(), m.Bounds, m.Elem, m.Bytes(), ErrCorrupt)
	}
	return m, nil
}

// create makes the files of a new region, or checks that the stored one
// matches m.
func (s *Disk) create(m Meta) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, err := s.stat(m.ID)
	if err == nil {
		if old != m {
			return fmt.Errorf("region: %v stored as %v %v, written as %v %v: %w", m.ID, old.Elem, old.Bounds, m.Elem, m.Bounds, ErrExists)
		}
		return nil
	}
	if !errors.Is(err, ErrNotFound) {
		return err
	}
	mp, rp := s.paths(m.ID)
	f, err := os.OpenFile(rp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("region: create %v: %w", m.ID, err)
	}
	if err := f.Truncate(m.Bytes()); err != nil {
		f.Close()
		return fmt.Errorf("region: create %v: %w", m.ID, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("region: create %v: %w", m.ID, err)
	}
	b, err := json.Marshal(diskMeta{ID: m.ID.String(), Elem: m.Elem, Bounds: m.Bounds})
	if err != nil {
		return fmt.Errorf("region: create %v: %w", m.ID, err)
	}
	// The metadata file appears atomically, after the array exists.
	tmp := mp + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("region: create %v: %w", m.ID, err)
	}
	if err := os.Rename(tmp, mp); err != nil {
		return fmt.Errorf("region: create %v: %w", m.ID, err)
	}
	return nil
}

// Write implements Storage.
func (s *Disk) Write(ctx context.Context, m Meta, box Box, data []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("region: write %v: %w", m.ID, err)
	}
	if err := m.Validate(); err != nil {
		return err
	}
	if err := checkIO(m, box, len(data)); err != nil {
		return err
	}
	if err := s.create(m); err != nil {
		return err
	}
	_, rp := s.paths(m.ID)
	f, err := os.OpenFile(rp, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("region: write %v: %w", m.ID, err)
	}
	es := m.Elem.Size()
	err = runs(m.Bounds, box, func(a, b, n int) error {
		_, err := f.WriteAt(data[b*es:(b+n)*es], int64(a)*int64(es))
		return err
	})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("region: write %v: %w", m.ID, err)
	}
	return nil
}

// Read implements Storage.
func (s *Disk) Read(ctx context.Context, id ID, box Box, data []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("region: read %v: %w", id, err)
	}
	m, err := s.stat(id)
	if err != nil {
		return err
	}
	if err := checkIO(m, box, len(data)); err != nil {
		return err
	}
	_, rp := s.paths(id)
	f, err := os.Open(rp)
	if err != nil {
		return fmt.Errorf("region: read %v: %w", id, err)
	}
	defer f.Close()
	es := m.Elem.Size()
	err = runs(m.Bounds, box, func(a, b, n int) error {
		_, err := f.ReadAt(data[b*es:(b+n)*es], int64(a)*int64(es))
		return err
	})
	if err != nil {
		return fmt.Errorf("region: read %v: %w", id, err)
	}
	return nil
}

// Stat implements Storage.
func (s *Disk) Stat(ctx context.Context, id ID) (Meta, error) {
	if err := ctx.Err(); err != nil {
		return Meta{}, fmt.Errorf("region: stat %v: %w", id, err)
	}
	return s.stat(id)
}

// Delete implements Storage.
func (s *Disk) Delete(ctx context.Context, id ID) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("region: delete %v: %w", id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := id.Validate(); err != nil {
		return err
	}
	if isObjectKind(id.Type) {
		err := os.Remove(s.objPath(id))
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("region: delete %v in %s: %w", id, s.dir, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("region: delete %v: %w", id, err)
		}
		return nil
	}
	if _, err := s.stat(id); err != nil {
		return err
	}
	mp, rp := s.paths(id)
	if err := os.Remove(mp); err != nil {
		return fmt.Errorf("region: delete %v: %w", id, err)
	}
	if err := os.Remove(rp); err != nil {
		return fmt.Errorf("region: delete %v: %w", id, err)
	}
	return nil
}

// List implements Storage.
func (s *Disk) List(ctx context.Context) ([]ID, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("region: list: %w", err)
	}
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("region: list %s: %w", s.dir, err)
	}
	var ids []ID
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".rto") {
			// The name is the identifier's file base: recover it from the
			// object's header.
			b, err := os.ReadFile(filepath.Join(s.dir, e.Name()))
			if err != nil {
				return nil, fmt.Errorf("region: list %s: %w", s.dir, err)
			}
			if m, err := objectMeta(b); err == nil && m.ID.fileBase()+".rto" == e.Name() {
				ids = append(ids, m.ID)
			}
			continue
		}
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(s.dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("region: list %s: %w", s.dir, err)
		}
		var dm diskMeta
		if json.Unmarshal(b, &dm) != nil {
			continue // not ours
		}
		if id, err := ParseID(dm.ID); err == nil {
			ids = append(ids, id)
		}
	}
	sortIDs(ids)
	return ids, nil
}

// denseKind returns the dense kind for a number of dimensions.
func denseKind(dims int) Kind {
	switch dims {
	case 1:
		return Dense1D
	case 3:
		return Dense3D
	}
	return Dense2D
}
