package cuda

import (
	"errors"
	"fmt"
)

// Sentinel errors. Errors returned by this package wrap one of these (or
// are an [*Error]) so callers can test them with [errors.Is].
var (
	// ErrNoDevice means that no CUDA device can be used: the package was
	// built without the cuda tag, libcuda.so.1 is missing, cuInit failed,
	// or the driver reports no devices. Every "no GPU here" error wraps it.
	ErrNoDevice = errors.New("cuda: no usable CUDA device")

	// ErrNoCUDA means the package was built without the cuda build tag, so
	// it has no CUDA support at all. Errors wrapping it also wrap
	// ErrNoDevice.
	ErrNoCUDA = errors.New("cuda: built without the cuda tag (rebuild with -tags cuda)")

	// ErrLibrary means a CUDA library (cuBLAS, cuFFT) could not be loaded at
	// run time: no soname it was looked up by opened, or a function is
	// missing from it.
	ErrLibrary = errors.New("cuda: CUDA library not available")

	// ErrWrongDevice means a [device.Device] that is not a *cuda.Device
	// (for example a CPU) was given where a GPU is required, or buffers,
	// streams and handles of different devices were mixed.
	ErrWrongDevice = errors.New("cuda: not a CUDA device of this operation")

	// ErrClosed means a device, stream, event or handle was used after
	// Close.
	ErrClosed = errors.New("cuda: use after Close")

	// ErrSize means buffer sizes or dimensions do not fit the operation.
	ErrSize = errors.New("cuda: size mismatch")

	// ErrOutOfMemory is matched (through [*Error.Is]) by allocation
	// failures of the driver, cuBLAS and cuFFT.
	ErrOutOfMemory = errors.New("cuda: out of memory")
)

// Library names used in [Error.Lib].
const (
	LibDriver = "driver" // the CUDA driver API (libcuda.so.1)
	LibCUBLAS = "cublas" // cuBLAS
	LibCUFFT  = "cufft"  // cuFFT
)

// Error is a failed call into CUDA: a driver API call, or a cuBLAS or cuFFT
// call.
type Error struct {
	Lib  string // LibDriver, LibCUBLAS or LibCUFFT
	Op   string // the failed call, e.g. "cuMemAlloc"
	Code int    // the status code the call returned
	Name string // the symbolic name of Code, e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Msg  string // the library's description of Code, if it gives one
}

// Error formats the call, the symbolic code and the description.
func (e *Error) Error() string {
	s := fmt.Sprintf("cuda: %s: %s (%d)", e.Op, e.Name, e.Code)
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	return s
}

// Status codes that mean "out of memory" in each library.
const (
	cudaErrorOutOfMemory  = 2 // CUDA_ERROR_OUT_OF_MEMORY
	cudaErrorNoDevice     = 100
	cublasStatusAllocFail = 3 // CUBLAS_STATUS_ALLOC_FAILED
	cufftAllocFailed      = 2 // CUFFT_ALLOC_FAILED
)

// Is reports whether the error is an out-of-memory condition (target
// ErrOutOfMemory) or the driver's "no device" (target ErrNoDevice).
func (e *Error) Is(target error) bool {
	switch target {
	case ErrOutOfMemory:
		switch e.Lib {
		case LibDriver:
			return e.Code == cudaErrorOutOfMemory
		case LibCUBLAS:
			return e.Code == cublasStatusAllocFail
		case LibCUFFT:
			return e.Code == cufftAllocFailed
		}
	case ErrNoDevice:
		return e.Lib == LibDriver && e.Code == cudaErrorNoDevice
	}
	return false
}

// cublasStatusName names a cublasStatus_t value.
func cublasStatusName(code int) string {
	switch code {
	case 0:
		return "CUBLAS_STATUS_SUCCESS"
	case 1:
		return "CUBLAS_STATUS_NOT_INITIALIZED"
	case 3:
		return "CUBLAS_STATUS_ALLOC_FAILED"
	case 7:
		return "CUBLAS_STATUS_INVALID_VALUE"
	case 8:
		return "CUBLAS_STATUS_ARCH_MISMATCH"
	case 11:
		return "CUBLAS_STATUS_MAPPING_ERROR"
	case 13:
		return "CUBLAS_STATUS_EXECUTION_FAILED"
	case 14:
		return "CUBLAS_STATUS_INTERNAL_ERROR"
	case 15:
		return "CUBLAS_STATUS_NOT_SUPPORTED"
	case 16:
		return "CUBLAS_STATUS_LICENSE_ERROR"
	}
	return "CUBLAS_STATUS_UNKNOWN"
}

// cufftResultName names a cufftResult value.
func cufftResultName(code int) string {
	names := [...]string{
		"CUFFT_SUCCESS", "CUFFT_INVALID_PLAN", "CUFFT_ALLOC_FAILED", "CUFFT_INVALID_TYPE",
		"CUFFT_INVALID_VALUE", "CUFFT_INTERNAL_ERROR", "CUFFT_EXEC_FAILED", "CUFFT_SETUP_FAILED",
		"CUFFT_INVALID_SIZE", "CUFFT_UNALIGNED_DATA", "CUFFT_INCOMPLETE_PARAMETER_LIST",
		"CUFFT_INVALID_DEVICE", "CUFFT_PARSE_ERROR", "CUFFT_NO_WORKSPACE", "CUFFT_NOT_IMPLEMENTED",
		"CUFFT_LICENSE_ERROR", "CUFFT_NOT_SUPPORTED",
	}
	if code >= 0 && code < len(names) {
		return names[code]
	}
	return "CUFFT_UNKNOWN"
}

// errNotLoaded is the shim's status for a call into a library that was not
// loaded (HTGS_ERR_NOT_LOADED in shim.h).
const errNotLoaded = -1

// libError returns the *Error of a cuBLAS or cuFFT status, or nil for
// success (0).
func libError(lib, op string, code int) error {
	if code == 0 {
		return nil
	}
	var name string
	switch {
	case code == errNotLoaded:
		name = "HTGS_ERR_NOT_LOADED"
	case lib == LibCUFFT:
		name = cufftResultName(code)
	default:
		name = cublasStatusName(code)
	}
	return &Error{Lib: lib, Op: op, Code: code, Name: name}
}
