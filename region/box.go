package region

import (
	"fmt"
	"strings"
)

// Box is an axis-aligned box of 1, 2 or 3 dimensions in the integer
// coordinates of a region template. It is half-open: it holds the points p
// with Lo[i] <= p[i] < Hi[i] for i < Dims. A 2-D box keeps Lo[2] = 0 and
// Hi[2] = 1, so that its element count and shape read the same as a
// one-plane 3-D box; a 1-D box likewise keeps y and z in [0,1).
//
// The zero Box (Dims 0) is the empty box with no dimensions; it is what an
// empty region template reports as its bounds.
type Box struct {
	Dims   int    // 1, 2 or 3
	Lo, Hi [3]int // inclusive lower corner, exclusive upper corner
}

// Span returns the 1-D box [x0, x1).
func Span(x0, x1 int) Box {
	return Box{Dims: 1, Lo: [3]int{x0, 0, 0}, Hi: [3]int{x1, 1, 1}}
}

// Rect returns the 2-D box [x0, x1) x [y0, y1).
func Rect(x0, y0, x1, y1 int) Box {
	return Box{Dims: 2, Lo: [3]int{x0, y0, 0}, Hi: [3]int{x1, y1, 1}}
}

// Cube returns the 3-D box [x0, x1) x [y0, y1) x [z0, z1).
func Cube(x0, y0, z0, x1, y1, z1 int) Box {
	return Box{Dims: 3, Lo: [3]int{x0, y0, z0}, Hi: [3]int{x1, y1, z1}}
}

// Validate reports whether b is a well-formed box: 1, 2 or 3 dimensions, no
// negative extent, a 2-D box lying in the plane z = 0 and a 1-D box on the
// line y = z = 0. Errors wrap [ErrBadBox].
func (b Box) Validate() error {
	switch b.Dims {
	case 1:
		if b.Lo[1] != 0 || b.Hi[1] != 1 || b.Lo[2] != 0 || b.Hi[2] != 1 {
			return fmt.Errorf("region: 1-D box %v must have y and z ranges [0,1): %w", b, ErrBadBox)
		}
	case 2:
		if b.Lo[2] != 0 || b.Hi[2] != 1 {
			return fmt.Errorf("region: 2-D box %v must have z range [0,1): %w", b, ErrBadBox)
		}
	case 3:
	default:
		return fmt.Errorf("region: box %v has %d dimensions, want 1, 2 or 3: %w", b, b.Dims, ErrBadBox)
	}
	n := 1
	for i := range b.Dims {
		if b.Hi[i] < b.Lo[i] {
			return fmt.Errorf("region: box %v has negative extent on axis %d: %w", b, i, ErrBadBox)
		}
		e := b.Hi[i] - b.Lo[i]
		if e < 0 || e > 0 && n > maxBoxLen/e {
			return fmt.Errorf("region: box %v holds more than %d elements: %w", b, maxBoxLen, ErrBadBox)
		}
		n *= e
	}
	return nil
}

// maxBoxLen bounds the elements of a valid box, so that its length and its
// size in bytes (8 per element at most) fit an int64.
const maxBoxLen = 1 << 59

// Shape returns the extent of b on each axis (1 on z for a 2-D box).
func (b Box) Shape() [3]int {
	if b.Dims == 0 {
		return [3]int{}
	}
	return [3]int{b.Hi[0] - b.Lo[0], b.Hi[1] - b.Lo[1], b.Hi[2] - b.Lo[2]}
}

// Len returns the number of points in b.
func (b Box) Len() int {
	s := b.Shape()
	if s[0] <= 0 || s[1] <= 0 || s[2] <= 0 {
		return 0
	}
	return s[0] * s[1] * s[2]
}

// Empty reports whether b holds no point.
func (b Box) Empty() bool { return b.Len() == 0 }

// Contains reports whether every point of c lies in b. An empty c of the
// same dimensionality is contained in any b.
func (b Box) Contains(c Box) bool {
	if b.Dims != c.Dims {
		return false
	}
	if c.Empty() {
		return true
	}
	for i := range 3 {
		if c.Lo[i] < b.Lo[i] || c.Hi[i] > b.Hi[i] {
			return false
		}
	}
	return true
}

// ContainsPoint reports whether the point (x, y, z) lies in b. For a 2-D box
// z must be 0.
func (b Box) ContainsPoint(x, y, z int) bool {
	return b.Dims != 0 &&
		x >= b.Lo[0] && x < b.Hi[0] &&
		y >= b.Lo[1] && y < b.Hi[1] &&
		z >= b.Lo[2] && z < b.Hi[2]
}

// Intersect returns the largest box contained in both b and c; it is empty
// when they do not overlap. Boxes of different dimensionality do not
// intersect: the result is then the zero Box.
func (b Box) Intersect(c Box) Box {
	if b.Dims != c.Dims {
		return Box{}
	}
	r := Box{Dims: b.Dims}
	for i := range 3 {
		r.Lo[i] = max(b.Lo[i], c.Lo[i])
		r.Hi[i] = max(r.Lo[i], min(b.Hi[i], c.Hi[i]))
	}
	return r
}

// Union returns the smallest box containing both b and c. The zero Box is
// the identity; a 2-D box united with a 3-D box gives a 3-D box.
func (b Box) Union(c Box) Box {
	if b.Dims == 0 {
		return c
	}
	if c.Dims == 0 {
		return b
	}
	r := Box{Dims: max(b.Dims, c.Dims)}
	for i := range 3 {
		r.Lo[i] = min(b.Lo[i], c.Lo[i])
		r.Hi[i] = max(b.Hi[i], c.Hi[i])
	}
	return r
}

// Grow returns b extended by n on both sides of each of its axes (shrunk
// for a negative n): the box of a partition with its ghost border. Axes
// beyond b.Dims are left alone. The result may need clipping to a domain
// with Intersect.
func (b Box) Grow(n int) Box {
	for i := range b.Dims {
		b.Lo[i] -= n
		b.Hi[i] += n
		if b.Hi[i] < b.Lo[i] {
			b.Hi[i] = b.Lo[i]
		}
	}
	return b
}

// String formats b as "[x0,x1)", "[x0,x1)x[y0,y1)" or "[x0,x1)x[y0,y1)x[z0,z1)".
func (b Box) String() string {
	if b.Dims == 0 {
		return "[]"
	}
	var sb strings.Builder
	for i := range min(b.Dims, 3) {
		if i > 0 {
			sb.WriteByte('x')
		}
		fmt.Fprintf(&sb, "[%d,%d)", b.Lo[i], b.Hi[i])
	}
	return sb.String()
}
