package align

import (
	"math"
	"testing"

	"github.com/gohtgs/htgs/internal/fuzzrun"
)

// FuzzOptionsValidate: Validate never panics, and options it accepts
// resolve to what the aligner can use: peaks from 1 to MaxPeaks (a count
// in the millions held a worker for hours per pair), percentages in
// range, a whitening exponent in (0, 1].
func FuzzOptionsValidate(f *testing.F) {
	fuzzrun.Prepare(f)
	f.Add(2, 16, 0.0, 0.0, 0.0, 0.0, 0, 0.0, 0.0)
	f.Add(1<<40, 0, 10.0, 12.5, math.NaN(), 3.0, 5, 0.5, 0.9)
	f.Add(-1, -1, 100.0, -1.0, 0.0, 100.0, -1, 2.0, 1.5)
	f.Fuzz(func(t *testing.T, peaks, maxPeaks int, overlap, h, v, unc float64, rep int, white, corr float64) {
		o := Options{PeakCount: peaks, MaxPeakCount: maxPeaks, Overlap: overlap, HorizontalOverlap: h, VerticalOverlap: v,
			OverlapUncertainty: unc, Repeatability: rep, Whitening: white, CorrThreshold: corr}
		if o.Validate() != nil {
			return
		}
		r := o.resolve()
		if r.peaks < 1 || r.peaks > MaxPeaks || r.maxPeaks < r.peaks || r.maxPeaks > MaxPeaks {
			t.Fatalf("%+v resolves to %d peaks, up to %d", o, r.peaks, r.maxPeaks)
		}
		if !(r.beta > 0 && r.beta <= 1) || r.uncertainty < 0 || r.uncertainty >= 100 || r.repeat < 0 {
			t.Fatalf("%+v resolves to %+v", o, r)
		}
	})
}
