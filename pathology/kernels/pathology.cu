// GPU implementations of the pathology pipeline's hybrid operations.
//
// Compile with
//
//	nvcc -ptx -arch=compute_70 -O3 -o pathology.ptx pathology.cu
//
// Every kernel parameter is 8 bytes (a pointer or a long long), as
// cuda.Function.Launch passes them. Images are row-major, w pixels wide,
// planar RGB (three planes of w*h bytes). Every kernel loops over its
// elements with a grid stride, so any grid size is correct. The Go code in
// ../gpu_ref.go mirrors each kernel with the same indexing, and the tests
// compare both with the CPU implementations in ../kernels.go.

typedef unsigned char u8;
typedef unsigned short u16;
typedef long long i64;
typedef unsigned long long u64;

#define NUM_FEATURES 6
#define FEAT_AREA 0
#define FEAT_MEAN 1
#define FEAT_GRAD 2
#define FEAT_PERIM 3
#define FEAT_HEMA 4
#define FEAT_EDGE 5

#define FOR_EACH(i, n) for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (i64)gridDim.x * blockDim.x)

// RBCDetection, first step: the reddish pixels (the mask of the
// reconstruction) and, among them, the strongly red ones (its marker), as
// rbcLoose and rbcSeed of ../recon.go. The reconstruction is then
// patho_recon8_u8 (out the marker, loose the mask).
extern "C" __global__ void patho_rbc_init(const u8 *rgb, u8 *loose, u8 *out, i64 n) {
	FOR_EACH(i, n) {
		int r = rgb[i], g = rgb[n + i], b = rgb[2 * n + i];
		int l = r > 120 && g < 110 && b < 130;
		loose[i] = (u8)l;
		out[i] = (u8)(l && r > 150 && g < 80 && b < 100);
	}
}

// MorphOpen, first step: darkness = 255 - (R+G+B)/3, integer division.
extern "C" __global__ void patho_dark(const u8 *rgb, u8 *dark, i64 n) {
	FOR_EACH(i, n) {
		int s = (int)rgb[i] + (int)rgb[n + i] + (int)rgb[2 * n + i];
		dark[i] = (u8)(255 - s / 3);
	}
}

// MorphOpen: erosion (op 0: min) or dilation (op 1: max) by a flat disk,
// pixels outside the image left out, as diskFilter of ../morph.go. The
// disk is given by its rows: disk[0] = r (at most DISK_MAXR), disk[1] = nw,
// the number of distinct half-widths, disk[2 .. 2+nw) those half-widths,
// disk[DISK_WIDX + r + dy] the index among them of row dy's (dy = -r..r).
// Each block takes DISK_TW x DISK_TH tiles of the output in turn: the tile
// and an r-pixel frame go into shared memory (outside the image: op's
// neutral element, which leaves those pixels out), then the minimum
// (maximum) of every row of that over [x-a, x+a] for each half-width a,
// then each output pixel combines its 2r+1 rows.
#define DISK_MAXR 15
#define DISK_WIDX 18
#define DISK_TW 32
#define DISK_TH 32
#define DISK_SW (DISK_TW + 2 * DISK_MAXR)
#define DISK_SH (DISK_TH + 2 * DISK_MAXR)

extern "C" __global__ void patho_disk(const u8 *in, u8 *out, i64 w, i64 h, i64 op, const int *disk) {
	__shared__ u8 s_in[DISK_SH][DISK_SW];
	__shared__ u8 s_row[DISK_MAXR + 1][DISK_SH][DISK_TW];
	__shared__ int s_slot[DISK_MAXR + 1];     // s_slot[a]: the index of half-width a, -1 if none
	__shared__ int s_widx[2 * DISK_MAXR + 1]; // the index of each row's half-width
	const int r = disk[0], nw = disk[1];
	for (int k = threadIdx.x; k <= r; k += blockDim.x) {
		s_slot[k] = -1;
		for (int wi = 0; wi < nw; wi++) {
			if (disk[2 + wi] == k) s_slot[k] = wi;
		}
	}
	for (int k = threadIdx.x; k <= 2 * r; k += blockDim.x) s_widx[k] = disk[DISK_WIDX + k];
	const int neutral = op == 0 ? 255 : 0;
	const i64 tx = (w + DISK_TW - 1) / DISK_TW, ty = (h + DISK_TH - 1) / DISK_TH;
	const int sw = DISK_TW + 2 * r, sh = DISK_TH + 2 * r;
	for (i64 t = blockIdx.x; t < tx * ty; t += gridDim.x) {
		const i64 x0 = (t % tx) * DISK_TW, y0 = (t / tx) * DISK_TH;
		__syncthreads(); // the previous tile is done with the shared arrays
		for (int k = threadIdx.x; k < sw * sh; k += blockDim.x) {
			int sy = k / sw, sx = k % sw;
			i64 x = x0 - r + sx, y = y0 - r + sy;
			s_in[sy][sx] = (x >= 0 && x < w && y >= 0 && y < h) ? in[y * w + x] : (u8)neutral;
		}
		__syncthreads();
		for (int k = threadIdx.x; k < sh * DISK_TW; k += blockDim.x) {
			int sy = k / DISK_TW, cx = k % DISK_TW;
			int m = s_in[sy][cx + r];
			for (int a = 0; a <= r; a++) {
				if (a > 0) {
					int u = s_in[sy][cx + r - a], v = s_in[sy][cx + r + a];
					m = op == 0 ? min(m, min(u, v)) : max(m, max(u, v));
				}
				if (s_slot[a] >= 0) s_row[s_slot[a]][sy][cx] = (u8)m;
			}
		}
		__syncthreads();
		for (int k = threadIdx.x; k < DISK_TW * DISK_TH; k += blockDim.x) {
			int oy = k / DISK_TW, ox = k % DISK_TW;
			i64 x = x0 + ox, y = y0 + oy;
			if (x >= w || y >= h) continue;
			int m = neutral;
			for (int dy = -r; dy <= r; dy++) {
				int v = s_row[s_widx[r + dy]][oy + r + dy][ox];
				m = op == 0 ? min(m, v) : max(m, v);
			}
			out[y * w + x] = (u8)m;
		}
	}
}

// Morphological reconstruction by dilation, as reconstruct of ../recon.go
// (8-connected; 4-connected for FillHoles), by iterated geodesic dilation:
// J starts as min(marker, mask) (the caller's) and each pixel becomes
// min(max of J over its neighbourhood in the image, I) until nothing
// changes. Values only rise,
// and never above the reconstruction, so any order of the updates ends at
// it. Each block takes RECON_T x RECON_T tiles in turn and iterates on the
// tile in shared memory (its one-pixel frame read once from J) until the
// tile is stable, then writes it back and sets *changed if it changed:
// the caller launches until a launch changes nothing.
#define RECON_T 32

template <typename T, int CONN>
__device__ void recon(T *J, const T *I, i64 w, i64 h, int *changed) {
	__shared__ T sj[RECON_T + 2][RECON_T + 2];
	__shared__ T si[RECON_T][RECON_T];
	__shared__ int tile_changed, any;
	const i64 tx = (w + RECON_T - 1) / RECON_T, ty = (h + RECON_T - 1) / RECON_T;
	for (i64 t = blockIdx.x; t < tx * ty; t += gridDim.x) {
		const i64 x0 = (t % tx) * RECON_T, y0 = (t / tx) * RECON_T;
		__syncthreads();
		if (threadIdx.x == 0) any = 0;
		for (int k = threadIdx.x; k < (RECON_T + 2) * (RECON_T + 2); k += blockDim.x) {
			int sy = k / (RECON_T + 2), sx = k % (RECON_T + 2);
			i64 x = x0 - 1 + sx, y = y0 - 1 + sy;
			sj[sy][sx] = (x >= 0 && x < w && y >= 0 && y < h) ? J[y * w + x] : (T)0;
		}
		for (int k = threadIdx.x; k < RECON_T * RECON_T; k += blockDim.x) {
			int sy = k / RECON_T, sx = k % RECON_T;
			i64 x = x0 + sx, y = y0 + sy;
			si[sy][sx] = (x < w && y < h) ? I[y * w + x] : (T)0; // outside: mask 0, J stays 0
		}
		for (;;) {
			__syncthreads();
			if (threadIdx.x == 0) tile_changed = 0;
			__syncthreads();
			for (int k = threadIdx.x; k < RECON_T * RECON_T; k += blockDim.x) {
				int sy = k / RECON_T + 1, sx = k % RECON_T + 1;
				T m = si[sy - 1][sx - 1], v = sj[sy][sx];
				if (v == m) continue; // at the mask (0 included): cannot rise
				T nv = v;
				if (CONN == 8) {
					for (int dy = -1; dy <= 1; dy++) {
						for (int dx = -1; dx <= 1; dx++) {
							nv = max(nv, sj[sy + dy][sx + dx]);
						}
					}
				} else {
					nv = max(max(nv, max(sj[sy - 1][sx], sj[sy + 1][sx])), max(sj[sy][sx - 1], sj[sy][sx + 1]));
				}
				nv = min(nv, m);
				if (nv != v) {
					sj[sy][sx] = nv;
					tile_changed = 1;
				}
			}
			__syncthreads();
			if (!tile_changed) break;
			if (threadIdx.x == 0) any = 1;
		}
		__syncthreads();
		if (any) {
			for (int k = threadIdx.x; k < RECON_T * RECON_T; k += blockDim.x) {
				int sy = k / RECON_T, sx = k % RECON_T;
				i64 x = x0 + sx, y = y0 + sy;
				if (x < w && y < h) J[y * w + x] = sj[sy + 1][sx + 1];
			}
			if (threadIdx.x == 0) *changed = 1;
		}
	}
}

extern "C" __global__ void patho_recon8_u8(u8 *J, const u8 *I, i64 w, i64 h, int *changed) {
	recon<u8, 8>(J, I, w, h, changed);
}

extern "C" __global__ void patho_recon8_u16(u16 *J, const u16 *I, i64 w, i64 h, int *changed) {
	recon<u16, 8>(J, I, w, h, changed);
}

extern "C" __global__ void patho_recon4_u8(u8 *J, const u8 *I, i64 w, i64 h, int *changed) {
	recon<u8, 4>(J, I, w, h, changed);
}

// FillHoles is a morphological reconstruction: the background reachable
// from the image border through 4-connected background pixels is the
// outside; everything else is filled. patho_fill_init writes the marker
// (reach: the background pixels of the border) and the mask (bg: the
// background), patho_recon4_u8 reconstructs reach under bg, and
// patho_fill_final sets every pixel not reached.
extern "C" __global__ void patho_fill_init(const u8 *in, u8 *reach, u8 *bg, i64 w, i64 h) {
	FOR_EACH(i, w * h) {
		i64 x = i % w, y = i / w;
		bg[i] = in[i] == 0 ? 1 : 0;
		reach[i] = (in[i] == 0 && (x == 0 || y == 0 || x == w - 1 || y == h - 1)) ? 1 : 0;
	}
}

extern "C" __global__ void patho_fill_final(const u8 *in, const u8 *reach, u8 *out, i64 n) {
	FOR_EACH(i, n) {
		out[i] = (in[i] != 0 || reach[i] == 0) ? 1 : 0;
	}
}

// ReconToNuclei, last step (reconToNuclei of ../recon.go): the candidate
// nuclei, where the darkness exceeds its reconstruction from the opening
// by at least threshold, outside the red blood cells. Before it:
// patho_dark (the darkness), the opening copied as the marker and
// patho_recon8_u8 (the marker reconstructed under the darkness; the
// opening never exceeds the darkness, as the reconstruction needs).
extern "C" __global__ void patho_cand_final(const u8 *dark, const u8 *rec, const u8 *rbc, u8 *out, i64 n, i64 threshold) {
	FOR_EACH(i, n) {
		out[i] = ((i64)dark[i] - (i64)rec[i] >= threshold && rbc[i] == 0) ? 1 : 0;
	}
}

// Connected-component labelling, for AreaThreshold (8-connected) and
// BWLabel (4-connected), by union-find on pixel indices: L[i] is pixel
// i's parent, -1 for the background. Every foreground pixel starts as a
// tree of its own (patho_lab_init_*); each then joins its trees with
// those of its foreground neighbours earlier in raster order, the larger
// root always put under the smaller (patho_lab_merge), so that parents
// only decrease and a component's root is its first pixel in raster
// order, the pixel the CPU's labels (../label.go) are numbered by;
// patho_lab_flatten points every pixel at its root.
template <typename T>
__device__ void lab_init(const T *mask, int *L, i64 n) {
	FOR_EACH(i, n) {
		L[i] = mask[i] != 0 ? (int)i : -1;
	}
}

extern "C" __global__ void patho_lab_init_u8(const u8 *mask, int *L, i64 n) {
	lab_init<u8>(mask, L, n);
}

extern "C" __global__ void patho_lab_init_u16(const u16 *mask, int *L, i64 n) {
	lab_init<u16>(mask, L, n);
}

// lab_root returns the root of a's tree (read through volatile: other
// threads lower parents meanwhile; a parent never rises, so the walk
// ends).
__device__ int lab_root(volatile int *L, int a) {
	int p = L[a];
	while (p != a) {
		a = p;
		p = L[a];
	}
	return a;
}

// lab_unite joins the trees of a and b. The larger of the two is given
// the smaller as parent (atomicMin); if it had another parent by then,
// that parent's tree must join too, and the loop goes on with it.
__device__ void lab_unite(int *L, int a, int b) {
	a = lab_root(L, a);
	b = lab_root(L, b);
	while (a != b) {
		if (a < b) {
			int t = a;
			a = b;
			b = t;
		}
		int old = atomicMin(&L[a], b);
		a = old == a ? b : old;
	}
}

extern "C" __global__ void patho_lab_merge(int *L, i64 w, i64 h, i64 eight) {
	FOR_EACH(i, w * h) {
		if (L[i] < 0) continue;
		i64 x = i % w, y = i / w;
		if (x > 0 && L[i - 1] >= 0) lab_unite(L, (int)i, (int)(i - 1));
		if (y > 0) {
			if (L[i - w] >= 0) lab_unite(L, (int)i, (int)(i - w));
			if (eight && x > 0 && L[i - w - 1] >= 0) lab_unite(L, (int)i, (int)(i - w - 1));
			if (eight && x + 1 < w && L[i - w + 1] >= 0) lab_unite(L, (int)i, (int)(i - w + 1));
		}
	}
}

extern "C" __global__ void patho_lab_flatten(int *L, i64 n) {
	FOR_EACH(i, n) {
		if (L[i] >= 0) L[i] = lab_root(L, (int)i);
	}
}

// AreaThreshold, after the labelling: each component's area at its root,
// then the pixels of the components of at least least pixels.
extern "C" __global__ void patho_lab_area(const int *L, int *area, i64 n) {
	FOR_EACH(i, n) {
		if (L[i] >= 0) atomicAdd(&area[L[i]], 1);
	}
}

extern "C" __global__ void patho_area_final(const int *L, const int *area, u8 *out, i64 n, i64 least) {
	FOR_EACH(i, n) {
		out[i] = (L[i] >= 0 && area[L[i]] >= least) ? 1 : 0;
	}
}

// BWLabel, after the labelling: the components numbered 1, 2, ... in the
// raster order of their roots, by a scan of the roots in segments of
// RANK_SEG pixels. patho_root_count counts each segment's roots,
// patho_root_scan turns the counts into each segment's first rank (one
// block), patho_root_rank gives every root its rank (R[root], from 0),
// and patho_bw_final labels the pixels, components past the 65535th 0.
// The three scan kernels need blocks of RANK_T threads.
#define RANK_SEG 4096
#define RANK_T 256

extern "C" __global__ void patho_root_count(const int *L, int *count, i64 n) {
	__shared__ int part[RANK_T];
	const i64 segs = (n + RANK_SEG - 1) / RANK_SEG;
	for (i64 s = blockIdx.x; s < segs; s += gridDim.x) {
		const i64 lo = s * RANK_SEG, hi = min(lo + RANK_SEG, n);
		int c = 0;
		for (i64 i = lo + threadIdx.x; i < hi; i += blockDim.x) c += L[i] == (int)i;
		part[threadIdx.x] = c;
		__syncthreads();
		for (int k = RANK_T / 2; k > 0; k >>= 1) {
			if (threadIdx.x < k) part[threadIdx.x] += part[threadIdx.x + k];
			__syncthreads();
		}
		if (threadIdx.x == 0) count[s] = part[0];
		__syncthreads();
	}
}

// scan_block turns part (RANK_T values, one per thread) into its
// inclusive prefix sums.
__device__ void scan_block(int *part) {
	for (int d = 1; d < RANK_T; d <<= 1) {
		int v = threadIdx.x >= d ? part[threadIdx.x - d] : 0;
		__syncthreads();
		part[threadIdx.x] += v;
		__syncthreads();
	}
}

extern "C" __global__ void patho_root_scan(int *count, i64 segs) {
	__shared__ int part[RANK_T];
	if (blockIdx.x != 0) return;
	const i64 per = (segs + RANK_T - 1) / RANK_T;
	const i64 lo = min((i64)threadIdx.x * per, segs), hi = min(lo + per, segs);
	int sum = 0;
	for (i64 k = lo; k < hi; k++) sum += count[k];
	part[threadIdx.x] = sum;
	__syncthreads();
	scan_block(part);
	int base = threadIdx.x > 0 ? part[threadIdx.x - 1] : 0;
	for (i64 k = lo; k < hi; k++) {
		int c = count[k];
		count[k] = base;
		base += c;
	}
}

extern "C" __global__ void patho_root_rank(const int *L, const int *count, int *R, i64 n) {
	__shared__ int part[RANK_T];
	const i64 segs = (n + RANK_SEG - 1) / RANK_SEG;
	for (i64 s = blockIdx.x; s < segs; s += gridDim.x) {
		int base = count[s];
		const i64 hi = min((s + 1) * RANK_SEG, n);
		for (i64 c = s * RANK_SEG; c < hi; c += RANK_T) {
			const i64 i = c + threadIdx.x;
			const int root = i < hi && L[i] == (int)i;
			part[threadIdx.x] = root;
			__syncthreads();
			scan_block(part);
			if (root) R[i] = base + part[threadIdx.x] - 1;
			base += part[RANK_T - 1];
			__syncthreads();
		}
	}
}

extern "C" __global__ void patho_bw_final(const int *L, const int *R, u16 *out, i64 n) {
	FOR_EACH(i, n) {
		int v = L[i] >= 0 ? R[L[i]] + 1 : 0;
		out[i] = v > 65535 ? 0 : (u16)v;
	}
}

// PreWatershed: the exact Euclidean distance of ../edt.go. First, per
// column (one thread each), g = the distance to the nearest zero of mask in
// the column, inf = w+h+1 where there is none (a downward then an upward
// pass, as phase 1 of distanceTransform).
extern "C" __global__ void patho_edt_cols(const u8 *mask, int *g, i64 w, i64 h) {
	const int inf = (int)(w + h + 1);
	FOR_EACH(x, w) {
		int d = mask[x] == 0 ? 0 : inf;
		g[x] = d;
		for (i64 y = 1; y < h; y++) {
			d = mask[y * w + x] == 0 ? 0 : min(d + 1, inf);
			g[y * w + x] = d;
		}
		for (i64 y = h - 2; y >= 0; y--) {
			int v = g[y * w + x];
			if (d + 1 < v) {
				v = d + 1;
				g[y * w + x] = v;
			}
			d = v;
		}
	}
}

// Then per pixel, d2 = min over the row's columns i of (x-i)^2 + g(i)^2
// (what the lower envelope of Meijster's phase 2 gives), searched outwards
// from x while (x-i)^2 is below the best so far; dist gets 0 where g is 0,
// 65535 where d2 reaches inf^2 (no zero in the image), else
// round(8*sqrt(d2)) saturated at 65535 (the same double arithmetic as the
// Go code: a correctly rounded square root, a multiplication by a power of
// two, rounding half away from zero).
extern "C" __global__ void patho_edt_rows(const int *g, u16 *dist, i64 w, i64 h) {
	const i64 inf = w + h + 1;
	FOR_EACH(i, w * h) {
		i64 x = i % w, row = i - x;
		i64 gx = g[i];
		if (gx == 0) {
			dist[i] = 0;
			continue;
		}
		i64 best = gx * gx;
		for (i64 k = 1; k * k < best && (x - k >= 0 || x + k < w); k++) {
			if (x - k >= 0) {
				i64 v = g[row + x - k];
				best = min(best, k * k + v * v);
			}
			if (x + k < w) {
				i64 v = g[row + x + k];
				best = min(best, k * k + v * v);
			}
		}
		if (best >= inf * inf) {
			dist[i] = 0xffff;
		} else {
			double d = round(8.0 * sqrt((double)best));
			dist[i] = (u16)(d > 65535.0 ? 65535.0 : d);
		}
	}
}

// PreWatershed, h-maxima: the marker dist - min(dist, 8) (one pixel, in
// eighths), reconstructed under dist by patho_recon8_u16.
extern "C" __global__ void patho_hmax_init(const u16 *dist, u16 *marker, i64 n) {
	FOR_EACH(i, n) {
		unsigned d = dist[i];
		marker[i] = (u16)(d - min(d, 8u));
	}
}

// Features: per-object sums and pixel counts, added with global atomics
// into sums (doubles) and counts (u64), rows of each and zeroed by the
// caller: a row for every label the tile can hold (objectRows of
// ../kernels.go, up to 65535), labels past rows left out;
// patho_feat_final divides them into the feature table.
__device__ double gray_at(const u8 *rgb, i64 n, i64 w, i64 h, i64 x, i64 y) {
	x = min(max(x, (i64)0), w - 1);
	y = min(max(y, (i64)0), h - 1);
	i64 i = y * w + x;
	return (double)((int)rgb[i] + (int)rgb[n + i] + (int)rgb[2 * n + i]) / 3;
}

// Colour deconvolution: the hematoxylin column of the inverse of Ruifrok
// and Johnston's H&E-DAB stain matrix (hemaR, hemaG, hemaB of
// ../canny.go), applied to a pixel's optical densities -ln((c+1)/256).
__device__ double optical_density(int c) { return -log(((double)c + 1) / 256); }

// kind 0: intensity (255 - mean of RGB), kind 1: Sobel gradient
// magnitude, kind 2: hematoxylin density.
extern "C" __global__ void patho_feat_accum(const u8 *rgb, const u16 *labels, double *sums, u64 *counts, i64 w, i64 h, i64 kind, i64 rows) {
	i64 n = w * h;
	FOR_EACH(i, n) {
		int l = labels[i];
		if (l == 0 || l > rows) continue;
		double v;
		if (kind == 0) {
			v = 255 - (double)((int)rgb[i] + (int)rgb[n + i] + (int)rgb[2 * n + i]) / 3;
		} else if (kind == 2) {
			v = 1.87798274 * optical_density(rgb[i]) + -0.06590806 * optical_density(rgb[n + i]) + -0.60190736 * optical_density(rgb[2 * n + i]);
		} else {
			i64 x = i % w, y = i / w;
			double gx = gray_at(rgb, n, w, h, x + 1, y - 1) + 2 * gray_at(rgb, n, w, h, x + 1, y) + gray_at(rgb, n, w, h, x + 1, y + 1) -
			            gray_at(rgb, n, w, h, x - 1, y - 1) - 2 * gray_at(rgb, n, w, h, x - 1, y) - gray_at(rgb, n, w, h, x - 1, y + 1);
			double gy = gray_at(rgb, n, w, h, x - 1, y + 1) + 2 * gray_at(rgb, n, w, h, x, y + 1) + gray_at(rgb, n, w, h, x + 1, y + 1) -
			            gray_at(rgb, n, w, h, x - 1, y - 1) - 2 * gray_at(rgb, n, w, h, x, y - 1) - gray_at(rgb, n, w, h, x + 1, y - 1);
			v = hypot(gx, gy);
		}
		atomicAdd(&sums[l - 1], v);
		atomicAdd(&counts[l - 1], 1ull);
	}
}

// kind 0 writes the area and mean columns, kind 1 the gradient column,
// kind 2 the hematoxylin column, kind 3 the edge share column.
extern "C" __global__ void patho_feat_final(const double *sums, const u64 *counts, double *table, i64 kind, i64 rows) {
	FOR_EACH(k, rows) {
		double a = (double)counts[k];
		double *row = table + k * NUM_FEATURES;
		double mean = a > 0 ? sums[k] / a : 0;
		if (kind == 0) {
			row[FEAT_AREA] = a;
			row[FEAT_MEAN] = mean;
		} else if (kind == 1) {
			row[FEAT_GRAD] = mean;
		} else if (kind == 2) {
			row[FEAT_HEMA] = mean;
		} else {
			row[FEAT_EDGE] = mean;
		}
	}
}

// patho_feat_count adds each object's values of the 8-bit image vals
// into sums and its pixel count into counts (FeatGradient's edges).
extern "C" __global__ void patho_feat_count(const u8 *vals, const u16 *labels, double *sums, u64 *counts, i64 n, i64 rows) {
	FOR_EACH(i, n) {
		int l = labels[i];
		if (l == 0 || l > rows) continue;
		atomicAdd(&sums[l - 1], (double)vals[i]);
		atomicAdd(&counts[l - 1], 1ull);
	}
}

// Canny's edges of the grey image (R+G+B)/3 (canny of ../canny.go,
// OpenCV's cv2.Canny with aperture 3 and the L1 norm): patho_canny
// writes the candidates (magnitude above CANNY_LOW and a maximum across
// the gradient) into mask and those above CANNY_HIGH into marker; the
// edges are then marker reconstructed under mask (patho_recon8_u8: the
// hysteresis, 8-connected).
#define CANNY_LOW 50
#define CANNY_HIGH 150
#define CANNY_TAN22 13573

__device__ int grey_at(const u8 *rgb, i64 n, i64 w, i64 h, i64 x, i64 y) {
	x = min(max(x, (i64)0), w - 1);
	y = min(max(y, (i64)0), h - 1);
	i64 i = y * w + x;
	return ((int)rgb[i] + (int)rgb[n + i] + (int)rgb[2 * n + i]) / 3;
}

// canny_d returns the Sobel derivatives at (x, y), the border replicated.
__device__ void canny_d(const u8 *rgb, i64 n, i64 w, i64 h, i64 x, i64 y, int *dx, int *dy) {
	int a = grey_at(rgb, n, w, h, x - 1, y - 1), b = grey_at(rgb, n, w, h, x, y - 1), c = grey_at(rgb, n, w, h, x + 1, y - 1);
	int d = grey_at(rgb, n, w, h, x - 1, y), f = grey_at(rgb, n, w, h, x + 1, y);
	int p = grey_at(rgb, n, w, h, x - 1, y + 1), q = grey_at(rgb, n, w, h, x, y + 1), r = grey_at(rgb, n, w, h, x + 1, y + 1);
	*dx = c + 2 * f + r - a - 2 * d - p;
	*dy = p + 2 * q + r - a - 2 * b - c;
}

// canny_mag returns the L1 magnitude at (x, y), 0 outside the image.
__device__ int canny_mag(const u8 *rgb, i64 n, i64 w, i64 h, i64 x, i64 y) {
	if (x < 0 || x >= w || y < 0 || y >= h) return 0;
	int dx, dy;
	canny_d(rgb, n, w, h, x, y, &dx, &dy);
	return abs(dx) + abs(dy);
}

extern "C" __global__ void patho_canny(const u8 *rgb, u8 *marker, u8 *mask, i64 w, i64 h) {
	i64 n = w * h;
	FOR_EACH(i, n) {
		i64 x = i % w, y = i / w;
		int xs, ys;
		canny_d(rgb, n, w, h, x, y, &xs, &ys);
		int v = abs(xs) + abs(ys);
		bool cand = false;
		if (v > CANNY_LOW) {
			long long ax = abs(xs), ay = (long long)abs(ys) << 15;
			long long tg22x = ax * CANNY_TAN22;
			if (ay < tg22x) {
				cand = v > canny_mag(rgb, n, w, h, x - 1, y) && v >= canny_mag(rgb, n, w, h, x + 1, y);
			} else if (ay > tg22x + (ax << 16)) {
				cand = v > canny_mag(rgb, n, w, h, x, y - 1) && v >= canny_mag(rgb, n, w, h, x, y + 1);
			} else {
				int s = (xs ^ ys) < 0 ? -1 : 1;
				cand = v > canny_mag(rgb, n, w, h, x - s, y - 1) && v > canny_mag(rgb, n, w, h, x + s, y + 1);
			}
		}
		mask[i] = cand ? 1 : 0;
		marker[i] = cand && v > CANNY_HIGH ? 1 : 0;
	}
}

// FeatMorphometry: each object's perimeter, the pixels with a 4-neighbour
// of another label or outside the tile (morphometryFeatures of
// ../kernels.go), counted into counts (rows, zeroed by the caller), then
// written into the table's perimeter column.
extern "C" __global__ void patho_feat_perim(const u16 *labels, u64 *counts, i64 w, i64 h, i64 rows) {
	FOR_EACH(i, w * h) {
		int l = labels[i];
		if (l == 0 || l > rows) continue;
		i64 x = i % w, y = i / w;
		if (x == 0 || y == 0 || x == w - 1 || y == h - 1 || labels[i - 1] != l || labels[i + 1] != l || labels[i - w] != l || labels[i + w] != l) {
			atomicAdd(&counts[l - 1], 1ull);
		}
	}
}

extern "C" __global__ void patho_perim_final(const u64 *counts, double *table, i64 rows) {
	FOR_EACH(k, rows) {
		table[k * NUM_FEATURES + FEAT_PERIM] = (double)counts[k];
	}
}

// Watershed, as ../watershed.go defines it: f the relief (dist+1 in the
// mask, 0 outside), the markers its regional maxima, each pixel flooded at
// its own level f, D the round of the flood at that level, and a pixel's
// basin the one of its predecessors (neighbours of greater key (f, -D)),
// unless a neighbour of its key has another. patho_ws_init writes f and
// f - 1, patho_recon8_u16 reconstructs f - 1 under f (the regional maxima
// are where it stays below f), patho_ws_markers starts the union-find
// labelling of the maxima (patho_lab_merge 8-connected, patho_lab_flatten:
// a marker's pixels share its first pixel's index), patho_ws_dist_init
// and patho_ws_dist compute D, patho_ws_lab_init and patho_ws_flood the
// candidate (C) and final (F) basins, patho_ws_final the output.
#define WS_INF 0x3fffffff
#define WS_UNK 0  // not known yet
#define WS_LINE -1
#define WS_OUT -2 // outside the mask

extern "C" __global__ void patho_ws_init(const u16 *dist, const u8 *filled, u16 *f, u16 *J, i64 n) {
	FOR_EACH(i, n) {
		unsigned v = filled[i] != 0 ? min((unsigned)dist[i], 0xfffeu) + 1 : 0;
		f[i] = (u16)v;
		J[i] = (u16)(v - min(v, 1u));
	}
}

extern "C" __global__ void patho_ws_markers(const u16 *f, const u16 *J, int *L, i64 n) {
	FOR_EACH(i, n) {
		L[i] = f[i] > J[i] ? (int)i : -1;
	}
}

// D: 0 on the markers, 1 next to a higher pixel, unknown (WS_INF) on the
// rest of the mask, which patho_ws_dist relaxes.
extern "C" __global__ void patho_ws_dist_init(const u16 *f, const int *L, int *D, i64 w, i64 h) {
	FOR_EACH(i, w * h) {
		int d = WS_INF;
		if (f[i] != 0) {
			if (L[i] >= 0) {
				d = 0;
			} else {
				i64 x = i % w, y = i / w;
				for (int dy = -1; dy <= 1; dy++) {
					for (int dx = -1; dx <= 1; dx++) {
						i64 xx = x + dx, yy = y + dy;
						if (xx >= 0 && xx < w && yy >= 0 && yy < h && f[yy * w + xx] > f[i]) d = 1;
					}
				}
			}
		}
		D[i] = d;
	}
}

// patho_ws_dist and patho_ws_flood relax tiles of WS_T x WS_T pixels in
// shared memory (ws_tile: f, D, C and F with a one-pixel frame), each
// block taking tiles in turn (ws_relax): a tile and its frame are read
// from the images, the tile is swept with a step until stable, written
// back if it changed, and *changed set. patho_ws_dist relaxes D(p) to 1 +
// the least D of p's neighbours of p's level (values only fall, to the
// least fixed point, in any order: stale frame values only delay);
// patho_ws_flood settles C and F (ws_step).
#define WS_T 32

struct ws_tile {
	u16 f[WS_T + 2][WS_T + 2];
	int d[WS_T + 2][WS_T + 2], c[WS_T + 2][WS_T + 2], F[WS_T + 2][WS_T + 2];
};

// ws_dist_step relaxes D at (sy, sx) of the tile; it reports a change.
__device__ bool ws_dist_step(ws_tile &s, int sy, int sx) {
	u16 v = s.f[sy][sx];
	int d = s.d[sy][sx];
	if (v == 0 || d <= 1) return false; // outside, or known
	int nd = d;
	for (int dy = -1; dy <= 1; dy++) {
		for (int dx = -1; dx <= 1; dx++) {
			if (s.f[sy + dy][sx + dx] == v && s.d[sy + dy][sx + dx] < WS_INF) nd = min(nd, s.d[sy + dy][sx + dx] + 1);
		}
	}
	if (nd < d) {
		s.d[sy][sx] = nd;
		return true;
	}
	return false;
}

__device__ bool ws_step(ws_tile &s, int sy, int sx);

// ws_relax runs patho_ws_flood's relaxation (FLOOD: C and F read and
// written back) or patho_ws_dist's (D written back).
template <bool FLOOD>
__device__ void ws_relax(const u16 *f, const int *D, int *Dout, int *C, int *F, i64 w, i64 h, int *changed) {
	__shared__ ws_tile s;
	__shared__ int tile_changed, any;
	const i64 tx = (w + WS_T - 1) / WS_T, ty = (h + WS_T - 1) / WS_T;
	for (i64 t = blockIdx.x; t < tx * ty; t += gridDim.x) {
		const i64 x0 = (t % tx) * WS_T, y0 = (t / tx) * WS_T;
		__syncthreads();
		if (threadIdx.x == 0) any = 0;
		for (int k = threadIdx.x; k < (WS_T + 2) * (WS_T + 2); k += blockDim.x) {
			int sy = k / (WS_T + 2), sx = k % (WS_T + 2);
			i64 x = x0 - 1 + sx, y = y0 - 1 + sy;
			bool in = x >= 0 && x < w && y >= 0 && y < h;
			i64 i = y * w + x;
			s.f[sy][sx] = in ? f[i] : (u16)0;
			s.d[sy][sx] = in ? D[i] : WS_INF;
			if (FLOOD) {
				s.c[sy][sx] = in ? C[i] : WS_OUT;
				s.F[sy][sx] = in ? F[i] : WS_OUT;
			}
		}
		for (;;) {
			__syncthreads();
			if (threadIdx.x == 0) tile_changed = 0;
			__syncthreads();
			for (int k = threadIdx.x; k < WS_T * WS_T; k += blockDim.x) {
				int sy = k / WS_T + 1, sx = k % WS_T + 1;
				if (FLOOD ? ws_step(s, sy, sx) : ws_dist_step(s, sy, sx)) tile_changed = 1;
			}
			__syncthreads();
			if (!tile_changed) break;
			if (threadIdx.x == 0) any = 1;
		}
		__syncthreads();
		if (any) {
			for (int k = threadIdx.x; k < WS_T * WS_T; k += blockDim.x) {
				int sy = k / WS_T, sx = k % WS_T;
				i64 x = x0 + sx, y = y0 + sy;
				if (x >= w || y >= h) continue;
				if (FLOOD) {
					C[y * w + x] = s.c[sy + 1][sx + 1];
					F[y * w + x] = s.F[sy + 1][sx + 1];
				} else {
					Dout[y * w + x] = s.d[sy + 1][sx + 1];
				}
			}
			if (threadIdx.x == 0) *changed = 1;
		}
	}
}

extern "C" __global__ void patho_ws_dist(const u16 *f, int *D, i64 w, i64 h, int *changed) {
	ws_relax<false>(f, D, D, 0, 0, w, h, changed);
}

// C and F: a marker's pixels its basin (its first pixel's index + 1),
// the rest of the mask unknown, WS_OUT outside. C may take L's place.
extern "C" __global__ void patho_ws_lab_init(const u16 *f, int *C, int *F, i64 n) {
	FOR_EACH(i, n) {
		int c = f[i] == 0 ? WS_OUT : (C[i] >= 0 ? C[i] + 1 : WS_UNK);
		C[i] = c;
		F[i] = c;
	}
}

// ws_step settles what it can of the pixel at (sy, sx) of a tile in
// shared memory: its candidate C once its predecessors' F are known (the
// one basin among them, else a line), its F once the C of its neighbours
// of its key are known (a line where one has another basin). Both are
// written once, so stale values only delay. It reports a change.
__device__ bool ws_step(ws_tile &s, int sy, int sx) {
	if (s.F[sy][sx] != WS_UNK) return false; // known, or outside
	const u16 v = s.f[sy][sx];
	const int d = s.d[sy][sx];
	bool moved = false;
	int c = s.c[sy][sx];
	if (c == WS_UNK) {
		int lab = 0;
		for (int dy = -1; dy <= 1; dy++) {
			for (int dx = -1; dx <= 1; dx++) {
				u16 qv = s.f[sy + dy][sx + dx];
				if ((dy == 0 && dx == 0) || qv == 0) continue;
				if (qv > v || (qv == v && s.d[sy + dy][sx + dx] < d)) {
					int b = s.F[sy + dy][sx + dx];
					if (b == WS_UNK) return false; // a predecessor not known yet
					if (b > 0) lab = (lab == 0 || lab == b) ? b : WS_LINE;
				}
			}
		}
		c = lab > 0 ? lab : WS_LINE;
		s.c[sy][sx] = c;
		moved = true;
	}
	int fin = c;
	for (int dy = -1; dy <= 1; dy++) {
		for (int dx = -1; dx <= 1; dx++) {
			if ((dy == 0 && dx == 0) || s.f[sy + dy][sx + dx] != v || s.d[sy + dy][sx + dx] != d) continue;
			int b = s.c[sy + dy][sx + dx];
			if (b == WS_UNK) return moved; // a neighbour of its key without its candidate yet
			if (b > 0 && c > 0 && b != c) fin = WS_LINE;
		}
	}
	s.F[sy][sx] = fin;
	return true;
}

extern "C" __global__ void patho_ws_flood(const u16 *f, const int *D, int *C, int *F, i64 w, i64 h, int *changed) {
	ws_relax<true>(f, D, 0, C, F, w, h, changed);
}

extern "C" __global__ void patho_ws_final(const int *F, u16 *out, i64 n) {
	FOR_EACH(i, n) {
		out[i] = F[i] > 0 ? 1 : 0;
	}
}
