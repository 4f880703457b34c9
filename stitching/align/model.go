package align

import (
	"fmt"
	"image"
	"math"
	"slices"

	"github.com/gohtgs/htgs/internal/stat"
)

// DirectionModel is the stage model of one pair direction.
type DirectionModel struct {
	// Pairs is the number of pairs in this direction.
	Pairs int
	// Overlap is the expected overlap in percent of the tile dimension
	// along the direction (width for west pairs, height for north pairs).
	Overlap float64
	// OverlapGiven reports whether Overlap came from the options rather
	// than being estimated.
	OverlapGiven bool
	// Primary is the expected translation component along the direction
	// (X for west pairs, Y for north pairs), dimension*(1-Overlap/100).
	Primary float64
	// Secondary is the median orthogonal component of the translations in
	// the overlap window.
	Secondary float64
	// Threshold is the correlation threshold actually applied.
	Threshold float64
	// Valid is the number of translations the model accepts.
	Valid int
	// ByColumn reports whether the translations of this direction are
	// modelled per grid column (true) or per grid row (false): repairs use
	// the median of the valid translations of the same column or row. The
	// stage model picks whichever predicts the valid translations better
	// (leave-one-out). With a stage whose positioning error is a function
	// of the column plus a function of the row (repeatable axis errors,
	// backlash), west translations vary by column and north translations
	// by row.
	ByColumn bool
	// TooFewPairs reports that fewer than [MinModelPairs] translations
	// of this direction were valid: too few for a stage model. Repair then
	// keeps every translation that reaches the correlation threshold
	// instead of replacing it by a median of one or two others.
	TooFewPairs bool
	// Matched is the number of translations the model's windows and
	// threshold accepted before translations were trusted on their own
	// correlation (step 4 of [EstimateModel]); TooFewPairs is Matched <
	// [MinModelPairs].
	Matched int
}

// MinModelPairs is the least number of valid translations per direction
// from which the stage model predicts (repairs) translations.
const MinModelPairs = 3

// StageModel is MIST's model of the microscope stage, estimated from the
// pair translations: expected overlap per direction, stage repeatability,
// and which translations are valid. Invalid translations are outliers
// (wrong peak, featureless overlap) to be repaired and re-searched. A
// StageModel is read-only after [EstimateModel]: its methods may be called
// from several goroutines.
type StageModel struct {
	Rows, Cols    int
	Width, Height int
	West, North   DirectionModel
	// Repeatability is the stage repeatability r in pixels (see
	// [Options.Repeatability]); RepeatabilityGiven reports whether it came
	// from the options.
	Repeatability      int
	RepeatabilityGiven bool

	opt            options
	validW, validN []bool
}

// Valid reports whether the model accepted the translation of pair p.
func (m *StageModel) Valid(p Pair) bool {
	i := p.Row*m.Cols + p.Col
	if p.Dir == West {
		return m.validW[i]
	}
	return m.validN[i]
}

// SearchRadius is the half-width of the square searched by refinement
// around a translation: 2r, since both tiles of a pair may each be off by
// r.
func (m *StageModel) SearchRadius() int { return 2 * m.Repeatability }

// pairsOf lists the pairs of one direction in row-major order.
func pairsOf(rows, cols int, d Direction) []Pair {
	var ps []Pair
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			if (d == West && c > 0) || (d == North && r > 0) {
				ps = append(ps, Pair{r, c, d})
			}
		}
	}
	return ps
}

// components returns the primary (along the direction) and secondary
// components of t.
func components(t Translation, d Direction) (p, s int) {
	if d == West {
		return t.X, t.Y
	}
	return t.Y, t.X
}

func fromComponents(p, s int, d Direction) (x, y int) {
	if d == West {
		return p, s
	}
	return s, p
}

// groupOf is the row or the column of pair p.
func groupOf(p Pair, byCol bool) int {
	if byCol {
		return p.Col
	}
	return p.Row
}

func corrOf(t Translation) float64 {
	if math.IsNaN(t.Corr) {
		return math.Inf(-1)
	}
	return t.Corr
}

// EstimateModel builds the stage model from the PCIAM+CCF translations rel
// of a grid of w x h tiles.
//
// For each direction:
//
//  1. Overlap. If the options give it, the expected primary component is
//     dimension*(1-overlap/100). Otherwise it is estimated robustly: among
//     translations with positive correlation and a primary component
//     strictly between 0 and the tile dimension, find the window of width
//     2*OverlapUncertainty% of the dimension holding the most values and
//     take their median. Wrong peaks scatter while correct translations
//     cluster, so this tolerates a majority of outliers, unlike a plain
//     median.
//
//  2. Validity. A translation is valid if its primary component is within
//     OverlapUncertainty% of the dimension of the expected one, its
//     secondary component within OverlapUncertainty% of the orthogonal
//     dimension of the median secondary component, and its correlation is
//     at least CorrThreshold (if no translation reaches the threshold, the
//     median correlation of the in-window translations is used instead).
//
//  3. Grouping. Each valid translation is predicted by the median of the
//     other valid translations of its grid row, and separately of its grid
//     column (leave-one-out; by all the others when it is alone). The
//     grouping with the smaller mean prediction error is kept
//     ([DirectionModel.ByColumn]). Valid translations predicted far worse
//     than the rest (error above Q3 + 3 IQR of the errors, and above 2 px)
//     are marked invalid, and the grouping is chosen again.
//
//  4. Trust. Translations the model rejected but whose NCC is at least
//     [ConfidentCorr] inside the overlap window are valid again; with
//     fewer than [MinModelPairs] valid translations (too few for a model,
//     [DirectionModel.TooFewPairs]) so is every translation reaching the
//     threshold whose primary component lies in the overlap window.
//
// Repeatability (unless given): the largest leave-one-out prediction
// error d of a valid translation (either component, either direction)
// bounds how far a repaired translation may be from the truth, so
// r = ceil(d/2)+1 and the refinement radius 2r >= d+2 (two pixels of
// margin for translations the valid sample did not cover). A direction
// with too few valid translations contributes the whole overlap window
// (2*ceil(OverlapUncertainty% of the dimension / 2)) instead.
//
// An error is returned when a direction has pairs but no usable
// translation to estimate its overlap from (give the overlap then).
func EstimateModel(rel *Translations, w, h int, opt Options) (*StageModel, error) {
	o := opt.resolve()
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	m := &StageModel{
		Rows: rel.Rows, Cols: rel.Cols, Width: w, Height: h,
		opt:    o,
		validW: make([]bool, rel.Rows*rel.Cols),
		validN: make([]bool, rel.Rows*rel.Cols),
	}
	maxDev := 0.0
	for _, d := range []Direction{West, North} {
		dm, dev, err := m.estimateDirection(rel, d)
		if err != nil {
			return nil, err
		}
		if d == West {
			m.West = dm
		} else {
			m.North = dm
		}
		maxDev = max(maxDev, dev)
		if dm.TooFewPairs && dm.Pairs > 0 {
			// Too few translations to measure the spread: search the
			// whole overlap window.
			dim := float64(w)
			if d == North {
				dim = float64(h)
			}
			maxDev = max(maxDev, 2*math.Ceil(o.uncertainty/100*dim/2))
		}
	}
	if o.repeat > 0 {
		m.Repeatability = o.repeat
		m.RepeatabilityGiven = true
	} else {
		m.Repeatability = int(math.Ceil(maxDev/2)) + 1
	}
	return m, nil
}

// dirEstimate is the state of the estimation of one direction's stage
// model (the steps of [EstimateModel]).
type dirEstimate struct {
	o          options
	rel        *Translations
	d          Direction
	cols       int
	ps         []Pair  // the direction's pairs
	valid      []bool  // the model's validity flags of the direction (row*cols+col)
	dimP, dimS float64 // tile dimension along the direction and across it
	winP, winS float64 // half-widths of the windows around Primary and Secondary
	dm         DirectionModel
}

// estimateDirection estimates the model of direction d (the numbered steps
// of [EstimateModel]) and returns it with the largest leave-one-out
// prediction error of its valid translations.
func (m *StageModel) estimateDirection(rel *Translations, d Direction) (DirectionModel, float64, error) {
	o := m.opt
	e := &dirEstimate{o: o, rel: rel, d: d, cols: m.Cols, ps: pairsOf(rel.Rows, rel.Cols, d)}
	e.dm.Pairs = len(e.ps)
	e.dimP, e.dimS, e.valid = float64(m.Width), float64(m.Height), m.validW
	given := o.hOverlap
	if d == North {
		e.dimP, e.dimS, e.valid = float64(m.Height), float64(m.Width), m.validN
		given = o.vOverlap
	}
	if len(e.ps) == 0 {
		e.dm.Overlap = given
		e.dm.OverlapGiven = !math.IsNaN(given)
		return e.dm, 0, nil
	}
	e.winP = max(1, o.uncertainty/100*e.dimP)
	e.winS = max(1, o.uncertainty/100*e.dimS)
	if err := e.overlap(given); err != nil {
		return e.dm, 0, err
	}
	e.secondary()
	e.validity()
	errs := e.grouping()
	e.trust()
	for _, p := range e.ps {
		if e.isValid(p) {
			e.dm.Valid++
		}
	}
	dev := 0.0
	for _, v := range errs {
		dev = max(dev, v)
	}
	return e.dm, dev, nil
}

func (e *dirEstimate) isValid(p Pair) bool { return e.valid[p.Row*e.cols+p.Col] }

func (e *dirEstimate) setValid(p Pair, ok bool) { e.valid[p.Row*e.cols+p.Col] = ok }

// overlap sets the expected primary component and the overlap (step 1):
// from given (percent, NaN: estimate it), or as the median of the densest
// window of primary components of the translations with positive
// correlation.
func (e *dirEstimate) overlap(given float64) error {
	if !math.IsNaN(given) {
		e.dm.Overlap, e.dm.OverlapGiven = given, true
		e.dm.Primary = e.dimP * (1 - given/100)
		return nil
	}
	var vals, wts []float64
	for _, p := range e.ps {
		t := e.rel.At(p)
		pc, _ := components(t, e.d)
		if corrOf(t) > 0 && pc > 0 && float64(pc) < e.dimP {
			vals = append(vals, float64(pc))
			wts = append(wts, corrOf(t))
		}
	}
	if len(vals) == 0 {
		return fmt.Errorf("align: cannot estimate the overlap of %s pairs: no translation with positive correlation; give the overlap in the options", e.d)
	}
	e.dm.Primary = densestMedian(vals, wts, e.winP)
	e.dm.Overlap = 100 * (1 - e.dm.Primary/e.dimP)
	return nil
}

// secondary sets the secondary centre from the orthogonal components of
// the translations in the primary window (those with positive correlation
// if there are any): the median of the densest window of them, weighted by
// correlation as for the overlap, so that wrong translations that happen
// to fall in the primary window (a majority of them, on weak content) do
// not drag it.
func (e *dirEstimate) secondary() {
	var secs, wts, secsAll, ones []float64
	for _, p := range e.ps {
		t := e.rel.At(p)
		pc, sc := components(t, e.d)
		if math.Abs(float64(pc)-e.dm.Primary) <= e.winP {
			secsAll = append(secsAll, float64(sc))
			ones = append(ones, 1)
			if corrOf(t) > 0 {
				secs = append(secs, float64(sc))
				wts = append(wts, corrOf(t))
			}
		}
	}
	if len(secs) == 0 {
		secs, wts = secsAll, ones
	}
	if len(secs) > 0 {
		e.dm.Secondary = densestMedian(secs, wts, e.winS)
	}
}

// inRange reports whether t lies in the windows around the expected
// primary and secondary components.
func (e *dirEstimate) inRange(t Translation) bool {
	pc, sc := components(t, e.d)
	return math.Abs(float64(pc)-e.dm.Primary) <= e.winP && math.Abs(float64(sc)-e.dm.Secondary) <= e.winS
}

// mark sets the validity of every pair (in range, correlation at least
// thr) and returns the number of valid ones.
func (e *dirEstimate) mark(thr float64) int {
	n := 0
	for _, p := range e.ps {
		t := e.rel.At(p)
		ok := e.inRange(t) && corrOf(t) >= thr
		e.setValid(p, ok)
		if ok {
			n++
		}
	}
	return n
}

// validity marks the valid translations (step 2), falling back to the
// median correlation of the in-range translations as the threshold when
// none reaches the configured one.
func (e *dirEstimate) validity() {
	e.dm.Threshold = e.o.corrThresh
	if e.mark(e.dm.Threshold) > 0 || !e.o.hasThreshold {
		return
	}
	var cs []float64
	for _, p := range e.ps {
		if t := e.rel.At(p); e.inRange(t) {
			cs = append(cs, corrOf(t))
		}
	}
	if len(cs) > 0 {
		e.dm.Threshold = stat.Median(cs)
		e.mark(e.dm.Threshold)
	}
}

// trust marks valid the translations the image content confirms even
// though the model rejected them (step 4): those with NCC at least
// [ConfidentCorr] inside the overlap window, and, when fewer than
// [MinModelPairs] translations are valid (too few for a model), every
// translation whose primary component lies in the overlap window and that
// reaches the correlation threshold.
func (e *dirEstimate) trust() {
	n := 0
	for _, p := range e.ps {
		if e.isValid(p) {
			n++
		}
	}
	e.dm.Matched = n
	e.dm.TooFewPairs = n < MinModelPairs
	for _, p := range e.ps {
		t := e.rel.At(p)
		if e.isValid(p) {
			continue
		}
		pc, _ := components(t, e.d)
		if corrOf(t) >= ConfidentCorr && e.inRange(t) ||
			e.dm.TooFewPairs && corrOf(t) >= max(e.dm.Threshold, 0) && math.Abs(float64(pc)-e.dm.Primary) <= e.winP {
			e.setValid(p, true)
		}
	}
}

// grouping chooses the grouping (row or column) whose medians predict the
// valid translations best (leave-one-out), drops valid translations that
// the others predict far worse than usual (beyond Q3 + 3 IQR of the
// leave-one-out errors, and at least 2 px off), then chooses again on what
// is left (step 3). It returns the leave-one-out errors of the valid
// translations under the chosen grouping.
func (e *dirEstimate) grouping() []float64 {
	var errs []float64
	for pass := 0; pass < 2; pass++ {
		var vps []Pair
		errs, vps = e.chooseGrouping()
		if pass == 1 || len(errs) < 4 || !e.dropOutliers(vps, errs) {
			break
		}
	}
	return errs
}

// chooseGrouping sets dm.ByColumn from the valid translations and returns
// their pairs and leave-one-out errors under that grouping.
func (e *dirEstimate) chooseGrouping() (errs []float64, vps []Pair) {
	var vts []Translation
	for _, p := range e.ps {
		if e.isValid(p) {
			vps = append(vps, p)
			vts = append(vts, e.rel.At(p))
		}
	}
	errRow := looErrors(vps, vts, e.d, false)
	errCol := looErrors(vps, vts, e.d, true)
	e.dm.ByColumn = mean(errCol) < mean(errRow)
	if e.dm.ByColumn {
		return errCol, vps
	}
	return errRow, vps
}

// dropOutliers marks invalid the pairs vps[i] whose error errs[i] lies
// beyond max(Q3 + 3 IQR, 2) and reports whether it dropped any.
func (e *dirEstimate) dropOutliers(vps []Pair, errs []float64) bool {
	sorted := slices.Clone(errs)
	slices.Sort(sorted)
	q1, q3 := quantile(sorted, 0.25), quantile(sorted, 0.75)
	fence := max(q3+3*(q3-q1), 2)
	dropped := false
	for i, p := range vps {
		if errs[i] > fence && !(corrOf(e.rel.At(p)) >= ConfidentCorr) {
			e.setValid(p, false)
			dropped = true
		}
	}
	return dropped
}

// Repair returns a copy of rel in which every translation the model marked
// invalid is replaced by the median of the valid translations of the same
// row or column (see [DirectionModel.ByColumn]), or of the direction when
// that row or column has none, or by the expected translation (Primary,
// Secondary) when the direction has no valid translation at all. Repaired
// translations get Corr = -1 ("not measured"); [StageModel.Refine] then
// searches around them.
func (m *StageModel) Repair(rel *Translations) *Translations {
	out := rel.Clone()
	for _, d := range []Direction{West, North} {
		dm := m.West
		if d == North {
			dm = m.North
		}
		ps := pairsOf(rel.Rows, rel.Cols, d)
		groups := map[int][]Translation{}
		var all []Translation
		for _, p := range ps {
			if m.Valid(p) {
				t := rel.At(p)
				groups[groupOf(p, dm.ByColumn)] = append(groups[groupOf(p, dm.ByColumn)], t)
				all = append(all, t)
			}
		}
		for _, p := range ps {
			if m.Valid(p) {
				continue
			}
			var mp, ms float64
			switch {
			case len(groups[groupOf(p, dm.ByColumn)]) > 0:
				mp, ms = medianComponents(groups[groupOf(p, dm.ByColumn)], d)
			case len(all) > 0:
				mp, ms = medianComponents(all, d)
			default:
				mp, ms = dm.Primary, dm.Secondary
			}
			x, y := fromComponents(int(math.Round(mp)), int(math.Round(ms)), d)
			out.Set(p, Translation{X: x, Y: y, Corr: -1})
		}
	}
	return out
}

// Refine searches the NCC surface of the pair (t1, t2) around start (a
// translation of [StageModel.Repair]'s output) with r, within the model's
// search radius and minimum overlap: see [StageModel.RefineWithin].
func (m *StageModel) Refine(r *Refiner, t1, t2 *image.Gray16, start Translation) Translation {
	return m.RefineWithin(r, t1, t2, start, m.SearchRadius())
}

// RefineParams are the values of a [StageModel] that [StageModel.Refine]
// depends on besides the two tiles and the start: models with equal
// RefineParams refine a pair alike. A live stitch refines pairs with a
// model estimated before every pair was in, and keeps the results the
// final model's RefineParams and start translations agree with.
type RefineParams struct {
	Width, Height int
	// Radius is the search radius, Widest the radius the search widens to.
	Radius, Widest int
	// MinX and MinY are the smallest overlap, in pixels, a displacement
	// must leave.
	MinX, MinY int
}

// RefineParams returns the values [StageModel.Refine] depends on (keep
// it in step with refineWithin).
func (m *StageModel) RefineParams() RefineParams {
	mx, my := m.opt.minOverlap(m.Width, m.Height)
	return RefineParams{Width: m.Width, Height: m.Height, Radius: m.SearchRadius(), Widest: m.WidestRadius(), MinX: mx, MinY: my}
}

// WidestRadius is the largest half-width of the square that
// [StageModel.RefineWithin] widens its search to: the search radius, or
// the overlap uncertainty (OverlapUncertainty percent of the larger tile
// dimension) if that is larger.
func (m *StageModel) WidestRadius() int {
	return max(m.SearchRadius(), int(math.Ceil(m.opt.uncertainty/100*float64(max(m.Width, m.Height)))))
}

// RefineWithin searches the NCC surface of the pair (t1, t2) for the
// displacement of highest NCC within radius of start (and the model's
// minimum overlap) with r, and makes sure that the box contains it: while
// the best displacement lies on the edge of the box (where the surface
// may still rise outside) and not on the edge of the admissible
// displacements, the radius is doubled, up to [StageModel.WidestRadius].
// The wider box's answer is kept only if its NCC beats the first box's by
// more than [NCCTolerance]: a maximum on the edge is a reason to look
// further, not to take a far peak that matches no better.
//
// Pairs whose best raw NCC is below [ConfidentCorr] and whose overlaps
// are noise-limited are searched again on Wiener-filtered tiles
// ([Refiner.RefineDenoised]), whose displacement replaces the raw one
// as [DenoisedOverrides] says, with a Spread of at least its distance
// from the raw maximum.
func (m *StageModel) RefineWithin(r *Refiner, t1, t2 *image.Gray16, start Translation, radius int) Translation {
	tr, _ := m.refineWithin(pairSearch{
		raw: func(start Translation, radius, mx, my int) (Translation, error) {
			return r.Refine(t1, t2, start, radius, mx, my), nil
		},
		tiles: func() (*image.Gray16, *image.Gray16, error) { return t1, t2, nil },
		r:     r,
	}, start, radius)
	return tr
}

// RefineBox is [StageModel.Refine] with the raw NCC values of the pair
// from ncc (see [Refiner.RefineBox]), such as a GPU's, which has the tiles
// in its memory: the result is Refine's. The tiles themselves are needed
// only for a pair whose best raw NCC is below [ConfidentCorr] (the
// noise-limited pairs' check and denoised search); tiles loads them then,
// and host reports whether it was called.
func (m *StageModel) RefineBox(r *Refiner, ncc BoxNCC, tiles func() (t1, t2 *image.Gray16, err error), start Translation) (tr Translation, host bool, err error) {
	var t1, t2 *image.Gray16
	var terr error
	s := pairSearch{
		raw: func(start Translation, radius, mx, my int) (Translation, error) {
			return r.RefineBox(m.Width, m.Height, ncc, start, radius, mx, my)
		},
		tiles: func() (*image.Gray16, *image.Gray16, error) {
			if !host { // once, for all the boxes of the pair
				host = true
				t1, t2, terr = tiles()
			}
			return t1, t2, terr
		},
		r: r,
	}
	tr, err = m.refineWithin(s, start, m.SearchRadius())
	return tr, host, err
}

// pairSearch is how RefineWithin searches a pair: raw is the raw NCC
// search of a box (Refiner.Refine or RefineBox), tiles gives the pair's
// tiles (for the noise-limited pairs), r the Refiner of their denoised
// search.
type pairSearch struct {
	raw   func(start Translation, radius, mx, my int) (Translation, error)
	tiles func() (t1, t2 *image.Gray16, err error)
	r     *Refiner
}

// refineWithin is RefineWithin with the searches of s.
//
// Everything it reads of m is in [StageModel.RefineParams].
func (m *StageModel) refineWithin(s pairSearch, start Translation, radius int) (Translation, error) {
	mx, my := m.opt.minOverlap(m.Width, m.Height)
	limit := max(radius, m.WidestRadius())
	first, err := m.refineOnce(s, start, radius, mx, my)
	if err != nil {
		return Translation{}, err
	}
	best := first
	for best.Corr != -1 && radius < limit && m.onBoxEdge(best, start, radius, mx, my) {
		radius = min(2*max(radius, 1), limit)
		if best, err = m.refineOnce(s, start, radius, mx, my); err != nil {
			return Translation{}, err
		}
	}
	if best != first && !(best.Corr > first.Corr+NCCTolerance(first.Corr, overlapArea(m.Width, m.Height, first))) {
		// The wider box found nothing clearly better than the first
		// box's edge.
		return first, nil
	}
	return best, nil
}

// overlapArea is the overlap in pixels of two w x h tiles at t.
func overlapArea(w, h int, t Translation) uint64 {
	return uint64(max(0, w-abs(t.X))) * uint64(max(0, h-abs(t.Y)))
}

// ClimbFrom searches the NCC surface of the pair (t1, t2) for the local
// maximum nearest start, as [StageModel.RefineWithin] does within radius
// of start, but instead of widening the box while its maximum lies on
// its edge, it moves the box there (up to maxSteps times): it finds the
// peak that start lies on, not the highest one around. It searches the
// raw tiles only (the Wiener-filtered surface of a noise-limited pair is
// smoother and would carry the climb to the highest peak). The global
// solve uses it to re-search a pair around the displacement its loops
// imply.
func (m *StageModel) ClimbFrom(r *Refiner, t1, t2 *image.Gray16, start Translation, radius, maxSteps int) Translation {
	mx, my := m.opt.minOverlap(m.Width, m.Height)
	radius = max(radius, 1)
	best := r.Refine(t1, t2, start, radius, mx, my)
	for step := 0; step < maxSteps && best.Corr != -1 && m.onBoxEdge(best, start, radius, mx, my); step++ {
		start = best
		best = r.Refine(t1, t2, start, radius, mx, my)
	}
	return best
}

// onBoxEdge reports whether t lies on the edge of the search box of
// radius around start without lying on the edge of the admissible
// displacements (overlap at least mx by my).
func (m *StageModel) onBoxEdge(t, start Translation, radius, mx, my int) bool {
	ax, ay := m.Width-max(mx, 1), m.Height-max(my, 1)
	edgeX := (t.X == start.X-radius && t.X > -ax) || (t.X == start.X+radius && t.X < ax)
	edgeY := (t.Y == start.Y-radius && t.Y > -ay) || (t.Y == start.Y+radius && t.Y < ay)
	return edgeX || edgeY
}

// refineOnce is one search of RefineWithin: raw, then filtered for
// noise-limited pairs, with the rule that decides between them.
func (m *StageModel) refineOnce(s pairSearch, start Translation, radius, mx, my int) (Translation, error) {
	best, err := s.raw(start, radius, mx, my)
	if err != nil || best.Corr >= ConfidentCorr || best.Corr == -1 {
		return best, err
	}
	t1, t2, err := s.tiles()
	if err != nil {
		return Translation{}, err
	}
	if overlapNoiseCeiling(t1, t2, best.X, best.Y) >= ConfidentCorr {
		return best, nil
	}
	den := s.r.RefineDenoised(t1, t2, start, radius, mx, my)
	if den.Corr == -1 {
		return best, nil
	}
	if !DenoisedOverrides(best, den, overlapArea(m.Width, m.Height, best)) {
		return best, nil
	}
	den.Spread = max(den.Spread, best.Spread, max(abs(den.X-best.X), abs(den.Y-best.Y)))
	return den, nil
}

// DenoisedOverrides is the rule by which the displacement den that a
// search of Wiener-filtered tiles found replaces raw, the raw NCC maximum
// of the same box, whose overlap covers n pixels: always, except when raw
// is a distinct peak (its Spread is 0: no other displacement of the box
// is within [NCCTolerance] of its NCC) and either den lies more than 2 px
// from it or raw stands out of the surface (its Margin, over the
// displacements more than 1 px away, is at least [DistinctPeakMargin]
// tolerances). Within 2 px of a raw maximum that does not stand out, the
// filtered surface corrects the raw one's bias where noise is comparable
// to the content (the low-contrast grids); a move away from a raw maximum
// that the raw tiles single out clearly is not believed.
func DenoisedOverrides(raw, den Translation, n uint64) bool {
	if raw.Spread > 0 {
		return true
	}
	if max(abs(raw.X-den.X), abs(raw.Y-den.Y)) > 2 {
		return false
	}
	return raw.Margin < DistinctPeakMargin*NCCTolerance(raw.Corr, n)
}

// DistinctPeakMargin is the Margin, in units of [NCCTolerance], at which
// a raw NCC maximum stands out of its surface so clearly that the
// denoised search does not move it (see [DenoisedOverrides]). Measured
// (docs/stitching.md): raw maxima that the denoised search corrected by
// 1-2 px on the low-contrast grids stood at most 2.3 tolerances above
// the displacements more than 1 px away; raw maxima that were the truth
// and that it moved by 1 px on the hard grids without flat-field
// correction, 6.7-12.
const DistinctPeakMargin = 4

// overlapNoiseCeiling is [NoiseCeiling] of the overlaps of t1 and t2 at
// displacement (x, y); 1 when the overlap is too small to tell.
func overlapNoiseCeiling(t1, t2 *image.Gray16, x, y int) float64 {
	b := t1.Bounds()
	w, h := b.Dx(), b.Dy()
	x0, x1 := max(0, x), min(w, x+w)
	y0, y1 := max(0, y), min(h, y+h)
	if x1-x0 < 3 || y1-y0 < 3 {
		return 1
	}
	f := func(t *image.Gray16, u0, v0 int) float64 {
		v := regionVariance(t, u0, v0, x1-x0, y1-y0)
		if !(v > 0) {
			return 0
		}
		return max(0, 1-noiseVariance(t, u0, v0, x1-x0, y1-y0)/v)
	}
	return math.Sqrt(f(t1, x0, y0) * f(t2, x0-x, y0-y))
}

// looErrors returns, for every valid translation ts[i] of pair ps[i], the
// error (larger component) of predicting it by the median of the other
// valid translations of its row or column (byCol), or of all the others
// when it is alone in its row or column.
func looErrors(ps []Pair, ts []Translation, d Direction, byCol bool) []float64 {
	groups := map[int][]int{}
	for i, p := range ps {
		g := groupOf(p, byCol)
		groups[g] = append(groups[g], i)
	}
	all := make([]int, len(ps))
	for i := range all {
		all[i] = i
	}
	errs := make([]float64, 0, len(ps))
	var others []Translation
	for i, p := range ps {
		members := groups[groupOf(p, byCol)]
		if len(members) < 2 {
			members = all
		}
		others = others[:0]
		for _, j := range members {
			if j != i {
				others = append(others, ts[j])
			}
		}
		if len(others) == 0 {
			errs = append(errs, 0)
			continue
		}
		mp, ms := medianComponents(others, d)
		pc, sc := components(ts[i], d)
		errs = append(errs, max(math.Abs(float64(pc)-mp), math.Abs(float64(sc)-ms)))
	}
	return errs
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func medianComponents(ts []Translation, d Direction) (mp, ms float64) {
	pv := make([]float64, len(ts))
	sv := make([]float64, len(ts))
	for i, t := range ts {
		pc, sc := components(t, d)
		pv[i], sv[i] = float64(pc), float64(sc)
	}
	return stat.Median(pv), stat.Median(sv)
}

// quantile returns the q-quantile of sorted v by linear interpolation.
func quantile(sorted []float64, q float64) float64 {
	pos := q * float64(len(sorted)-1)
	i := int(pos)
	if i >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	f := pos - float64(i)
	return sorted[i]*(1-f) + sorted[i+1]*f
}

// densestMedian returns the median of the values inside the interval of
// width 2*half whose values have the largest total weight wt (the
// correlations: a cluster of well-matched translations outweighs an
// equal or slightly larger cluster of poorly matched ones); the earliest
// such interval on ties.
func densestMedian(v, wt []float64, half float64) float64 {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmpF(v[a], v[b]) })
	s := make([]float64, len(v))
	for k, i := range idx {
		s[k] = v[i]
	}
	bestI, bestJ, bestW := 0, 0, math.Inf(-1)
	j, sum := -1, 0.0
	for i := range s {
		if j < i {
			j, sum = i, wt[idx[i]]
		}
		for j+1 < len(s) && s[j+1]-s[i] <= 2*half {
			j++
			sum += wt[idx[j]]
		}
		if sum > bestW+1e-12 {
			bestI, bestJ, bestW = i, j, sum
		}
		sum -= wt[idx[i]]
	}
	return stat.Median(s[bestI : bestJ+1])
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
