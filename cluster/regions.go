package cluster

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gohtgs/htgs/region"
)

// Regions is a global region storage on JetStream, the DataSpaces role of
// Region Templates: stages on any worker read the ROI they need and write
// their outputs back. It implements [region.Storage] for dense regions and
// [region.ObjectStorage] for sparse regions and polygon sets.
//
// A dense region is kept as chunks of a fixed shape (default 256×256×1
// elements) in a JetStream key-value bucket, so that reading an ROI fetches
// only the chunks it overlaps. A write that covers part of a chunk
// updates it by compare-and-swap on the chunk's revision, so concurrent
// writes of disjoint boxes are safe from any number of processes, as the
// Storage contract requires. Sparse regions and polygon sets are whole
// objects in the namespace's Object Store, reached through a pointer in the
// key-value bucket that UpdateObject swaps atomically.
//
// Chunk values must fit in a message: keep chunk shape × element size below
// the server's maximum payload (1 MiB by default; 8 MiB for [StartServerProcess] and package natsserver).
type Regions struct {
	kv    jetstream.KeyValue
	obj   jetstream.ObjectStore
	chunk [3]int
	ns    string
	limit int64 // MaxPayload: the largest object body read
}

// RegionChunk sets the chunk shape of a [Regions] storage, in elements
// along x, y and z (default 256, 256, 1). Every process using one storage
// must use the same shape. Clients and workers ignore it.
func RegionChunk(x, y, z int) Option {
	return option(func(c *config) { c.chunk = [3]int{x, y, z} })
}

// NewRegions opens (creating it if needed) the region storage of the
// namespace on nc. opts are the namespace's options (Namespace,
// FileStorage, Replicas) and RegionChunk. A Regions starts no goroutine
// and needs no closing; nc stays the caller's.
func NewRegions(ctx context.Context, nc *nats.Conn, opts ...Option) (*Regions, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if cfg.chunk == ([3]int{}) {
		cfg.chunk = [3]int{256, 256, 1}
	}
	if cfg.chunk[0] < 1 || cfg.chunk[1] < 1 || cfg.chunk[2] < 1 {
		return nil, fmt.Errorf("cluster: regions: chunk shape %v", cfg.chunk)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("cluster: regions: %w", err)
	}
	if _, err := setup(ctx, js, cfg); err != nil { // the run's streams, created if missing, as by every client
		return nil, fmt.Errorf("cluster: regions: %w", err)
	}
	bucket := strings.ToUpper(cfg.ns) + "_REGIONS"
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      bucket,
		Description: "htgs cluster: dense region chunks, metadata and object pointers",
		Storage:     cfg.storage,
		Replicas:    cfg.replicas,
		History:     1,
	})
	if errors.Is(err, jetstream.ErrBucketExists) {
		kv, err = js.KeyValue(ctx, bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: regions: bucket %s: %w", bucket, err)
	}
	objBucket := strings.ToUpper(cfg.ns) + "_REGION_OBJECTS"
	obj, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      objBucket,
		Description: "htgs cluster: sparse regions and polygon sets",
		Storage:     cfg.storage,
		Replicas:    cfg.replicas,
	})
	if errors.Is(err, jetstream.ErrBucketExists) {
		obj, err = js.ObjectStore(ctx, objBucket)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: regions: bucket %s: %w", objBucket, err)
	}
	return &Regions{kv: kv, obj: obj, chunk: cfg.chunk, ns: cfg.ns, limit: cfg.maxPayload}, nil
}

// idKey encodes an identifier for a key ("::" and the kind are not key
// characters).
func idKey(id region.ID) string { return base64.RawURLEncoding.EncodeToString([]byte(id.String())) }

func metaKey(id region.ID) string { return "m." + idKey(id) }
func ptrKey(id region.ID) string  { return "o." + idKey(id) }
func chunkKey(id region.ID, c [3]int) string {
	return "c." + idKey(id) + "." + strconv.Itoa(c[0]) + "." + strconv.Itoa(c[1]) + "." + strconv.Itoa(c[2])
}

type storedMeta struct {
	ID     string
	Elem   region.ElemType
	Bounds region.Box
}

func (s *Regions) stat(ctx context.Context, id region.ID) (region.Meta, error) {
	e, err := s.kv.Get(ctx, metaKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return region.Meta{}, fmt.Errorf("cluster: region %v: %w", id, region.ErrNotFound)
	}
	if err != nil {
		return region.Meta{}, fmt.Errorf("cluster: region %v: %w", id, err)
	}
	var sm storedMeta
	if err := json.Unmarshal(e.Value(), &sm); err != nil {
		return region.Meta{}, fmt.Errorf("cluster: region %v: metadata: %w", id, err)
	}
	return region.Meta{ID: id, Elem: sm.Elem, Bounds: sm.Bounds}, nil
}

// Stat implements region.Storage.
func (s *Regions) Stat(ctx context.Context, id region.ID) (region.Meta, error) {
	return s.stat(ctx, id)
}

// chunks calls f for every chunk overlapping box: the chunk's grid index,
// its box (clipped to bounds) and its overlap with box.
func (s *Regions) chunks(bounds, box region.Box, f func(idx [3]int, cbox, overlap region.Box) error) error {
	if box.Empty() {
		return nil
	}
	var lo, hi [3]int
	for d := range 3 {
		lo[d] = floorDiv(box.Lo[d]-bounds.Lo[d], s.chunk[d])
		hi[d] = floorDiv(box.Hi[d]-1-bounds.Lo[d], s.chunk[d])
	}
	for cz := lo[2]; cz <= hi[2]; cz++ {
		for cy := lo[1]; cy <= hi[1]; cy++ {
			for cx := lo[0]; cx <= hi[0]; cx++ {
				idx := [3]int{cx, cy, cz}
				cbox := bounds
				for d := range 3 {
					cbox.Lo[d] = bounds.Lo[d] + idx[d]*s.chunk[d]
					cbox.Hi[d] = min(cbox.Lo[d]+s.chunk[d], bounds.Hi[d])
				}
				if err := f(idx, cbox, cbox.Intersect(box)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func floorDiv(a, b int) int {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// copyBox copies the elements of part from src, a row-major array over
// sbox, into dst, a row-major array over dbox (es bytes per element).
func copyBox(dst []byte, dbox region.Box, src []byte, sbox region.Box, part region.Box, es int) {
	ds, ss, ps := dbox.Shape(), sbox.Shape(), part.Shape()
	row := ps[0] * es
	for z := range ps[2] {
		for y := range ps[1] {
			do := (((part.Lo[2]-dbox.Lo[2]+z)*ds[1]+part.Lo[1]-dbox.Lo[1]+y)*ds[0] + part.Lo[0] - dbox.Lo[0]) * es
			so := (((part.Lo[2]-sbox.Lo[2]+z)*ss[1]+part.Lo[1]-sbox.Lo[1]+y)*ss[0] + part.Lo[0] - sbox.Lo[0]) * es
			copy(dst[do:do+row], src[so:so+row])
		}
	}
}

func checkBox(m region.Meta, box region.Box, n int) error {
	if err := box.Validate(); err != nil {
		return fmt.Errorf("cluster: region %v: %w", m.ID, err)
	}
	if !m.Bounds.Contains(box) {
		return fmt.Errorf("cluster: region %v: box %v is outside its bounds %v: %w", m.ID, box, m.Bounds, region.ErrOutOfBounds)
	}
	if want := box.Len() * m.Elem.Size(); n != want {
		return fmt.Errorf("cluster: region %v: %d bytes for box %v, want %d", m.ID, n, box, want)
	}
	return nil
}

// Write implements region.Storage.
func (s *Regions) Write(ctx context.Context, m region.Meta, box region.Box, data []byte) error {
	if err := m.Validate(); err != nil {
		return err
	}
	if err := checkBox(m, box, len(data)); err != nil {
		return err
	}
	b, _ := json.Marshal(storedMeta{ID: m.ID.String(), Elem: m.Elem, Bounds: m.Bounds})
	if _, err := s.kv.Create(ctx, metaKey(m.ID), b); err != nil {
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("cluster: region %v: %w", m.ID, err)
		}
		old, err := s.stat(ctx, m.ID)
		if err != nil {
			return err
		}
		if old != m {
			return fmt.Errorf("cluster: region %v stored as %v %v, written as %v %v: %w", m.ID, old.Elem, old.Bounds, m.Elem, m.Bounds, region.ErrExists)
		}
	}
	es := m.Elem.Size()
	return s.chunks(m.Bounds, box, func(idx [3]int, cbox, part region.Box) error {
		key := chunkKey(m.ID, idx)
		if part == cbox { // the whole chunk: no need to read it
			buf := make([]byte, cbox.Len()*es)
			copyBox(buf, cbox, data, box, part, es)
			if _, err := s.kv.Put(ctx, key, buf); err != nil {
				return fmt.Errorf("cluster: region %v: write chunk %v: %w", m.ID, idx, err)
			}
			return nil
		}
		for { // read, modify, compare-and-swap
			var (
				buf []byte
				rev uint64
			)
			e, err := s.kv.Get(ctx, key)
			switch {
			case errors.Is(err, jetstream.ErrKeyNotFound):
				buf = make([]byte, cbox.Len()*es)
			case err != nil:
				return fmt.Errorf("cluster: region %v: read chunk %v: %w", m.ID, idx, err)
			default:
				buf, rev = slices.Clone(e.Value()), e.Revision()
			}
			if len(buf) != cbox.Len()*es {
				return fmt.Errorf("cluster: region %v: chunk %v has %d bytes, want %d (another chunk shape?): %w", m.ID, idx, len(buf), cbox.Len()*es, region.ErrCorrupt)
			}
			copyBox(buf, cbox, data, box, part, es)
			if rev == 0 {
				_, err = s.kv.Create(ctx, key, buf)
			} else {
				_, err = s.kv.Update(ctx, key, buf, rev)
			}
			if err == nil {
				return nil
			}
			if !errors.Is(err, jetstream.ErrKeyExists) && !isWrongSequence(err) {
				return fmt.Errorf("cluster: region %v: write chunk %v: %w", m.ID, idx, err)
			}
			if ctx.Err() != nil {
				return fmt.Errorf("cluster: region %v: write chunk %v: %w", m.ID, idx, ctx.Err())
			}
		}
	})
}

// isWrongSequence reports a compare-and-swap that lost: someone else
// updated the key first.
func isWrongSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// readParallel bounds the chunks one Read fetches at once.
const readParallel = 8

// Read implements region.Storage. Only the chunks box overlaps are
// fetched, several at a time; chunks never written read as zeros.
func (s *Regions) Read(ctx context.Context, id region.ID, box region.Box, data []byte) error {
	m, err := s.stat(ctx, id)
	if err != nil {
		return err
	}
	if err := checkBox(m, box, len(data)); err != nil {
		return err
	}
	es := m.Elem.Size()
	type chunk struct {
		idx        [3]int
		cbox, part region.Box
	}
	var cs []chunk
	_ = s.chunks(m.Bounds, box, func(idx [3]int, cbox, part region.Box) error {
		cs = append(cs, chunk{idx, cbox, part})
		return nil
	})
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		sem   = make(chan struct{}, readParallel)
	)
	for _, c := range cs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			err := s.readChunk(ctx, id, c.idx, c.cbox, c.part, box, data, es)
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// readChunk copies the part of chunk idx that box needs into data (parts
// of different chunks are disjoint, so chunks are read concurrently).
func (s *Regions) readChunk(ctx context.Context, id region.ID, idx [3]int, cbox, part, box region.Box, data []byte, es int) error {
	e, err := s.kv.Get(ctx, chunkKey(id, idx))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		zero := make([]byte, cbox.Len()*es)
		copyBox(data, box, zero, cbox, part, es)
		return nil
	}
	if err != nil {
		return fmt.Errorf("cluster: region %v: read chunk %v: %w", id, idx, err)
	}
	if len(e.Value()) != cbox.Len()*es {
		return fmt.Errorf("cluster: region %v: chunk %v has %d bytes, want %d: %w", id, idx, len(e.Value()), cbox.Len()*es, region.ErrCorrupt)
	}
	copyBox(data, box, e.Value(), cbox, part, es)
	return nil
}

// Delete implements region.Storage.
func (s *Regions) Delete(ctx context.Context, id region.ID) error {
	m, err := s.stat(ctx, id)
	if err != nil {
		return err
	}
	err = s.chunks(m.Bounds, m.Bounds, func(idx [3]int, _, _ region.Box) error {
		if err := s.kv.Purge(ctx, chunkKey(id, idx)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("cluster: region %v: delete chunk %v: %w", id, idx, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := s.kv.Purge(ctx, metaKey(id)); err != nil {
		return fmt.Errorf("cluster: region %v: delete: %w", id, err)
	}
	return nil
}

// List implements region.Storage: the dense regions, sorted by name,
// timestamp, version and kind.
func (s *Regions) List(ctx context.Context) ([]region.ID, error) {
	lister, err := s.kv.ListKeysFiltered(ctx, "m.>")
	if err != nil {
		return nil, fmt.Errorf("cluster: regions: list: %w", err)
	}
	var ids []region.ID
	for k := range lister.Keys() {
		b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(k, "m."))
		if err != nil {
			continue
		}
		id, err := region.ParseID(string(b))
		if err != nil {
			continue
		}
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b region.ID) int {
		switch {
		case a.Name != b.Name:
			return strings.Compare(a.Name, b.Name)
		case a.Timestamp != b.Timestamp:
			return a.Timestamp - b.Timestamp
		case a.Version != b.Version:
			return a.Version - b.Version
		}
		return int(a.Type) - int(b.Type)
	})
	return ids, nil
}

// objPtr is the value of an object's pointer key: the object store names
// of the current body and of the keepBodies-1 before it. A body is deleted
// only when it is keepBodies updates old, so that a reader that took the
// pointer just before some updates still finds its body.
type objPtr struct {
	Cur  string   `json:"cur"`
	Prev []string `json:"prev,omitempty"`
}

// keepBodies is how many bodies of an object are kept.
const keepBodies = 4

// pointer returns an object's pointer and its revision (0 if absent).
func (s *Regions) pointer(ctx context.Context, id region.ID) (objPtr, uint64, error) {
	e, err := s.kv.Get(ctx, ptrKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return objPtr{}, 0, nil
	}
	if err != nil {
		return objPtr{}, 0, fmt.Errorf("cluster: object %v: %w", id, err)
	}
	var p objPtr
	if err := json.Unmarshal(e.Value(), &p); err != nil || p.Cur == "" {
		return objPtr{}, 0, fmt.Errorf("cluster: object %v: pointer %q: %w", id, e.Value(), region.ErrCorrupt)
	}
	return p, e.Revision(), nil
}

// body reads the current body of an object (nil, 0 if there is none),
// retrying if an update replaced it while it was read.
func (s *Regions) body(ctx context.Context, id region.ID) ([]byte, objPtr, uint64, error) {
	for {
		p, rev, err := s.pointer(ctx, id)
		if err != nil || rev == 0 {
			return nil, p, rev, err
		}
		b, err := readObject(ctx, s.obj, p.Cur, s.limit)
		if err == nil {
			return b, p, rev, nil
		}
		if errors.Is(err, ErrMalformed) {
			return nil, p, rev, fmt.Errorf("cluster: object %v: %w", id, err)
		}
		if _, rev2, err2 := s.pointer(ctx, id); err2 != nil || rev2 == rev {
			return nil, p, rev, fmt.Errorf("cluster: object %v: %w", id, err)
		}
	}
}

// ReadObject implements region.ObjectStorage.
func (s *Regions) ReadObject(ctx context.Context, id region.ID) ([]byte, error) {
	b, _, rev, err := s.body(ctx, id)
	if err != nil {
		return nil, err
	}
	if rev == 0 {
		return nil, fmt.Errorf("cluster: object %v: %w", id, region.ErrNotFound)
	}
	return b, nil
}

// UpdateObject implements region.ObjectStorage: f's result is stored as a
// new body, and the pointer to it is swapped only if no other update came
// first; otherwise f runs again on the newer body.
func (s *Regions) UpdateObject(ctx context.Context, id region.ID, f func(old []byte) ([]byte, error)) error {
	if err := id.Validate(); err != nil {
		return err
	}
	for {
		old, p, rev, err := s.body(ctx, id)
		if err != nil {
			return err
		}
		nb, err := f(old)
		if err != nil {
			return err
		}
		var r [8]byte
		if _, err := rand.Read(r[:]); err != nil {
			return fmt.Errorf("cluster: object %v: %w", id, err)
		}
		name := idKey(id) + "." + hex.EncodeToString(r[:])
		if _, err := s.obj.PutBytes(ctx, name, nb); err != nil {
			return fmt.Errorf("cluster: object %v: store: %w", id, err)
		}
		np := objPtr{Cur: name}
		var drop []string
		if p.Cur != "" {
			np.Prev = append([]string{p.Cur}, p.Prev...)
			if len(np.Prev) > keepBodies-1 {
				np.Prev, drop = np.Prev[:keepBodies-1], np.Prev[keepBodies-1:]
			}
		}
		ptr, _ := json.Marshal(np)
		if rev == 0 {
			_, err = s.kv.Create(ctx, ptrKey(id), ptr)
		} else {
			_, err = s.kv.Update(ctx, ptrKey(id), ptr, rev)
		}
		if err == nil {
			for _, old := range drop {
				_ = s.obj.Delete(ctx, old)
			}
			return nil
		}
		_ = s.obj.Delete(ctx, name)
		if !errors.Is(err, jetstream.ErrKeyExists) && !isWrongSequence(err) {
			return fmt.Errorf("cluster: object %v: swap: %w", id, err)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("cluster: object %v: %w", id, ctx.Err())
		}
	}
}

var (
	_ region.Storage       = (*Regions)(nil)
	_ region.ObjectStorage = (*Regions)(nil)
)
