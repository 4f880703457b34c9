package align

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// modelGrid builds the translations of a rows x cols grid of w x h tiles
// whose true positions follow a stage model: nominal step, per-column
// offsets (x and y), per-row offsets, and uniform jitter. All correlations
// are 0.9.
func modelGrid(seed uint64, rows, cols, w, h int, overlap float64, drift, jitter int) (*Translations, []int, []int) {
	rng := rand.New(rand.NewPCG(seed, 9))
	u := func(a int) int { return rng.IntN(2*a+1) - a }
	colOff := make([][2]int, cols)
	rowOff := make([][2]int, rows)
	for c := range colOff {
		colOff[c] = [2]int{u(drift), u(drift)}
	}
	for r := range rowOff {
		rowOff[r] = [2]int{u(drift), u(drift)}
	}
	sx := int(math.Round(float64(w) * (1 - overlap/100)))
	sy := int(math.Round(float64(h) * (1 - overlap/100)))
	xs, ys := make([]int, rows*cols), make([]int, rows*cols)
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			i := r*cols + c
			xs[i] = c*sx + colOff[c][0] + rowOff[r][0] + u(jitter)
			ys[i] = r*sy + colOff[c][1] + rowOff[r][1] + u(jitter)
		}
	}
	tr := NewTranslations(rows, cols)
	for _, p := range Pairs(rows, cols) {
		nr, nc := p.Neighbor()
		i, j := p.Row*cols+p.Col, nr*cols+nc
		tr.Set(p, Translation{X: xs[i] - xs[j], Y: ys[i] - ys[j], Corr: 0.9})
	}
	return tr, xs, ys
}

func TestStageModelOutliers(t *testing.T) {
	const w, h = 400, 300
	truth, _, _ := modelGrid(1, 6, 7, w, h, 12, 3, 2)
	rel := truth.Clone()
	outliers := map[Pair]Translation{
		{2, 3, West}:  {X: 40, Y: 200, Corr: 0.3},   // wrong peak, low correlation
		{4, 1, West}:  {X: 352, Y: 120, Corr: 0.8},  // secondary component far off
		{1, 5, North}: {X: 2, Y: 180, Corr: 0.95},   // primary component far off
		{5, 6, North}: {X: -300, Y: 264, Corr: 0.2}, // garbage
		{3, 3, North}: {X: 0, Y: 265, Corr: 0.1},    // plausible but too weak
	}
	for p, v := range outliers {
		rel.Set(p, v)
	}
	m, err := EstimateModel(rel, w, h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(m.West.Overlap-12) > 1.5 || math.Abs(m.North.Overlap-12) > 1.5 || m.West.OverlapGiven {
		t.Errorf("overlap estimates %.2f / %.2f, want about 12", m.West.Overlap, m.North.Overlap)
	}
	for _, p := range Pairs(6, 7) {
		_, bad := outliers[p]
		if m.Valid(p) == bad {
			t.Errorf("%v: valid = %v", p, m.Valid(p))
		}
	}
	// Position errors: up to 2*drift (column offsets) + 2*jitter per
	// translation component; the leave-one-out errors are at most that.
	if m.Repeatability < 2 || m.Repeatability > 8 {
		t.Errorf("repeatability %d", m.Repeatability)
	}
	rep := m.Repair(rel)
	for p := range outliers {
		got, want := rep.At(p), truth.At(p)
		if got.Corr != -1 {
			t.Errorf("%v: repaired Corr %v, want -1", p, got.Corr)
		}
		if abs(got.X-want.X) > m.SearchRadius() || abs(got.Y-want.Y) > m.SearchRadius() {
			t.Errorf("%v: repaired %+v, truth %+v, beyond search radius %d", p, got, want, m.SearchRadius())
		}
	}
	for _, p := range Pairs(6, 7) {
		if _, bad := outliers[p]; !bad && rep.At(p) != rel.At(p) {
			t.Errorf("%v: valid translation changed by Repair", p)
		}
	}
}

// TestStageModelGrouping: with per-column stage offsets only, west
// translations depend on the column, so the model must group west pairs by
// column and repair a missing west translation from its column.
func TestStageModelGrouping(t *testing.T) {
	const w, h = 400, 300
	rows, cols := 6, 6
	colDY := []int{0, 9, -8, 3, 12, -10} // west Y per column
	rel := NewTranslations(rows, cols)
	for _, p := range Pairs(rows, cols) {
		if p.Dir == West {
			rel.Set(p, Translation{X: 350 + p.Col%2, Y: colDY[p.Col] + (p.Row % 2), Corr: 0.9})
		} else {
			rel.Set(p, Translation{X: 1 - p.Col%2, Y: 260 + 3*(p.Row%3), Corr: 0.9})
		}
	}
	bad := Pair{3, 4, West}
	rel.Set(bad, Translation{X: 120, Y: -40, Corr: 0.2})
	m, err := EstimateModel(rel, w, h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !m.West.ByColumn {
		t.Errorf("west pairs not grouped by column: %+v", m.West)
	}
	if m.North.ByColumn {
		t.Errorf("north pairs grouped by column: %+v", m.North)
	}
	got := m.Repair(rel).At(bad)
	if got.X != 350 || abs(got.Y-colDY[4]) > 1 {
		t.Errorf("repaired %+v, want about (350, %d)", got, colDY[4])
	}
}

func TestStageModelGivenOverlap(t *testing.T) {
	const w, h = 400, 300
	truth, _, _ := modelGrid(2, 4, 5, w, h, 10, 1, 1)
	m, err := EstimateModel(truth, w, h, Options{HorizontalOverlap: 10, VerticalOverlap: 10.5, Repeatability: 3})
	if err != nil {
		t.Fatal(err)
	}
	if !m.West.OverlapGiven || m.West.Overlap != 10 || m.North.Overlap != 10.5 || m.West.Primary != 360 {
		t.Errorf("given overlap not used: %+v %+v", m.West, m.North)
	}
	if m.Repeatability != 3 || !m.RepeatabilityGiven || m.SearchRadius() != 6 {
		t.Errorf("given repeatability not used: %d", m.Repeatability)
	}
	// A wrong given overlap makes every translation invalid.
	m, err = EstimateModel(truth, w, h, Options{Overlap: 40})
	if err != nil {
		t.Fatal(err)
	}
	if m.West.Valid != 0 || m.North.Valid != 0 {
		t.Errorf("translations valid under a wrong overlap: %d %d", m.West.Valid, m.North.Valid)
	}
	rep := m.Repair(truth)
	if got := rep.At(Pair{1, 1, West}); got.X != 240 {
		t.Errorf("repair without valid translations: %+v, want X = 240 from the given overlap", got)
	}
}

func TestStageModelMajorityOutliers(t *testing.T) {
	const w, h = 400, 300
	truth, _, _ := modelGrid(3, 8, 8, w, h, 15, 2, 2)
	rel := truth.Clone()
	rng := rand.New(rand.NewPCG(3, 3))
	ps := Pairs(8, 8)
	for i, p := range ps {
		if i%3 != 0 { // two thirds garbage with decent correlations
			rel.Set(p, Translation{X: rng.IntN(w), Y: rng.IntN(h) - h/2, Corr: 0.3 + 0.4*rng.Float64()})
		}
	}
	m, err := EstimateModel(rel, w, h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(m.West.Overlap-15) > 1.5 || math.Abs(m.North.Overlap-15) > 1.5 {
		t.Errorf("overlap estimates %.2f / %.2f with two thirds outliers, want about 15", m.West.Overlap, m.North.Overlap)
	}
}

func TestStageModelErrors(t *testing.T) {
	rel := NewTranslations(2, 2)
	for _, p := range Pairs(2, 2) {
		rel.Set(p, Translation{X: 5, Y: 5, Corr: -0.5})
	}
	if _, err := EstimateModel(rel, 100, 100, Options{}); err == nil || !strings.Contains(err.Error(), "give the overlap") {
		t.Errorf("no usable translation: %v", err)
	}
	if _, err := EstimateModel(rel, 100, 100, Options{Overlap: 150}); err == nil {
		t.Error("overlap 150% accepted")
	}
	// A single tile has no pairs: nothing to estimate.
	if _, err := EstimateModel(NewTranslations(1, 1), 100, 100, Options{}); err != nil {
		t.Errorf("1x1 grid: %v", err)
	}
}

func TestDensestMedian(t *testing.T) {
	v := []float64{3, 90, 91, 92, 91, 250, 260, 10, 93, 400}
	ones := make([]float64, len(v))
	for i := range ones {
		ones[i] = 1
	}
	if got := densestMedian(v, ones, 2); got != 91 {
		t.Errorf("densestMedian = %v, want 91", got)
	}
	// Two translations that match well outweigh two that match poorly.
	v = []float64{76, 82, 226, 226}
	if got := densestMedian(v, []float64{0.36, 0.41, 0.88, 0.83}, 12); got != 226 {
		t.Errorf("weighted densestMedian = %v, want 226", got)
	}
}

// The secondary centre tolerates a majority of wrong translations inside
// the primary window when they scatter away from the true cluster on one
// side (a plain median follows them): issue 15, failure mode 1.
func TestStageModelSecondaryMajorityWrong(t *testing.T) {
	const w, h = 400, 300
	truth, _, _ := modelGrid(2, 4, 5, w, h, 10, 0, 1)
	rel := truth.Clone()
	wrong := []int{-190, -175, -160, -140, -120, -105, -90, -75, -60}
	for i, p := range pairsOf(4, 5, North)[:len(wrong)] {
		tr := rel.At(p)
		rel.Set(p, Translation{X: wrong[i], Y: tr.Y, Corr: 0.6})
	}
	m, err := EstimateModel(rel, w, h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s := m.North.Secondary; math.Abs(s) > 2 {
		t.Errorf("north secondary %v, want about 0 (the correct translations' cluster)", s)
	}
	for _, p := range pairsOf(4, 5, North)[len(wrong):] {
		if !m.Valid(p) {
			t.Errorf("%v (correct) marked invalid", p)
		}
	}
}
