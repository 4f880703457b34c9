package tileio

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/gohtgs/htgs/internal/infile"
	"github.com/gohtgs/htgs/stitching/align"
)

// GlobalPosition is one line of a global-positions file: the tile name,
// the correlation of the spanning-tree edge that placed the tile, its
// position in the mosaic (upper-left corner, pixels) and its 0-based grid
// coordinates.
type GlobalPosition struct {
	Name     string
	Corr     float64
	X, Y     int
	Col, Row int
}

// WriteGlobalPositions writes one line per tile in MIST's global-positions
// format:
//
//	file: NAME; corr: 0.1234567890; position: (X, Y); grid: (COL, ROW);
//
// with the correlation printed with 10 decimals and COL/ROW 0-based; a NaN
// correlation (a tile no edge placed) is written "NaN", as MIST does. Names
// must be non-empty, without ';', line breaks, or leading/trailing spaces
// (they could not be read back).
func WriteGlobalPositions(w io.Writer, pos []GlobalPosition) error {
	bw := bufio.NewWriter(w)
	for i, p := range pos {
		if err := checkName(p.Name, ";"); err != nil {
			return fmt.Errorf("tileio: global position %d: %w", i, err)
		}
		if math.IsInf(p.Corr, 0) {
			return fmt.Errorf("tileio: global position %d (%s): correlation %v", i, p.Name, p.Corr)
		}
		fmt.Fprintf(bw, "file: %s; corr: %s; position: (%d, %d); grid: (%d, %d);\n",
			p.Name, formatCorr(p.Corr), p.X, p.Y, p.Col, p.Row)
	}
	return bw.Flush()
}

// RelativePosition is one line of a relative-positions file: the
// translation (X, Y) of Tile relative to its neighbour Neighbor in
// direction Dir (Tile is tile 2, Neighbor tile 1 of the pair) and its
// correlation.
type RelativePosition struct {
	Dir      align.Direction
	Tile     string
	Neighbor string
	Corr     float64
	X, Y     int
}

// WriteRelativePositions writes one line per pair:
//
//	west, TILE, NEIGHBOR, 0.1234567890, X, Y
//	north, TILE, NEIGHBOR, 0.1234567890, X, Y
//
// fields separated by a comma and one space, the correlation printed with
// 10 decimals ("NaN" for NaN, as MIST writes it), X and Y as integers: the position of TILE relative to
// NEIGHBOR (its west or north neighbour). Names must be non-empty, without
// ',', line breaks, or leading/trailing spaces.
func WriteRelativePositions(w io.Writer, rel []RelativePosition) error {
	bw := bufio.NewWriter(w)
	for i, r := range rel {
		if r.Dir != align.West && r.Dir != align.North {
			return fmt.Errorf("tileio: relative position %d: invalid direction %v", i, r.Dir)
		}
		if err := checkName(r.Tile, ","); err != nil {
			return fmt.Errorf("tileio: relative position %d: tile: %w", i, err)
		}
		if err := checkName(r.Neighbor, ","); err != nil {
			return fmt.Errorf("tileio: relative position %d: neighbor: %w", i, err)
		}
		if math.IsInf(r.Corr, 0) {
			return fmt.Errorf("tileio: relative position %d (%s): correlation %v", i, r.Tile, r.Corr)
		}
		fmt.Fprintf(bw, "%s, %s, %s, %s, %d, %d\n", r.Dir, r.Tile, r.Neighbor, formatCorr(r.Corr), r.X, r.Y)
	}
	return bw.Flush()
}

// RelativePositions lists the translations of t in canonical pair order
// (see [align.Pairs]) as records for [WriteRelativePositions]; name gives
// the tile names.
func RelativePositions(t *align.Translations, name func(row, col int) string) []RelativePosition {
	ps := align.Pairs(t.Rows, t.Cols)
	out := make([]RelativePosition, len(ps))
	for i, p := range ps {
		tr := t.At(p)
		nr, nc := p.Neighbor()
		out[i] = RelativePosition{Dir: p.Dir, Tile: name(p.Row, p.Col), Neighbor: name(nr, nc), Corr: tr.Corr, X: tr.X, Y: tr.Y}
	}
	return out
}

func formatCorr(c float64) string {
	if math.IsNaN(c) {
		return "NaN"
	}
	return strconv.FormatFloat(c, 'f', 10, 64)
}

func checkName(name, sep string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty name")
	case strings.ContainsAny(name, sep+"\r\n"):
		return fmt.Errorf("name %q contains %q or a line break", name, sep)
	case strings.TrimSpace(name) != name:
		return fmt.Errorf("name %q has leading or trailing space", name)
	}
	return nil
}

// lineReader yields non-blank lines with their 1-based numbers.
type lineReader struct {
	sc   *bufio.Scanner
	line int
}

func newLineReader(r io.Reader) *lineReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	return &lineReader{sc: sc}
}

func (l *lineReader) next() (string, bool) {
	for l.sc.Scan() {
		l.line++
		s := strings.TrimSpace(l.sc.Text())
		if s != "" {
			return s, true
		}
	}
	return "", false
}

// ReadGlobalPositions parses the format of [WriteGlobalPositions]. Blank
// lines and surrounding white space are ignored; anything else that does
// not match the format is an error naming the line. It reads the files MIST
// writes too: correlations may use any precision, scientific notation,
// "NaN" (MIST's for a tile no edge placed) or a decimal comma (MIST
// formats them in the machine's locale, "0,9876543210" in a German one);
// infinite correlations are rejected.
func ReadGlobalPositions(r io.Reader) ([]GlobalPosition, error) {
	lr := newLineReader(r)
	var out []GlobalPosition
	for {
		s, ok := lr.next()
		if !ok {
			break
		}
		p, err := parseGlobalLine(s)
		if err != nil {
			return nil, fmt.Errorf("tileio: global positions line %d: %w", lr.line, err)
		}
		out = append(out, p)
	}
	if err := lr.sc.Err(); err != nil {
		return nil, fmt.Errorf("tileio: global positions line %d: %w", lr.line+1, err)
	}
	return out, nil
}

// fieldScanner parses a line left to right.
type fieldScanner struct{ s string }

func (f *fieldScanner) literal(lit string) error {
	rest, ok := strings.CutPrefix(f.s, lit)
	if !ok {
		got := f.s
		if len(got) > 20 {
			got = got[:20] + "..."
		}
		return fmt.Errorf("expected %q, found %q", lit, got)
	}
	f.s = rest
	return nil
}

// until returns the text up to (not including) sep and consumes both.
func (f *fieldScanner) until(sep, what string) (string, error) {
	i := strings.Index(f.s, sep)
	if i < 0 {
		return "", fmt.Errorf("%s: missing %q", what, sep)
	}
	v := f.s[:i]
	f.s = f.s[i+len(sep):]
	return strings.TrimSpace(v), nil
}

func (f *fieldScanner) integer(sep, what string) (int, error) {
	v, err := f.until(sep, what)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s: invalid integer %q", what, v)
	}
	return n, nil
}

func parseCorr(v string) (float64, error) {
	if strings.Count(v, ",") == 1 && !strings.Contains(v, ".") {
		v = strings.Replace(v, ",", ".", 1) // a decimal comma
	}
	if strings.EqualFold(v, "nan") {
		return math.NaN(), nil
	}
	c, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(c) || math.IsInf(c, 0) {
		return 0, fmt.Errorf("corr: invalid number %q", v)
	}
	return c, nil
}

func parseGlobalLine(s string) (GlobalPosition, error) {
	var p GlobalPosition
	f := &fieldScanner{s: s}
	var err error
	if err = f.literal("file:"); err != nil {
		return p, err
	}
	if p.Name, err = f.until("; corr:", "file"); err != nil {
		return p, err
	}
	if p.Name == "" {
		return p, fmt.Errorf("file: empty name")
	}
	cs, err := f.until(";", "corr")
	if err != nil {
		return p, err
	}
	if p.Corr, err = parseCorr(cs); err != nil {
		return p, err
	}
	f.s = strings.TrimLeft(f.s, " \t")
	if err = f.literal("position:"); err != nil {
		return p, err
	}
	f.s = strings.TrimLeft(f.s, " \t")
	if err = f.literal("("); err != nil {
		return p, err
	}
	if p.X, err = f.integer(",", "position x"); err != nil {
		return p, err
	}
	if p.Y, err = f.integer(")", "position y"); err != nil {
		return p, err
	}
	if err = f.literal(";"); err != nil {
		return p, err
	}
	f.s = strings.TrimLeft(f.s, " \t")
	if err = f.literal("grid:"); err != nil {
		return p, err
	}
	f.s = strings.TrimLeft(f.s, " \t")
	if err = f.literal("("); err != nil {
		return p, err
	}
	if p.Col, err = f.integer(",", "grid col"); err != nil {
		return p, err
	}
	if p.Row, err = f.integer(")", "grid row"); err != nil {
		return p, err
	}
	if err = f.literal(";"); err != nil {
		return p, err
	}
	if strings.TrimSpace(f.s) != "" {
		return p, fmt.Errorf("unexpected trailing text %q", f.s)
	}
	if p.Col < 0 || p.Row < 0 {
		return p, fmt.Errorf("negative grid coordinates (%d, %d)", p.Col, p.Row)
	}
	return p, nil
}

// ReadRelativePositions parses the format of [WriteRelativePositions].
// Blank lines and white space around fields are ignored; anything else that
// does not match is an error naming the line. Correlations are read as
// [ReadGlobalPositions] reads them, a decimal comma included: MIST's
// "west, B, A, 0,9876543210, 12, -3" (fields separated by ", ", the
// decimal comma without a space) is the correlation 0.9876543210.
func ReadRelativePositions(r io.Reader) ([]RelativePosition, error) {
	lr := newLineReader(r)
	var out []RelativePosition
	for {
		s, ok := lr.next()
		if !ok {
			break
		}
		p, err := parseRelativeLine(s)
		if err != nil {
			return nil, fmt.Errorf("tileio: relative positions line %d: %w", lr.line, err)
		}
		out = append(out, p)
	}
	if err := lr.sc.Err(); err != nil {
		return nil, fmt.Errorf("tileio: relative positions line %d: %w", lr.line+1, err)
	}
	return out, nil
}

func parseRelativeLine(s string) (RelativePosition, error) {
	var p RelativePosition
	fs := strings.Split(s, ",")
	if len(fs) == 7 && isDigits(fs[4]) && isDigits(strings.TrimPrefix(strings.TrimSpace(fs[3]), "-")) {
		// A decimal comma: "0,98" is split in "0" and "98" (no space).
		fs = append(fs[:3], append([]string{strings.TrimSpace(fs[3]) + "." + fs[4]}, fs[5:]...)...)
	}
	if len(fs) != 6 {
		return p, fmt.Errorf("want 6 comma-separated fields (dir, tile, neighbor, corr, x, y), found %d", len(fs))
	}
	for i := range fs {
		fs[i] = strings.TrimSpace(fs[i])
	}
	var err error
	if p.Dir, err = align.ParseDirection(fs[0]); err != nil {
		return p, err
	}
	p.Tile, p.Neighbor = fs[1], fs[2]
	if p.Tile == "" || p.Neighbor == "" {
		return p, fmt.Errorf("empty tile name")
	}
	if p.Corr, err = parseCorr(fs[3]); err != nil {
		return p, err
	}
	if p.X, err = strconv.Atoi(fs[4]); err != nil {
		return p, fmt.Errorf("x: invalid integer %q", fs[4])
	}
	if p.Y, err = strconv.Atoi(fs[5]); err != nil {
		return p, fmt.Errorf("y: invalid integer %q", fs[5])
	}
	return p, nil
}

// isDigits reports whether s is a non-empty run of ASCII digits.
func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// ReadPositionsFile reads the global-positions file at path (MIST's or
// WriteGlobalPositions's, see ReadGlobalPositions) for the tiles of a rows
// x cols grid, to compose a mosaic at positions known beforehand: every
// grid cell must appear once, and the result is in row-major order.
// Positions are shifted so that the smallest is (0, 0), as MIST does; a
// span beyond 2^40 pixels is refused. Errors name path.
func ReadPositionsFile(path string, rows, cols int) ([]GlobalPosition, error) {
	f, err := infile.Open(path) // a FIFO or a folder is refused, not waited on
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pos, err := ReadGlobalPositions(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// Nothing is sized by the grid before the file is known to have a
	// position for each tile (rows*cols cannot overflow then).
	if rows < 1 || cols < 1 || rows > len(pos) || cols > len(pos) || rows*cols > len(pos) {
		return nil, fmt.Errorf("%s: %d positions for the %d x %d grid (one per tile)", path, len(pos), cols, rows)
	}
	byCell := make([]*GlobalPosition, rows*cols)
	for i := range pos {
		p := &pos[i]
		if far := 1 << 40; p.X < -far || p.X > far || p.Y < -far || p.Y > far {
			return nil, fmt.Errorf("%s: tile %s at (%d, %d) lies beyond 2^40 pixels", path, p.Name, p.X, p.Y)
		}
		if p.Row >= rows || p.Col >= cols {
			return nil, fmt.Errorf("%s: tile %s at grid (%d, %d) lies outside the %d x %d grid", path, p.Name, p.Col, p.Row, cols, rows)
		}
		if byCell[p.Row*cols+p.Col] != nil {
			return nil, fmt.Errorf("%s: grid (%d, %d) appears twice", path, p.Col, p.Row)
		}
		byCell[p.Row*cols+p.Col] = p
	}
	out := make([]GlobalPosition, rows*cols)
	minX, minY := math.MaxInt, math.MaxInt
	for i, p := range byCell {
		if p == nil {
			return nil, fmt.Errorf("%s: no position for grid (%d, %d) (col, row) of the %d x %d grid", path, i%cols, i/cols, cols, rows)
		}
		out[i] = *p
		minX, minY = min(minX, p.X), min(minY, p.Y)
	}
	for i := range out {
		out[i].X -= minX
		out[i].Y -= minY
	}
	return out, nil
}
