package align

import (
	"math"
	"slices"
)

// Candidate is one displacement hypothesis of a pair for [SolvePositions]:
// the pair's measured translation, or one found by searching the pair's
// NCC surface again around the displacement the other pairs imply.
type Candidate struct {
	Pair Pair
	Translation
	// Weight, when positive, is the hypothesis's weight in the fit
	// instead of its correlation (see [SolvePositions]).
	Weight float64
}

// Solution is the outcome of [SolvePositions].
type Solution struct {
	Rows, Cols int
	// Positions are the tile positions, row-major, shifted so that the
	// smallest X and the smallest Y are 0. The Corr of a tile is the
	// largest correlation of the hypotheses its position agrees with (-1
	// when it agrees with none).
	Positions []Position
	// Cost is the weighted sum of absolute residuals at Positions.
	Cost float64
}

// Implied returns the displacement of pair p that the positions imply
// (tile 2 minus tile 1).
func (s *Solution) Implied(p Pair) (x, y int) {
	nr, nc := p.Neighbor()
	a, b := s.Positions[nr*s.Cols+nc], s.Positions[p.Row*s.Cols+p.Col]
	return b.X - a.X, b.Y - a.Y
}

// candidateWeight is the weight of a hypothesis in the solve: its
// correlation, floored at a small positive value so that unmeasured
// (-1, NaN) or anti-correlated pairs still tie the graph together
// without deciding anything.
func candidateWeight(c float64) float64 {
	if !(c > minSolveWeight) {
		return minSolveWeight
	}
	return c
}

// minSolveWeight is the weight of a hypothesis without positive
// correlation.
const minSolveWeight = 1e-3

// SolvePositions places the tiles of the grid of t by a robust global fit
// over every pair rather than a spanning tree: it minimizes, separately
// in X and in Y, the sum over all hypotheses (the translation of every
// pair in t and the extra candidates) of weight * |implied - hypothesis|,
// where the weight is the hypothesis's correlation (or a candidate's
// Weight), floored at 1e-3.
// Minimizing absolute residuals (L1) rather than squared ones lets a pair
// that the loops around it contradict carry its whole error instead of
// spreading it over its neighbours, so wrong pairs do not move correctly
// registered tiles; and each loop of pairs votes, so a wrong pair of high
// correlation cannot place a tile against two correct ones of lower
// correlation, as it can in a maximum spanning tree.
//
// The fit starts from start (the spanning tree's positions, see
// [GlobalPositions]), runs iteratively reweighted least squares (weights
// w / max(|r|, 0.05), solved by conjugate gradients on the pair graph),
// rounds, and finishes with exact integer coordinate descent (each tile
// moved to the weighted median of the positions its hypotheses imply)
// while the cost decreases. When start already satisfies every
// hypothesis, it is returned unchanged (correlations included): then no
// fit can do better. Otherwise the Corr of each tile is the largest
// correlation of the hypotheses its position agrees with.
func SolvePositions(t *Translations, extra []Candidate, start []Position) *Solution {
	rows, cols := t.Rows, t.Cols
	n := rows * cols
	s := &Solution{Rows: rows, Cols: cols, Positions: slices.Clone(start)}
	if n == 0 {
		return s
	}
	hs := hypotheses(t, extra)
	changed := false
	for _, ax := range []int{0, 1} {
		x := make([]float64, n)
		for i, p := range start {
			x[i] = float64(p.X)
			if ax == 1 {
				x[i] = float64(p.Y)
			}
		}
		if l1Cost(hs, x, ax) > 0 {
			changed = true
			irls(hs, x, ax)
			for i := range x {
				x[i] = math.Round(x[i])
			}
			medianDescent(hs, x, ax)
		}
		for i := range x {
			if ax == 0 {
				s.Positions[i].X = int(x[i])
			} else {
				s.Positions[i].Y = int(x[i])
			}
		}
	}
	if changed {
		s.normalize(hs)
	}
	return s
}

// hyp is one hypothesis between tiles a (tile 1) and b (tile 2): b - a
// should be (dx, dy).
type hyp struct {
	a, b   int
	dx, dy float64
	w      float64
	corr   float64
}

func (h hyp) d(ax int) float64 {
	if ax == 0 {
		return h.dx
	}
	return h.dy
}

// hypotheses lists the measured translations of t and the candidates.
func hypotheses(t *Translations, extra []Candidate) []hyp {
	ps := Pairs(t.Rows, t.Cols)
	hs := make([]hyp, 0, len(ps)+len(extra))
	add := func(p Pair, tr Translation, w float64) {
		nr, nc := p.Neighbor()
		hs = append(hs, hyp{a: nr*t.Cols + nc, b: p.Row*t.Cols + p.Col, dx: float64(tr.X), dy: float64(tr.Y), w: w, corr: corrOf(tr)})
	}
	for _, p := range ps {
		add(p, t.At(p), candidateWeight(t.At(p).Corr))
	}
	for _, c := range extra {
		w := candidateWeight(c.Corr)
		if c.Weight > 0 {
			w = candidateWeight(c.Weight)
		}
		add(c.Pair, c.Translation, w)
	}
	return hs
}

// l1Cost is the weighted sum of absolute residuals of axis ax.
func l1Cost(hs []hyp, x []float64, ax int) float64 {
	c := 0.0
	for _, h := range hs {
		c += h.w * math.Abs(x[h.b]-x[h.a]-h.d(ax))
	}
	return c
}

// irlsEps bounds the reweighting of iteratively reweighted least squares:
// residuals below it (in pixels) weigh as much as it.
const irlsEps = 0.05

// irls approximately minimizes the L1 cost of axis ax from x, in place.
func irls(hs []hyp, x []float64, ax int) {
	w := make([]float64, len(hs))
	best, bestCost := slices.Clone(x), l1Cost(hs, x, ax)
	for it := 0; it < 40; it++ {
		for k, h := range hs {
			w[k] = h.w / max(math.Abs(x[h.b]-x[h.a]-h.d(ax)), irlsEps)
		}
		cgSolve(hs, w, x, ax)
		if c := l1Cost(hs, x, ax); c < bestCost-1e-9 {
			copy(best, x)
			bestCost = c
		} else if it > 4 {
			break
		}
	}
	copy(x, best)
}

// cgSolve solves the weighted least-squares problem min sum w_k (x_b - x_a
// - d_k)^2 with x[0] fixed, by conjugate gradients on the reduced graph
// Laplacian, starting from x (in place).
func cgSolve(hs []hyp, w, x []float64, ax int) {
	n := len(x)
	// A x = b with A the weighted Laplacian; node 0 is fixed.
	apply := func(v, out []float64) {
		clear(out)
		for k, h := range hs {
			d := w[k] * (v[h.b] - v[h.a])
			out[h.b] += d
			out[h.a] -= d
		}
		out[0] = v[0]
	}
	b := make([]float64, n)
	for k, h := range hs {
		b[h.b] += w[k] * h.d(ax)
		b[h.a] -= w[k] * h.d(ax)
	}
	b[0] = x[0]
	r := make([]float64, n)
	apply(x, r)
	rr := 0.0
	for i := range r {
		r[i] = b[i] - r[i]
		rr += r[i] * r[i]
	}
	p := slices.Clone(r)
	ap := make([]float64, n)
	for it := 0; it < 4*n && rr > 1e-14; it++ {
		apply(p, ap)
		pap := 0.0
		for i := range p {
			pap += p[i] * ap[i]
		}
		if !(pap > 0) {
			break
		}
		alpha := rr / pap
		nrr := 0.0
		for i := range x {
			x[i] += alpha * p[i]
			r[i] -= alpha * ap[i]
			nrr += r[i] * r[i]
		}
		beta := nrr / rr
		rr = nrr
		for i := range p {
			p[i] = r[i] + beta*p[i]
		}
	}
}

// medianDescent moves each tile, in turn, to the weighted median of the
// positions its hypotheses imply, while the L1 cost of axis ax decreases
// (integer positions stay integer).
func medianDescent(hs []hyp, x []float64, ax int) {
	n := len(x)
	inc := make([][]int, n)
	for k, h := range hs {
		inc[h.a] = append(inc[h.a], k)
		inc[h.b] = append(inc[h.b], k)
	}
	type vw struct{ v, w float64 }
	var buf []vw
	for sweep := 0; sweep < 50; sweep++ {
		moved := false
		for i := 0; i < n; i++ {
			buf = buf[:0]
			tot := 0.0
			for _, k := range inc[i] {
				h := hs[k]
				v := x[h.a] + h.d(ax) // i is b
				if h.a == i {
					v = x[h.b] - h.d(ax)
				}
				buf = append(buf, vw{v, h.w})
				tot += h.w
			}
			if len(buf) == 0 {
				continue
			}
			slices.SortFunc(buf, func(a, b vw) int { return cmpF(a.v, b.v) })
			acc, med := 0.0, buf[len(buf)-1].v
			for _, e := range buf {
				acc += e.w
				if acc >= tot/2 {
					med = e.v
					break
				}
			}
			if med == x[i] {
				continue
			}
			cost := func(xi float64) float64 {
				c := 0.0
				for _, e := range buf {
					c += e.w * math.Abs(xi-e.v)
				}
				return c
			}
			if cost(med) < cost(x[i])-1e-12 {
				x[i] = med
				moved = true
			}
		}
		if !moved {
			break
		}
	}
}

// normalize shifts the positions so that the smallest X and Y are 0, sets
// each tile's Corr and the solution's cost.
func (s *Solution) normalize(hs []hyp) {
	pos := s.Positions
	shiftToOrigin(pos)
	for i := range pos {
		pos[i].Corr = -1
	}
	s.Cost = 0
	for _, h := range hs {
		rx := float64(pos[h.b].X-pos[h.a].X) - h.dx
		ry := float64(pos[h.b].Y-pos[h.a].Y) - h.dy
		s.Cost += h.w * (math.Abs(rx) + math.Abs(ry))
		if rx == 0 && ry == 0 { // h.corr is never NaN (corrOf); -Inf loses to -1
			pos[h.a].Corr = max(pos[h.a].Corr, h.corr)
			pos[h.b].Corr = max(pos[h.b].Corr, h.corr)
		}
	}
}

// PairScore is the raw NCC of pair p at displacement (x, y) and the
// number of pixels it was computed over, for [SettleCorners].
type PairScore func(p Pair, x, y int) (corr float64, n uint64, err error)

// SettleCorners decides the place of each corner tile of s's grid (the
// tiles with two pairs, when the grid has at least two rows and two
// columns) whose pairs the positions contradict, by the pairs' own
// correlations rather than by the fit. A corner's two pairs lie in one
// loop only, whose other two pairs are confirmed by the loops beyond it:
// when that loop does not close, one of the corner's pairs is wrong, and
// the fit, which has no other loop to ask, keeps the better-correlated one
// (or splits the difference between re-searched peaks), as a spanning tree
// would. Here the tile goes instead where the sum of its two pairs' NCC
// (score) is highest, among the places that one hypothesis of either pair
// (its translation in t or a candidate of extra) gives it: a wrong pair
// with a higher peak elsewhere still correlates well at the truth, while a
// right pair correlates poorly at the wrong pair's displacement. The tile
// moves only when that sum beats its current one by more than the two
// pairs' [NCCTolerance] at both places (on a surface flat to a few
// thousandths, as on the low-contrast grids, the sum of NCC is no better
// a guide than the fit, and the tile stays). It returns the
// tiles moved (row-major indices); the positions are then shifted to the
// origin again with each tile's Corr and the Cost updated.
func SettleCorners(s *Solution, t *Translations, extra []Candidate, score PairScore) ([]int, error) {
	rows, cols := s.Rows, s.Cols
	if rows < 2 || cols < 2 {
		return nil, nil
	}
	hs := hypotheses(t, extra)
	var moved []int
	for _, rc := range [][2]int{{0, 0}, {0, cols - 1}, {rows - 1, 0}, {rows - 1, cols - 1}} {
		i := rc[0]*cols + rc[1]
		// The corner's two pairs, as hypotheses from tile a to tile b, and
		// the neighbour of i in each.
		var own []Pair
		for _, p := range Pairs(rows, cols) {
			nr, nc := p.Neighbor()
			if p.Row*cols+p.Col == i || nr*cols+nc == i {
				own = append(own, p)
			}
		}
		if len(own) != 2 || !slices.ContainsFunc(own, func(p Pair) bool {
			x, y := s.Implied(p)
			tr := t.At(p)
			return tr.X != x || tr.Y != y
		}) {
			continue
		}
		// place returns tile i's position that puts pair p at (dx, dy).
		place := func(p Pair, dx, dy int) Position {
			nr, nc := p.Neighbor()
			if nr*cols+nc == i { // i is tile 1
				b := s.Positions[p.Row*cols+p.Col]
				return Position{X: b.X - dx, Y: b.Y - dy}
			}
			a := s.Positions[nr*cols+nc]
			return Position{X: a.X + dx, Y: a.Y + dy}
		}
		// total is the sum of the two pairs' NCC with tile i at q, and
		// of their tolerances.
		total := func(q Position) (sum, tol float64, err error) {
			old := s.Positions[i]
			s.Positions[i] = Position{X: q.X, Y: q.Y, Corr: old.Corr}
			defer func() { s.Positions[i] = old }()
			for _, p := range own {
				x, y := s.Implied(p)
				c, n, err := score(p, x, y)
				if err != nil {
					return 0, 0, err
				}
				if math.IsNaN(c) {
					c = -1
				}
				sum += c
				tol += NCCTolerance(c, n)
			}
			return sum, tol, nil
		}
		cur := s.Positions[i]
		curSum, curTol, err := total(cur)
		if err != nil {
			return moved, err
		}
		best, bestSum, bestTol := cur, curSum, curTol
		seen := map[[2]int]bool{{cur.X, cur.Y}: true}
		for _, h := range hs {
			for _, p := range own {
				nr, nc := p.Neighbor()
				if h.a != nr*cols+nc || h.b != p.Row*cols+p.Col {
					continue
				}
				q := place(p, int(h.dx), int(h.dy))
				if seen[[2]int{q.X, q.Y}] {
					continue
				}
				seen[[2]int{q.X, q.Y}] = true
				sum, tol, err := total(q)
				if err != nil {
					return moved, err
				}
				if sum > bestSum {
					best, bestSum, bestTol = q, sum, tol
				}
			}
		}
		if bestSum > curSum+curTol+bestTol {
			s.Positions[i].X, s.Positions[i].Y = best.X, best.Y
			moved = append(moved, i)
		}
	}
	if len(moved) > 0 {
		s.normalize(hs)
	}
	return moved, nil
}
