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

// stitch_box_sums computes, for each displacement (x, y) of the box
// [x0, x0+bw) x [y0, ...) (cell c = (y-y0)*bw + x-x0, ncell cells), the
// exact sums over the overlap of a, b, a*a, b*b and a*b, where a is t1's
// pixel and b t2's at the same place (t2's origin at (x, y) in t1's
// coordinates), into sums[5c .. 5c+4], which must be zero on entry. Launch
// with ncell*per blocks of BOX_BLOCK threads: blocks c*per .. c*per+per-1
// share cell c, each summing every per-th run of BOX_BLOCK pixels of the
// overlap, and add their sums atomically. The sums are exact: products of
// 16-bit values fit in 32 bits and are accumulated in 64.
extern "C" __global__ void stitch_box_sums(const u16 *t1, const u16 *t2, i64 w, i64 h,
					   i64 x0, i64 y0, i64 bw, i64 ncell, i64 per, u64 *sums)
{
	__shared__ u64 red[5][BOX_BLOCK / 32];
	i64 c = blockIdx.x / per;
	i64 part = blockIdx.x - c * per;
	u64 sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0;
	if (c < ncell) {
		i64 x = x0 + c % bw, y = y0 + c / bw;
		i64 ox0 = x > 0 ? x : 0, ox1 = x + w < w ? x + w : w;
		i64 oy0 = y > 0 ? y : 0, oy1 = y + h < h ? y + h : h;
		i64 nx = ox1 - ox0, ny = oy1 - oy0;
		if (nx > 0 && ny > 0) {
			i64 n = nx * ny;
			i64 stride = per * BOX_BLOCK;
			i64 i = part * BOX_BLOCK + threadIdx.x;
			// (r, q): row and column of pixel i of the overlap, advanced
			// by the stride without a division per pixel.
			i64 r = i / nx, q = i - r * nx;
			i64 dr = stride / nx, dq = stride - dr * nx;
			for (; i < n; i += stride) {
				unsigned int ua = t1[(oy0 + r) * w + ox0 + q];
				unsigned int ub = t2[(oy0 + r - y) * w + ox0 + q - x];
				unsigned int a = ((ua & 0xff) << 8) | (ua >> 8);
				unsigned int b = ((ub & 0xff) << 8) | (ub >> 8);
				sa += a;
				sb += b;
				saa += (u64)(a * a);
				sbb += (u64)(b * b);
				sab += (u64)(a * b);
				q += dq;
				r += dr;
				if (q >= nx) {
					q -= nx;
					r++;
				}
			}
		}
	}
	// Reduce within each warp, then across the block's warps.
	for (int o = 16; o > 0; o >>= 1) {
		sa += __shfl_down_sync(0xffffffff, sa, o);
		sb += __shfl_down_sync(0xffffffff, sb, o);
		saa += __shfl_down_sync(0xffffffff, saa, o);
		sbb += __shfl_down_sync(0xffffffff, sbb, o);
		sab += __shfl_down_sync(0xffffffff, sab, o);
	}
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	if (lane == 0) {
		red[0][warp] = sa;
		red[1][warp] = sb;
		red[2][warp] = saa;
		red[3][warp] = sbb;
		red[4][warp] = sab;
	}
	__syncthreads();
	if (threadIdx.x < 5 && c < ncell) {
		u64 s = 0;
		for (int k = 0; k < BOX_BLOCK / 32; k++) {
			s += red[threadIdx.x][k];
		}
		if (s != 0) {
			atomicAdd(&sums[5 * c + threadIdx.x], s);
		}
	}
}
