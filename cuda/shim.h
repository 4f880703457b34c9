// shim.h declares the C side of the cuda package (built with -tags cuda).
//
// Nothing here is linked against a CUDA library: libcuda.so.1, cuBLAS and
// cuFFT are opened with dlopen at run time and their functions looked up
// with dlsym, so a binary built against the CUDA 11.8 headers starts on a
// machine without CUDA and runs with newer drivers (CUDA 12, 13).
//
// Handles (contexts, streams, events, modules, functions, cuBLAS handles)
// cross into Go as uintptr_t so that Go never converts integers to
// pointers. Every call that needs a CUDA context takes it as its first
// argument and makes it current for the duration of the call only (pushing
// it when another context is current and popping it afterwards), inside
// one C call, so the calling goroutine cannot migrate between threads in
// the middle.
#ifndef HTGS_CUDA_SHIM_H
#define HTGS_CUDA_SHIM_H

#include <stddef.h>
#include <stdint.h>

// HTGS_ERR_NOT_LOADED is returned by calls made before the library they
// need was loaded (a bug in the Go side, which always loads first).
#define HTGS_ERR_NOT_LOADED (-1)

// ---- loading ----------------------------------------------------------

// htgs_cu_load opens libcuda.so.1, resolves the driver functions and calls
// cuInit(0). It returns 0 on success, -2 when the library or a function is
// missing (err holds the reason) or the CUresult of cuInit.
int htgs_cu_load(char *err, size_t errlen);
// htgs_cublas_load opens the first cuBLAS library of the NUL-separated,
// double-NUL-terminated list names and resolves its functions. It returns
// 0, or -2 with the reasons in err. soname receives the name that opened.
int htgs_cublas_load(const char *names, char *soname, size_t sonamelen, char *err, size_t errlen);
// htgs_cufft_load is htgs_cublas_load for cuFFT.
int htgs_cufft_load(const char *names, char *soname, size_t sonamelen, char *err, size_t errlen);
// htgs_try_dlopen opens and closes a library, for tests: 0 when it opens.
int htgs_try_dlopen(const char *name, char *err, size_t errlen);

// ---- driver -----------------------------------------------------------

// htgs_cu_error_name writes the symbolic name and description of a
// CUresult into name and msg.
void htgs_cu_error_name(int code, char *name, size_t namelen, char *msg, size_t msglen);
int htgs_cu_driver_version(int *version);
int htgs_cu_device_count(int *n);
// htgs_cu_device_info reads the name, total memory, compute capability and
// multiprocessor count of device ordinal.
int htgs_cu_device_info(int ordinal, char *name, size_t namelen, unsigned long long *mem,
			int *major, int *minor, int *sms);
int htgs_cu_primary_retain(int ordinal, uintptr_t *ctx);
int htgs_cu_primary_release(int ordinal);
// htgs_cu_ctx_push makes ctx current on the calling thread (stacked).
int htgs_cu_ctx_push(uintptr_t ctx);
// htgs_cu_ctx_pop undoes htgs_cu_ctx_push.
int htgs_cu_ctx_pop(void);
int htgs_cu_ctx_current(uintptr_t *ctx);
int htgs_cu_ctx_sync(uintptr_t ctx);
int htgs_cu_mem_info(uintptr_t ctx, unsigned long long *freemem, unsigned long long *total);

int htgs_cu_mem_alloc(uintptr_t ctx, unsigned long long *dptr, unsigned long long bytes);
int htgs_cu_mem_free(uintptr_t ctx, unsigned long long dptr);
// htgs_cu_host_alloc allocates portable page-locked host memory.
int htgs_cu_host_alloc(uintptr_t ctx, void **p, unsigned long long bytes);
int htgs_cu_host_free(uintptr_t ctx, void *p);

int htgs_cu_stream_create(uintptr_t ctx, uintptr_t *stream);
int htgs_cu_stream_destroy(uintptr_t ctx, uintptr_t stream);
int htgs_cu_stream_sync(uintptr_t ctx, uintptr_t stream);
int htgs_cu_event_create(uintptr_t ctx, uintptr_t *event);
int htgs_cu_event_destroy(uintptr_t ctx, uintptr_t event);
int htgs_cu_event_record(uintptr_t ctx, uintptr_t event, uintptr_t stream);
int htgs_cu_event_sync(uintptr_t ctx, uintptr_t event);
// htgs_cu_event_query sets *done to whether the event has completed,
// without blocking (cuEventQuery; not ready is no error).
int htgs_cu_event_query(uintptr_t ctx, uintptr_t event, int *done);
int htgs_cu_stream_wait(uintptr_t ctx, uintptr_t stream, uintptr_t event);

// Copy directions for htgs_cu_copy.
#define HTGS_HTOD 0
#define HTGS_DTOH 1
#define HTGS_DTOD 2

// htgs_cu_copy queues an asynchronous copy of bytes bytes on stream (0 is
// the legacy default stream). For HTGS_HTOD src is a host pointer and dst a
// device pointer; for HTGS_DTOH the reverse; for HTGS_DTOD both are device
// pointers. When sync is non-zero it waits for the stream afterwards.
int htgs_cu_copy(uintptr_t ctx, int dir, unsigned long long dst, void *hdst,
		 unsigned long long src, const void *hsrc, unsigned long long bytes,
		 uintptr_t stream, int sync);
// htgs_cu_memset queues a byte fill of bytes bytes at dst on stream.
int htgs_cu_memset(uintptr_t ctx, unsigned long long dst, unsigned char value,
		   unsigned long long bytes, uintptr_t stream, int sync);

// htgs_cu_module_load JIT-loads a PTX (or cubin) image; on failure the JIT
// error log is written to log.
int htgs_cu_module_load(uintptr_t ctx, const char *image, uintptr_t *mod, char *log, size_t loglen);
int htgs_cu_module_unload(uintptr_t ctx, uintptr_t mod);
int htgs_cu_module_function(uintptr_t ctx, uintptr_t mod, const char *name, uintptr_t *fn);
// htgs_cu_launch launches fn with a 1-D grid. Every kernel argument is one
// 8-byte slot of args (pointers, long long, double bit patterns).
int htgs_cu_launch(uintptr_t ctx, uintptr_t fn, unsigned int grid, unsigned int block,
		   uintptr_t stream, const uint64_t *args, int nargs, int sync);

// ---- cuBLAS -----------------------------------------------------------
//
// Library calls report their own status as the return value; a failure to
// make the context current is reported in *drv (0 otherwise).

int htgs_cublas_create(uintptr_t ctx, uintptr_t *handle, int *drv);
int htgs_cublas_destroy(uintptr_t ctx, uintptr_t handle, int *drv);
int htgs_cublas_version(uintptr_t ctx, uintptr_t handle, int *version, int *drv);
int htgs_cublas_set_stream(uintptr_t ctx, uintptr_t handle, uintptr_t stream, int *drv);
// htgs_cublas_dgemm is cublasDgemm_v2 (column-major) with host scalars.
int htgs_cublas_dgemm(uintptr_t ctx, uintptr_t handle, int transa, int transb, int m, int n, int k,
		      double alpha, unsigned long long a, int lda, unsigned long long b, int ldb,
		      double beta, unsigned long long c, int ldc, int *drv);

// ---- cuBLASXt (host-memory BLAS over several GPUs, in libcublas) -------

int htgs_cublasxt_create(uintptr_t ctx, uintptr_t *handle, int *drv);
int htgs_cublasxt_destroy(uintptr_t ctx, uintptr_t handle, int *drv);
int htgs_cublasxt_device_select(uintptr_t ctx, uintptr_t handle, int n, int *ids, int *drv);
int htgs_cublasxt_set_block_dim(uintptr_t ctx, uintptr_t handle, int dim, int *drv);
int htgs_cublasxt_set_pinning(uintptr_t ctx, uintptr_t handle, int on, int *drv);
// htgs_cublasxt_dgemm is cublasXtDgemm (column-major, host pointers, host
// scalars); it returns when C is in host memory.
int htgs_cublasxt_dgemm(uintptr_t ctx, uintptr_t handle, int transa, int transb, size_t m, size_t n,
			size_t k, double alpha, uintptr_t a, size_t lda, uintptr_t b, size_t ldb,
			double beta, uintptr_t c, size_t ldc, int *drv);

// ---- cuFFT ------------------------------------------------------------

// FFT plan types (the values of cufftType).
#define HTGS_FFT_Z2Z 0x69
#define HTGS_FFT_D2Z 0x6a
#define HTGS_FFT_Z2D 0x6c

int htgs_cufft_plan2d(uintptr_t ctx, int nx, int ny, int type, int *plan, int *drv);
int htgs_cufft_destroy(uintptr_t ctx, int plan, int *drv);
int htgs_cufft_version(int *version);
int htgs_cufft_set_stream(uintptr_t ctx, int plan, uintptr_t stream, int *drv);
// htgs_cufft_exec runs plan of the given type; direction (-1 forward, +1
// inverse) matters for Z2Z only.
int htgs_cufft_exec(uintptr_t ctx, int plan, int type, unsigned long long in,
		    unsigned long long out, int direction, int *drv);

#endif
