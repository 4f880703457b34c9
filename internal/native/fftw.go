package native

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// FFTW planner flags (fftw3.h).
const (
	FFTWMeasure        = 0
	FFTWDestroyInput   = 1 << 0
	FFTWUnaligned      = 1 << 1
	FFTWPreserveInput  = 1 << 4
	FFTWEstimate       = 1 << 6
	FFTWWisdomOnly     = 1 << 21
	fftwSoname         = "libfftw3.so.3"
	fftwDarwinLibName  = "libfftw3.3.dylib"
	fftwHomebrewPrefix = "/opt/homebrew/lib/"
)

// FFTW is the loaded double-precision FFTW 3 library. Plans are created and
// destroyed under a lock that the object holds (FFTW's planner is not
// thread-safe); executing a plan on new arrays ([FFTW.ExecR2C],
// [FFTW.ExecC2R]) is thread-safe and takes no lock, so each goroutine
// executes its own plan on its own buffers concurrently.
type FFTW struct {
	version string
	planMu  sync.Mutex // serializes the planner (plan creation, destruction)
	shared  map[planKey]Plan

	planR2C, planC2R, execR2C, execC2R, destroy, alignmentOf uintptr
}

// Plan is an FFTW plan (fftw_plan).
type Plan uintptr

// Dim is one dimension of a guru plan (fftw_iodim): N points, input and
// output strides IS and OS in elements.
type Dim struct{ N, IS, OS int32 }

// LoadFFTW loads libfftw3 once per process and returns it, or the reason it
// is not available (install Debian's libfftw3-double3).
var LoadFFTW = sync.OnceValues(loadFFTW)

func loadFFTW() (*FFTW, error) {
	names := []string{fftwSoname, "libfftw3.so", fftwDarwinLibName,
		fftwHomebrewPrefix + fftwDarwinLibName, "/usr/local/lib/" + fftwDarwinLibName}
	h, err := dlopen(names...)
	if err != nil {
		return nil, fmt.Errorf("native: cannot load FFTW (install libfftw3-double3): %w", err)
	}
	f := &FFTW{}
	for _, s := range []struct {
		name string
		p    *uintptr
	}{
		{"fftw_plan_guru_dft_r2c", &f.planR2C},
		{"fftw_plan_guru_dft_c2r", &f.planC2R},
		{"fftw_execute_dft_r2c", &f.execR2C},
		{"fftw_execute_dft_c2r", &f.execC2R},
		{"fftw_destroy_plan", &f.destroy},
		{"fftw_alignment_of", &f.alignmentOf},
	} {
		if *s.p, err = dlsym(h, s.name); err != nil {
			dlclose(h)
			return nil, fmt.Errorf("native: FFTW: %w", err)
		}
	}
	f.version = "FFTW 3"
	if v, err := dlsym(h, "fftw_version"); err == nil && v != 0 {
		f.version = cString(v)
	}
	return f, nil
}

// Version returns the library's version string, such as
// "fftw-3.3.10-sse2-avx".
func (f *FFTW) Version() string { return f.version }

// PlanR2C creates a real-to-complex guru plan of rank len(dims) (the last
// dimension is the halved one) on the arrays in and out, which must stay
// valid during the call. It returns 0 if FFTW cannot make the plan.
func (f *FFTW) PlanR2C(dims []Dim, in *float64, out *complex128, flags uint32) Plan {
	f.planMu.Lock()
	defer f.planMu.Unlock()
	return Plan(f.planLocked(f.planR2C, dims, unsafe.Pointer(in), unsafe.Pointer(out), flags))
}

// PlanC2R creates a complex-to-real guru plan (see [FFTW.PlanR2C]).
func (f *FFTW) PlanC2R(dims []Dim, in *complex128, out *float64, flags uint32) Plan {
	f.planMu.Lock()
	defer f.planMu.Unlock()
	return Plan(f.planLocked(f.planC2R, dims, unsafe.Pointer(in), unsafe.Pointer(out), flags))
}

// MaxSharedPlans is the number of geometries [FFTW.SharedR2C] and
// [FFTW.SharedC2R] keep plans for.
const MaxSharedPlans = 64

// planKey is the geometry of a shared plan.
type planKey struct {
	c2r        bool
	rank       int
	dims       [3]Dim
	flags      uint32
	alignClass int
}

// SharedR2C returns an r2c plan of the geometry dims (rank 1 to 3) with
// flags, for arrays of FFTW alignment class alignClass, and whether it is
// shared. The first request for a geometry plans it on the arrays that
// arrays returns (of that class, valid during the call) and keeps the plan
// for the life of the process; later requests, from any goroutine, get the
// same plan without planning again, so each task copy of a pipeline does
// not plan (and wait for the planner's lock) once more. A shared plan must
// not be destroyed. Once MaxSharedPlans geometries are kept, or for other
// ranks, the plan is the caller's own (shared false): destroy it with
// [FFTW.Destroy]. It returns 0 if FFTW cannot make the plan.
func (f *FFTW) SharedR2C(dims []Dim, flags uint32, alignClass int, arrays func() (*float64, *complex128)) (Plan, bool) {
	return f.sharedPlan(false, dims, flags, alignClass, func() uintptr {
		in, out := arrays()
		return f.planLocked(f.planR2C, dims, unsafe.Pointer(in), unsafe.Pointer(out), flags)
	})
}

// SharedC2R is [FFTW.SharedR2C] for c2r plans.
func (f *FFTW) SharedC2R(dims []Dim, flags uint32, alignClass int, arrays func() (*complex128, *float64)) (Plan, bool) {
	return f.sharedPlan(true, dims, flags, alignClass, func() uintptr {
		in, out := arrays()
		return f.planLocked(f.planC2R, dims, unsafe.Pointer(in), unsafe.Pointer(out), flags)
	})
}

func (f *FFTW) sharedPlan(c2r bool, dims []Dim, flags uint32, alignClass int, plan func() uintptr) (Plan, bool) {
	f.planMu.Lock()
	defer f.planMu.Unlock()
	k := planKey{c2r: c2r, rank: len(dims), flags: flags, alignClass: alignClass}
	if len(dims) < 1 || len(dims) > len(k.dims) {
		return Plan(plan()), false
	}
	copy(k.dims[:], dims)
	if p, ok := f.shared[k]; ok {
		return p, true
	}
	p := Plan(plan())
	if p == 0 || len(f.shared) >= MaxSharedPlans {
		return p, false
	}
	if f.shared == nil {
		f.shared = make(map[planKey]Plan)
	}
	f.shared[k] = p
	return p, true
}

// planLocked calls a guru planner on the arrays in and out, which it keeps
// alive during the call; the caller holds planMu.
func (f *FFTW) planLocked(fn uintptr, dims []Dim, in, out unsafe.Pointer, flags uint32) uintptr {
	p := call(fn, uintptr(len(dims)), uintptr(unsafe.Pointer(&dims[0])), 0, 0,
		uintptr(in), uintptr(out), uintptr(flags))
	runtime.KeepAlive(dims)
	runtime.KeepAlive(in)
	runtime.KeepAlive(out)
	return p
}

// Destroy frees a plan.
func (f *FFTW) Destroy(p Plan) {
	if p == 0 {
		return
	}
	f.planMu.Lock()
	defer f.planMu.Unlock()
	call(f.destroy, uintptr(p))
}

// ExecR2C executes an r2c plan on new arrays, which must have the sizes and
// the alignment ([FFTW.AlignmentOf]) of the arrays it was planned with.
// Thread-safe. The caller keeps in and out alive (runtime.KeepAlive).
func (f *FFTW) ExecR2C(p Plan, in *float64, out *complex128) {
	call(f.execR2C, uintptr(p), uintptr(unsafe.Pointer(in)), uintptr(unsafe.Pointer(out)))
}

// ExecC2R executes a c2r plan on new arrays (see [FFTW.ExecR2C]); it
// overwrites in.
func (f *FFTW) ExecC2R(p Plan, in *complex128, out *float64) {
	call(f.execC2R, uintptr(p), uintptr(unsafe.Pointer(in)), uintptr(unsafe.Pointer(out)))
}

// AlignmentOf returns FFTW's alignment class of p (fftw_alignment_of):
// arrays passed to a plan's new-array execute function must have the
// class of the arrays it was planned with.
func (f *FFTW) AlignmentOf(p unsafe.Pointer) int {
	return int(int32(call(f.alignmentOf, uintptr(p))))
}

// cString copies the NUL-terminated C string at p.
func cString(p uintptr) string {
	if p == 0 {
		return ""
	}
	ptr := *(*unsafe.Pointer)(unsafe.Pointer(&p)) // C memory: not moved by Go
	var n int
	for *(*byte)(unsafe.Add(ptr, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(ptr), n))
}
