// GPU kernels of package stitching's refinement: the exact NCC sums of a
// pair of tiles at every displacement of a search box, from the tiles'
// pixels already in device memory.
//
// Compile with (from the repository root; stitching/kernels/gen.sh)
//
//	nvcc -ptx -arch=compute_70 -O3 -o stitching/kernels/refine.ptx stitching/kernels/refine.cu
//
// Every kernel parameter is 8 bytes (a pointer or a long long), as
// cuda.Function.Launch passes them. Tiles are w x h pixels of 16 bits,
// big endian (Go's image.Gray16 layout), row after row.

typedef unsigned short u16;
typedef long long i64;
typedef unsigned long long u64;

#define BOX_BLOCK 256
#define BOX_WARPS (BOX_BLOCK / 32)

// be16 returns the value of a big-endian 16-bit pixel read as a
// little-endian one (its bytes swapped).
__device__ __forceinline__ unsigned int be16(u16 v)
{
	return __byte_perm((unsigned int)v, 0, 0x4401);
}

// overlap_sums adds to s this thread's share of the sums over the overlap
// of t1 and t2 (w x h, w * h < 2^31) when t2's origin is at (x, y) in t1's
// coordinates: of a, b, a*a, b*b and a*b, a being t1's pixel and b t2's at
// the same place. Warp gw of nw takes the overlap's rows gw, gw + nw, ...;
// its lanes every 32nd pixel of a row, so that a warp reads consecutive
// pixels. Per pixel: two loads, two byte swaps, two 32-bit adds and three
// 32x32->64-bit multiply-adds; the 32-bit sums of a and b hold one row's
// share (at most 2^16 values of a lane below 2^16 each) before they are
// added to the 64-bit ones.
__device__ __forceinline__ void overlap_sums(const u16 *t1, const u16 *t2, int w, int h, int x, int y,
					     int gw, int nw, int lane, u64 s[5])
{
	int ox0 = x > 0 ? x : 0, ox1 = x < 0 ? x + w : w;
	int oy0 = y > 0 ? y : 0, oy1 = y < 0 ? y + h : h;
	int nx = ox1 - ox0;
	if (nx <= 0 || oy1 <= oy0) {
		return;
	}
	u64 saa = 0, sbb = 0, sab = 0, sa = 0, sb = 0;
	for (int v = oy0 + gw; v < oy1; v += nw) {
		const u16 *r1 = t1 + v * w + ox0;
		const u16 *r2 = t2 + (v - y) * w + (ox0 - x);
		unsigned int ra = 0, rb = 0;
		for (int u = lane; u < nx; u += 32) {
			unsigned int a = be16(r1[u]);
			unsigned int b = be16(r2[u]);
			ra += a;
			rb += b;
			saa += (u64)a * a;
			sbb += (u64)b * b;
			sab += (u64)a * b;
		}
		sa += ra;
		sb += rb;
	}
	s[0] += sa;
	s[1] += sb;
	s[2] += saa;
	s[3] += sbb;
	s[4] += sab;
}

// block_add reduces the block's five sums s and adds them to dst[0..4]
// (atomically: other blocks add theirs). Every thread of the block calls it.
__device__ __forceinline__ void block_add(u64 s[5], u64 *dst, bool valid)
{
	__shared__ u64 red[5][BOX_WARPS];
	for (int k = 0; k < 5; k++) {
		for (int o = 16; o > 0; o >>= 1) {
			s[k] += __shfl_down_sync(0xffffffff, s[k], o);
		}
	}
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	if (lane == 0) {
		for (int k = 0; k < 5; k++) {
			red[k][warp] = s[k];
		}
	}
	__syncthreads();
	if (threadIdx.x < 5 && valid) {
		u64 t = 0;
		for (int k = 0; k < BOX_WARPS; k++) {
			t += red[threadIdx.x][k];
		}
		if (t != 0) {
			atomicAdd(&dst[threadIdx.x], t);
		}
	}
}

// warp_add reduces a warp's five sums s and lane 0 adds them to dst[0..4].
__device__ __forceinline__ void warp_add(u64 s[5], u64 *dst)
{
	for (int k = 0; k < 5; k++) {
		for (int o = 16; o > 0; o >>= 1) {
			s[k] += __shfl_down_sync(0xffffffff, s[k], o);
		}
	}
	if ((threadIdx.x & 31) == 0) {
		for (int k = 0; k < 5; k++) {
			if (s[k] != 0) {
				atomicAdd(&dst[k], s[k]);
			}
		}
	}
}

// stitch_box_sums computes, for each displacement (x, y) of the box
// [x0, x0+bw) x [y0, ...) (cell c = (y-y0)*bw + x-x0, ncell cells), the
// exact sums over the overlap of a, b, a*a, b*b and a*b, where a is t1's
// pixel and b t2's at the same place (t2's origin at (x, y) in t1's
// coordinates), into sums[5c .. 5c+4], which must be zero on entry. Launch
// with ceil(ncell/BOX_WARPS)*per blocks of BOX_BLOCK threads: the warps of
// block g*per+part take the BOX_WARPS neighbouring cells g*BOX_WARPS, ...,
// one each, and rows part, part+per, ... of their overlaps. Neighbouring
// cells read nearly the same pixels of the same rows at the same time, so
// most of their loads should hit the SM's L1 cache (on an H200 this was
// no faster than a block a cell: 102 against 104 µs for a west pair's 21 x
// 21 box; a thread a pixel with 64-bit indices, the first version, took 157
// µs). The sums are exact: products of 16-bit values fit in
// 32 bits and are accumulated in 64. Needs w*h < 2^31.
extern "C" __global__ void stitch_box_sums(const u16 *t1, const u16 *t2, i64 w, i64 h,
					   i64 x0, i64 y0, i64 bw, i64 ncell, i64 per, u64 *sums)
{
	int g = blockIdx.x / (int)per;
	int part = blockIdx.x - g * (int)per;
	int c = g * BOX_WARPS + (threadIdx.x >> 5);
	if (c >= ncell) {
		return; // the whole warp: no __syncthreads below
	}
	u64 s[5] = {0, 0, 0, 0, 0};
	int x = (int)x0 + c % (int)bw, y = (int)y0 + c / (int)bw;
	overlap_sums(t1, t2, (int)w, (int)h, x, y, part, (int)per, threadIdx.x & 31, s);
	warp_add(s, sums + 5 * c);
}

// stitch_offset_sums is stitch_box_sums for a list of n displacements,
// offs[2c] and offs[2c+1] for displacement c: the CCF's candidates.
extern "C" __global__ void stitch_offset_sums(const u16 *t1, const u16 *t2, i64 w, i64 h,
					      const i64 *offs, i64 n, i64 per, u64 *sums)
{
	int c = blockIdx.x / (int)per;
	int part = blockIdx.x - c * (int)per;
	u64 s[5] = {0, 0, 0, 0, 0};
	bool valid = c < n;
	if (valid) {
		overlap_sums(t1, t2, (int)w, (int)h, (int)offs[2 * c], (int)offs[2 * c + 1],
			     part * BOX_WARPS + (threadIdx.x >> 5), (int)per * BOX_WARPS, threadIdx.x & 31, s);
	}
	block_add(s, sums + 5 * c, valid);
}
