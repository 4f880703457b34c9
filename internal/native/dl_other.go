//go:build !((linux || darwin) && (amd64 || arm64))

package native

const supported = false

func dlopen(...string) (uintptr, error)      { return 0, ErrUnsupported }
func dlsym(uintptr, string) (uintptr, error) { return 0, ErrUnsupported }
func dlclose(uintptr)                        {}
func call(uintptr, ...uintptr) uintptr       { panic(ErrUnsupported) }
func register(any, uintptr)                  { panic(ErrUnsupported) }
func setenvC(string, string) error           { return ErrUnsupported }
