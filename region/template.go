package region

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Template is a region template: a named container for the data regions of
// one spatial (and temporal) domain, such as the tiles, masks and feature
// maps of one slide. Its bounding box is kept the smallest box containing
// the bounds of every region inserted.
//
// Regions are keyed by their full identifier; regions of the same name must
// differ in kind, timestamp or version. A Template is safe for concurrent
// use.
type Template struct {
	name string

	mu      sync.RWMutex
	lazy    bool
	bounds  Box
	regions map[string][]Region // by name, in insertion order
}

// NewTemplate returns an empty template. The name follows the rules of a
// region name (see ID.Validate).
func NewTemplate(name string) (*Template, error) {
	if err := (ID{Name: name, Type: Dense2D}).Validate(); err != nil {
		return nil, fmt.Errorf("region: template name: %w", err)
	}
	return &Template{name: name, regions: map[string][]Region{}}, nil
}

// Name returns the template's name.
func (t *Template) Name() string { return t.name }

// SetLazy chooses how Instantiate reads the template's regions: eagerly
// (the default: every region's ROI is read before the stage runs) or lazily
// (nothing is read up front; each region is read on first access). Lazy
// reading suits regions larger than memory or ROIs known only at run time.
func (t *Template) SetLazy(lazy bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lazy = lazy
}

// Lazy reports whether the template reads its regions lazily.
func (t *Template) Lazy() bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.lazy
}

// Bounds returns the smallest box containing every region's bounds (the
// zero Box while the template is empty).
func (t *Template) Bounds() Box {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.bounds
}

// Insert adds r. A region with the same identifier already in the template
// gives [ErrExists].
func (t *Template) Insert(r Region) error {
	id := r.ID()
	if err := id.Validate(); err != nil {
		return fmt.Errorf("region: insert into %q: %w", t.name, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, o := range t.regions[id.Name] {
		if o.ID() == id {
			return fmt.Errorf("region: insert %v into %q: %w", id, t.name, ErrExists)
		}
	}
	t.regions[id.Name] = append(t.regions[id.Name], r)
	t.bounds = t.bounds.Union(r.Bounds())
	return nil
}

// Remove deletes the region id from the template (the bounds do not
// shrink). A missing region gives [ErrNotFound].
func (t *Template) Remove(id ID) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	rs := t.regions[id.Name]
	for i, o := range rs {
		if o.ID() == id {
			rs = append(rs[:i:i], rs[i+1:]...)
			if len(rs) == 0 {
				delete(t.regions, id.Name)
			} else {
				t.regions[id.Name] = rs
			}
			return nil
		}
	}
	return fmt.Errorf("region: remove %v from %q: %w", id, t.name, ErrNotFound)
}

// Region returns the region with identifier id. An invalid identifier gives
// [ErrBadID], a missing region [ErrNotFound]; the error names the versions
// of the region that do exist.
func (t *Template) Region(id ID) (Region, error) {
	if err := id.Validate(); err != nil {
		return nil, fmt.Errorf("region: lookup in %q: %w", t.name, err)
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	rs := t.regions[id.Name]
	for _, r := range rs {
		if r.ID() == id {
			return r, nil
		}
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("region: %v in template %q: %w", id, t.name, ErrNotFound)
	}
	have := make([]ID, len(rs))
	for i, r := range rs {
		have[i] = r.ID()
	}
	sortIDs(have)
	return nil, fmt.Errorf("region: %v in template %q (have %v): %w", id, t.name, have, ErrNotFound)
}

// Latest returns the region named name with the highest timestamp, then
// version: the one a stage reading "the current mask" wants.
func (t *Template) Latest(name string) (Region, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var best Region
	for _, r := range t.regions[name] {
		if best == nil || best.ID().less(r.ID()) {
			best = r
		}
	}
	if best == nil {
		return nil, fmt.Errorf("region: %q in template %q: %w", name, t.name, ErrNotFound)
	}
	return best, nil
}

// Regions returns every region, sorted by identifier.
func (t *Template) Regions() []Region {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var ids []ID
	byID := map[ID]Region{}
	for _, rs := range t.regions {
		for _, r := range rs {
			ids = append(ids, r.ID())
			byID[r.ID()] = r
		}
	}
	sortIDs(ids)
	out := make([]Region, len(ids))
	for i, id := range ids {
		out[i] = byID[id]
	}
	return out
}

// Len returns the number of regions.
func (t *Template) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	n := 0
	for _, rs := range t.regions {
		n += len(rs)
	}
	return n
}

// Instantiate reads every region's ROI from its input storage, unless the
// template is lazy, in which case it does nothing and each region is read on
// first access. Regions already in memory are left alone. All regions are
// attempted; the errors are joined.
func (t *Template) Instantiate(ctx context.Context) error {
	if t.Lazy() {
		return nil
	}
	var errs []error
	for _, r := range t.Regions() {
		if err := r.Stage(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("region: instantiate %q: %w", t.name, err)
	}
	return nil
}

// Get returns the dense region id of element type T from t: [ErrNotFound]
// if it is missing, [ErrType] if it is not a Dense[T].
func Get[T Elem](t *Template, id ID) (*Dense[T], error) {
	r, err := t.Region(id)
	if err != nil {
		return nil, err
	}
	d, ok := r.(*Dense[T])
	if !ok {
		return nil, fmt.Errorf("region: %v in %q holds %v, not %v: %w", id, t.name, r.Elem(), ElemOf[T](), ErrType)
	}
	return d, nil
}
