package tileio

import (
	"strings"
	"testing"
	"unicode"
)

func TestPatternName(t *testing.T) {
	cases := []struct {
		pat              string
		first            int
		row, col, cols   int
		want             string
		wantSequentialOK bool
	}{
		{"img_r{rrr}_c{ccc}.tif", 1, 0, 0, 5, "img_r001_c001.tif", false},
		{"img_r{rrr}_c{ccc}.tif", 1, 2, 11, 12, "img_r003_c012.tif", false},
		{"img_r{rrr}_c{ccc}.tif", 0, 2, 11, 12, "img_r002_c011.tif", false},
		{"r{r}_c{c}.png", 0, 12, 3, 20, "r12_c3.png", false},
		{"r{rr}/c{cc}.tif", 1, 0, 99, 100, "r01/c100.tif", false}, // wider numbers printed in full
		{"tile_{iiii}.tif", 1, 2, 3, 10, "tile_0024.tif", true},
		{"tile_{i}.tif", 0, 0, 0, 10, "tile_0.tif", true},
		{"{rr}x{cc}", 0, 1, 2, 3, "01x02", false},
		{"a{c}b{r}c{c}", 0, 4, 5, 9, "a5b4c5", false},
	}
	for _, c := range cases {
		p, err := ParsePattern(c.pat, c.first)
		if err != nil {
			t.Fatalf("ParsePattern(%q): %v", c.pat, err)
		}
		if got := p.Name(c.row, c.col, c.cols); got != c.want {
			t.Errorf("%q.Name(%d,%d,%d) = %q, want %q", c.pat, c.row, c.col, c.cols, got, c.want)
		}
		if p.Sequential() != c.wantSequentialOK {
			t.Errorf("%q.Sequential() = %v", c.pat, p.Sequential())
		}
		if p.String() != c.pat {
			t.Errorf("String() = %q, want %q", p.String(), c.pat)
		}
	}
}

func TestPatternErrors(t *testing.T) {
	cases := []struct{ pat, want string }{
		{"img.tif", "needs both"},
		{"img_r{rrr}.tif", "needs both"},
		{"img_{i}_{r}_{c}", "mixes"},
		{"img_{x}_{c}", "unknown placeholder"},
		{"img_{rc}_{c}", "unknown placeholder"},
		{"img_{}_{c}", "empty placeholder"},
		{"img_{r_{c}", "unknown placeholder"},
		{"img_{r}_{c", "unterminated"},
		{"img_r}_{c}", "unmatched"},
		{"img_{r}{c}", "separated"},
	}
	for _, c := range cases {
		_, err := ParsePattern(c.pat, 0)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParsePattern(%q) = %v, want error containing %q", c.pat, err, c.want)
		}
	}
	if _, err := ParsePattern("{r}_{c}", -1); err == nil {
		t.Error("negative first index accepted")
	}
}

// FuzzParsePattern checks that the parser never panics, that accepted
// patterns round-trip through String, and that names of distinct tiles are
// distinct whenever every literal between placeholders holds a non-digit.
func FuzzParsePattern(f *testing.F) {
	for _, s := range []string{"img_r{rrr}_c{ccc}.tif", "{i}", "tile_{iiii}.png", "{r}{c}", "{r", "}", "{rr}-{cc}/{r}", "a{{r}}{c}", ""} {
		f.Add(s, 1)
	}
	f.Fuzz(func(t *testing.T, s string, first int) {
		first %= 3
		if first < 0 {
			first = -first
		}
		p, err := ParsePattern(s, first)
		if err != nil {
			return
		}
		if p.String() != s {
			t.Fatalf("String() = %q, want %q", p.String(), s)
		}
		q, err := ParsePattern(p.String(), first)
		if err != nil {
			t.Fatalf("re-parse of %q: %v", s, err)
		}
		separated := true
		for i, part := range p.parts {
			if part.kind == 0 && i > 0 && i < len(p.parts)-1 && !strings.ContainsFunc(part.lit, func(r rune) bool { return !unicode.IsDigit(r) }) {
				separated = false
			}
		}
		const rows, cols = 4, 12
		seen := map[string][2]int{}
		for r := 0; r < rows; r++ {
			for c := 0; c < cols; c++ {
				n := p.Name(r, c, cols)
				if n != q.Name(r, c, cols) {
					t.Fatalf("re-parsed pattern names differ")
				}
				if prev, dup := seen[n]; dup && separated {
					t.Fatalf("pattern %q: tiles %v and (%d,%d) both named %q", s, prev, r, c, n)
				}
				seen[n] = [2]int{r, c}
			}
		}
	})
}
