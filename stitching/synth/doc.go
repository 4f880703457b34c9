// Package synth generates realistic synthetic microscope tile grids with
// ground truth, as test and demo data for stitching (for example the
// phase-correlation method of NIST MIST).
//
// # Model
//
// A Scene describes one large 2-D specimen plane and a stage that images it
// tile by tile. Nothing is rendered up front: every specimen value is a pure
// function of the seed and the plane coordinates, so any window (a tile, or
// Scene.Specimen for ground truth) is rendered on demand, tiles of any grid
// size can be streamed with bounded memory, and overlapping tiles show
// exactly the same specimen before acquisition effects.
//
// The specimen consists of
//   - cells: elliptical blobs with soft, irregular edges (2nd and 3rd shape
//     harmonics), log-normal sizes and contrasts, granular inner texture at
//     1.5 and 4 px, and (for most) an offset nucleus. In phase contrast they
//     are darker than the background with a thin bright halo, and about 10%
//     are small bright rounded (mitotic-like) cells; in fluorescence they are
//     bright on a dark background with brighter nuclei;
//   - colonies: cells clustered by a Poisson cluster (Thomas) process with
//     log-normal colony sizes and elongated Gaussian spreads, plus isolated
//     cells;
//   - near-featureless regions: a slow random field removes colonies and
//     isolated cells from about Params.EmptyFraction of the plane;
//   - background: smoothed value noise at 48, 12 and 1.7 px plus a slow 700 px
//     variation, and small debris particles everywhere.
//
// Objects are generated per 256 x 256 px bucket from a random stream seeded
// by the bucket coordinates, and a window renders all buckets within the
// largest colony reach of it.
//
// # Stage
//
// Nominal positions follow the grid with step round(size*(1-Overlap)). The
// true, integer positions add MIST's stage model: a repeatable (x, y) offset
// per row and per column (Config.Drift), an independent random error per tile
// (Config.Jitter) and a small camera rotation (Config.Skew). Validation makes
// sure adjacent tiles always overlap.
//
// # Acquisition
//
// Each tile is multiplied by the same off-centre vignetting (and, at the Hard
// level, camera-fixed dust shadows) and a per-tile brightness factor, then
// gets shot noise (Gaussian with variance proportional to the signal) and
// Gaussian read noise, and is rounded and clamped to Config.BitDepth bits
// (e.g. 12-bit data in a 16-bit container, least significant bits aligned).
//
// # Levels
//
// Measured with a minimal MIST-like aligner (phase correlation over whole
// tiles, top two peaks, four aliasing interpretations chosen by normalised
// cross-correlation; then a per column-pair / row-pair median stage model
// and hill climbing within the jitter radius; see pciam_test.go), on the
// default 8 x 10 grid of 512 x 384 tiles with 10% overlap (142 adjacent
// pairs), seeds 1 to 4:
//   - Easy: phase correlation alone is exact for all pairs.
//   - Realistic (default): phase correlation is exact for 91-97% of the
//     pairs (the failures are pairs whose overlaps hold little
//     structure); stage model plus refinement makes all of them exact. A
//     stitcher without a stage model and refinement step will not reach 99%
//     here; that is intended, as on real data.
//   - Hard: phase correlation exact for 61-73%, 81-91% after refinement.
//
// In fluorescence (ModalityParams) the Realistic level gives 87-90% exact
// pairs from phase correlation and 98.6-100% after the minimal refinement;
// the rest are axis-aligned phase-correlation artefacts (tile-edge
// discontinuities) whose true overlap correlates at more than 0.99, i.e.
// solvable by a stricter stage-model filter.
//
// # Cost
//
// Rendering costs about 40 ns per pixel on one core: the default grid takes
// about 0.25 s on two idle cores. A 42 x 59 grid of 1392 x 1040 tiles (the
// MIST paper's size: a 74k x 39k px plane, 7 GB of 16-bit tiles) takes about
// 1.5-3 minutes with GenerateToDir on two cores (measured 30-70 ms per tile
// including the TIFF write) and about 200 MB of memory: one tile and its
// float64 scratch per worker.
package synth
