package stitching

import (
	"fmt"
	"math"
	"strings"

	"github.com/gohtgs/htgs/internal/stat"
	"github.com/gohtgs/htgs/stitching/align"
)

// Limits of the quality measures below which [Quality.Warnings] warns.
const (
	// LowCorrelation is the correlation under which two tiles hardly
	// match: pure noise gives about 0.03, tiles with real overlapping
	// content 0.6 to 1.
	LowCorrelation = 0.3
	// MinModelTranslations is the least number of valid translations per
	// direction from which the stage model estimates an overlap or a
	// repeatability: with fewer, one wrong translation decides the model.
	MinModelTranslations = 3
	// MaxPlausibleOverlap is the largest overlap estimate, in percent,
	// taken as plausible; stages are set up with overlaps of about 5 to
	// 50%, and wrong translations give estimates near 100%.
	MaxPlausibleOverlap = 90.0
	// NearZeroShiftOverlap is the overlap estimate, in percent, above
	// which the translations are taken as the near-zero shifts of a
	// pattern fixed to the camera rather than a stage's steps.
	NearZeroShiftOverlap = 99.0
)

// DirectionQuality describes the stage model of one pair direction.
type DirectionQuality struct {
	// Pairs is the number of pairs of this direction in the grid.
	Pairs int
	// Valid is the number of their translations the stage model accepted
	// (see [align.DirectionModel.Valid]).
	Valid int
	// Overlap is the overlap, in percent, that the model used; NaN when
	// the direction has no pairs and no overlap was given.
	Overlap float64
	// OverlapGiven reports whether Overlap came from the options.
	OverlapGiven bool
	// ModelSkipped reports that the direction had too few valid
	// translations for a stage model ([align.DirectionModel.TooFewPairs]):
	// translations reaching the correlation threshold were kept as
	// measured instead of being repaired, and refinement searched the
	// whole overlap window.
	ModelSkipped bool
	// Matched is the number of translations the stage model's windows
	// and threshold accepted before trusting translations on their own
	// correlation ([align.DirectionModel.Matched]).
	Matched int
}

// UncertainTile is a tile whose estimated position uncertainty is 1 px or
// more (see [Result.Uncertainty]).
type UncertainTile struct {
	Row, Col int
	// Pixels is the estimated uncertainty; -1: no pair correlating at
	// least LowCorrelation confirms the tile.
	Pixels int
}

// Quality gathers measures of how much a [Result] can be trusted, taken
// from the result itself (no ground truth needed). Grids too small for the
// stage model, pure noise and wrong grid sizes or file patterns show up
// here; [Quality.Warnings] says which measures are poor.
type Quality struct {
	// Pairs is the number of adjacent pairs of the grid.
	Pairs int
	// MedianCorr is the median correlation of the registration's
	// translations ([Result.Relative]) over all pairs: NaN without pairs.
	MedianCorr float64
	// LowCorrTiles is the number of tiles placed by a spanning-tree edge
	// whose correlation (after refinement) is below LowCorrelation: their
	// positions are not confirmed by the image content.
	LowCorrTiles int
	// West and North describe the stage model of each direction.
	West, North DirectionQuality
	// RepeatabilityGiven reports whether the repeatability came from the
	// options rather than from the translations.
	RepeatabilityGiven bool
	// Uncertain lists the tiles whose position is uncertain by 1 px or
	// more, row-major (from [Result.Uncertainty]).
	Uncertain []UncertainTile
	// Contradicted is the number of pairs whose refined translation the
	// global solve's positions contradict ([Result.Inconsistent]).
	Contradicted int
}

// Quality returns the quality measures of r (see [Quality]).
func (r *Result) Quality() Quality {
	q := Quality{MedianCorr: math.NaN()}
	if r.Model != nil {
		dq := func(d align.DirectionModel) DirectionQuality {
			return DirectionQuality{Pairs: d.Pairs, Valid: d.Valid, Overlap: d.Overlap, OverlapGiven: d.OverlapGiven, ModelSkipped: d.TooFewPairs, Matched: d.Matched}
		}
		q.West, q.North = dq(r.Model.West), dq(r.Model.North)
		q.RepeatabilityGiven = r.Model.RepeatabilityGiven
	}
	if r.Relative != nil {
		ps := align.Pairs(r.Relative.Rows, r.Relative.Cols)
		q.Pairs = len(ps)
		corrs := make([]float64, 0, len(ps))
		for _, p := range ps {
			c := r.Relative.At(p).Corr
			if math.IsNaN(c) {
				c = -1
			}
			corrs = append(corrs, c)
		}
		q.MedianCorr = stat.Median(corrs)
	}
	for i, u := range r.Uncertainty {
		if u != 0 && r.Cols > 0 {
			q.Uncertain = append(q.Uncertain, UncertainTile{Row: i / r.Cols, Col: i % r.Cols, Pixels: u})
		}
	}
	q.Contradicted = len(r.Inconsistent)
	// Every tile but the root of the spanning tree, tile (0, 0), was
	// placed by an edge whose correlation it carries (see GlobalPositions);
	// after the global solve a tile carries the largest correlation of
	// the pairs its position agrees with (see align.Solution).
	for i, p := range r.Positions {
		if i > 0 && !(p.Corr >= LowCorrelation) {
			q.LowCorrTiles++
		}
	}
	return q
}

// Warnings returns one sentence for each poor quality measure, nil when
// none is poor:
//   - the median correlation is below LowCorrelation: the tiles hardly
//     match (noise, no common content, wrong grid size or pattern);
//   - an estimated overlap is NaN, not in (0, 100), at least
//     NearZeroShiftOverlap, or above MaxPlausibleOverlap while fewer than
//     4 in 5 of its direction's translations agree with it (a 95%
//     overlap that the translations confirm is believed);
//   - a direction's stage model rests on fewer than MinModelTranslations
//     valid translations while it estimated something (the overlap or the
//     repeatability);
//   - a direction's stage model was skipped (too few pairs);
//   - fewer than half of a direction's translations (of 4 or more) are
//     valid;
//   - pairs disagreed with the loops around them (the global solve
//     overrode them);
//   - tiles are placed with an uncertainty of 1 px or more (named, the
//     first 12);
//   - tiles were placed by pairs correlating below LowCorrelation.
func (q Quality) Warnings() []string {
	var w []string
	if q.Pairs > 0 && !(q.MedianCorr >= LowCorrelation) {
		w = append(w, fmt.Sprintf("the median correlation of the %d pairs is %.3f (below %.1f): the tiles hardly match (noise, no common content, or a wrong grid size or file pattern); the positions are unreliable",
			q.Pairs, q.MedianCorr, LowCorrelation))
	}
	for _, d := range []struct {
		name string
		q    DirectionQuality
	}{{"horizontal (west pairs)", q.West}, {"vertical (north pairs)", q.North}} {
		if d.q.Pairs == 0 {
			continue
		}
		if !d.q.OverlapGiven {
			switch ov := d.q.Overlap; {
			case math.IsNaN(ov) || ov <= 0 || ov >= 100:
				w = append(w, fmt.Sprintf("the %s overlap estimate %.2f%% is impossible; give the overlap instead of estimating it", d.name, ov))
			case ov >= NearZeroShiftOverlap:
				w = append(w, fmt.Sprintf("the %s overlap estimate %.2f%% means the tiles barely move against each other, as when a pattern fixed to the camera (dust, fixed-pattern noise, vignetting) decides the correlation; give the overlap instead of estimating it",
					d.name, ov))
			case ov > MaxPlausibleOverlap && 5*d.q.Valid < 4*d.q.Pairs:
				w = append(w, fmt.Sprintf("the %s overlap estimate %.2f%% is implausible (above %.0f%%) and only %d of %d translations agree with it: it may come from wrong translations; give the overlap instead of estimating it",
					d.name, ov, MaxPlausibleOverlap, d.q.Valid, d.q.Pairs))
			}
		}
		if d.q.ModelSkipped {
			w = append(w, fmt.Sprintf("%s model skipped: too few pairs (%d of %d matched the stage model, want at least %d): translations reaching the correlation threshold were kept as measured, and refinement searched around them, widening its box while the best match lay on its edge",
				d.name, d.q.Matched, d.q.Pairs, align.MinModelPairs))
		}
		if d.q.Pairs >= 4 && 2*d.q.Valid < d.q.Pairs && d.q.Valid >= MinModelTranslations {
			w = append(w, fmt.Sprintf("only %d of the %d %s translations are valid: the others were repaired from the stage model and searched again, and may be wrong",
				d.q.Valid, d.q.Pairs, d.name))
		}
		if d.q.Valid < MinModelTranslations && (!d.q.OverlapGiven || !q.RepeatabilityGiven) {
			w = append(w, fmt.Sprintf("the %s stage model rests on %d valid translation(s) of %d pairs (want at least %d): the grid is too small or the pairs do not match, and the estimated overlap and repeatability may be wrong",
				d.name, d.q.Valid, d.q.Pairs, MinModelTranslations))
		}
	}
	if q.Contradicted > 0 {
		w = append(w, fmt.Sprintf("%d pair(s) disagreed with the loops of pairs around them; the positions follow the loops (see the pairs' Spread)", q.Contradicted))
	}
	if len(q.Uncertain) > 0 {
		const show = 12
		var names []string
		for k, u := range q.Uncertain {
			if k == show {
				names = append(names, fmt.Sprintf("and %d more", len(q.Uncertain)-show))
				break
			}
			if u.Pixels < 0 {
				names = append(names, fmt.Sprintf("(%d,%d) unconfirmed", u.Row, u.Col))
			} else {
				names = append(names, fmt.Sprintf("(%d,%d) ±%d px", u.Row, u.Col, u.Pixels))
			}
		}
		w = append(w, fmt.Sprintf("%d tile(s) placed with an uncertainty of 1 px or more (row,col): %s", len(q.Uncertain), strings.Join(names, ", ")))
	}
	if q.LowCorrTiles > 0 {
		w = append(w, fmt.Sprintf("%d tile(s) were placed by pairs correlating below %.1f: their positions are not confirmed by the image content",
			q.LowCorrTiles, LowCorrelation))
	}
	return w
}

// Warnings returns r.Quality().Warnings().
func (r *Result) Warnings() []string { return r.Quality().Warnings() }
