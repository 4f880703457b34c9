//go:build cuda && !cgo

package cuda

// The cuda build tag needs cgo: the backend is C (backend_cuda.go, shim.c).
// This reference to an undefined name makes such a build fail with a
// message that says so, instead of a list of missing functions.
var _ = the_cuda_build_tag_requires_cgo_set_CGO_ENABLED_1
