//go:build cuda && cgo

package cuda

// Host registration and 2-D copies (hostregister.go). The driver functions
// are looked up here, in libcuda.so.1 as htgs_cu_load opened it, so that
// shim.c's tables stay as they are.

/*
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <cuda.h>
#include "shim.h"

static __typeof__(cuMemHostRegister) *p_htgs_reg;
static __typeof__(cuMemHostUnregister) *p_htgs_unreg;
static __typeof__(cuMemcpy2DAsync) *p_htgs_copy2d;
static __typeof__(cuEventCreate) *p_htgs_event_create;
static __typeof__(cuEventElapsedTime) *p_htgs_event_elapsed;

// htgs_reg_load resolves the functions; the Go side calls it once, after
// the driver is loaded.
static int htgs_reg_load(char *err, size_t errlen) {
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (h == NULL) {
		const char *e = dlerror();
		snprintf(err, errlen, "%s", e ? e : "libcuda.so.1 not loaded");
		return -2;
	}
	p_htgs_reg = (__typeof__(p_htgs_reg))dlsym(h, "cuMemHostRegister_v2");
	p_htgs_unreg = (__typeof__(p_htgs_unreg))dlsym(h, "cuMemHostUnregister");
	p_htgs_copy2d = (__typeof__(p_htgs_copy2d))dlsym(h, "cuMemcpy2DAsync_v2");
	p_htgs_event_create = (__typeof__(p_htgs_event_create))dlsym(h, "cuEventCreate");
	p_htgs_event_elapsed = (__typeof__(p_htgs_event_elapsed))dlsym(h, "cuEventElapsedTime");
	if (p_htgs_reg == NULL || p_htgs_unreg == NULL || p_htgs_copy2d == NULL || p_htgs_event_create == NULL || p_htgs_event_elapsed == NULL) {
		snprintf(err, errlen, "libcuda.so.1: missing cuMemHostRegister_v2, cuMemHostUnregister, cuMemcpy2DAsync_v2, cuEventCreate or cuEventElapsedTime");
		return -2;
	}
	return 0;
}

static int htgs_reg_enter(uintptr_t ctx, int *pushed) {
	uintptr_t cur = 0;
	*pushed = 0;
	int r = htgs_cu_ctx_current(&cur);
	if (r != 0 || cur == ctx) {
		return r;
	}
	r = htgs_cu_ctx_push(ctx);
	if (r == 0) {
		*pushed = 1;
	}
	return r;
}

static int htgs_reg_leave(int pushed, int r) {
	if (pushed) {
		int r2 = htgs_cu_ctx_pop();
		if (r == 0) {
			r = r2;
		}
	}
	return r;
}

static int htgs_cu_host_register(uintptr_t ctx, uintptr_t addr, unsigned long long bytes) {
	int pushed;
	int r = htgs_reg_enter(ctx, &pushed);
	if (r != 0) {
		return r;
	}
	r = (int)p_htgs_reg((void *)addr, (size_t)bytes, CU_MEMHOSTREGISTER_PORTABLE);
	return htgs_reg_leave(pushed, r);
}

static int htgs_cu_host_unregister(uintptr_t ctx, uintptr_t addr) {
	int pushed;
	int r = htgs_reg_enter(ctx, &pushed);
	if (r != 0) {
		return r;
	}
	r = (int)p_htgs_unreg((void *)addr);
	return htgs_reg_leave(pushed, r);
}

// htgs_cu_event_create_blocking creates an event without timing whose
// synchronization blocks the calling thread instead of spinning.
static int htgs_cu_event_create_blocking(uintptr_t ctx, uintptr_t *event) {
	int pushed;
	int r = htgs_reg_enter(ctx, &pushed);
	if (r != 0) {
		return r;
	}
	CUevent e = NULL;
	r = (int)p_htgs_event_create(&e, CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC);
	*event = (uintptr_t)e;
	return htgs_reg_leave(pushed, r);
}

// htgs_cu_event_create_timed creates an event that records the time it
// completes (for cuEventElapsedTime).
static int htgs_cu_event_create_timed(uintptr_t ctx, uintptr_t *event) {
	int pushed;
	int r = htgs_reg_enter(ctx, &pushed);
	if (r != 0) {
		return r;
	}
	CUevent e = NULL;
	r = (int)p_htgs_event_create(&e, CU_EVENT_DEFAULT);
	*event = (uintptr_t)e;
	return htgs_reg_leave(pushed, r);
}

// htgs_cu_event_elapsed gives the milliseconds from event start to event
// end, both completed.
static int htgs_cu_event_elapsed(uintptr_t ctx, uintptr_t start, uintptr_t end, float *ms) {
	int pushed;
	int r = htgs_reg_enter(ctx, &pushed);
	if (r != 0) {
		return r;
	}
	r = (int)p_htgs_event_elapsed(ms, (CUevent)start, (CUevent)end);
	return htgs_reg_leave(pushed, r);
}

// htgs_cu_copy2d queues a pitched copy between device memory dev and host
// memory host: to the device when todev is non-zero.
static int htgs_cu_copy2d(uintptr_t ctx, int todev, unsigned long long dev, unsigned long long dpitch,
			  uintptr_t host, unsigned long long hpitch, unsigned long long width,
			  unsigned long long height, uintptr_t stream) {
	CUDA_MEMCPY2D c;
	memset(&c, 0, sizeof c);
	if (todev) {
		c.srcMemoryType = CU_MEMORYTYPE_HOST;
		c.srcHost = (const void *)host;
		c.srcPitch = (size_t)hpitch;
		c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
		c.dstDevice = (CUdeviceptr)dev;
		c.dstPitch = (size_t)dpitch;
	} else {
		c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
		c.srcDevice = (CUdeviceptr)dev;
		c.srcPitch = (size_t)dpitch;
		c.dstMemoryType = CU_MEMORYTYPE_HOST;
		c.dstHost = (void *)host;
		c.dstPitch = (size_t)hpitch;
	}
	c.WidthInBytes = (size_t)width;
	c.Height = (size_t)height;
	int pushed;
	int r = htgs_reg_enter(ctx, &pushed);
	if (r != 0) {
		return r;
	}
	r = (int)p_htgs_copy2d(&c, (CUstream)stream);
	return htgs_reg_leave(pushed, r);
}
*/
import "C"

import (
	"fmt"
	"sync"
)

var registerLoad = sync.OnceValue(func() error {
	if err := loadDriver(); err != nil {
		return err
	}
	var buf [512]C.char
	if C.htgs_reg_load(&buf[0], C.size_t(len(buf))) != 0 {
		return fmt.Errorf("%w: %s", ErrLibrary, C.GoString(&buf[0]))
	}
	return nil
})

func drvHostRegister(ctx, addr uintptr, bytes int64) error {
	if err := registerLoad(); err != nil {
		return err
	}
	return cuError("cuMemHostRegister", C.htgs_cu_host_register(C.uintptr_t(ctx), C.uintptr_t(addr), C.ulonglong(bytes)))
}

func drvHostUnregister(ctx, addr uintptr) error {
	if err := registerLoad(); err != nil {
		return err
	}
	return cuError("cuMemHostUnregister", C.htgs_cu_host_unregister(C.uintptr_t(ctx), C.uintptr_t(addr)))
}

func drvCopy2D(ctx uintptr, toDevice bool, dev DevicePtr, dpitch int64, host uintptr, hpitch, width, height int64, s uintptr) error {
	if err := registerLoad(); err != nil {
		return err
	}
	return cuError("cuMemcpy2DAsync", C.htgs_cu_copy2d(C.uintptr_t(ctx), cbool(toDevice), C.ulonglong(dev), C.ulonglong(dpitch),
		C.uintptr_t(host), C.ulonglong(hpitch), C.ulonglong(width), C.ulonglong(height), C.uintptr_t(s)))
}

func drvEventCreateBlocking(ctx uintptr) (uintptr, error) {
	if err := registerLoad(); err != nil {
		return 0, err
	}
	var h C.uintptr_t
	if err := cuError("cuEventCreate", C.htgs_cu_event_create_blocking(C.uintptr_t(ctx), &h)); err != nil {
		return 0, err
	}
	return uintptr(h), nil
}

func drvEventCreateTimed(ctx uintptr) (uintptr, error) {
	if err := registerLoad(); err != nil {
		return 0, err
	}
	var h C.uintptr_t
	if err := cuError("cuEventCreate", C.htgs_cu_event_create_timed(C.uintptr_t(ctx), &h)); err != nil {
		return 0, err
	}
	return uintptr(h), nil
}

func drvEventElapsed(ctx, start, end uintptr) (float32, error) {
	if err := registerLoad(); err != nil {
		return 0, err
	}
	var ms C.float
	if err := cuError("cuEventElapsedTime", C.htgs_cu_event_elapsed(C.uintptr_t(ctx), C.uintptr_t(start), C.uintptr_t(end), &ms)); err != nil {
		return 0, err
	}
	return float32(ms), nil
}
