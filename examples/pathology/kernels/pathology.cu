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

#define MAX_OBJECTS 256
#define NUM_FEATURES 4
#define FEAT_AREA 0
#define FEAT_MEAN 1
#define FEAT_GRAD 2

#define FOR_EACH(i, n) for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (i64)gridDim.x * blockDim.x)

// RBCDetection: strongly red, little green and blue.
extern "C" __global__ void patho_rbc(const u8 *rgb, u8 *out, i64 n) {
	FOR_EACH(i, n) {
		out[i] = (rgb[i] > 150 && rgb[n + i] < 80 && rgb[2 * n + i] < 100) ? 1 : 0;
	}
}

// MorphOpen, first step: darkness = 255 - mean of RGB.
extern "C" __global__ void patho_dark(const u8 *rgb, u8 *dark, i64 n) {
	FOR_EACH(i, n) {
		int s = (int)rgb[i] + (int)rgb[n + i] + (int)rgb[2 * n + i];
		dark[i] = (u8)(255 - s / 3);
	}
}

// MorphOpen: 3x3 erosion (op 0: min) or dilation (op 1: max); pixels
// outside the image are skipped.
extern "C" __global__ void patho_filter3(const u8 *in, u8 *out, i64 w, i64 h, i64 op) {
	FOR_EACH(i, w * h) {
		i64 x = i % w, y = i / w;
		int acc = op == 0 ? 255 : 0;
		for (int dy = -1; dy <= 1; dy++) {
			i64 yy = y + dy;
			if (yy < 0 || yy >= h) continue;
			for (int dx = -1; dx <= 1; dx++) {
				i64 xx = x + dx;
				if (xx < 0 || xx >= w) continue;
				int v = in[yy * w + xx];
				acc = op == 0 ? min(acc, v) : max(acc, v);
			}
		}
		out[i] = (u8)acc;
	}
}

// FillHoles is a morphological reconstruction: the background reachable
// from the image border through 4-connected background pixels is the
// outside; everything else is filled. reach starts as the background
// pixels of the border and grows by one step (or more, as updates are in
// place) per launch of patho_fill_step, until *changed stays 0.
extern "C" __global__ void patho_fill_init(const u8 *in, u8 *reach, i64 w, i64 h) {
	FOR_EACH(i, w * h) {
		i64 x = i % w, y = i / w;
		reach[i] = (in[i] == 0 && (x == 0 || y == 0 || x == w - 1 || y == h - 1)) ? 1 : 0;
	}
}

extern "C" __global__ void patho_fill_step(const u8 *in, u8 *reach, i64 w, i64 h, int *changed) {
	FOR_EACH(i, w * h) {
		if (in[i] != 0 || reach[i] != 0) continue;
		i64 x = i % w, y = i / w;
		if ((x > 0 && reach[i - 1]) || (x < w - 1 && reach[i + 1]) ||
		    (y > 0 && reach[i - w]) || (y < h - 1 && reach[i + w])) {
			reach[i] = 1;
			*changed = 1;
		}
	}
}

extern "C" __global__ void patho_fill_final(const u8 *in, const u8 *reach, u8 *out, i64 n) {
	FOR_EACH(i, n) {
		out[i] = (in[i] != 0 || reach[i] == 0) ? 1 : 0;
	}
}

// PreWatershed: city-block distance of each mask pixel to the background,
// pixels outside the image counting as background. Iterated relaxation:
// each step lowers dist to 1 + the least 4-neighbour until *changed stays 0.
extern "C" __global__ void patho_dt_init(const u8 *mask, u16 *dist, i64 n) {
	FOR_EACH(i, n) {
		dist[i] = mask[i] != 0 ? 0xffff : 0;
	}
}

extern "C" __global__ void patho_dt_step(u16 *dist, i64 w, i64 h, int *changed) {
	FOR_EACH(i, w * h) {
		unsigned d = dist[i];
		if (d == 0) continue;
		i64 x = i % w, y = i / w;
		unsigned m = 0xffff;
		m = min(m, x > 0 ? (unsigned)dist[i - 1] : 0u);
		m = min(m, x < w - 1 ? (unsigned)dist[i + 1] : 0u);
		m = min(m, y > 0 ? (unsigned)dist[i - w] : 0u);
		m = min(m, y < h - 1 ? (unsigned)dist[i + w] : 0u);
		if (m + 1 < d) {
			dist[i] = (u16)(m + 1);
			*changed = 1;
		}
	}
}

// Features: per-object sums in shared memory, flushed with atomics into
// sums (MAX_OBJECTS doubles) and counts (MAX_OBJECTS u64) zeroed by the
// caller; patho_feat_final divides them into the feature table.
__device__ double gray_at(const u8 *rgb, i64 n, i64 w, i64 h, i64 x, i64 y) {
	x = min(max(x, (i64)0), w - 1);
	y = min(max(y, (i64)0), h - 1);
	i64 i = y * w + x;
	return (double)((int)rgb[i] + (int)rgb[n + i] + (int)rgb[2 * n + i]) / 3;
}

// kind 0: intensity (255 - mean of RGB), kind 1: Sobel gradient magnitude.
extern "C" __global__ void patho_feat_accum(const u8 *rgb, const u16 *labels, double *sums, u64 *counts, i64 w, i64 h, i64 kind) {
	__shared__ double s[MAX_OBJECTS];
	__shared__ u64 c[MAX_OBJECTS];
	for (int k = threadIdx.x; k < MAX_OBJECTS; k += blockDim.x) {
		s[k] = 0;
		c[k] = 0;
	}
	__syncthreads();
	i64 n = w * h;
	FOR_EACH(i, n) {
		int l = labels[i];
		if (l == 0 || l > MAX_OBJECTS) continue;
		double v;
		if (kind == 0) {
			v = 255 - (double)((int)rgb[i] + (int)rgb[n + i] + (int)rgb[2 * n + i]) / 3;
		} else {
			i64 x = i % w, y = i / w;
			double gx = gray_at(rgb, n, w, h, x + 1, y - 1) + 2 * gray_at(rgb, n, w, h, x + 1, y) + gray_at(rgb, n, w, h, x + 1, y + 1) -
			            gray_at(rgb, n, w, h, x - 1, y - 1) - 2 * gray_at(rgb, n, w, h, x - 1, y) - gray_at(rgb, n, w, h, x - 1, y + 1);
			double gy = gray_at(rgb, n, w, h, x - 1, y + 1) + 2 * gray_at(rgb, n, w, h, x, y + 1) + gray_at(rgb, n, w, h, x + 1, y + 1) -
			            gray_at(rgb, n, w, h, x - 1, y - 1) - 2 * gray_at(rgb, n, w, h, x, y - 1) - gray_at(rgb, n, w, h, x + 1, y - 1);
			v = hypot(gx, gy);
		}
		atomicAdd(&s[l - 1], v);
		atomicAdd(&c[l - 1], 1ull);
	}
	__syncthreads();
	for (int k = threadIdx.x; k < MAX_OBJECTS; k += blockDim.x) {
		if (c[k] != 0) {
			atomicAdd(&sums[k], s[k]);
			atomicAdd(&counts[k], c[k]);
		}
	}
}

// kind 0 writes the area and mean columns, kind 1 the gradient column.
extern "C" __global__ void patho_feat_final(const double *sums, const u64 *counts, double *table, i64 kind) {
	FOR_EACH(k, MAX_OBJECTS) {
		double a = (double)counts[k];
		double *row = table + k * NUM_FEATURES;
		if (kind == 0) {
			row[FEAT_AREA] = a;
			row[FEAT_MEAN] = a > 0 ? sums[k] / a : 0;
		} else {
			row[FEAT_GRAD] = a > 0 ? sums[k] / a : 0;
		}
	}
}
