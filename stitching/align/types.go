package align

import "fmt"

// Direction says which neighbour of a tile a [Pair] refers to.
type Direction uint8

const (
	// West pairs tile (r, c) with its left neighbour (r, c-1).
	West Direction = iota
	// North pairs tile (r, c) with its upper neighbour (r-1, c).
	North
)

// String returns "west" or "north".
func (d Direction) String() string {
	switch d {
	case West:
		return "west"
	case North:
		return "north"
	}
	return fmt.Sprintf("Direction(%d)", uint8(d))
}

// ParseDirection is the inverse of [Direction.String].
func ParseDirection(s string) (Direction, error) {
	switch s {
	case "west":
		return West, nil
	case "north":
		return North, nil
	}
	return 0, fmt.Errorf("align: unknown direction %q (want west or north)", s)
}

// Pair identifies an adjacent pair of tiles: tile (Row, Col) and its
// neighbour in direction Dir. Tile 1 of the pair is the neighbour, tile 2
// is (Row, Col).
type Pair struct {
	Row, Col int
	Dir      Direction
}

// Neighbor returns the grid coordinates of the neighbour (tile 1) of p.
func (p Pair) Neighbor() (row, col int) {
	if p.Dir == West {
		return p.Row, p.Col - 1
	}
	return p.Row - 1, p.Col
}

// String formats p as "west(r,c)" or "north(r,c)".
func (p Pair) String() string {
	return fmt.Sprintf("%s(%d,%d)", p.Dir, p.Row, p.Col)
}

// Pairs returns every adjacent pair of a rows x cols grid in canonical
// order: tiles in row-major order, and for each tile its west pair (if
// col > 0) before its north pair (if row > 0).
func Pairs(rows, cols int) []Pair {
	if rows <= 0 || cols <= 0 {
		return nil
	}
	ps := make([]Pair, 0, 2*rows*cols)
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			if c > 0 {
				ps = append(ps, Pair{r, c, West})
			}
			if r > 0 {
				ps = append(ps, Pair{r, c, North})
			}
		}
	}
	return ps
}

// Translation is the displacement of tile 2 of a pair relative to tile 1
// (see the package documentation for the sign convention) together with the
// normalized cross-correlation of the two tiles over their overlap at that
// displacement. Corr is in [-1, 1]; -1 also marks "no admissible
// displacement found".
//
// Translations found by a search of the NCC surface ([Refiner.Refine],
// [StageModel.Refine]) also say how clearly the surface peaks there: Margin
// is Corr minus the highest NCC of the searched box more than 1 px
// (Chebyshev) away (a small margin: another displacement matches almost
// as well), and Spread is the largest Chebyshev distance in pixels from
// (X, Y) of a displacement of the box whose NCC is within
// [NCCTolerance] of Corr (0: the peak is sharp; 1 or more: the content
// cannot tell the displacements within Spread apart). Both are 0 for
// translations not found by such a search (PCIAM+CCF, repairs).
type Translation struct {
	X, Y   int
	Corr   float64
	Margin float64
	Spread int
}

// Translations holds one [Translation] per adjacent pair of a Rows x Cols
// grid. West[r*Cols+c] is the translation of the west pair of tile (r, c)
// and North[r*Cols+c] that of its north pair; entries of tiles in column 0
// (West) or row 0 (North) are unused and stay zero. Set on distinct pairs
// writes distinct elements, so tasks may fill one Translations
// concurrently as long as each pair has one writer.
type Translations struct {
	Rows, Cols int
	West       []Translation
	North      []Translation
}

// NewTranslations returns zeroed translations for a rows x cols grid.
func NewTranslations(rows, cols int) *Translations {
	n := rows * cols
	return &Translations{Rows: rows, Cols: cols, West: make([]Translation, n), North: make([]Translation, n)}
}

// At returns the translation of pair p. It panics if p is not a pair of
// the grid.
func (t *Translations) At(p Pair) Translation {
	return *t.ref(p)
}

// Set stores the translation of pair p. It panics if p is not a pair of
// the grid.
func (t *Translations) Set(p Pair, tr Translation) {
	*t.ref(p) = tr
}

func (t *Translations) ref(p Pair) *Translation {
	if p.Row < 0 || p.Row >= t.Rows || p.Col < 0 || p.Col >= t.Cols ||
		(p.Dir == West && p.Col == 0) || (p.Dir == North && p.Row == 0) || p.Dir > North {
		panic(fmt.Sprintf("align: pair %v outside a %dx%d grid", p, t.Rows, t.Cols))
	}
	i := p.Row*t.Cols + p.Col
	if p.Dir == West {
		return &t.West[i]
	}
	return &t.North[i]
}

// Clone returns a deep copy of t.
func (t *Translations) Clone() *Translations {
	c := &Translations{Rows: t.Rows, Cols: t.Cols}
	c.West = append([]Translation(nil), t.West...)
	c.North = append([]Translation(nil), t.North...)
	return c
}

// Position is the global position of a tile (upper-left corner in the
// mosaic) and the correlation of the spanning-tree edge that placed it.
type Position struct {
	X, Y int
	Corr float64
}
