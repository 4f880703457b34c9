// Package native loads optimized numerical libraries at run time, without
// cgo: FFTW 3 (libfftw3.so.3) for the stitching FFTs and OpenBLAS
// (libopenblas.so.0) for the matmul block kernel. It uses
// github.com/ebitengine/purego, which calls C functions from a
// CGO_ENABLED=0 build, so the default pure-Go build picks up the fast
// libraries when they are installed and falls back to gonum when they are
// not (the callers decide; this package only reports an error).
//
// # State
//
// A shared library is process-wide state: dlopen returns the same handle
// to every caller, FFTW's planner and OpenBLAS's thread count are global to
// the library. Each library is therefore loaded once per process, by
// [LoadFFTW] and [LoadOpenBLAS] (sync.OnceValues), into an object that is
// immutable after loading except for the state that mirrors the library's
// own global state (the FFTW planner lock, the OpenBLAS thread count). The
// objects are passed explicitly to the code that uses them; nothing else
// in this package is a package-level variable.
//
// Platforms: linux and darwin on amd64 and arm64 (where purego calls C
// without cgo); elsewhere the loaders return [ErrUnsupported].
package native

import "errors"

// ErrUnsupported is returned by the loaders on platforms where libraries
// cannot be loaded without cgo.
var ErrUnsupported = errors.New("native: run-time loading of C libraries is not supported on this platform")
