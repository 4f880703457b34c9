package tiled

import (
	"errors"
	"fmt"
)

// BigTIFFStream writes a pyramidal BigTIFF, as WriteBigTIFF does, from
// full-resolution rows that arrive in order, without the full-resolution
// image ever being stored: each completed row of tiles goes straight to
// the file, and the first reduced level is built from the rows as they
// pass into a temporary tiled image (a quarter of the size); the further
// levels are built from it at Close. The file is byte for byte the one
// WriteBigTIFF makes of the same pixels.
type BigTIFFStream struct {
	W, H, TW, TH int

	t      *tiffWriter
	levels int
	tmpDir string
	budget int64
	next   int      // first row not yet written
	offs   []uint64 // full-resolution tile offsets so far
	half   *Image   // level 1 (nil with one level)
	down   []uint16 // level-1 rows of one call
	done   bool
}

// CreateBigTIFF starts a BigTIFF of a w x h image in tw x th tiles
// (multiples of 16) with levels levels (<= 0: down to one tile, see
// Levels) at path; the reduced levels' temporary images go to tmpDir with
// caches of budget bytes.
func CreateBigTIFF(path string, w, h, tw, th, levels int, tmpDir string, budget int64) (*BigTIFFStream, error) {
	if tw <= 0 || th <= 0 || tw%16 != 0 || th%16 != 0 {
		return nil, fmt.Errorf("tiled: TIFF tiles must be multiples of 16, have %dx%d", tw, th)
	}
	if w <= 0 || h <= 0 {
		return nil, fmt.Errorf("tiled: bad size %dx%d", w, h)
	}
	if levels <= 0 {
		levels = Levels(w, h, tw, th)
	}
	s := &BigTIFFStream{W: w, H: h, TW: tw, TH: th, levels: levels, tmpDir: tmpDir, budget: budget}
	if levels > 1 {
		half, err := CreateTemp(tmpDir, (w+1)/2, (h+1)/2, tw, th, budget)
		if err != nil {
			return nil, err
		}
		s.half = half
	}
	t, err := newTIFFWriter(path, tw, th)
	if err != nil {
		if s.half != nil {
			s.half.Close()
		}
		return nil, err
	}
	s.t = t
	return s, nil
}

// WriteRows writes the full-resolution rows [y0, y0+n) from px (row
// stride W). Rows come in order (y0 is the first row not yet written) and
// n is a multiple of TH unless the rows reach the image's last.
func (s *BigTIFFStream) WriteRows(y0, n int, px []uint16) error {
	switch {
	case s.done:
		return errors.New("tiled: WriteRows after Close")
	case y0 != s.next:
		return fmt.Errorf("tiled: rows from %d, expected %d", y0, s.next)
	case n <= 0 || y0+n > s.H || (n%s.TH != 0 && y0+n != s.H):
		return fmt.Errorf("tiled: %d rows from %d: want a multiple of %d or up to row %d", n, y0, s.TH, s.H)
	case len(px) < n*s.W:
		return errors.New("tiled: WriteRows buffer too small")
	}
	tile := s.t.buf
	for ty0 := y0; ty0 < y0+n; ty0 += s.TH {
		ch := min(s.TH, s.H-ty0)
		for tx0 := 0; tx0 < s.W; tx0 += s.TW {
			cw := min(s.TW, s.W-tx0)
			for y := range ch {
				copy(tile[y*s.TW:y*s.TW+cw], px[(ty0-y0+y)*s.W+tx0:])
			}
			s.offs = append(s.offs, s.t.tile(tile, s.TW, s.TH, cw, ch))
		}
	}
	if s.t.w.err != nil {
		return s.t.w.err
	}
	s.next = y0 + n
	if s.half == nil {
		return nil
	}
	// Level 1 rows [y0/2, ceil((y0+n)/2)): 2x2 means, the last row and
	// column repeated where the image is odd, as Downsample's clamped read.
	hw := s.half.W
	rows := (y0+n+1)/2 - y0/2
	if cap(s.down) < rows*hw {
		s.down = make([]uint16, rows*hw)
	}
	d := s.down[:rows*hw]
	for r := range rows {
		Y := y0/2 + r
		r0 := px[(2*Y-y0)*s.W : (2*Y-y0+1)*s.W]
		r1 := px[(min(2*Y+1, s.H-1)-y0)*s.W:][:s.W]
		out := d[r*hw : (r+1)*hw]
		for X := range out {
			c0, c1 := 2*X, min(2*X+1, s.W-1)
			sum := uint32(r0[c0]) + uint32(r0[c1]) + uint32(r1[c0]) + uint32(r1[c1])
			out[X] = uint16((sum + 2) / 4)
		}
	}
	return s.half.WriteRect(0, y0/2, hw, rows, d)
}

// Close writes the full resolution's IFD and the reduced levels and
// finishes the file; every row must have been written. On error the file
// is removed.
func (s *BigTIFFStream) Close() error {
	if s.done {
		return errors.New("tiled: BigTIFFStream closed twice")
	}
	s.done = true
	var err error
	if s.next != s.H {
		err = fmt.Errorf("tiled: closed after %d of %d rows", s.next, s.H)
	}
	if err == nil {
		s.t.ifd(0, s.W, s.H, s.TW, s.TH, s.offs)
		err = s.t.w.err
	}
	if s.half != nil {
		if err == nil {
			err = s.half.Flush()
		}
		if err == nil {
			err = eachLevel(s.half, s.levels-1, s.tmpDir, s.budget, func(l int, level *Image) error {
				return s.t.level(l+1, level)
			})
		}
		if cerr := s.half.Close(); err == nil {
			err = cerr
		}
	}
	return s.t.finish(err)
}
