package stitching

import (
	"fmt"
	"math"
)

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
	return 0, fmt.Errorf("stitching: unknown direction %q (want west or north)", s)
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
type Translation struct {
	X, Y int
	Corr float64
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
		panic(fmt.Sprintf("stitching: pair %v outside a %dx%d grid", p, t.Rows, t.Cols))
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

// Relative lists the translations in canonical pair order (see [Pairs]) as
// records for [WriteRelativePositions]; name gives the tile names.
func (t *Translations) Relative(name func(row, col int) string) []RelativePosition {
	ps := Pairs(t.Rows, t.Cols)
	out := make([]RelativePosition, len(ps))
	for i, p := range ps {
		tr := t.At(p)
		nr, nc := p.Neighbor()
		out[i] = RelativePosition{Dir: p.Dir, Tile: name(p.Row, p.Col), Neighbor: name(nr, nc), Corr: tr.Corr, X: tr.X, Y: tr.Y}
	}
	return out
}

// Position is the global position of a tile (upper-left corner in the
// mosaic) and the correlation of the spanning-tree edge that placed it.
type Position struct {
	X, Y int
	Corr float64
}

// Options tune the stitcher. The zero value selects the documented
// defaults; use negative values where noted to switch a limit off.
type Options struct {
	// PeakCount is the number of peaks of the phase-correlation matrix
	// examined per pair (MIST uses 2). 0 means 2.
	PeakCount int

	// MinOverlap is the minimum overlap, in pixels, that a candidate
	// displacement must leave in each dimension (overlap width and
	// overlap height) to be scored; narrow strips give unreliable but
	// sometimes high correlations. 0 means 8; negative means 1.
	MinOverlap int
	// MinOverlapFraction is the same limit as a fraction of the tile
	// dimension (width for the overlap width, height for the overlap
	// height); the larger of the two limits applies. 0 means 0.02;
	// negative switches the fractional limit off.
	MinOverlapFraction float64

	// Overlap is the expected overlap between adjacent tiles, in percent
	// of the tile size, for both directions. 0 or NaN means: estimate it
	// from the computed translations.
	Overlap float64
	// HorizontalOverlap and VerticalOverlap override Overlap for west
	// pairs (percent of the tile width) and north pairs (percent of the
	// tile height). 0 or NaN means: use Overlap.
	HorizontalOverlap, VerticalOverlap float64
	// OverlapUncertainty is the half-width, in percent of the tile
	// dimension, of the window around the expected overlap in which a
	// translation is considered valid by the stage model; it also bounds
	// the deviation of the orthogonal component. 0 means 5.
	OverlapUncertainty float64

	// Repeatability is the stage repeatability r in pixels: every tile
	// may deviate by up to r from its nominal grid position, so relative
	// translations vary by up to 2r and refinement searches the
	// (4r+1)^2 square around each translation. 0 means: estimate it from
	// the valid translations.
	Repeatability int

	// CorrThreshold is the minimum correlation of a valid translation in
	// the stage model. 0 means 0.5; negative means no threshold. When no
	// translation of a direction reaches it, the median correlation of
	// the translations inside the overlap window is used instead.
	CorrThreshold float64

	// NoFlatField switches off the flat-field (vignetting) correction
	// that [Sequential] applies by default (see [FlatField]); set it to
	// reproduce MIST, which works on the raw tiles.
	NoFlatField bool

	// NoPeriodicDecomposition makes the per-tile FFT transform the raw
	// tile, as MIST does, instead of its periodic component (see
	// [FFT2.ForwardPeriodic] and [TileFFT]).
	NoPeriodicDecomposition bool

	// Whitening is the exponent b of the cross-power spectrum
	// normalization F1 conj(F2) / |F1 conj(F2)|^b. b = 1 is MIST's full
	// normalization (pure phase correlation). 0 means the default 0.75,
	// which keeps a little of the magnitude: with smooth, noisy content
	// the high frequencies are mostly noise, which full normalization
	// amplifies to the weight of the signal; 0.75 gives much stronger true
	// peaks there and about the same results on textured content. Values
	// must lie in (0, 1]; 1, 0.75 and 0.5 are computed without math.Pow.
	Whitening float64
}

// options is Options with defaults resolved.
type options struct {
	peaks        int
	minOv        int
	minOvFrac    float64
	hOverlap     float64 // percent or NaN
	vOverlap     float64 // percent or NaN
	uncertainty  float64 // percent
	repeat       int     // 0: estimate
	corrThresh   float64
	hasThreshold bool
	beta         float64
	periodic     bool
}

func (o Options) resolve() options {
	r := options{
		peaks:        o.PeakCount,
		minOv:        o.MinOverlap,
		minOvFrac:    o.MinOverlapFraction,
		uncertainty:  o.OverlapUncertainty,
		repeat:       o.Repeatability,
		corrThresh:   o.CorrThreshold,
		hasThreshold: true,
		beta:         o.Whitening,
		periodic:     !o.NoPeriodicDecomposition,
	}
	if !(r.beta > 0) {
		r.beta = 0.75
	}
	if r.peaks <= 0 {
		r.peaks = 2
	}
	switch {
	case r.minOv == 0:
		r.minOv = 8
	case r.minOv < 0:
		r.minOv = 1
	}
	switch {
	case r.minOvFrac == 0 || math.IsNaN(r.minOvFrac):
		r.minOvFrac = 0.02
	case r.minOvFrac < 0:
		r.minOvFrac = 0
	}
	if !(r.uncertainty > 0) {
		r.uncertainty = 5
	}
	if r.repeat < 0 {
		r.repeat = 0
	}
	switch {
	case r.corrThresh == 0 || math.IsNaN(r.corrThresh):
		r.corrThresh = 0.5
	case r.corrThresh < 0:
		r.corrThresh = math.Inf(-1)
		r.hasThreshold = false
	}
	ov := func(v float64) float64 {
		if v > 0 && v < 100 {
			return v
		}
		return math.NaN()
	}
	r.hOverlap, r.vOverlap = ov(o.Overlap), ov(o.Overlap)
	if v := ov(o.HorizontalOverlap); !math.IsNaN(v) {
		r.hOverlap = v
	}
	if v := ov(o.VerticalOverlap); !math.IsNaN(v) {
		r.vOverlap = v
	}
	return r
}

// minOverlap returns the minimum overlap width and height for w x h tiles.
func (o options) minOverlap(w, h int) (mx, my int) {
	mx = max(o.minOv, int(math.Ceil(o.minOvFrac*float64(w))), 1)
	my = max(o.minOv, int(math.Ceil(o.minOvFrac*float64(h))), 1)
	return min(mx, w), min(my, h)
}

// validate rejects option values that cannot be meant.
func (o Options) validate() error {
	for _, v := range []struct {
		name string
		val  float64
	}{{"Overlap", o.Overlap}, {"HorizontalOverlap", o.HorizontalOverlap}, {"VerticalOverlap", o.VerticalOverlap}} {
		if v.val != 0 && !math.IsNaN(v.val) && !(v.val > 0 && v.val < 100) {
			return fmt.Errorf("stitching: %s = %v; want a percentage in (0, 100), or 0 to estimate it", v.name, v.val)
		}
	}
	if o.OverlapUncertainty < 0 || o.OverlapUncertainty >= 100 {
		return fmt.Errorf("stitching: OverlapUncertainty = %v; want a percentage in [0, 100)", o.OverlapUncertainty)
	}
	if o.Repeatability < 0 {
		return fmt.Errorf("stitching: Repeatability = %d; want >= 0", o.Repeatability)
	}
	if o.Whitening < 0 || o.Whitening > 1 || math.IsNaN(o.Whitening) {
		return fmt.Errorf("stitching: Whitening = %v; want an exponent in (0, 1], or 0 for the default", o.Whitening)
	}
	if o.CorrThreshold > 1 {
		return fmt.Errorf("stitching: CorrThreshold = %v; want <= 1", o.CorrThreshold)
	}
	return nil
}
