//go:build (linux || darwin) && (amd64 || arm64)

package native

import (
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/ebitengine/purego"
)

const supported = true

// dlopen opens the first of names that loads (RTLD_NOW | RTLD_LOCAL).
func dlopen(names ...string) (handle uintptr, err error) {
	var errs []string
	for _, n := range names {
		h, err := purego.Dlopen(n, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err == nil {
			return h, nil
		}
		errs = append(errs, err.Error())
	}
	return 0, errors.New(strings.Join(errs, "; "))
}

func dlsym(h uintptr, name string) (uintptr, error) { return purego.Dlsym(h, name) }

func dlclose(h uintptr) { _ = purego.Dlclose(h) }

// call calls the C function fn with integer and pointer arguments.
func call(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}

// register binds the Go function variable fptr to the C function fn (for
// signatures with floating-point arguments, which call cannot pass).
func register(fptr any, fn uintptr) { purego.RegisterFunc(fptr, fn) }

// setenvC sets an environment variable in the C library's environment,
// which a CGO_ENABLED=0 program's os.Setenv does not reach: libraries read
// it with getenv.
func setenvC(name, value string) error {
	libc := "libc.so.6"
	if runtime.GOOS == "darwin" {
		libc = "/usr/lib/libSystem.B.dylib"
	}
	h, err := dlopen(libc)
	if err != nil {
		return err
	}
	defer dlclose(h)
	fn, err := dlsym(h, "setenv")
	if err != nil {
		return err
	}
	var setenv func(name, value string, overwrite int32) int32
	register(&setenv, fn)
	if setenv(name, value, 1) != 0 {
		return fmt.Errorf("setenv(%s) failed", name)
	}
	return nil
}
