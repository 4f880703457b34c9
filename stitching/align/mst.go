package align

import (
	"container/heap"
	"math"
)

// GlobalPositions places the tiles of the grid of t. It builds a maximum
// spanning tree of the grid graph (tiles as nodes, adjacent pairs as edges
// weighted by their correlation) with Prim's algorithm from tile (0, 0),
// and positions every tile by adding the translations along its tree path
// (subtracting them when an edge is walked from tile 2 to tile 1). The
// positions are then shifted so that the smallest X and the smallest Y are
// 0. Positions are row-major (index row*Cols+col).
//
// The Corr of a tile is the correlation of the tree edge that attached it;
// the root tile (0, 0) gets the largest correlation of its tree edges, and
// a lone tile gets 0. NaN correlations count as -Inf. Because the grid
// graph is connected every tile is placed; the tree, hence the result, does
// not depend on the root when correlations are distinct (ties are broken
// by discovery order, deterministically).
func GlobalPositions(t *Translations) []Position {
	pos, _ := TreePositions(t, 0, nil)
	return pos
}

// TreePositions is GlobalPositions on part of the grid: it places, along
// a maximum spanning tree of correlations grown from tile root
// (row-major), the tiles reachable from it through the pairs for which
// has reports true (every pair when has is nil), and reports which tiles
// it placed. The placed tiles' positions are shifted so that their
// smallest X and smallest Y are 0; the others are zero. Stitching while
// tiles arrive places the largest group of registered pairs this way.
func TreePositions(t *Translations, root int, has func(Pair) bool) (pos []Position, placed []bool) {
	rows, cols := t.Rows, t.Cols
	n := rows * cols
	pos = make([]Position, n)
	placed = make([]bool, n)
	if n == 0 {
		return pos, placed
	}
	q := &edgeHeap{}
	seq := 0
	push := func(tile int) {
		r, c := tile/cols, tile%cols
		add := func(p Pair, to int, sign int) {
			if placed[to] || (has != nil && !has(p)) {
				return
			}
			tr := t.At(p)
			heap.Push(q, edge{w: corrOf(tr), seq: seq, to: to, from: tile, dx: sign * tr.X, dy: sign * tr.Y, corr: tr.Corr})
			seq++
		}
		if c > 0 { // west neighbour: tile is tile 2 of its west pair
			add(Pair{r, c, West}, tile-1, -1)
		}
		if c+1 < cols { // east neighbour: tile is tile 1 of the east's pair
			add(Pair{r, c + 1, West}, tile+1, 1)
		}
		if r > 0 {
			add(Pair{r, c, North}, tile-cols, -1)
		}
		if r+1 < rows {
			add(Pair{r + 1, c, North}, tile+cols, 1)
		}
	}
	placed[root] = true
	push(root)
	rootCorr, hasRootEdge := 0.0, false
	for q.Len() > 0 {
		e := heap.Pop(q).(edge)
		if placed[e.to] {
			continue
		}
		placed[e.to] = true
		corr := e.corr
		if math.IsNaN(corr) {
			corr = -1
		}
		pos[e.to] = Position{X: pos[e.from].X + e.dx, Y: pos[e.from].Y + e.dy, Corr: corr}
		if e.from == root && (!hasRootEdge || corr > rootCorr) {
			rootCorr, hasRootEdge = corr, true
		}
		push(e.to)
	}
	pos[root].Corr = rootCorr
	minX, minY := pos[root].X, pos[root].Y
	for i, p := range pos {
		if placed[i] {
			minX, minY = min(minX, p.X), min(minY, p.Y)
		}
	}
	for i := range pos {
		if placed[i] {
			pos[i].X -= minX
			pos[i].Y -= minY
		}
	}
	return pos, placed
}

// shiftToOrigin shifts the positions (at least one) so that the smallest X
// and the smallest Y are 0.
func shiftToOrigin(pos []Position) {
	minX, minY := pos[0].X, pos[0].Y
	for _, p := range pos {
		minX, minY = min(minX, p.X), min(minY, p.Y)
	}
	for i := range pos {
		pos[i].X -= minX
		pos[i].Y -= minY
	}
}

type edge struct {
	w        float64
	seq      int
	from, to int
	dx, dy   int
	corr     float64
}

// edgeHeap is a max-heap on weight, FIFO among equal weights.
type edgeHeap []edge

func (h edgeHeap) Len() int { return len(h) }
func (h edgeHeap) Less(i, j int) bool {
	if h[i].w != h[j].w {
		return h[i].w > h[j].w
	}
	return h[i].seq < h[j].seq
}
func (h edgeHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *edgeHeap) Push(x any)   { *h = append(*h, x.(edge)) }
func (h *edgeHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
