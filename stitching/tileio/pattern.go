package tileio

import (
	"fmt"
	"strconv"
	"strings"
)

// Pattern is a parsed tile file-name pattern such as "img_r{rrr}_c{ccc}.tif".
//
// Placeholders are a run of one repeated letter in braces:
//
//   - {r}, {rr}, {rrr}, ...: the row number;
//   - {c}, {cc}, {ccc}, ...: the column number;
//   - {i}, {ii}, {iii}, ...: the sequential tile index in row-major order
//     (index = row*cols + col).
//
// Numbers are zero-padded to the width of the placeholder; numbers wider
// than the placeholder are printed in full. Numbering starts at First (NIST
// data sets count from 1). A pattern must contain either {i} or both {r}
// and {c}; it may not mix {i} with {r}/{c}. Any other use of '{' or '}' is
// an error. Two placeholders must be separated by at least one literal
// character, so that names stay unambiguous.
type Pattern struct {
	// First is the number of the first row, column and index.
	First int

	src   string
	parts []patternPart
}

type patternPart struct {
	lit   string // literal text when kind == 0
	kind  byte   // 0, 'r', 'c' or 'i'
	width int
}

// ParsePattern parses a pattern (see [Pattern]); first is the number of the
// first row/column/index and must be non-negative.
func ParsePattern(s string, first int) (Pattern, error) {
	if first < 0 {
		return Pattern{}, fmt.Errorf("tileio: pattern %q: negative first index %d", s, first)
	}
	p := Pattern{First: first, src: s}
	var lit strings.Builder
	var hasR, hasC, hasI bool
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
			if k != 'r' && k != 'c' && k != 'i' || strings.Count(body, string(k)) != len(body) {
				return Pattern{}, fmt.Errorf("tileio: pattern %q: unknown placeholder {%s} at offset %d (want {r..}, {c..} or {i..})", s, body, i)
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
		return Pattern{}, fmt.Errorf("tileio: pattern %q mixes {i} with {r}/{c}", s)
	case !hasI && !(hasR && hasC):
		return Pattern{}, fmt.Errorf("tileio: pattern %q needs both {r} and {c}, or {i}", s)
	}
	return p, nil
}

// String returns the pattern text as given to [ParsePattern].
func (p Pattern) String() string { return p.src }

// Sequential reports whether the pattern numbers tiles with {i}.
func (p Pattern) Sequential() bool {
	for _, q := range p.parts {
		if q.kind == 'i' {
			return true
		}
	}
	return false
}

// Name returns the file name of tile (row, col), 0-based, in a grid with
// cols columns (cols only matters for {i} patterns).
func (p Pattern) Name(row, col, cols int) string {
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
			n = row*cols + col + p.First
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
