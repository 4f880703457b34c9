package align

import (
	"fmt"
	"math"
)

// Options tune the stitching algorithm: registration ([Aligner],
// [TileFFT]), the stage model ([EstimateModel]) and the flat-field
// correction that stitching.Sequential and stitching.Stitch apply. They
// live here, with the algorithms that read them, and the stitching
// package passes them through; how a run is executed (workers, pools,
// GPUs) is stitching.GraphOptions. The zero value selects the documented
// defaults; use negative values where noted to switch a limit off.
type Options struct {
	// PeakCount is the number of peaks of the phase-correlation matrix
	// examined per pair (MIST uses 2). 0 means 2.
	PeakCount int
	// MaxPeakCount is the number of peaks examined when none of the first
	// PeakCount gives a confident match (see [Aligner.Align]): on flat
	// correlation surfaces (low contrast, strong noise) the true
	// displacement is often not among the highest peaks. 0 means 16;
	// a value <= PeakCount (e.g. -1) switches the extension off, as in
	// MIST.
	MaxPeakCount int

	// MinOverlap is the minimum overlap, in pixels, that a candidate
	// displacement must leave in each dimension (overlap width and
	// overlap height) to be scored; narrow strips give unreliable but
	// sometimes high correlations. 0 means 8; negative means 1.
	MinOverlap int
	// MinOverlapFraction is the same limit as a fraction of the tile
	// dimension (width for the overlap width, height for the overlap
	// height); the larger of the two limits applies. 0 means 0.02;
	// negative switches the fractional limit off.
	MinOverlapFraction float64

	// Overlap is the expected overlap between adjacent tiles, in percent
	// of the tile size, for both directions. 0 or NaN means: estimate it
	// from the computed translations.
	Overlap float64
	// HorizontalOverlap and VerticalOverlap override Overlap for west
	// pairs (percent of the tile width) and north pairs (percent of the
	// tile height). 0 or NaN means: use Overlap.
	HorizontalOverlap, VerticalOverlap float64
	// OverlapUncertainty is the half-width, in percent of the tile
	// dimension, of the window around the expected overlap in which a
	// translation is considered valid by the stage model; it also bounds
	// the deviation of the orthogonal component. 0 means 5.
	OverlapUncertainty float64

	// Repeatability is the stage repeatability r in pixels: every tile
	// may deviate by up to r from its nominal grid position, so relative
	// translations vary by up to 2r and refinement searches the
	// (4r+1)^2 square around each translation. 0 means: estimate it from
	// the valid translations.
	Repeatability int

	// CorrThreshold is the minimum correlation of a valid translation in
	// the stage model. 0 means 0.5; negative means no threshold. When no
	// translation of a direction reaches it, the median correlation of
	// the translations inside the overlap window is used instead.
	CorrThreshold float64

	// NoFlatField switches off the flat-field (vignetting) correction
	// that stitching.Sequential and stitching.Stitch apply by default (see
	// [FlatField]); set it to reproduce MIST, which works on the raw tiles.
	NoFlatField bool

	// NoPeriodicDecomposition makes the per-tile FFT transform the raw
	// tile, as MIST does, instead of its periodic component (see
	// [FFT2.ForwardPeriodic] and [TileFFT]).
	NoPeriodicDecomposition bool

	// Whitening is the exponent b of the cross-power spectrum
	// normalization F1 conj(F2) / |F1 conj(F2)|^b. b = 1 is MIST's full
	// normalization (pure phase correlation). 0 means the default 0.75,
	// which keeps a little of the magnitude: with smooth, noisy content
	// the high frequencies are mostly noise, which full normalization
	// amplifies to the weight of the signal; 0.75 gives much stronger true
	// peaks there and about the same results on textured content. Values
	// must lie in (0, 1]; 1, 0.75 and 0.5 are computed without math.Pow.
	Whitening float64

	// FFT selects the FFT implementation of the registration transforms
	// ([TileFFT], [Aligner]): FFTAuto (the zero value) uses FFTW when it
	// can be loaded, FFTGonum forces the pure-Go transforms.
	FFT FFTKernel

	// SpanningTree places the tiles as MIST does, by composing the
	// refined translations along a maximum spanning tree of correlations
	// ([GlobalPositions]), instead of the default global, loop-consistent
	// solve over every pair ([SolvePositions], with the re-search of the
	// pairs that the loops contradict in stitching.Sequential and
	// stitching.Stitch).
	SpanningTree bool
}

// options is Options with defaults resolved.
type options struct {
	peaks        int
	maxPeaks     int
	minOv        int
	minOvFrac    float64
	hOverlap     float64 // percent or NaN
	vOverlap     float64 // percent or NaN
	uncertainty  float64 // percent
	repeat       int     // 0: estimate
	corrThresh   float64
	hasThreshold bool
	beta         float64
	periodic     bool
}

func (o Options) resolve() options {
	r := options{
		peaks:        o.PeakCount,
		minOv:        o.MinOverlap,
		minOvFrac:    o.MinOverlapFraction,
		uncertainty:  o.OverlapUncertainty,
		repeat:       o.Repeatability,
		corrThresh:   o.CorrThreshold,
		hasThreshold: true,
		beta:         o.Whitening,
		periodic:     !o.NoPeriodicDecomposition,
	}
	if !(r.beta > 0) {
		r.beta = 0.75
	}
	if r.peaks <= 0 {
		r.peaks = 2
	}
	switch {
	case o.MaxPeakCount == 0:
		r.maxPeaks = max(16, r.peaks)
	default:
		r.maxPeaks = max(o.MaxPeakCount, r.peaks)
	}
	switch {
	case r.minOv == 0:
		r.minOv = 8
	case r.minOv < 0:
		r.minOv = 1
	}
	switch {
	case r.minOvFrac == 0 || math.IsNaN(r.minOvFrac):
		r.minOvFrac = 0.02
	case r.minOvFrac < 0:
		r.minOvFrac = 0
	}
	if !(r.uncertainty > 0) {
		r.uncertainty = 5
	}
	if r.repeat < 0 {
		r.repeat = 0
	}
	switch {
	case r.corrThresh == 0 || math.IsNaN(r.corrThresh):
		r.corrThresh = 0.5
	case r.corrThresh < 0:
		r.corrThresh = math.Inf(-1)
		r.hasThreshold = false
	}
	ov := func(v float64) float64 {
		if v > 0 && v < 100 {
			return v
		}
		return math.NaN()
	}
	r.hOverlap, r.vOverlap = ov(o.Overlap), ov(o.Overlap)
	if v := ov(o.HorizontalOverlap); !math.IsNaN(v) {
		r.hOverlap = v
	}
	if v := ov(o.VerticalOverlap); !math.IsNaN(v) {
		r.vOverlap = v
	}
	return r
}

// minOverlap returns the minimum overlap width and height for w x h tiles.
func (o options) minOverlap(w, h int) (mx, my int) {
	mx = max(o.minOv, int(math.Ceil(o.minOvFrac*float64(w))), 1)
	my = max(o.minOv, int(math.Ceil(o.minOvFrac*float64(h))), 1)
	return min(mx, w), min(my, h)
}

// EffectivePeakCount returns the number of phase-correlation peaks
// examined per pair: PeakCount, or its default.
func (o Options) EffectivePeakCount() int { return o.resolve().peaks }

// EffectiveWhitening returns the exponent of the cross-power spectrum
// normalization: Whitening, or its default.
func (o Options) EffectiveWhitening() float64 { return o.resolve().beta }

// EffectiveOverlaps returns the expected horizontal (west pairs) and
// vertical (north pairs) overlaps in percent that the options give, NaN
// for one that is estimated from the translations.
func (o Options) EffectiveOverlaps() (horizontal, vertical float64) {
	r := o.resolve()
	return r.hOverlap, r.vOverlap
}

// EffectiveOverlapUncertainty returns OverlapUncertainty, or its default.
func (o Options) EffectiveOverlapUncertainty() float64 { return o.resolve().uncertainty }

// MaxPeaks bounds Options.PeakCount and Options.MaxPeakCount: the peaks of
// a pair are kept sorted by insertion among the correlation matrix's local
// maxima (up to a quarter of its pixels) and each is scored, so that a
// count in the millions (from a job or an option value) would hold a
// worker for hours per pair. MIST uses 2.
const MaxPeaks = 256

// Validate rejects option values that cannot be meant. [EstimateModel],
// stitching.Sequential and stitching.Stitch call it.
func (o Options) Validate() error {
	for _, v := range []struct {
		name string
		val  float64
	}{{"Overlap", o.Overlap}, {"HorizontalOverlap", o.HorizontalOverlap}, {"VerticalOverlap", o.VerticalOverlap}} {
		if v.val != 0 && !math.IsNaN(v.val) && !(v.val > 0 && v.val < 100) {
			return fmt.Errorf("align: %s = %v; want a percentage in (0, 100), or 0 to estimate it", v.name, v.val)
		}
	}
	if o.OverlapUncertainty < 0 || o.OverlapUncertainty >= 100 {
		return fmt.Errorf("align: OverlapUncertainty = %v; want a percentage in [0, 100)", o.OverlapUncertainty)
	}
	if o.PeakCount > MaxPeaks || o.MaxPeakCount > MaxPeaks {
		return fmt.Errorf("align: PeakCount = %d, MaxPeakCount = %d; want at most %d peaks", o.PeakCount, o.MaxPeakCount, MaxPeaks)
	}
	if o.Repeatability < 0 {
		return fmt.Errorf("align: Repeatability = %d; want >= 0", o.Repeatability)
	}
	if o.Whitening < 0 || o.Whitening > 1 || math.IsNaN(o.Whitening) {
		return fmt.Errorf("align: Whitening = %v; want an exponent in (0, 1], or 0 for the default", o.Whitening)
	}
	if o.CorrThreshold > 1 {
		return fmt.Errorf("align: CorrThreshold = %v; want <= 1", o.CorrThreshold)
	}
	return nil
}
