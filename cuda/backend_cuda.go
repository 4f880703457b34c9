//go:build cuda && cgo

package cuda

// Headers: Debian's nvidia-cuda-dev puts cuda.h, cublas_v2.h and cufft.h in
// /usr/include; NVIDIA's installers use /usr/local/cuda/include. Other
// places can be given with CGO_CFLAGS=-I... . Only libdl is linked: the
// CUDA libraries are opened at run time (see shim.c).

/*
#cgo CFLAGS: -I/usr/local/cuda/include -O2 -Wall
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "shim.h"

// htgs_cu_copy_go is htgs_cu_copy for Go memory, whose address comes as an
// integer so that cgo's pointer check does not inspect the object around
// it (a Go slice inside a struct that also holds pointers would otherwise
// make the call panic); the caller pins the memory for the call.
static int htgs_cu_copy_go(uintptr_t ctx, int dir, unsigned long long dst, uintptr_t hdst,
			   unsigned long long src, uintptr_t hsrc, unsigned long long bytes,
			   uintptr_t stream, int sync) {
	return htgs_cu_copy(ctx, dir, dst, (void *)hdst, src, (const void *)hsrc, bytes, stream, sync);
}
*/
import "C"

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"unsafe"
)

// Run-time loading of the CUDA libraries. These memoized loaders are the
// package-level state that dynamic loading requires: the C side keeps each
// library's function table, filled exactly once through them.
var (
	driverLoad = sync.OnceValue(func() error {
		var buf [1024]C.char
		r := C.htgs_cu_load(&buf[0], C.size_t(len(buf)))
		switch {
		case r == 0:
			return nil
		case r == -2:
			return fmt.Errorf("%w: %s", ErrNoDevice, C.GoString(&buf[0]))
		default:
			return fmt.Errorf("%w: %w", ErrNoDevice, cuError("cuInit", r))
		}
	})
	cublasLoad = sync.OnceValues(func() (string, error) {
		return loadLib("cuBLAS", "HTGS_CUBLAS", cublasSonames(), func(names, so *C.char, soLen C.size_t, e *C.char, eLen C.size_t) C.int {
			return C.htgs_cublas_load(names, so, soLen, e, eLen)
		})
	})
	cufftLoad = sync.OnceValues(func() (string, error) {
		return loadLib("cuFFT", "HTGS_CUFFT", cufftSonames(), func(names, so *C.char, soLen C.size_t, e *C.char, eLen C.size_t) C.int {
			return C.htgs_cufft_load(names, so, soLen, e, eLen)
		})
	})
)

func loadDriver() error           { return driverLoad() }
func loadCUBLAS() (string, error) { return cublasLoad() }
func loadCUFFT() (string, error)  { return cufftLoad() }

// loadLib opens the first library of $env and sonames that has the
// functions the package uses (the driver must be loaded first: the
// libraries need it).
func loadLib(what, env string, sonames []string, load func(names, so *C.char, soLen C.size_t, e *C.char, eLen C.size_t) C.int) (string, error) {
	if err := loadDriver(); err != nil {
		return "", err
	}
	if p := os.Getenv(env); p != "" {
		sonames = append([]string{p}, sonames...)
	}
	list := C.CString(strings.Join(sonames, "\x00") + "\x00")
	defer C.free(unsafe.Pointer(list))
	var so [256]C.char
	var buf [2048]C.char
	if load(list, &so[0], C.size_t(len(so)), &buf[0], C.size_t(len(buf))) != 0 {
		return "", fmt.Errorf("%w: %s (tried %s; set %s to a library path): %s",
			ErrLibrary, what, strings.Join(sonames, ", "), env, C.GoString(&buf[0]))
	}
	return C.GoString(&so[0]), nil
}

// tryDlopen reports whether a library opens (for tests of error paths).
func tryDlopen(name string) error {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var buf [1024]C.char
	if C.htgs_try_dlopen(cs, &buf[0], C.size_t(len(buf))) != 0 {
		return fmt.Errorf("%w: %s", ErrLibrary, C.GoString(&buf[0]))
	}
	return nil
}

// cuError returns the *Error of a driver CUresult, or nil for success.
func cuError(op string, r C.int) error {
	if r == 0 {
		return nil
	}
	var name [128]C.char
	var msg [512]C.char
	C.htgs_cu_error_name(r, &name[0], C.size_t(len(name)), &msg[0], C.size_t(len(msg)))
	return &Error{Lib: LibDriver, Op: op, Code: int(r), Name: C.GoString(&name[0]), Msg: C.GoString(&msg[0])}
}

// libCall converts the result of a LIBSCOPED shim call: a context error
// in drv, else the library's status.
func libCall(lib, op string, status, drv C.int) error {
	if drv != 0 {
		return cuError("cuCtxPushCurrent ("+op+")", drv)
	}
	return libError(lib, op, int(status))
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// ---- driver ------------------------------------------------------------

func drvVersion() (int, error) {
	var v C.int
	if err := cuError("cuDriverGetVersion", C.htgs_cu_driver_version(&v)); err != nil {
		return 0, err
	}
	return int(v), nil
}

func drvDeviceCount() (int, error) {
	var n C.int
	if err := cuError("cuDeviceGetCount", C.htgs_cu_device_count(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

func drvDeviceInfo(ordinal int) (deviceInfo, error) {
	var name [256]C.char
	var mem C.ulonglong
	var major, minor, sms C.int
	r := C.htgs_cu_device_info(C.int(ordinal), &name[0], C.size_t(len(name)), &mem, &major, &minor, &sms)
	if err := cuError("cuDeviceGet*", r); err != nil {
		return deviceInfo{}, err
	}
	return deviceInfo{name: C.GoString(&name[0]), mem: int64(mem), major: int(major), minor: int(minor), sms: int(sms)}, nil
}

func drvPrimaryRetain(ordinal int) (uintptr, error) {
	var c C.uintptr_t
	if err := cuError("cuDevicePrimaryCtxRetain", C.htgs_cu_primary_retain(C.int(ordinal), &c)); err != nil {
		return 0, err
	}
	return uintptr(c), nil
}

func drvPrimaryRelease(ordinal int) error {
	return cuError("cuDevicePrimaryCtxRelease", C.htgs_cu_primary_release(C.int(ordinal)))
}

func drvCtxPush(ctx uintptr) error {
	return cuError("cuCtxPushCurrent", C.htgs_cu_ctx_push(C.uintptr_t(ctx)))
}

func drvCtxPop() error { return cuError("cuCtxPopCurrent", C.htgs_cu_ctx_pop()) }

func drvCtxCurrent() (uintptr, error) {
	var c C.uintptr_t
	if err := cuError("cuCtxGetCurrent", C.htgs_cu_ctx_current(&c)); err != nil {
		return 0, err
	}
	return uintptr(c), nil
}

func drvCtxSync(ctx uintptr) error {
	return cuError("cuCtxSynchronize", C.htgs_cu_ctx_sync(C.uintptr_t(ctx)))
}

func drvMemInfo(ctx uintptr) (free, total int64, err error) {
	var f, t C.ulonglong
	if err := cuError("cuMemGetInfo", C.htgs_cu_mem_info(C.uintptr_t(ctx), &f, &t)); err != nil {
		return 0, 0, err
	}
	return int64(f), int64(t), nil
}

func drvMemAlloc(ctx uintptr, bytes int64) (DevicePtr, error) {
	var p C.ulonglong
	if err := cuError("cuMemAlloc", C.htgs_cu_mem_alloc(C.uintptr_t(ctx), &p, C.ulonglong(bytes))); err != nil {
		return 0, err
	}
	return DevicePtr(p), nil
}

func drvMemFree(ctx uintptr, p DevicePtr) error {
	return cuError("cuMemFree", C.htgs_cu_mem_free(C.uintptr_t(ctx), C.ulonglong(p)))
}

func drvHostAlloc(ctx uintptr, bytes int64) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	if err := cuError("cuMemHostAlloc", C.htgs_cu_host_alloc(C.uintptr_t(ctx), &p, C.ulonglong(bytes))); err != nil {
		return nil, err
	}
	return p, nil
}

func drvHostFree(ctx uintptr, p unsafe.Pointer) error {
	return cuError("cuMemFreeHost", C.htgs_cu_host_free(C.uintptr_t(ctx), p))
}

func drvStreamCreate(ctx uintptr) (uintptr, error) {
	var s C.uintptr_t
	if err := cuError("cuStreamCreate", C.htgs_cu_stream_create(C.uintptr_t(ctx), &s)); err != nil {
		return 0, err
	}
	return uintptr(s), nil
}

func drvStreamDestroy(ctx, s uintptr) error {
	return cuError("cuStreamDestroy", C.htgs_cu_stream_destroy(C.uintptr_t(ctx), C.uintptr_t(s)))
}

func drvStreamSync(ctx, s uintptr) error {
	return cuError("cuStreamSynchronize", C.htgs_cu_stream_sync(C.uintptr_t(ctx), C.uintptr_t(s)))
}

func drvEventCreate(ctx uintptr) (uintptr, error) {
	var e C.uintptr_t
	if err := cuError("cuEventCreate", C.htgs_cu_event_create(C.uintptr_t(ctx), &e)); err != nil {
		return 0, err
	}
	return uintptr(e), nil
}

func drvEventDestroy(ctx, e uintptr) error {
	return cuError("cuEventDestroy", C.htgs_cu_event_destroy(C.uintptr_t(ctx), C.uintptr_t(e)))
}

func drvEventRecord(ctx, e, s uintptr) error {
	return cuError("cuEventRecord", C.htgs_cu_event_record(C.uintptr_t(ctx), C.uintptr_t(e), C.uintptr_t(s)))
}

func drvEventSync(ctx, e uintptr) error {
	return cuError("cuEventSynchronize", C.htgs_cu_event_sync(C.uintptr_t(ctx), C.uintptr_t(e)))
}

func drvEventQuery(ctx, e uintptr) (bool, error) {
	var done C.int
	if err := cuError("cuEventQuery", C.htgs_cu_event_query(C.uintptr_t(ctx), C.uintptr_t(e), &done)); err != nil {
		return false, err
	}
	return done != 0, nil
}

func drvStreamWait(ctx, s, e uintptr) error {
	return cuError("cuStreamWaitEvent", C.htgs_cu_stream_wait(C.uintptr_t(ctx), C.uintptr_t(s), C.uintptr_t(e)))
}

// drvCopyHtoD copies from host memory src, which is either C memory
// (pinned) or a Go slice without pointers (pageable; then wait is true, so
// the driver has finished reading it before the call returns).
func drvCopyHtoD(ctx uintptr, dst DevicePtr, src unsafe.Pointer, n int64, s uintptr, wait bool) error {
	r := C.htgs_cu_copy(C.uintptr_t(ctx), C.HTGS_HTOD, C.ulonglong(dst), nil, 0, src, C.ulonglong(n), C.uintptr_t(s), cbool(wait))
	return cuError("cuMemcpyHtoDAsync", r)
}

// drvCopyDtoH copies to host memory dst (as for drvCopyHtoD: pinned, or a
// Go slice with wait true).
func drvCopyDtoH(ctx uintptr, dst unsafe.Pointer, src DevicePtr, n int64, s uintptr, wait bool) error {
	r := C.htgs_cu_copy(C.uintptr_t(ctx), C.HTGS_DTOH, 0, dst, C.ulonglong(src), nil, C.ulonglong(n), C.uintptr_t(s), cbool(wait))
	return cuError("cuMemcpyDtoHAsync", r)
}

// drvCopyGoHtoD copies n bytes of Go memory at addr, which the caller has
// pinned, to dst and waits for the copy to finish.
func drvCopyGoHtoD(ctx uintptr, dst DevicePtr, addr uintptr, n int64, s uintptr) error {
	r := C.htgs_cu_copy_go(C.uintptr_t(ctx), C.HTGS_HTOD, C.ulonglong(dst), 0, 0, C.uintptr_t(addr), C.ulonglong(n), C.uintptr_t(s), 1)
	return cuError("cuMemcpyHtoDAsync", r)
}

// drvCopyGoDtoH copies n bytes from src to Go memory at addr, which the
// caller has pinned, and waits for the copy to finish.
func drvCopyGoDtoH(ctx uintptr, addr uintptr, src DevicePtr, n int64, s uintptr) error {
	r := C.htgs_cu_copy_go(C.uintptr_t(ctx), C.HTGS_DTOH, 0, C.uintptr_t(addr), C.ulonglong(src), 0, C.ulonglong(n), C.uintptr_t(s), 1)
	return cuError("cuMemcpyDtoHAsync", r)
}

func drvCopyDtoD(ctx uintptr, dst, src DevicePtr, n int64, s uintptr, wait bool) error {
	r := C.htgs_cu_copy(C.uintptr_t(ctx), C.HTGS_DTOD, C.ulonglong(dst), nil, C.ulonglong(src), nil, C.ulonglong(n), C.uintptr_t(s), cbool(wait))
	return cuError("cuMemcpyDtoDAsync", r)
}

func drvMemset(ctx uintptr, dst DevicePtr, v byte, n int64, s uintptr, wait bool) error {
	r := C.htgs_cu_memset(C.uintptr_t(ctx), C.ulonglong(dst), C.uchar(v), C.ulonglong(n), C.uintptr_t(s), cbool(wait))
	return cuError("cuMemsetD8Async", r)
}

func drvModuleLoad(ctx uintptr, image string) (uintptr, error) {
	img := C.CString(image)
	defer C.free(unsafe.Pointer(img))
	var log [8192]C.char
	var m C.uintptr_t
	if err := cuError("cuModuleLoadDataEx", C.htgs_cu_module_load(C.uintptr_t(ctx), img, &m, &log[0], C.size_t(len(log)))); err != nil {
		if l := C.GoString(&log[0]); l != "" {
			return 0, fmt.Errorf("%w\nJIT log:\n%s", err, l)
		}
		return 0, err
	}
	return uintptr(m), nil
}

func drvModuleUnload(ctx, mod uintptr) error {
	return cuError("cuModuleUnload", C.htgs_cu_module_unload(C.uintptr_t(ctx), C.uintptr_t(mod)))
}

func drvModuleFunction(ctx, mod uintptr, name string) (uintptr, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var f C.uintptr_t
	if err := cuError("cuModuleGetFunction", C.htgs_cu_module_function(C.uintptr_t(ctx), C.uintptr_t(mod), cs, &f)); err != nil {
		return 0, err
	}
	return uintptr(f), nil
}

// drvLaunch launches fn with one 8-byte slot per argument.
func drvLaunch(ctx, fn uintptr, grid, block uint32, s uintptr, args []uint64, wait bool) error {
	var p *C.uint64_t
	if len(args) > 0 {
		p = (*C.uint64_t)(unsafe.Pointer(&args[0]))
	}
	r := C.htgs_cu_launch(C.uintptr_t(ctx), C.uintptr_t(fn), C.uint(grid), C.uint(block), C.uintptr_t(s), p, C.int(len(args)), cbool(wait))
	return cuError("cuLaunchKernel", r)
}

// ---- cuBLAS ------------------------------------------------------------

func blasCreate(ctx uintptr) (uintptr, error) {
	var h C.uintptr_t
	var drv C.int
	st := C.htgs_cublas_create(C.uintptr_t(ctx), &h, &drv)
	if err := libCall(LibCUBLAS, "cublasCreate", st, drv); err != nil {
		return 0, err
	}
	return uintptr(h), nil
}

func blasDestroy(ctx, h uintptr) error {
	var drv C.int
	st := C.htgs_cublas_destroy(C.uintptr_t(ctx), C.uintptr_t(h), &drv)
	return libCall(LibCUBLAS, "cublasDestroy", st, drv)
}

func blasVersion(ctx, h uintptr) (int, error) {
	var v, drv C.int
	st := C.htgs_cublas_version(C.uintptr_t(ctx), C.uintptr_t(h), &v, &drv)
	if err := libCall(LibCUBLAS, "cublasGetVersion", st, drv); err != nil {
		return 0, err
	}
	return int(v), nil
}

func blasSetStream(ctx, h, s uintptr) error {
	var drv C.int
	st := C.htgs_cublas_set_stream(C.uintptr_t(ctx), C.uintptr_t(h), C.uintptr_t(s), &drv)
	return libCall(LibCUBLAS, "cublasSetStream", st, drv)
}

// blasDgemm is column-major cublasDgemm.
func blasDgemm(ctx, h uintptr, transA, transB bool, m, n, k int, alpha float64, a DevicePtr, lda int,
	b DevicePtr, ldb int, beta float64, c DevicePtr, ldc int) error {
	var drv C.int
	st := C.htgs_cublas_dgemm(C.uintptr_t(ctx), C.uintptr_t(h), cbool(transA), cbool(transB),
		C.int(m), C.int(n), C.int(k), C.double(alpha), C.ulonglong(a), C.int(lda),
		C.ulonglong(b), C.int(ldb), C.double(beta), C.ulonglong(c), C.int(ldc), &drv)
	return libCall(LibCUBLAS, "cublasDgemm", st, drv)
}

// ---- cuBLASXt ----------------------------------------------------------

func xtCreate(ctx uintptr) (uintptr, error) {
	var h C.uintptr_t
	var drv C.int
	st := C.htgs_cublasxt_create(C.uintptr_t(ctx), &h, &drv)
	if err := libCall(LibCUBLAS, "cublasXtCreate", st, drv); err != nil {
		return 0, err
	}
	return uintptr(h), nil
}

func xtDestroy(ctx, h uintptr) error {
	var drv C.int
	st := C.htgs_cublasxt_destroy(C.uintptr_t(ctx), C.uintptr_t(h), &drv)
	return libCall(LibCUBLAS, "cublasXtDestroy", st, drv)
}

func xtDeviceSelect(ctx, h uintptr, ids []int) error {
	cids := make([]C.int, len(ids))
	for i, id := range ids {
		cids[i] = C.int(id)
	}
	var drv C.int
	st := C.htgs_cublasxt_device_select(C.uintptr_t(ctx), C.uintptr_t(h), C.int(len(cids)), &cids[0], &drv)
	return libCall(LibCUBLAS, "cublasXtDeviceSelect", st, drv)
}

func xtSetBlockDim(ctx, h uintptr, dim int) error {
	var drv C.int
	st := C.htgs_cublasxt_set_block_dim(C.uintptr_t(ctx), C.uintptr_t(h), C.int(dim), &drv)
	return libCall(LibCUBLAS, "cublasXtSetBlockDim", st, drv)
}

func xtSetPinning(ctx, h uintptr, on bool) error {
	var drv C.int
	st := C.htgs_cublasxt_set_pinning(C.uintptr_t(ctx), C.uintptr_t(h), cbool(on), &drv)
	return libCall(LibCUBLAS, "cublasXtSetPinningMemMode", st, drv)
}

// xtDgemm is column-major cublasXtDgemm on host memory; a, b and c are the
// addresses of Go memory that the caller keeps alive for the call.
func xtDgemm(ctx, h uintptr, transA, transB bool, m, n, k int, alpha float64, a uintptr, lda int,
	b uintptr, ldb int, beta float64, c uintptr, ldc int) error {
	var drv C.int
	st := C.htgs_cublasxt_dgemm(C.uintptr_t(ctx), C.uintptr_t(h), cbool(transA), cbool(transB),
		C.size_t(m), C.size_t(n), C.size_t(k), C.double(alpha), C.uintptr_t(a), C.size_t(lda),
		C.uintptr_t(b), C.size_t(ldb), C.double(beta), C.uintptr_t(c), C.size_t(ldc), &drv)
	return libCall(LibCUBLAS, "cublasXtDgemm", st, drv)
}

// ---- cuFFT -------------------------------------------------------------

func fftPlan2d(ctx uintptr, nx, ny, typ int) (int, error) {
	var plan, drv C.int
	st := C.htgs_cufft_plan2d(C.uintptr_t(ctx), C.int(nx), C.int(ny), C.int(typ), &plan, &drv)
	if err := libCall(LibCUFFT, "cufftPlan2d", st, drv); err != nil {
		return 0, err
	}
	return int(plan), nil
}

func fftDestroy(ctx uintptr, plan int) error {
	var drv C.int
	st := C.htgs_cufft_destroy(C.uintptr_t(ctx), C.int(plan), &drv)
	return libCall(LibCUFFT, "cufftDestroy", st, drv)
}

func fftVersion() (int, error) {
	var v C.int
	if err := libError(LibCUFFT, "cufftGetVersion", int(C.htgs_cufft_version(&v))); err != nil {
		return 0, err
	}
	return int(v), nil
}

func fftSetStream(ctx uintptr, plan int, s uintptr) error {
	var drv C.int
	st := C.htgs_cufft_set_stream(C.uintptr_t(ctx), C.int(plan), C.uintptr_t(s), &drv)
	return libCall(LibCUFFT, "cufftSetStream", st, drv)
}

func fftExec(ctx uintptr, plan, typ int, in, out DevicePtr, dir int) error {
	var drv C.int
	st := C.htgs_cufft_exec(C.uintptr_t(ctx), C.int(plan), C.int(typ), C.ulonglong(in), C.ulonglong(out), C.int(dir), &drv)
	op := "cufftExecZ2Z"
	switch typ {
	case fftD2Z:
		op = "cufftExecD2Z"
	case fftZ2D:
		op = "cufftExecZ2D"
	}
	return libCall(LibCUFFT, op, st, drv)
}
