package tileio

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/gohtgs/htgs/internal/fuzzrun"
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
		if got := p.Name(c.row, c.col, 100, c.cols); got != c.want {
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
// distinct whenever every literal between placeholders holds a non-digit,
// and that no name leaves the tile folder.
func FuzzParsePattern(f *testing.F) {
	fuzzrun.Prepare(f)
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
				n := p.Name(r, c, rows, cols)
				if !filepath.IsLocal(n) && filepath.Clean(n) != "." {
					t.Fatalf("pattern %q names %q, outside the tile folder", s, n)
				}
				if n != q.Name(r, c, rows, cols) {
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

// mistGrid numbers a rows x cols grid the way MIST's sequential loader
// describes it: fill by rows (or columns), reverse every other row (or
// column) for the continuous numberings, then mirror the grid left-right for
// a right origin and top-bottom for a lower one.
func mistGrid(n Numbering, o Origin, rows, cols int) [][]int {
	g := make([][]int, rows)
	for r := range g {
		g[r] = make([]int, cols)
		for c := range g[r] {
			switch n {
			case HorizontalCombing, HorizontalContinuous:
				g[r][c] = r*cols + c
			default:
				g[r][c] = c*rows + r
			}
		}
	}
	if n == HorizontalContinuous {
		for r := 1; r < rows; r += 2 {
			slices.Reverse(g[r])
		}
	}
	if n == VerticalContinuous {
		for c := 1; c < cols; c += 2 {
			for r := 0; r < rows/2; r++ {
				g[r][c], g[rows-1-r][c] = g[rows-1-r][c], g[r][c]
			}
		}
	}
	if o == UpperRight || o == LowerRight {
		for r := range g {
			slices.Reverse(g[r])
		}
	}
	if o == LowerLeft || o == LowerRight {
		slices.Reverse(g)
	}
	return g
}

func TestLayoutIndexMatchesMIST(t *testing.T) {
	for n := HorizontalCombing; n <= VerticalContinuous; n++ {
		for o := UpperLeft; o <= LowerRight; o++ {
			l := Layout{n, o}
			for _, sz := range [][2]int{{1, 1}, {1, 5}, {5, 1}, {3, 4}, {4, 3}, {5, 5}, {6, 7}} {
				rows, cols := sz[0], sz[1]
				want := mistGrid(n, o, rows, cols)
				seen := make([]bool, rows*cols)
				for r := range rows {
					for c := range cols {
						i := l.Index(r, c, rows, cols)
						if i != want[r][c] {
							t.Fatalf("%v %v %dx%d: Index(%d,%d) = %d, want %d", n, o, rows, cols, r, c, i, want[r][c])
						}
						if i < 0 || i >= rows*cols || seen[i] {
							t.Fatalf("%v %v %dx%d: index %d out of range or repeated", n, o, rows, cols, i)
						}
						seen[i] = true
					}
				}
			}
		}
	}
	// A 3 x 3 snake from the lower-right corner, as a person would draw it.
	l := Layout{HorizontalContinuous, LowerRight}
	got := [3][3]int{}
	for r := range 3 {
		for c := range 3 {
			got[r][c] = l.Index(r, c, 3, 3)
		}
	}
	if want := [3][3]int{{8, 7, 6}, {3, 4, 5}, {2, 1, 0}}; got != want {
		t.Errorf("snake from LR: %v, want %v", got, want)
	}
}

func TestParseLayoutNames(t *testing.T) {
	for n := HorizontalCombing; n <= VerticalContinuous; n++ {
		got, err := ParseNumbering(strings.ToLower(n.String()))
		if err != nil || got != n {
			t.Errorf("ParseNumbering(%q) = %v, %v", n.String(), got, err)
		}
	}
	for o := UpperLeft; o <= LowerRight; o++ {
		got, err := ParseOrigin(strings.ToLower(o.String()))
		if err != nil || got != o {
			t.Errorf("ParseOrigin(%q) = %v, %v", o.String(), got, err)
		}
	}
	if _, err := ParseNumbering("ZIGZAG"); err == nil {
		t.Error("unknown numbering accepted")
	}
	if _, err := ParseOrigin("C"); err == nil {
		t.Error("unknown origin accepted")
	}
}

func TestTimeSlicesAndMISTPositions(t *testing.T) {
	p, err := ParsePattern("img_t{tt}_pos{ppp}.tif", 1)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Sequential() || !p.HasTime() {
		t.Fatalf("Sequential %v, HasTime %v", p.Sequential(), p.HasTime())
	}
	p.Layout = Layout{VerticalCombing, UpperLeft}
	if got := p.AtTime(7).Name(1, 2, 3, 4); got != "img_t07_pos008.tif" {
		t.Errorf("name %q, want img_t07_pos008.tif", got)
	}
	if _, err := ParsePattern("a{t}_{t}_{p}", 0); err == nil {
		t.Error("two time placeholders accepted")
	}
	if _, err := ParsePattern("a{t}_{r}", 0); err == nil {
		t.Error("a row without a column accepted")
	}
	rc, _ := ParsePattern("r{r}_c{c}", 0)
	if rc.HasTime() || rc.AtTime(3).Name(1, 2, 3, 4) != "r1_c2" {
		t.Error("a pattern without {t} changed with AtTime")
	}
}
