//go:build !cuda

package cuda

func drvHostRegister(uintptr, uintptr, int64) error { return noCUDAError{} }
func drvHostUnregister(uintptr, uintptr) error      { return noCUDAError{} }
func drvCopy2D(uintptr, bool, DevicePtr, int64, uintptr, int64, int64, int64, uintptr) error {
	return noCUDAError{}
}

func drvEventCreateBlocking(uintptr) (uintptr, error)            { return 0, noCUDAError{} }
func drvEventCreateTimed(uintptr) (uintptr, error)               { return 0, noCUDAError{} }
func drvEventElapsed(uintptr, uintptr, uintptr) (float32, error) { return 0, noCUDAError{} }
