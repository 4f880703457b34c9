// Kernels of package stitching's phase correlation on the GPU: the
// normalized cross-power spectrum (with a whitening exponent), the
// smooth component of the periodic-plus-smooth decomposition, the local
// maxima of the correlation matrix, a max reduction that returns value and
// index, and the conversion of 16-bit pixels (flat-field corrected) to
// float64. They were package cuda's until issue 30 put a tile's kernels
// beside the code that uses them.
//
// Compiled by kernels/gen.sh (scripts/gen-cuda-ptx.sh) to PTX and to a fat
// binary, which the package embeds (-tags cuda) and loads with
// cuda.Device.LoadModule.
//
// Calling convention: cuda.Function.Launch passes every kernel argument as
// one 8-byte slot, so every parameter here is 8 bytes wide (pointers, long
// long, double). Do not add int or float parameters.

#define HTGS_BLOCK 256 // threads per block of every launch (the Go side agrees)

// cross_power returns x*conj(y) / |x*conj(y)|^beta, or 0 where the
// magnitude is not above floor or not finite (a zero or rounding-noise
// coefficient carries no phase). beta == 1 avoids pow.
__device__ __forceinline__ double2 cross_power(double2 x, double2 y, double floor, double beta)
{
	// (xr + i xi) * (yr - i yi)
	double re = x.x * y.x + x.y * y.y;
	double im = x.y * y.x - x.x * y.y;
	double m = hypot(re, im);
	if (!(m > floor && isfinite(m))) {
		return make_double2(0.0, 0.0);
	}
	double d = beta == 1.0 ? m : pow(m, beta);
	return make_double2(re / d, im / d);
}

// Source modes of htgs_max_blocks.
#define HTGS_MAX_F64 0       // src is double[n]
#define HTGS_MAX_ABS_C128 1  // src is double2[n]; value |z|
#define HTGS_MAX_REAL_C128 2 // src is double2[n]; value Re z

// better reports whether candidate (v, i) beats the current best (bv, bi):
// a larger value, or an equal value at a smaller index. Index -1 means
// "none" and never wins.
__device__ __forceinline__ bool better(double v, long long i, double bv, long long bi)
{
	if (i < 0) {
		return false;
	}
	if (bi < 0) {
		return true;
	}
	return v > bv || (v == bv && i < bi);
}

__device__ __forceinline__ double load(const void *src, long long i, long long mode)
{
	if (mode == HTGS_MAX_F64) {
		return ((const double *)src)[i];
	}
	double2 z = ((const double2 *)src)[i];
	return mode == HTGS_MAX_ABS_C128 ? hypot(z.x, z.y) : z.x;
}

// reduce_block leaves the best (value, index) of the block's threads in
// sv[0], si[0].
__device__ void reduce_block(double *sv, long long *si)
{
	unsigned t = threadIdx.x;
	__syncthreads();
	for (unsigned s = HTGS_BLOCK / 2; s > 0; s >>= 1) {
		if (t < s && better(sv[t + s], si[t + s], sv[t], si[t])) {
			sv[t] = sv[t + s];
			si[t] = si[t + s];
		}
		__syncthreads();
	}
}

// htgs_max_blocks reduces src[0..n) (NaNs skipped) to one (value, index)
// per block in pval[blockIdx.x], pidx[blockIdx.x]; index -1 when the block
// saw no candidate. Launch with HTGS_BLOCK threads per block.
extern "C" __global__ void htgs_max_blocks(const void *src, long long n, long long mode,
					   double *pval, long long *pidx)
{
	__shared__ double sv[HTGS_BLOCK];
	__shared__ long long si[HTGS_BLOCK];
	double bv = 0.0;
	long long bi = -1;
	long long stride = (long long)HTGS_BLOCK * gridDim.x;
	for (long long i = (long long)blockIdx.x * HTGS_BLOCK + threadIdx.x; i < n; i += stride) {
		double v = load(src, i, mode);
		if (v == v && better(v, i, bv, bi)) { // v == v: not NaN
			bv = v;
			bi = i;
		}
	}
	sv[threadIdx.x] = bv;
	si[threadIdx.x] = bi;
	reduce_block(sv, si);
	if (threadIdx.x == 0) {
		pval[blockIdx.x] = sv[0];
		pidx[blockIdx.x] = si[0];
	}
}

// htgs_max_final reduces the parts per-block results of htgs_max_blocks to
// out_val[0], out_idx[0]. Launch with one block of HTGS_BLOCK threads.
extern "C" __global__ void htgs_max_final(const double *pval, const long long *pidx, long long parts,
					  double *out_val, long long *out_idx)
{
	__shared__ double sv[HTGS_BLOCK];
	__shared__ long long si[HTGS_BLOCK];
	double bv = 0.0;
	long long bi = -1;
	for (long long p = threadIdx.x; p < parts; p += HTGS_BLOCK) {
		if (better(pval[p], pidx[p], bv, bi)) {
			bv = pval[p];
			bi = pidx[p];
		}
	}
	sv[threadIdx.x] = bv;
	si[threadIdx.x] = bi;
	reduce_block(sv, si);
	if (threadIdx.x == 0) {
		*out_val = sv[0];
		*out_idx = si[0];
	}
}

// htgs_cross_power_pow writes, for i < n, the normalized cross-power
// spectrum with whitening exponent beta: dst[i] = a[i]*conj(b[i]) /
// |a[i]*conj(b[i])|^beta (0 where the magnitude is not above floor or not
// finite). dst may alias a or b.
extern "C" __global__ void htgs_cross_power_pow(double2 *dst, const double2 *a, const double2 *b,
						long long n, double floor, double beta)
{
	long long stride = (long long)blockDim.x * gridDim.x;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		dst[i] = cross_power(a[i], b[i], floor, beta);
	}
}

// htgs_subtract_smooth subtracts from the row-major h x hw half spectrum
// spec (hw = w/2+1 columns of non-negative horizontal frequencies q, h
// rows r) the spectrum of the smooth component of the periodic-plus-smooth
// decomposition (Moisan 2011):
//
//	spec[r][q] -= (a[q]*phy[r] + b[r]*phx[q]) / (lapx[q] + lapy[r])
//
// for (q, r) != (0, 0), where a is the 1-D transform of the differences
// between the last and first rows, b that of the differences between the
// last and first columns, phx[q] = 1 - exp(2 pi i q/w), phy[r] = 1 -
// exp(2 pi i r/h), lapx[q] = 2cos(2 pi q/w) - 2, lapy[r] = 2cos(2 pi r/h) - 2.
extern "C" __global__ void htgs_subtract_smooth(double2 *spec, const double2 *a, const double2 *b,
						const double2 *phx, const double2 *phy,
						const double *lapx, const double *lapy,
						long long hw, long long h)
{
	long long n = hw * h;
	long long stride = (long long)blockDim.x * gridDim.x;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		if (i == 0) {
			continue;
		}
		long long r = i / hw, q = i % hw;
		double2 aq = a[q], br = b[r], px = phx[q], py = phy[r];
		// v = aq*py + br*px
		double vr = aq.x * py.x - aq.y * py.y + br.x * px.x - br.y * px.y;
		double vi = aq.x * py.y + aq.y * py.x + br.x * px.y + br.y * px.x;
		double den = lapx[q] + lapy[r];
		double2 s = spec[i];
		spec[i] = make_double2(s.x - vr / den, s.y - vi / den);
	}
}

// htgs_local_max writes out[i] = m[i] where m[i] is a maximum of its
// circular 3x3 neighbourhood in the row-major w x h matrix m (among equal
// values the smallest index wins; NaN never does), and -inf elsewhere.
extern "C" __global__ void htgs_local_max(double *out, const double *m, long long w, long long h)
{
	long long n = w * h;
	long long stride = (long long)blockDim.x * gridDim.x;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		long long x = i % w, y = i / w;
		double v = m[i];
		bool best = v == v;
		for (int dy = -1; dy <= 1 && best; dy++) {
			long long yy = y + dy;
			if (yy < 0) {
				yy += h;
			} else if (yy >= h) {
				yy -= h;
			}
			for (int dx = -1; dx <= 1; dx++) {
				long long xx = x + dx;
				if (xx < 0) {
					xx += w;
				} else if (xx >= w) {
					xx -= w;
				}
				long long j = yy * w + xx;
				if (j == i) {
					continue;
				}
				double u = m[j];
				if (u > v || (u == v && j < i)) {
					best = false;
					break;
				}
			}
		}
		out[i] = best ? v : -1.0 / 0.0;
	}
}

// htgs_gray16_to_f64 converts the n big-endian 16-bit pixels of pix (the
// layout of Go's image.Gray16) to double in dst. With a non-null gain (n
// floats) each pixel is first flat-field corrected, v*gain[i] rounded half
// up and clamped to [0, 65535] in float arithmetic with the product rounded
// before the addition (as Go's stitching/align.FlatField computes it), and
// written back to pix. With a non-null sum the pixels' sum (after
// correction) is added to *sum. Launch with HTGS_BLOCK threads per block.
extern "C" __global__ void htgs_gray16_to_f64(double *dst, unsigned char *pix, const float *gain,
					      long long n, unsigned long long *sum)
{
	__shared__ unsigned long long red[HTGS_BLOCK];
	unsigned long long s = 0;
	long long stride = (long long)blockDim.x * gridDim.x;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		unsigned int v = ((unsigned int)pix[2 * i] << 8) | (unsigned int)pix[2 * i + 1];
		if (gain) {
			float r = __fadd_rn(__fmul_rn((float)v, gain[i]), 0.5f);
			unsigned int u = 0;
			if (r >= 65535.0f) {
				u = 65535;
			} else if (r > 0.0f) {
				u = (unsigned int)r;
			}
			v = u;
			pix[2 * i] = (unsigned char)(v >> 8);
			pix[2 * i + 1] = (unsigned char)v;
		}
		dst[i] = (double)v;
		s += v;
	}
	if (!sum) {
		return;
	}
	red[threadIdx.x] = s;
	__syncthreads();
	for (int k = HTGS_BLOCK / 2; k > 0; k >>= 1) {
		if (threadIdx.x < k) {
			red[threadIdx.x] += red[threadIdx.x + k];
		}
		__syncthreads();
	}
	if (threadIdx.x == 0) {
		atomicAdd(sum, red[0]);
	}
}
