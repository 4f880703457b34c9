package tileio

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Pattern is a parsed tile file-name pattern such as "img_r{rrr}_c{ccc}.tif".
//
// Placeholders are a run of one repeated letter in braces:
//
//   - {r}, {rr}, {rrr}, ...: the row number;
//   - {c}, {cc}, {ccc}, ...: the column number;
//   - {i}, {ii}, {iii}, ... or MIST's {p}, {pp}, {ppp}, ...: the sequential
//     position index, numbered over the grid as Layout says (row-major from
//     the upper-left corner by default: index = row*cols + col);
//   - {t}, {tt}, {ttt}, ...: the time slice (see [Pattern.AtTime]), optional.
//
// Numbers are zero-padded to the width of the placeholder; numbers wider
// than the placeholder are printed in full. Numbering starts at First (NIST
// data sets count from 1). A pattern must contain either a position index
// or both {r} and {c}; it may not mix the two. Any other use of '{' or '}'
// is an error. Two placeholders must be separated by at least one literal
// character, so that names stay unambiguous.
type Pattern struct {
	// First is the number of the first row, column and index.
	First int
	// Layout is the order in which the tiles were acquired (MIST's
	// numbering pattern and grid origin): the position index of a
	// sequential pattern runs over the grid in it; row-column names do not
	// depend on it. A [TileSet] and a [Watcher] give it as their
	// acquisition order ([AcquisitionOrder]). The zero value is row by row
	// from the upper-left corner.
	Layout Layout

	src   string
	parts []patternPart
	time  int
}

// Numbering is the order in which a sequential pattern's position index
// runs over the grid (MIST's numberingPattern).
type Numbering uint8

// The numberings of MIST, from the grid's origin corner.
const (
	// HorizontalCombing numbers row by row, every row in the same
	// direction.
	HorizontalCombing Numbering = iota
	// VerticalCombing numbers column by column, every column in the same
	// direction.
	VerticalCombing
	// HorizontalContinuous numbers row by row, turning back at the end of
	// each row (a snake).
	HorizontalContinuous
	// VerticalContinuous numbers column by column, turning back at the end
	// of each column.
	VerticalContinuous
)

var numberingNames = [...]string{"HORIZONTALCOMBING", "VERTICALCOMBING", "HORIZONTALCONTINUOUS", "VERTICALCONTINUOUS"}

// String returns MIST's name of the numbering, such as "HORIZONTALCOMBING".
func (n Numbering) String() string {
	if int(n) < len(numberingNames) {
		return numberingNames[n]
	}
	return fmt.Sprintf("Numbering(%d)", int(n))
}

// ParseNumbering parses MIST's numbering names, in any case.
func ParseNumbering(s string) (Numbering, error) {
	for i, name := range numberingNames {
		if strings.EqualFold(s, name) {
			return Numbering(i), nil
		}
	}
	return 0, fmt.Errorf("tileio: unknown numbering %q (want %s)", s, strings.Join(numberingNames[:], ", "))
}

// Origin is the grid corner where a sequential numbering starts (MIST's
// gridOrigin).
type Origin uint8

// The four corners.
const (
	UpperLeft Origin = iota
	UpperRight
	LowerLeft
	LowerRight
)

var originNames = [...]string{"UL", "UR", "LL", "LR"}

// String returns MIST's name of the corner: "UL", "UR", "LL" or "LR".
func (o Origin) String() string {
	if int(o) < len(originNames) {
		return originNames[o]
	}
	return fmt.Sprintf("Origin(%d)", int(o))
}

// ParseOrigin parses MIST's corner names UL, UR, LL and LR, in any case.
func ParseOrigin(s string) (Origin, error) {
	for i, name := range originNames {
		if strings.EqualFold(s, name) {
			return Origin(i), nil
		}
	}
	return 0, fmt.Errorf("tileio: unknown grid origin %q (want UL, UR, LL or LR)", s)
}

// Layout says how a sequential position index runs over a grid.
type Layout struct {
	Numbering Numbering
	Origin    Origin
}

// Index returns the 0-based position index of tile (row, col) of a rows x
// cols grid: the numbering is laid out from the upper-left corner, then
// mirrored left-right for a right origin and top-bottom for a lower one,
// as MIST does.
func (l Layout) Index(row, col, rows, cols int) int {
	if l.Origin == UpperRight || l.Origin == LowerRight {
		col = cols - 1 - col
	}
	if l.Origin == LowerLeft || l.Origin == LowerRight {
		row = rows - 1 - row
	}
	switch l.Numbering {
	case VerticalCombing:
		return col*rows + row
	case HorizontalContinuous:
		if row%2 == 1 {
			col = cols - 1 - col
		}
		return row*cols + col
	case VerticalContinuous:
		if col%2 == 1 {
			row = rows - 1 - row
		}
		return col*rows + row
	}
	return row*cols + col
}

type patternPart struct {
	lit   string // literal text when kind == 0
	kind  byte   // 0, 'r', 'c', 'i' (also for {p}) or 't'
	width int
}

// ParsePattern parses a pattern (see [Pattern]); first is the number of the
// first row/column/index and must be non-negative.
func ParsePattern(s string, first int) (Pattern, error) {
	if first < 0 {
		return Pattern{}, fmt.Errorf("tileio: pattern %q: negative first index %d", s, first)
	}
	if err := checkLocal(s); err != nil {
		return Pattern{}, err
	}
	p := Pattern{First: first, src: s}
	var lit strings.Builder
	var hasR, hasC, hasI, hasT bool
	lastWasPlaceholder := false
	for i := 0; i < len(s); {
		switch s[i] {
		case '}':
			return Pattern{}, fmt.Errorf("tileio: pattern %q: unmatched '}' at offset %d", s, i)
		case '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return Pattern{}, fmt.Errorf("tileio: pattern %q: unterminated '{' at offset %d", s, i)
			}
			body := s[i+1 : i+end]
			if body == "" {
				return Pattern{}, fmt.Errorf("tileio: pattern %q: empty placeholder at offset %d", s, i)
			}
			k := body[0]
			if !strings.ContainsRune("rcipt", rune(k)) || strings.Count(body, string(k)) != len(body) {
				return Pattern{}, fmt.Errorf("tileio: pattern %q: unknown placeholder {%s} at offset %d (want {r..}, {c..}, {i..}, {p..} or {t..})", s, body, i)
			}
			if k == 'p' {
				k = 'i'
			}
			if lastWasPlaceholder && lit.Len() == 0 {
				return Pattern{}, fmt.Errorf("tileio: pattern %q: placeholders at offset %d must be separated by literal text", s, i)
			}
			if lit.Len() > 0 {
				p.parts = append(p.parts, patternPart{lit: lit.String()})
				lit.Reset()
			}
			p.parts = append(p.parts, patternPart{kind: k, width: len(body)})
			switch k {
			case 'r':
				hasR = true
			case 'c':
				hasC = true
			case 'i':
				hasI = true
			case 't':
				if hasT {
					return Pattern{}, fmt.Errorf("tileio: pattern %q: two time-slice placeholders", s)
				}
				hasT = true
			}
			lastWasPlaceholder = true
			i += end + 1
		default:
			lit.WriteByte(s[i])
			i++
		}
	}
	if lit.Len() > 0 {
		p.parts = append(p.parts, patternPart{lit: lit.String()})
	}
	switch {
	case hasI && (hasR || hasC):
		return Pattern{}, fmt.Errorf("tileio: pattern %q mixes a position index {i}/{p} with {r}/{c}", s)
	case !hasI && !(hasR && hasC):
		return Pattern{}, fmt.Errorf("tileio: pattern %q needs both {r} and {c}, or a position index {i} or {p}", s)
	}
	return p, nil
}

// checkLocal refuses a pattern whose names would leave the tile folder:
// an absolute path, or a ".." component. A placeholder prints digits, so
// only the literal text can form such a component.
func checkLocal(s string) error {
	if filepath.IsAbs(s) || strings.HasPrefix(s, "/") || strings.HasPrefix(s, `\`) {
		return fmt.Errorf("tileio: pattern %q: an absolute path; a pattern names files inside the tile folder (put the folder in -dir)", s)
	}
	for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == '/' || r == filepath.Separator }) {
		if part == ".." {
			return fmt.Errorf("tileio: pattern %q: a \"..\" component would leave the tile folder (put the folder in -dir)", s)
		}
	}
	return nil
}

// String returns the pattern text as given to [ParsePattern].
func (p Pattern) String() string { return p.src }

// Sequential reports whether the pattern numbers tiles with a position
// index ({i} or {p}).
func (p Pattern) Sequential() bool {
	for _, q := range p.parts {
		if q.kind == 'i' {
			return true
		}
	}
	return false
}

// HasTime reports whether the pattern has a time-slice placeholder {t}.
func (p Pattern) HasTime() bool {
	for _, q := range p.parts {
		if q.kind == 't' {
			return true
		}
	}
	return false
}

// AtTime returns the pattern with its time-slice placeholder set to t (the
// number printed, as MIST counts slices). Names of a pattern without {t}
// do not change.
func (p Pattern) AtTime(t int) Pattern {
	p.time = t
	return p
}

// Time returns the time slice set by AtTime (0 by default).
func (p Pattern) Time() int { return p.time }

// Name returns the file name of tile (row, col), 0-based, in a rows x cols
// grid (the grid's size matters only for sequential patterns).
func (p Pattern) Name(row, col, rows, cols int) string {
	var b strings.Builder
	for _, q := range p.parts {
		var n int
		switch q.kind {
		case 0:
			b.WriteString(q.lit)
			continue
		case 'r':
			n = row + p.First
		case 'c':
			n = col + p.First
		case 'i':
			n = p.Layout.Index(row, col, rows, cols) + p.First
		case 't':
			n = p.time
		}
		d := strconv.Itoa(n)
		if n >= 0 {
			for k := len(d); k < q.width; k++ {
				b.WriteByte('0')
			}
		}
		b.WriteString(d)
	}
	return b.String()
}

// ParseTimeSlices parses MIST's time-slice syntax, the slices to stitch
// of a pattern with {t}: comma-separated numbers and inclusive ranges,
// "1-3,5". The result is sorted, without repeats, and holds a million
// slices at most.
func ParseTimeSlices(s string) ([]int, error) {
	seen := map[int]bool{}
	var out []int
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(strings.TrimSpace(lo))
		b, err2 := a, error(nil)
		if isRange {
			b, err2 = strconv.Atoi(strings.TrimSpace(hi))
		}
		if err1 != nil || err2 != nil || a < 0 || b < a {
			return nil, fmt.Errorf("time slices %q: %q is not a number N or a range N-M with N <= M", s, part)
		}
		if b-a > 1_000_000 {
			return nil, fmt.Errorf("time slices %q: range %q too long", s, part)
		}
		for t := a; t <= b; t++ {
			if !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		}
		if len(out) > 1_000_000 {
			return nil, fmt.Errorf("time slices %q: more than a million slices", s)
		}
	}
	sort.Ints(out)
	return out, nil
}
