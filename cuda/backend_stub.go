//go:build !cuda

package cuda

import "unsafe"

// This file is the backend of builds without the cuda tag: pure Go, no
// cgo. Every entry point reports noCUDA, and since no *Device can be
// obtained, nothing beyond Devices, DriverVersion and argument checks is
// reachable.

// noCUDAError is the error of every CUDA operation in this build.
type noCUDAError struct{}

// Error says that the build has no CUDA support.
func (noCUDAError) Error() string {
	return "cuda: no usable CUDA device: built without the cuda tag (rebuild with -tags cuda)"
}

// Unwrap makes errors.Is match both ErrNoDevice and ErrNoCUDA.
func (noCUDAError) Unwrap() []error { return []error{ErrNoDevice, ErrNoCUDA} }

func loadDriver() error           { return noCUDAError{} }
func loadCUBLAS() (string, error) { return "", noCUDAError{} }
func loadCUFFT() (string, error)  { return "", noCUDAError{} }

func drvVersion() (int, error)              { return 0, noCUDAError{} }
func drvDeviceCount() (int, error)          { return 0, noCUDAError{} }
func drvDeviceInfo(int) (deviceInfo, error) { return deviceInfo{}, noCUDAError{} }
func drvPrimaryRetain(int) (uintptr, error) { return 0, noCUDAError{} }
func drvPrimaryRelease(int) error           { return noCUDAError{} }
func drvCtxPush(uintptr) error              { return noCUDAError{} }
func drvCtxPop() error                      { return noCUDAError{} }
func drvCtxCurrent() (uintptr, error)       { return 0, noCUDAError{} }
func drvCtxSync(uintptr) error              { return noCUDAError{} }
func drvMemInfo(uintptr) (int64, int64, error) {
	return 0, 0, noCUDAError{}
}
func drvMemAlloc(uintptr, int64) (DevicePtr, error)               { return 0, noCUDAError{} }
func drvMemFree(uintptr, DevicePtr) error                         { return noCUDAError{} }
func drvHostAlloc(uintptr, int64) (unsafe.Pointer, error)         { return nil, noCUDAError{} }
func drvHostFree(uintptr, unsafe.Pointer) error                   { return noCUDAError{} }
func drvStreamCreate(uintptr) (uintptr, error)                    { return 0, noCUDAError{} }
func drvStreamDestroy(uintptr, uintptr) error                     { return noCUDAError{} }
func drvStreamSync(uintptr, uintptr) error                        { return noCUDAError{} }
func drvEventCreate(uintptr) (uintptr, error)                     { return 0, noCUDAError{} }
func drvEventDestroy(uintptr, uintptr) error                      { return noCUDAError{} }
func drvEventRecord(uintptr, uintptr, uintptr) error              { return noCUDAError{} }
func drvEventSync(uintptr, uintptr) error                         { return noCUDAError{} }
func drvEventQuery(uintptr, uintptr) (bool, error)                { return false, noCUDAError{} }
func drvStreamWait(uintptr, uintptr, uintptr) error               { return noCUDAError{} }
func drvModuleLoad(uintptr, string) (uintptr, error)              { return 0, noCUDAError{} }
func drvModuleUnload(uintptr, uintptr) error                      { return noCUDAError{} }
func drvModuleFunction(uintptr, uintptr, string) (uintptr, error) { return 0, noCUDAError{} }

func drvCopyHtoD(uintptr, DevicePtr, unsafe.Pointer, int64, uintptr, bool) error {
	return noCUDAError{}
}
func drvCopyDtoH(uintptr, unsafe.Pointer, DevicePtr, int64, uintptr, bool) error {
	return noCUDAError{}
}
func drvCopyGoHtoD(uintptr, DevicePtr, uintptr, int64, uintptr) error           { return noCUDAError{} }
func drvCopyGoDtoH(uintptr, uintptr, DevicePtr, int64, uintptr) error           { return noCUDAError{} }
func drvCopyDtoD(uintptr, DevicePtr, DevicePtr, int64, uintptr, bool) error     { return noCUDAError{} }
func drvMemset(uintptr, DevicePtr, byte, int64, uintptr, bool) error            { return noCUDAError{} }
func drvLaunch(uintptr, uintptr, uint32, uint32, uintptr, []uint64, bool) error { return noCUDAError{} }

func blasCreate(uintptr) (uintptr, error)           { return 0, noCUDAError{} }
func blasDestroy(uintptr, uintptr) error            { return noCUDAError{} }
func blasVersion(uintptr, uintptr) (int, error)     { return 0, noCUDAError{} }
func blasSetStream(uintptr, uintptr, uintptr) error { return noCUDAError{} }
func blasDgemm(uintptr, uintptr, bool, bool, int, int, int, float64, DevicePtr, int, DevicePtr, int, float64, DevicePtr, int) error {
	return noCUDAError{}
}

func xtCreate(uintptr) (uintptr, error)            { return 0, noCUDAError{} }
func xtDestroy(uintptr, uintptr) error             { return noCUDAError{} }
func xtDeviceSelect(uintptr, uintptr, []int) error { return noCUDAError{} }
func xtSetBlockDim(uintptr, uintptr, int) error    { return noCUDAError{} }
func xtSetPinning(uintptr, uintptr, bool) error    { return noCUDAError{} }
func xtDgemm(uintptr, uintptr, bool, bool, int, int, int, float64, uintptr, int, uintptr, int, float64, uintptr, int) error {
	return noCUDAError{}
}

func fftPlan2d(uintptr, int, int, int) (int, error)              { return 0, noCUDAError{} }
func fftDestroy(uintptr, int) error                              { return noCUDAError{} }
func fftVersion() (int, error)                                   { return 0, noCUDAError{} }
func fftSetStream(uintptr, int, uintptr) error                   { return noCUDAError{} }
func fftExec(uintptr, int, int, DevicePtr, DevicePtr, int) error { return noCUDAError{} }
