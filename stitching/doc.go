// Package stitching stitches a grid of overlapping 16-bit grayscale
// microscopy tiles: it finds the position of every tile in the mosaic with
// the Fourier-based algorithm of NIST's MIST (Chalfoun et al., Scientific
// Reports 2017), run as HTGS task graphs (Blattner et al.).
//
// # Entry points
//
//   - [Stitch] runs the algorithm as two task graphs, registration then
//     refinement, on all cores; with GraphOptions.GPU the registration
//     runs on every GPU of the machine ([CheckGPU] tells whether it can);
//   - [StitchLive] is Stitch for a grid still being acquired: tiles enter
//     as they arrive (a channel of [tileio.Arrival]), pairs are registered
//     as soon as both tiles are in, and the result equals Stitch's on the
//     finished grid;
//   - [StitchRegistered] is Stitch with the registration done elsewhere
//     (a [RegisterFunc]: a cluster's workers, each running [RegisterBand]
//     on a band of rows), then the same global optimization and
//     refinement;
//   - [Sequential] runs the same algorithm on the calling goroutine: the
//     baseline and the reference for Stitch. [Optimize] is its global
//     optimization alone;
//   - all of them return a [Result] (translations, stage model, positions,
//     flat field): [Result.Quality] and [Result.Warnings] judge it without
//     ground truth, [Evaluate] measures it against ground truth;
//   - [MemoryEstimate] sizes a run before it starts, [SoftMemoryLimit]
//     the Go runtime's soft memory limit to run it under.
//
// # Packages
//
// The stitching packages, in the order a run uses them:
//
//   - stitching/tileio: the tiles of a grid ([tileio.TileSource]: files
//     named by a pattern, or tiles in memory), decoding with a size guard,
//     and MIST's output files;
//   - stitching/align: the algorithm itself, in pieces that work on one
//     tile, one adjacent pair or the grid's translations: flat-field
//     correction, FFTs, phase correlation and cross-correlation factors,
//     stage model, refinement, global solve or spanning tree; and [align.Options], which
//     tune them. Its documentation says where the algorithm departs from
//     MIST and fixes the conventions (pairs, signs of translations);
//   - stitching (this package): runs those pieces over a whole grid,
//     sequentially or as task graphs, within a bounded number of tiles in
//     memory;
//   - stitching/compose: blends the tiles into a mosaic at their
//     positions;
//   - stitching/mosaic: plans the mosaic within a memory budget and
//     writes it, composed in memory or out of core, as a tiled pyramidal
//     OME-TIFF or an OME-Zarr folder with its preview; and the preview of
//     a mosaic still filling in, for live stitching;
//   - stitching/synth: realistic synthetic grids with ground truth, for
//     tests and demos.
//
// A run on files, with error handling left out:
//
//	pat, err := tileio.ParsePattern("img_r{rrr}_c{ccc}.tif", 1)
//	src, err := tileio.OpenTileSet(dir, pat, rows, cols)
//	res, err := stitching.Stitch(ctx, src, align.Options{}, stitching.GraphOptions{})
//	for _, w := range res.Warnings() {
//		log.Print(w)
//	}
//	err = tileio.WriteGlobalPositions(f, res.GlobalPositions())
package stitching
