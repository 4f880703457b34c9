package tileio

import (
	"strings"
	"testing"

	"github.com/gohtgs/htgs/internal/fuzzrun"
)

// FuzzParseLayout: ParseNumbering and ParseOrigin never panic, accept
// exactly MIST's names in any case (the value's String is the name), and
// the layout they make numbers every tile of a rows x cols grid once, from
// 0 to rows*cols-1.
func FuzzParseLayout(f *testing.F) {
	fuzzrun.Prepare(f)
	for _, n := range numberingNames {
		for _, o := range originNames {
			f.Add(n, o, uint8(3), uint8(4))
		}
	}
	f.Add("horizontalcombing", "ul", uint8(1), uint8(1))
	f.Add(" HORIZONTALCOMBING", "U L", uint8(0), uint8(7))
	f.Fuzz(func(t *testing.T, num, org string, rows8, cols8 uint8) {
		n, nerr := ParseNumbering(num)
		if nerr != nil {
			if n != 0 || !strings.Contains(nerr.Error(), "numbering") {
				t.Fatalf("refused %q as %v: %v", num, n, nerr)
			}
		} else if !strings.EqualFold(n.String(), num) {
			t.Fatalf("%q parsed as %v", num, n)
		}
		o, oerr := ParseOrigin(org)
		if oerr != nil {
			if o != 0 || !strings.Contains(oerr.Error(), "origin") {
				t.Fatalf("refused %q as %v: %v", org, o, oerr)
			}
		} else if !strings.EqualFold(o.String(), org) {
			t.Fatalf("%q parsed as %v", org, o)
		}
		if nerr != nil || oerr != nil {
			return
		}
		l := Layout{Numbering: n, Origin: o}
		rows, cols := 1+int(rows8%16), 1+int(cols8%16)
		seen := make([]bool, rows*cols)
		for r := range rows {
			for c := range cols {
				i := l.Index(r, c, rows, cols)
				if i < 0 || i >= rows*cols || seen[i] {
					t.Fatalf("%v: tile (%d, %d) of %d x %d has index %d (out of range or twice)", l, r, c, rows, cols, i)
				}
				seen[i] = true
			}
		}
	})
}
