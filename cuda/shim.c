//go:build cuda

// shim.c: run-time binding of the CUDA driver, cuBLAS and cuFFT; see shim.h.
//
// The function pointer tables below are the only global state. Each table
// is written once, by its load function, which the Go side calls under a
// sync.Once before any other use; afterwards they are only read.

#include "shim.h"

#include <cublasXt.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <cufft.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

// ---- function tables --------------------------------------------------

// The driver functions used, by exported symbol. The versioned names are the
// ones cuda.h maps the plain names to; the driver keeps exporting them for
// binary compatibility, so the same names work with CUDA 11, 12 and 13.
#define HTGS_CU_FUNCS(X)                                                                           \
	X(cuInit)                                                                                  \
	X(cuDriverGetVersion)                                                                      \
	X(cuGetErrorName)                                                                          \
	X(cuGetErrorString)                                                                        \
	X(cuDeviceGetCount)                                                                        \
	X(cuDeviceGet)                                                                             \
	X(cuDeviceGetName)                                                                         \
	X(cuDeviceGetAttribute)                                                                    \
	X(cuDeviceTotalMem_v2)                                                                     \
	X(cuDevicePrimaryCtxRetain)                                                                \
	X(cuDevicePrimaryCtxRelease_v2)                                                            \
	X(cuCtxGetCurrent)                                                                         \
	X(cuCtxPushCurrent_v2)                                                                     \
	X(cuCtxPopCurrent_v2)                                                                      \
	X(cuCtxSynchronize)                                                                        \
	X(cuMemGetInfo_v2)                                                                         \
	X(cuMemAlloc_v2)                                                                           \
	X(cuMemFree_v2)                                                                            \
	X(cuMemHostAlloc)                                                                          \
	X(cuMemFreeHost)                                                                           \
	X(cuMemcpyHtoDAsync_v2)                                                                    \
	X(cuMemcpyDtoHAsync_v2)                                                                    \
	X(cuMemcpyDtoDAsync_v2)                                                                    \
	X(cuMemsetD8Async)                                                                         \
	X(cuStreamCreate)                                                                          \
	X(cuStreamDestroy_v2)                                                                      \
	X(cuStreamSynchronize)                                                                     \
	X(cuStreamWaitEvent)                                                                       \
	X(cuEventCreate)                                                                           \
	X(cuEventDestroy_v2)                                                                       \
	X(cuEventRecord)                                                                           \
	X(cuEventSynchronize)                                                                      \
	X(cuEventQuery)                                                                            \
	X(cuModuleLoadDataEx)                                                                      \
	X(cuModuleUnload)                                                                          \
	X(cuModuleGetFunction)                                                                     \
	X(cuLaunchKernel)

#define HTGS_CUBLAS_FUNCS(X)                                                                       \
	X(cublasCreate_v2)                                                                         \
	X(cublasDestroy_v2)                                                                        \
	X(cublasGetVersion_v2)                                                                     \
	X(cublasSetStream_v2)                                                                      \
	X(cublasDgemm_v2)

// cuBLASXt, in the same library: optional (a library without it still
// serves cuBLAS; the Xt calls then report HTGS_ERR_NOT_LOADED).
#define HTGS_CUBLASXT_FUNCS(X)                                                                     \
	X(cublasXtCreate)                                                                          \
	X(cublasXtDestroy)                                                                         \
	X(cublasXtDeviceSelect)                                                                    \
	X(cublasXtSetBlockDim)                                                                     \
	X(cublasXtSetPinningMemMode)                                                               \
	X(cublasXtDgemm)

#define HTGS_CUFFT_FUNCS(X)                                                                        \
	X(cufftPlan2d)                                                                             \
	X(cufftDestroy)                                                                            \
	X(cufftGetVersion)                                                                         \
	X(cufftSetStream)                                                                          \
	X(cufftExecZ2Z)                                                                            \
	X(cufftExecD2Z)                                                                            \
	X(cufftExecZ2D)

// Pointers typed from the headers' own prototypes, so a mismatch between
// a call below and the real signature is a compile error.
#define HTGS_DECLARE(f) static __typeof__(f) *p_##f;
HTGS_CU_FUNCS(HTGS_DECLARE)
HTGS_CUBLAS_FUNCS(HTGS_DECLARE)
HTGS_CUBLASXT_FUNCS(HTGS_DECLARE)
HTGS_CUFFT_FUNCS(HTGS_DECLARE)

static int cu_loaded, cublas_loaded, cublasxt_loaded, cufft_loaded;

// lookup resolves every function of a table in handle h; on failure it
// names the first missing symbol in err.
#define HTGS_LOOKUP(f)                                                                             \
	if (ok) {                                                                                  \
		p_##f = (__typeof__(p_##f))dlsym(h, #f);                                           \
		if (p_##f == NULL) {                                                               \
			snprintf(err, errlen, "%s: missing symbol %s", lib, #f);                  \
			ok = 0;                                                                    \
		}                                                                                  \
	}

int htgs_try_dlopen(const char *name, char *err, size_t errlen)
{
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *e = dlerror();
		snprintf(err, errlen, "%s", e ? e : name);
		return -2;
	}
	dlclose(h);
	return 0;
}

int htgs_cu_load(char *err, size_t errlen)
{
	const char *lib = "libcuda.so.1";
	if (cu_loaded) {
		return 0;
	}
	void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
	if (h == NULL) {
		const char *e = dlerror();
		snprintf(err, errlen, "%s", e ? e : "dlopen libcuda.so.1 failed");
		return -2;
	}
	int ok = 1;
	HTGS_CU_FUNCS(HTGS_LOOKUP)
	if (!ok) {
		// Not closed: the pointers resolved so far (cuGetErrorName among
		// them) must not dangle. The library stays unused (cu_loaded is 0).
		return -2;
	}
	CUresult r = p_cuInit(0);
	if (r != CUDA_SUCCESS) {
		// Keep the library open: cuGetErrorName is still needed to name r.
		return (int)r;
	}
	cu_loaded = 1;
	return 0;
}

// open_first tries each name of the NUL-separated list in turn and returns
// the first handle that opens, recording the name; otherwise it lists the
// dlerror of every attempt in err.
static void *open_first(const char *names, char *soname, size_t sonamelen, char *err, size_t errlen)
{
	size_t used = 0;
	err[0] = 0;
	for (const char *n = names; *n != 0; n += strlen(n) + 1) {
		void *h = dlopen(n, RTLD_NOW | RTLD_LOCAL);
		if (h != NULL) {
			snprintf(soname, sonamelen, "%s", n);
			return h;
		}
		const char *e = dlerror();
		if (used < errlen) {
			int w = snprintf(err + used, errlen - used, "%s%s", used ? "; " : "", e ? e : n);
			if (w > 0) {
				used += (size_t)w;
			}
		}
	}
	return NULL;
}

int htgs_cublas_load(const char *names, char *soname, size_t sonamelen, char *err, size_t errlen)
{
	if (cublas_loaded) {
		return 0;
	}
	void *h = open_first(names, soname, sonamelen, err, errlen);
	if (h == NULL) {
		return -2;
	}
	const char *lib = soname;
	int ok = 1;
	HTGS_CUBLAS_FUNCS(HTGS_LOOKUP)
	if (!ok) {
		dlclose(h);
		return -2;
	}
	cublas_loaded = 1;
	// The Xt table is optional: its lookup failing leaves cuBLAS loaded.
	char xterr[256];
	err = xterr;
	errlen = sizeof xterr;
	HTGS_CUBLASXT_FUNCS(HTGS_LOOKUP)
	cublasxt_loaded = ok;
	return 0;
}

int htgs_cufft_load(const char *names, char *soname, size_t sonamelen, char *err, size_t errlen)
{
	if (cufft_loaded) {
		return 0;
	}
	void *h = open_first(names, soname, sonamelen, err, errlen);
	if (h == NULL) {
		return -2;
	}
	const char *lib = soname;
	int ok = 1;
	HTGS_CUFFT_FUNCS(HTGS_LOOKUP)
	if (!ok) {
		dlclose(h);
		return -2;
	}
	cufft_loaded = 1;
	return 0;
}

// ---- context scoping --------------------------------------------------

// scope_enter makes ctx current unless it already is; *pushed tells
// scope_leave whether to pop it again.
static CUresult scope_enter(uintptr_t ctx, int *pushed)
{
	CUcontext cur = NULL;
	*pushed = 0;
	if (!cu_loaded) {
		return (CUresult)HTGS_ERR_NOT_LOADED;
	}
	CUresult r = p_cuCtxGetCurrent(&cur);
	if (r != CUDA_SUCCESS) {
		return r;
	}
	if (cur == (CUcontext)ctx) {
		return CUDA_SUCCESS;
	}
	r = p_cuCtxPushCurrent_v2((CUcontext)ctx);
	if (r == CUDA_SUCCESS) {
		*pushed = 1;
	}
	return r;
}

// scope_leave pops the context scope_enter pushed and returns the first
// error of r and the pop.
static CUresult scope_leave(int pushed, CUresult r)
{
	if (pushed) {
		CUcontext popped;
		CUresult r2 = p_cuCtxPopCurrent_v2(&popped);
		if (r == CUDA_SUCCESS) {
			r = r2;
		}
	}
	return r;
}

// SCOPED runs a driver call with ctx current and returns its CUresult.
#define SCOPED(ctx, call)                                                                          \
	do {                                                                                       \
		int pushed_;                                                                       \
		CUresult r_ = scope_enter((ctx), &pushed_);                                        \
		if (r_ != CUDA_SUCCESS) {                                                          \
			return (int)r_;                                                            \
		}                                                                                  \
		r_ = (call);                                                                       \
		return (int)scope_leave(pushed_, r_);                                              \
	} while (0)

// LIBSCOPED runs a library call with ctx current; it returns the library
// status and reports context errors in *drv.
#define LIBSCOPED(ctx, drv, loaded, call)                                                          \
	do {                                                                                       \
		int pushed_;                                                                       \
		*(drv) = 0;                                                                        \
		if (!(loaded)) {                                                                   \
			return HTGS_ERR_NOT_LOADED;                                                \
		}                                                                                  \
		CUresult r_ = scope_enter((ctx), &pushed_);                                        \
		if (r_ != CUDA_SUCCESS) {                                                          \
			*(drv) = (int)r_;                                                          \
			return 0;                                                                  \
		}                                                                                  \
		int s_ = (int)(call);                                                              \
		*(drv) = (int)scope_leave(pushed_, CUDA_SUCCESS);                                  \
		return s_;                                                                         \
	} while (0)

// ---- driver -----------------------------------------------------------

void htgs_cu_error_name(int code, char *name, size_t namelen, char *msg, size_t msglen)
{
	const char *n = NULL, *m = NULL;
	if (p_cuGetErrorName != NULL) {
		p_cuGetErrorName((CUresult)code, &n);
	}
	if (p_cuGetErrorString != NULL) {
		p_cuGetErrorString((CUresult)code, &m);
	}
	if (code == HTGS_ERR_NOT_LOADED) {
		n = "HTGS_ERR_NOT_LOADED";
		m = "CUDA driver not loaded";
	}
	snprintf(name, namelen, "%s", n ? n : "CUDA_ERROR_UNRECOGNIZED");
	snprintf(msg, msglen, "%s", m ? m : "");
}

int htgs_cu_driver_version(int *version)
{
	if (!cu_loaded) {
		return HTGS_ERR_NOT_LOADED;
	}
	return (int)p_cuDriverGetVersion(version);
}

int htgs_cu_device_count(int *n)
{
	if (!cu_loaded) {
		return HTGS_ERR_NOT_LOADED;
	}
	return (int)p_cuDeviceGetCount(n);
}

int htgs_cu_device_info(int ordinal, char *name, size_t namelen, unsigned long long *mem,
			int *major, int *minor, int *sms)
{
	CUdevice d;
	size_t total = 0;
	CUresult r;
	if (!cu_loaded) {
		return HTGS_ERR_NOT_LOADED;
	}
	if ((r = p_cuDeviceGet(&d, ordinal)) != CUDA_SUCCESS) {
		return (int)r;
	}
	if ((r = p_cuDeviceGetName(name, (int)namelen, d)) != CUDA_SUCCESS) {
		return (int)r;
	}
	if ((r = p_cuDeviceTotalMem_v2(&total, d)) != CUDA_SUCCESS) {
		return (int)r;
	}
	*mem = total;
	if ((r = p_cuDeviceGetAttribute(major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d)) !=
	    CUDA_SUCCESS) {
		return (int)r;
	}
	if ((r = p_cuDeviceGetAttribute(minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d)) !=
	    CUDA_SUCCESS) {
		return (int)r;
	}
	return (int)p_cuDeviceGetAttribute(sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d);
}

int htgs_cu_primary_retain(int ordinal, uintptr_t *ctx)
{
	CUdevice d;
	CUcontext c;
	CUresult r;
	if (!cu_loaded) {
		return HTGS_ERR_NOT_LOADED;
	}
	if ((r = p_cuDeviceGet(&d, ordinal)) != CUDA_SUCCESS) {
		return (int)r;
	}
	if ((r = p_cuDevicePrimaryCtxRetain(&c, d)) != CUDA_SUCCESS) {
		return (int)r;
	}
	*ctx = (uintptr_t)c;
	return 0;
}

int htgs_cu_primary_release(int ordinal)
{
	CUdevice d;
	CUresult r;
	if (!cu_loaded) {
		return HTGS_ERR_NOT_LOADED;
	}
	if ((r = p_cuDeviceGet(&d, ordinal)) != CUDA_SUCCESS) {
		return (int)r;
	}
	return (int)p_cuDevicePrimaryCtxRelease_v2(d);
}

int htgs_cu_ctx_push(uintptr_t ctx)
{
	if (!cu_loaded) {
		return HTGS_ERR_NOT_LOADED;
	}
	return (int)p_cuCtxPushCurrent_v2((CUcontext)ctx);
}

int htgs_cu_ctx_pop(void)
{
	CUcontext c;
	if (!cu_loaded) {
		return HTGS_ERR_NOT_LOADED;
	}
	return (int)p_cuCtxPopCurrent_v2(&c);
}

int htgs_cu_ctx_current(uintptr_t *ctx)
{
	CUcontext c = NULL;
	if (!cu_loaded) {
		return HTGS_ERR_NOT_LOADED;
	}
	CUresult r = p_cuCtxGetCurrent(&c);
	*ctx = (uintptr_t)c;
	return (int)r;
}

int htgs_cu_ctx_sync(uintptr_t ctx) { SCOPED(ctx, p_cuCtxSynchronize()); }

static CUresult mem_info(unsigned long long *freemem, unsigned long long *total)
{
	size_t f = 0, t = 0;
	CUresult r = p_cuMemGetInfo_v2(&f, &t);
	*freemem = f;
	*total = t;
	return r;
}

int htgs_cu_mem_info(uintptr_t ctx, unsigned long long *freemem, unsigned long long *total)
{
	SCOPED(ctx, mem_info(freemem, total));
}

int htgs_cu_mem_alloc(uintptr_t ctx, unsigned long long *dptr, unsigned long long bytes)
{
	SCOPED(ctx, p_cuMemAlloc_v2((CUdeviceptr *)dptr, (size_t)bytes));
}

int htgs_cu_mem_free(uintptr_t ctx, unsigned long long dptr)
{
	SCOPED(ctx, p_cuMemFree_v2((CUdeviceptr)dptr));
}

int htgs_cu_host_alloc(uintptr_t ctx, void **p, unsigned long long bytes)
{
	SCOPED(ctx, p_cuMemHostAlloc(p, (size_t)bytes, CU_MEMHOSTALLOC_PORTABLE));
}

int htgs_cu_host_free(uintptr_t ctx, void *p) { SCOPED(ctx, p_cuMemFreeHost(p)); }

static CUresult stream_create(uintptr_t *stream)
{
	CUstream s = NULL;
	CUresult r = p_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
	*stream = (uintptr_t)s;
	return r;
}

int htgs_cu_stream_create(uintptr_t ctx, uintptr_t *stream) { SCOPED(ctx, stream_create(stream)); }

int htgs_cu_stream_destroy(uintptr_t ctx, uintptr_t stream)
{
	SCOPED(ctx, p_cuStreamDestroy_v2((CUstream)stream));
}

int htgs_cu_stream_sync(uintptr_t ctx, uintptr_t stream)
{
	SCOPED(ctx, p_cuStreamSynchronize((CUstream)stream));
}

static CUresult event_create(uintptr_t *event)
{
	CUevent e = NULL;
	CUresult r = p_cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
	*event = (uintptr_t)e;
	return r;
}

int htgs_cu_event_create(uintptr_t ctx, uintptr_t *event) { SCOPED(ctx, event_create(event)); }

int htgs_cu_event_destroy(uintptr_t ctx, uintptr_t event)
{
	SCOPED(ctx, p_cuEventDestroy_v2((CUevent)event));
}

int htgs_cu_event_record(uintptr_t ctx, uintptr_t event, uintptr_t stream)
{
	SCOPED(ctx, p_cuEventRecord((CUevent)event, (CUstream)stream));
}

int htgs_cu_event_sync(uintptr_t ctx, uintptr_t event)
{
	SCOPED(ctx, p_cuEventSynchronize((CUevent)event));
}

int htgs_cu_event_query(uintptr_t ctx, uintptr_t event, int *done)
{
	int pushed;
	CUresult r = scope_enter(ctx, &pushed);
	if (r != CUDA_SUCCESS) {
		return (int)r;
	}
	r = p_cuEventQuery((CUevent)event);
	*done = r == CUDA_SUCCESS;
	if (r == CUDA_ERROR_NOT_READY) {
		r = CUDA_SUCCESS;
	}
	return (int)scope_leave(pushed, r);
}

int htgs_cu_stream_wait(uintptr_t ctx, uintptr_t stream, uintptr_t event)
{
	SCOPED(ctx, p_cuStreamWaitEvent((CUstream)stream, (CUevent)event, 0));
}

static CUresult copy(int dir, unsigned long long dst, void *hdst, unsigned long long src,
		     const void *hsrc, unsigned long long bytes, uintptr_t stream, int sync)
{
	CUresult r;
	switch (dir) {
	case HTGS_HTOD:
		r = p_cuMemcpyHtoDAsync_v2((CUdeviceptr)dst, hsrc, (size_t)bytes, (CUstream)stream);
		break;
	case HTGS_DTOH:
		r = p_cuMemcpyDtoHAsync_v2(hdst, (CUdeviceptr)src, (size_t)bytes, (CUstream)stream);
		break;
	case HTGS_DTOD:
		r = p_cuMemcpyDtoDAsync_v2((CUdeviceptr)dst, (CUdeviceptr)src, (size_t)bytes,
					   (CUstream)stream);
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (r == CUDA_SUCCESS && sync) {
		r = p_cuStreamSynchronize((CUstream)stream);
	}
	return r;
}

int htgs_cu_copy(uintptr_t ctx, int dir, unsigned long long dst, void *hdst,
		 unsigned long long src, const void *hsrc, unsigned long long bytes,
		 uintptr_t stream, int sync)
{
	SCOPED(ctx, copy(dir, dst, hdst, src, hsrc, bytes, stream, sync));
}

static CUresult memset8(unsigned long long dst, unsigned char value, unsigned long long bytes,
			uintptr_t stream, int sync)
{
	CUresult r = p_cuMemsetD8Async((CUdeviceptr)dst, value, (size_t)bytes, (CUstream)stream);
	if (r == CUDA_SUCCESS && sync) {
		r = p_cuStreamSynchronize((CUstream)stream);
	}
	return r;
}

int htgs_cu_memset(uintptr_t ctx, unsigned long long dst, unsigned char value,
		   unsigned long long bytes, uintptr_t stream, int sync)
{
	SCOPED(ctx, memset8(dst, value, bytes, stream, sync));
}

static CUresult module_load(const char *image, uintptr_t *mod, char *log, size_t loglen)
{
	CUmodule m = NULL;
	CUjit_option opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void *vals[2] = {log, (void *)(uintptr_t)loglen};
	if (loglen > 0) {
		log[0] = 0;
	}
	CUresult r = p_cuModuleLoadDataEx(&m, image, 2, opts, vals);
	*mod = (uintptr_t)m;
	return r;
}

int htgs_cu_module_load(uintptr_t ctx, const char *image, uintptr_t *mod, char *log, size_t loglen)
{
	SCOPED(ctx, module_load(image, mod, log, loglen));
}

int htgs_cu_module_unload(uintptr_t ctx, uintptr_t mod)
{
	SCOPED(ctx, p_cuModuleUnload((CUmodule)mod));
}

static CUresult module_function(uintptr_t mod, const char *name, uintptr_t *fn)
{
	CUfunction f = NULL;
	CUresult r = p_cuModuleGetFunction(&f, (CUmodule)mod, name);
	*fn = (uintptr_t)f;
	return r;
}

int htgs_cu_module_function(uintptr_t ctx, uintptr_t mod, const char *name, uintptr_t *fn)
{
	SCOPED(ctx, module_function(mod, name, fn));
}

#define HTGS_MAX_ARGS 16

static CUresult launch(uintptr_t fn, unsigned int grid, unsigned int block, uintptr_t stream,
		       const uint64_t *args, int nargs, int sync)
{
	void *params[HTGS_MAX_ARGS];
	if (nargs < 0 || nargs > HTGS_MAX_ARGS) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	for (int i = 0; i < nargs; i++) {
		// The driver reads each argument's bytes through these pointers
		// while cuLaunchKernel runs; it does not keep them.
		params[i] = (void *)&args[i];
	}
	CUresult r = p_cuLaunchKernel((CUfunction)fn, grid, 1, 1, block, 1, 1, 0, (CUstream)stream,
				      params, NULL);
	if (r == CUDA_SUCCESS && sync) {
		r = p_cuStreamSynchronize((CUstream)stream);
	}
	return r;
}

int htgs_cu_launch(uintptr_t ctx, uintptr_t fn, unsigned int grid, unsigned int block,
		   uintptr_t stream, const uint64_t *args, int nargs, int sync)
{
	SCOPED(ctx, launch(fn, grid, block, stream, args, nargs, sync));
}

// ---- cuBLAS -----------------------------------------------------------

static cublasStatus_t blas_create(uintptr_t *handle)
{
	cublasHandle_t h = NULL;
	cublasStatus_t s = p_cublasCreate_v2(&h);
	*handle = (uintptr_t)h;
	return s;
}

int htgs_cublas_create(uintptr_t ctx, uintptr_t *handle, int *drv)
{
	LIBSCOPED(ctx, drv, cublas_loaded, blas_create(handle));
}

int htgs_cublas_destroy(uintptr_t ctx, uintptr_t handle, int *drv)
{
	LIBSCOPED(ctx, drv, cublas_loaded, p_cublasDestroy_v2((cublasHandle_t)handle));
}

int htgs_cublas_version(uintptr_t ctx, uintptr_t handle, int *version, int *drv)
{
	LIBSCOPED(ctx, drv, cublas_loaded, p_cublasGetVersion_v2((cublasHandle_t)handle, version));
}

int htgs_cublas_set_stream(uintptr_t ctx, uintptr_t handle, uintptr_t stream, int *drv)
{
	LIBSCOPED(ctx, drv, cublas_loaded,
		  p_cublasSetStream_v2((cublasHandle_t)handle, (cudaStream_t)stream));
}

int htgs_cublas_dgemm(uintptr_t ctx, uintptr_t handle, int transa, int transb, int m, int n, int k,
		      double alpha, unsigned long long a, int lda, unsigned long long b, int ldb,
		      double beta, unsigned long long c, int ldc, int *drv)
{
	LIBSCOPED(ctx, drv, cublas_loaded,
		  p_cublasDgemm_v2((cublasHandle_t)handle, transa ? CUBLAS_OP_T : CUBLAS_OP_N,
				   transb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha,
				   (const double *)(uintptr_t)a, lda, (const double *)(uintptr_t)b,
				   ldb, &beta, (double *)(uintptr_t)c, ldc));
}

// ---- cuBLASXt -----------------------------------------------------------

static cublasStatus_t xt_create(uintptr_t *handle)
{
	cublasXtHandle_t h = NULL;
	cublasStatus_t s = p_cublasXtCreate(&h);
	*handle = (uintptr_t)h;
	return s;
}

int htgs_cublasxt_create(uintptr_t ctx, uintptr_t *handle, int *drv)
{
	LIBSCOPED(ctx, drv, cublasxt_loaded, xt_create(handle));
}

int htgs_cublasxt_destroy(uintptr_t ctx, uintptr_t handle, int *drv)
{
	LIBSCOPED(ctx, drv, cublasxt_loaded, p_cublasXtDestroy((cublasXtHandle_t)handle));
}

int htgs_cublasxt_device_select(uintptr_t ctx, uintptr_t handle, int n, int *ids, int *drv)
{
	LIBSCOPED(ctx, drv, cublasxt_loaded, p_cublasXtDeviceSelect((cublasXtHandle_t)handle, n, ids));
}

int htgs_cublasxt_set_block_dim(uintptr_t ctx, uintptr_t handle, int dim, int *drv)
{
	LIBSCOPED(ctx, drv, cublasxt_loaded, p_cublasXtSetBlockDim((cublasXtHandle_t)handle, dim));
}

int htgs_cublasxt_set_pinning(uintptr_t ctx, uintptr_t handle, int on, int *drv)
{
	LIBSCOPED(ctx, drv, cublasxt_loaded,
		  p_cublasXtSetPinningMemMode((cublasXtHandle_t)handle, on ? CUBLASXT_PINNING_ENABLED
									      : CUBLASXT_PINNING_DISABLED));
}

int htgs_cublasxt_dgemm(uintptr_t ctx, uintptr_t handle, int transa, int transb, size_t m, size_t n,
			size_t k, double alpha, uintptr_t a, size_t lda, uintptr_t b, size_t ldb,
			double beta, uintptr_t c, size_t ldc, int *drv)
{
	LIBSCOPED(ctx, drv, cublasxt_loaded,
		  p_cublasXtDgemm((cublasXtHandle_t)handle, transa ? CUBLAS_OP_T : CUBLAS_OP_N,
				  transb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha,
				  (const double *)a, lda, (const double *)b, ldb, &beta, (double *)c,
				  ldc));
}

// ---- cuFFT ------------------------------------------------------------

int htgs_cufft_plan2d(uintptr_t ctx, int nx, int ny, int type, int *plan, int *drv)
{
	LIBSCOPED(ctx, drv, cufft_loaded, p_cufftPlan2d((cufftHandle *)plan, nx, ny, (cufftType)type));
}

int htgs_cufft_destroy(uintptr_t ctx, int plan, int *drv)
{
	LIBSCOPED(ctx, drv, cufft_loaded, p_cufftDestroy((cufftHandle)plan));
}

int htgs_cufft_version(int *version)
{
	if (!cufft_loaded) {
		return HTGS_ERR_NOT_LOADED;
	}
	return (int)p_cufftGetVersion(version);
}

int htgs_cufft_set_stream(uintptr_t ctx, int plan, uintptr_t stream, int *drv)
{
	LIBSCOPED(ctx, drv, cufft_loaded, p_cufftSetStream((cufftHandle)plan, (cudaStream_t)stream));
}

static cufftResult fft_exec(int plan, int type, unsigned long long in, unsigned long long out,
			    int direction)
{
	switch (type) {
	case HTGS_FFT_Z2Z:
		return p_cufftExecZ2Z((cufftHandle)plan, (cufftDoubleComplex *)(uintptr_t)in,
				      (cufftDoubleComplex *)(uintptr_t)out,
				      direction < 0 ? CUFFT_FORWARD : CUFFT_INVERSE);
	case HTGS_FFT_D2Z:
		return p_cufftExecD2Z((cufftHandle)plan, (cufftDoubleReal *)(uintptr_t)in,
				      (cufftDoubleComplex *)(uintptr_t)out);
	case HTGS_FFT_Z2D:
		return p_cufftExecZ2D((cufftHandle)plan, (cufftDoubleComplex *)(uintptr_t)in,
				      (cufftDoubleReal *)(uintptr_t)out);
	}
	return CUFFT_INVALID_TYPE;
}

int htgs_cufft_exec(uintptr_t ctx, int plan, int type, unsigned long long in,
		    unsigned long long out, int direction, int *drv)
{
	LIBSCOPED(ctx, drv, cufft_loaded, fft_exec(plan, type, in, out, direction));
}
