package stitching

import (
	"math"

	"github.com/gohtgs/htgs/stitching/align"
)

// MemoryEstimate returns about how many bytes of memory [Stitch] needs at
// its peak for a rows x cols grid of w x h tiles with these options, so
// that a program can refuse a run that cannot fit before starting it
// rather than die of an out-of-memory error halfway. It counts what grows
// with the tiles, per pixel of a tile (P = w*h):
//
//   - the tile slots of the pool (GraphOptions.PoolSize, or its default
//     min(rows, cols) + 2 + Workers): a 16-bit tile (2P bytes) and, on the
//     CPU, its half spectrum of complex128 (16*(w/2+1)*h, about 8P);
//   - tiles being read (GraphOptions.Readers): the file's bytes, the
//     decoded tile and its flat-field corrected copy (6P each);
//   - per worker: the aligner's cross-power spectrum and correlation
//     matrix (about 16P) during registration, the refiner's scratch during
//     refinement (about 28P, for overlaps up to half a tile);
//   - the scratch spaces of pairs whose weakness read noise explains, in
//     both phases: GraphOptions.WeakPairs of them (by default a quarter of
//     the Workers, at least one; all of them with GraphOptions.GPU, whose
//     host cores are free for these pairs, and shared with the
//     refinements run ahead during the registration) of
//     align.DenoiseScratch (about 110P) each;
//   - the flat field (4P).
//
// The registration and refinement phases do not overlap; the larger one
// counts. With GraphOptions.GPU the spectra live on the GPUs and are not
// counted. The mosaic is not included (see compose.MemoryEstimate). The
// result is an estimate of live memory, not a bound: the Go runtime may
// hold up to about twice the live heap between collections. It saturates
// at math.MaxInt64.
func MemoryEstimate(rows, cols, w, h int, opt align.Options, gopt GraphOptions) int64 {
	if rows <= 0 || cols <= 0 || w <= 0 || h <= 0 {
		return 0
	}
	workers, readers, slots := gopt.sizes(rows, cols)
	weakPairs := gopt.weakPairs(workers)
	if gopt.GPU {
		weakPairs = gopt.gpuWeakPairs(workers)
	}
	p := float64(w) * float64(h)
	spec := 16 * float64(w/2+1) * float64(h)
	tile := 2 * p
	if gopt.GPU {
		spec = 0
	}
	reading := float64(readers) * 3 * tile
	// Noise-limited pairs take a denoised search or refinement in one of
	// the run's shared scratch spaces (align.DenoiseScratch).
	weak := float64(weakPairs) * float64(align.DenoiseScratch(w, h))
	registration := float64(slots)*(tile+spec) + reading + float64(workers)*(spec+8*p) + weak
	refinement := float64(slots)*tile + reading + float64(workers)*28*p + weak
	total := 4*p + max(registration, refinement)
	// The translations and positions: a few hundred bytes per tile.
	total += 256 * float64(rows) * float64(cols)
	if total >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(total)
}

// SoftMemoryLimit is the soft memory limit (debug.SetMemoryLimit) to run
// [Stitch] under for a rows x cols grid of w x h tiles, so that the
// garbage collector keeps the heap near what the pools hold instead of
// letting it double (GOGC's default) on a large grid: 1.5 times the
// steady estimate plus 300 MB, and never less than the whole
// [MemoryEstimate] plus 300 MB. (With 1.25 times the estimate plus 256 MiB
// the paper-size grid on 16 cores ran 20% slower: the collector ran
// nearly all the time.) The steady estimate is without the scratch spaces
// of noise-limited pairs (GraphOptions.WeakPairs): those exist only on
// data with such pairs, and are kept and reused, not garbage, so the heap
// has room for them under the limit and the collector paces itself by the
// pools as before.
func SoftMemoryLimit(rows, cols, w, h int, opt align.Options, gopt GraphOptions) int64 {
	one := gopt
	one.WeakPairs = 1
	steady := MemoryEstimate(rows, cols, w, h, opt, one) - align.DenoiseScratch(w, h)
	full := MemoryEstimate(rows, cols, w, h, opt, gopt)
	return max(steady+steady/2, full) + 300e6
}
