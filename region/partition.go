package region

import (
	"fmt"
	"strconv"
)

// Partition is the share of a domain given to one stage instance: Core, the
// part it owns and commits, and ROI, the part it reads — Core grown by the
// ghost border and clipped to the domain. After computing, an instance
// shrinks its regions' ROI back to Core (Dense.SetROI) before committing.
type Partition struct {
	Index int // position in the partition list
	Core  Box // the cells owned by this instance
	ROI   Box // Core plus its ghost border, inside the domain
}

// Grid partitions domain (a template's Bounds, say) regularly into tiles of
// size tile (per axis; axes beyond domain.Dims are ignored), the last tile
// on each axis being smaller if the extent is not a multiple, and adds a
// ghost border of ghost cells on each side. Partitions are listed in
// row-major order (x fastest).
func Grid(domain Box, tile [3]int, ghost int) ([]Partition, error) {
	if err := domain.Validate(); err != nil {
		return nil, fmt.Errorf("region: grid: %w", err)
	}
	if ghost < 0 {
		return nil, fmt.Errorf("region: grid: negative ghost border %d: %w", ghost, ErrBadBox)
	}
	var n [3]int
	for i := range 3 {
		if i >= domain.Dims {
			tile[i], n[i] = 1, 1
			continue
		}
		if tile[i] <= 0 {
			return nil, fmt.Errorf("region: grid: tile size %v not positive on axis %d: %w", tile, i, ErrBadBox)
		}
		ext := domain.Hi[i] - domain.Lo[i]
		n[i] = (ext + tile[i] - 1) / tile[i]
	}
	var parts []Partition
	for k := range n[2] {
		for j := range n[1] {
			for i := range n[0] {
				c := Box{Dims: domain.Dims}
				for a, t := range [3]int{i, j, k} {
					if a >= domain.Dims {
						c.Lo[a], c.Hi[a] = domain.Lo[a], domain.Hi[a]
						continue
					}
					c.Lo[a] = domain.Lo[a] + t*tile[a]
					c.Hi[a] = min(c.Lo[a]+tile[a], domain.Hi[a])
				}
				parts = append(parts, Partition{Index: len(parts), Core: c, ROI: c.Grow(ghost).Intersect(domain)})
			}
		}
	}
	return parts, nil
}

// Irregular builds partitions from cores chosen by the application (by
// tissue or object density, say): each core must lie inside domain and no
// two may overlap ([ErrBadBox]); they need not cover the domain. Each gets
// a ghost border of ghost cells, clipped to the domain.
func Irregular(domain Box, cores []Box, ghost int) ([]Partition, error) {
	if err := domain.Validate(); err != nil {
		return nil, fmt.Errorf("region: partition: %w", err)
	}
	if ghost < 0 {
		return nil, fmt.Errorf("region: partition: negative ghost border %d: %w", ghost, ErrBadBox)
	}
	parts := make([]Partition, len(cores))
	for i, c := range cores {
		if err := c.Validate(); err != nil {
			return nil, fmt.Errorf("region: partition %d: %w", i, err)
		}
		if !domain.Contains(c) {
			return nil, fmt.Errorf("region: partition %d %v is outside the domain %v: %w", i, c, domain, ErrOutOfBounds)
		}
		for j := range i {
			if !cores[j].Intersect(c).Empty() {
				return nil, fmt.Errorf("region: partitions %d %v and %d %v overlap: %w", j, cores[j], i, c, ErrBadBox)
			}
		}
		parts[i] = Partition{Index: i, Core: c, ROI: c.Grow(ghost).Intersect(domain)}
	}
	return parts, nil
}

// Chunk is one piece of a data region split into chunks: its bounding box
// and the key it is stored under.
type Chunk struct {
	Box Box    // the chunk's extent, in template coordinates
	Key string // the chunk's key in the storage
}

// ChunkMap associates bounding boxes with the keys of the chunks a data
// region is split into (the bb2Id map of the paper's DataRegion), together
// with the region's resolution level.
type ChunkMap struct {
	Resolution int     // resolution level of the region (0: full resolution)
	Chunks     []Chunk // the chunks, in insertion order
}

// SplitChunks returns the chunk map of the region id over bounds cut into
// tiles of size tile (as [Grid], without ghosts); chunk i has the key
// id.String() + "#" + i.
func SplitChunks(id ID, bounds Box, tile [3]int, resolution int) (*ChunkMap, error) {
	parts, err := Grid(bounds, tile, 0)
	if err != nil {
		return nil, err
	}
	m := &ChunkMap{Resolution: resolution, Chunks: make([]Chunk, len(parts))}
	for i, p := range parts {
		m.Chunks[i] = Chunk{Box: p.Core, Key: id.String() + "#" + strconv.Itoa(i)}
	}
	return m, nil
}

// Add appends a chunk. Its box must be valid and the key new ([ErrExists]).
func (m *ChunkMap) Add(b Box, key string) error {
	if err := b.Validate(); err != nil {
		return fmt.Errorf("region: chunk %q: %w", key, err)
	}
	for _, c := range m.Chunks {
		if c.Key == key {
			return fmt.Errorf("region: chunk %q: %w", key, ErrExists)
		}
	}
	m.Chunks = append(m.Chunks, Chunk{Box: b, Key: key})
	return nil
}

// Lookup returns the chunks whose boxes intersect b, in insertion order:
// the pieces a reader of the ROI b must fetch.
func (m *ChunkMap) Lookup(b Box) []Chunk {
	var out []Chunk
	for _, c := range m.Chunks {
		if !c.Box.Intersect(b).Empty() {
			out = append(out, c)
		}
	}
	return out
}
