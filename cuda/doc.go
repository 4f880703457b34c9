// Package cuda runs work on NVIDIA GPUs through the CUDA driver API, cuBLAS
// and cuFFT, and implements the framework's [device.Device] for GPUs.
//
// # Builds
//
// CUDA support is compiled in only with the cuda build tag (go build
// -tags cuda), which needs cgo and the CUDA headers (cuda.h, cublas_v2.h,
// cufft.h; see scripts/install-cuda-headers.sh). Without the tag the
// package is pure Go, compiles with CGO_ENABLED=0 and has the same API:
// [Devices] returns an error wrapping [ErrNoCUDA] (and [ErrNoDevice]), and
// nothing else can be reached without a device. Callers therefore compile
// in both builds and fall back to the CPU when [Devices] fails.
//
// Even with the tag nothing is linked against CUDA: libcuda.so.1 is opened
// with dlopen on the first call to [Devices] (so a binary starts on a
// machine without a driver and [Devices] reports [ErrNoDevice]), and cuBLAS
// and cuFFT are opened by soname when the first handle or plan is made
// (libcublas.so.13, .12, .11; libcufft.so.12, .11, .10; then the same
// names in /usr/local/cuda/lib64), so a binary built against the CUDA 11.8
// headers runs with a CUDA 12 or 13 driver and libraries. The environment variables HTGS_CUBLAS and HTGS_CUFFT, when
// set, name a library file to try first.
//
// gorgonia.org/cu is deliberately not used: its package initializer calls
// cuInit and exits the process (os.Exit(1)) when no GPU is usable, which
// would kill every cuda-tagged binary, tests included, on a machine
// without a GPU; it also routes calls through a locked goroutine and lacks
// pinned host memory, streams for cuBLAS and cuFFT.
//
// # Contexts and threads
//
// Each [Device] uses the device's primary context (the one the CUDA
// runtime, and so cuBLAS and cuFFT, use too), retained on first use and
// released by [Device.Close]. Every call of this package makes the right
// context current for the duration of the call, inside a single C call, so
// any function may be called from any goroutine. A GPU task should still
// call [Bind] in its Initialize: it locks the goroutine to its OS thread
// and keeps the context current there, so each later call finds its
// context already current and costs one cgo call (no push and pop, and no
// hand-off to another goroutine).
//
// # Memory and streams
//
// [DeviceMem] is device memory, [HostMem] page-locked (pinned) host memory.
// Package [github.com/gohtgs/htgs/cuda/cudapool] makes them for memmgr's
// memory pools: this package is a driver binding below the framework and
// imports none of it but device. Copies and kernels are queued on a
// [Stream]: copies between [HostMem] and [DeviceMem] are asynchronous, so
// with separate streams an upload, a computation and a download can be in
// flight at once; an [Event] orders work across streams without blocking
// the host. A nil *Stream means the device's legacy default stream, and the
// call then waits for completion.
//
// # Libraries and kernels
//
// [BLAS] wraps a cuBLAS handle (DGEMM on row-major matrices), [FFT2D] a
// pair of cuFFT plans (2-D complex, or real-to-complex and back). The
// package has no kernels of its own: a program's kernels are CUDA C beside
// the code that uses them (stitching/kernels, pathology/kernels),
// compiled by scripts/gen-cuda-ptx.sh (nvcc) to PTX and to a fat binary
// with machine code for sm_80 and sm_90, embedded in the program and
// loaded with [Device.LoadModule]; [Function.Launch] runs them.
//
// # Global state
//
// The only package-level mutable state is what run-time loading of CUDA
// requires: the dlopen handles and function-pointer tables of libcuda,
// cuBLAS and cuFFT (in C), each filled once under a sync.Once.
package cuda
