// Package align is the stitching algorithm of package stitching: the
// registration of adjacent tiles and the global optimization that turns
// their translations into tile positions, following NIST's MIST (Chalfoun
// et al., Scientific Reports 2017). Every piece works on one tile, one
// adjacent pair or the grid's translations, with scratch owned by the
// caller, so that the task graphs of package stitching can run each piece
// on many tiles or pairs at once. The package reads no files (see
// stitching/tileio) and starts no goroutines.
//
//   - the grid: [Pair] and [Direction] name adjacent pairs ([Pairs] lists
//     them), [Translations] holds one [Translation] per pair, [Position] is
//     a tile's place in the mosaic;
//   - flat-field (vignetting) correction: [EstimateFlatField], [FlatField];
//   - forward 2-D FFT of a tile: [TileFFT] on top of [FFT2] (one per
//     goroutine);
//   - phase correlation (PCIAM) and cross-correlation factors (CCF) of an
//     adjacent pair: [Aligner] (one per goroutine), [CCF], [NCC];
//   - global optimization: [EstimateModel] (stage model: overlap,
//     repeatability, outliers), [StageModel.Repair], [StageModel.Refine]
//     with a [Refiner] (search of the NCC surface around each translation,
//     one Refiner per goroutine), [SolvePositions] (robust L1 fit of the
//     positions over every pair, the default of stitching.Sequential and
//     stitching.Stitch), [GlobalPositions] (MIST's maximum spanning
//     tree);
//   - [Options] tune all of the above.
//
// Registration of every pair, then the optimization, for a grid of
// rows x cols tiles of w x h pixels that tile(row, col) returns
// (stitching.Sequential does the same with one line of tiles in memory):
//
//	fft := align.NewTileFFT(w, h, opt)
//	f1, f2 := make([]complex128, fft.SpectrumLen()), make([]complex128, fft.SpectrumLen())
//	al := align.NewAligner(w, h, opt)
//	rel := align.NewTranslations(rows, cols)
//	for _, p := range align.Pairs(rows, cols) {
//		r, c := p.Neighbor()
//		t1, t2 := tile(r, c), tile(p.Row, p.Col)
//		fft.Forward(t1, f1)
//		fft.Forward(t2, f2)
//		rel.Set(p, al.Align(t1, t2, f1, f2, p.Dir))
//	}
//	model, err := align.EstimateModel(rel, w, h, opt) // err: no overlap to be found
//	repaired := model.Repair(rel)
//	refined := repaired.Clone()
//	ref := align.NewRefiner()
//	for _, p := range align.Pairs(rows, cols) {
//		r, c := p.Neighbor()
//		refined.Set(p, model.Refine(ref, tile(r, c), tile(p.Row, p.Col), repaired.At(p)))
//	}
//	positions := align.GlobalPositions(refined)
//
// Departures from MIST. The structure is MIST's (per-tile FFT, PCIAM with
// the top n peaks, CCF over the aliasing interpretations, stage model,
// repair, refinement, maximum spanning tree), but a few steps are made
// more robust, each with an option to restore MIST's behaviour:
//
//   - a smooth flat field (vignetting) is estimated and divided out when it
//     is significant ([EstimateFlatField]; Options.NoFlatField);
//   - the FFT is taken of the tile's periodic component, which removes the
//     border-wrap leakage without windowing away the overlap
//     ([FFT2.ForwardPeriodic]; Options.NoPeriodicDecomposition);
//   - the cross-power spectrum is normalized by |.|^0.75 instead of |.|
//     (Options.Whitening = 1 for MIST);
//   - candidates must leave a minimum overlap (Options.MinOverlap,
//     Options.MinOverlapFraction);
//   - the stage model groups translations by row or by column, whichever
//     predicts them better, and derives the repeatability from
//     leave-one-out prediction errors ([EstimateModel]);
//   - refinement searches the whole square of half-width 2r around each
//     translation for the NCC maximum, computed at once with FFTs
//     ([Refiner]), instead of hill climbing.
//   - when the best candidate of the first PeakCount peaks correlates
//     below [ConfidentCorr], up to MaxPeakCount (16) peaks are scored by
//     NCC (Options.MaxPeakCount = -1 for MIST's fixed count);
//   - the overlap is estimated from the window of primary components with
//     the largest total correlation, not the largest count; translations
//     with NCC >= ConfidentCorr inside the overlap window are never
//     dropped or repaired; a direction with fewer than [MinModelPairs]
//     valid translations skips the model (translations reaching the
//     correlation threshold inside the overlap window are kept, and the
//     search radius covers the whole overlap window,
//     [DirectionModel.TooFewPairs]).
//
// On the realistic level of stitching/synth both settings meet the
// accuracy bar (MIST's raw PCIAM+CCF is even exact slightly more often).
// At its hard level (strong vignetting, sparse content) the MIST settings
// leave 12-18% of the pairs wrong and tiles up to 21 px off, and on smooth
// noisy texture most raw translations are wrong; with the defaults every
// pair of those test grids ends up exact or nearly so.
//
// Conventions. Grid coordinates (row, col) are 0-based; tile (0, 0) is the
// upper-left tile. A [Pair] names a tile and one of its two "backward"
// neighbours: West pairs tile (r, c) with (r, c-1), North pairs tile (r, c)
// with (r-1, c). In a pair, "tile 1" is the neighbour and "tile 2" is the
// tile (r, c). A [Translation] (X, Y) is the position of tile 2 relative to
// tile 1: pixel (u, v) of tile 2 shows the same specimen point as pixel
// (u+X, v+Y) of tile 1. West translations therefore have X > 0 and north
// translations Y > 0. Global positions are the upper-left corners of the
// tiles in the mosaic, shifted so that the minimum X and minimum Y are 0.
package align
