package cuda

// Tests of the pure-Go layer (argument checks, errors, views): they run in
// every build, with or without the cuda tag and a GPU.

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"unsafe"

	"gonum.org/v1/gonum/blas"

	"github.com/gohtgs/htgs/device"
)

var _ device.Device = (*Device)(nil)

func TestErrorFormatAndIs(t *testing.T) {
	e := &Error{Lib: LibDriver, Op: "cuMemAlloc", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Msg: "out of memory"}
	if got, want := e.Error(), "cuda: cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	wrapped := errors.Join(errors.New("context"), e)
	if !errors.Is(wrapped, ErrOutOfMemory) {
		t.Error("driver code 2 does not match ErrOutOfMemory")
	}
	if errors.Is(e, ErrNoDevice) {
		t.Error("driver code 2 matches ErrNoDevice")
	}
	noDev := &Error{Lib: LibDriver, Op: "cuInit", Code: 100, Name: "CUDA_ERROR_NO_DEVICE"}
	if !errors.Is(noDev, ErrNoDevice) || errors.Is(noDev, ErrOutOfMemory) {
		t.Error("driver code 100 should match ErrNoDevice only")
	}
	if !errors.Is(libError(LibCUBLAS, "cublasCreate", 3), ErrOutOfMemory) {
		t.Error("CUBLAS_STATUS_ALLOC_FAILED does not match ErrOutOfMemory")
	}
	if !errors.Is(libError(LibCUFFT, "cufftPlan2d", 2), ErrOutOfMemory) {
		t.Error("CUFFT_ALLOC_FAILED does not match ErrOutOfMemory")
	}
	if errors.Is(libError(LibCUFFT, "cufftPlan2d", 3), ErrOutOfMemory) {
		t.Error("CUFFT_INVALID_TYPE matches ErrOutOfMemory")
	}
}

func TestLibError(t *testing.T) {
	if err := libError(LibCUBLAS, "cublasDgemm", 0); err != nil {
		t.Fatalf("status 0: %v", err)
	}
	cases := []struct {
		lib  string
		code int
		name string
	}{
		{LibCUBLAS, 7, "CUBLAS_STATUS_INVALID_VALUE"},
		{LibCUBLAS, 99, "CUBLAS_STATUS_UNKNOWN"},
		{LibCUFFT, 8, "CUFFT_INVALID_SIZE"},
		{LibCUFFT, 16, "CUFFT_NOT_SUPPORTED"},
		{LibCUFFT, 17, "CUFFT_UNKNOWN"},
		{LibCUFFT, errNotLoaded, "HTGS_ERR_NOT_LOADED"},
	}
	for _, c := range cases {
		err := libError(c.lib, "op", c.code)
		var e *Error
		if !errors.As(err, &e) || e.Name != c.name || e.Code != c.code || e.Lib != c.lib {
			t.Errorf("libError(%s, %d) = %#v, want name %s", c.lib, c.code, err, c.name)
		}
	}
}

func TestCheckGemm(t *testing.T) {
	const f = 8 // bytes per element
	ok := []struct {
		name    string
		tA, tB  blas.Transpose
		m, n, k int
		a, lda  int
		b, ldb  int
		c, ldc  int
	}{
		{"square", blas.NoTrans, blas.NoTrans, 4, 4, 4, 16, 4, 16, 4, 16, 4},
		{"rect", blas.NoTrans, blas.NoTrans, 2, 3, 5, 10, 5, 15, 3, 6, 3},
		{"transA", blas.Trans, blas.NoTrans, 2, 3, 5, 10, 2, 15, 3, 6, 3},
		{"transB", blas.NoTrans, blas.ConjTrans, 2, 3, 5, 10, 5, 15, 5, 6, 3},
		{"padded", blas.NoTrans, blas.NoTrans, 2, 2, 2, 5, 3, 6, 4, 4, 2},
		{"empty", blas.NoTrans, blas.NoTrans, 0, 0, 0, 0, 1, 0, 1, 0, 1},
	}
	for _, c := range ok {
		if err := checkGemm(c.tA, c.tB, c.m, c.n, c.k, int64(c.a*f), c.lda, int64(c.b*f), c.ldb, int64(c.c*f), c.ldc); err != nil {
			t.Errorf("%s: unexpected error %v", c.name, err)
		}
	}
	bad := []struct {
		name    string
		tA, tB  blas.Transpose
		m, n, k int
		a, lda  int
		b, ldb  int
		c, ldc  int
	}{
		{"bad transpose", 'X', blas.NoTrans, 2, 2, 2, 4, 2, 4, 2, 4, 2},
		{"negative", blas.NoTrans, blas.NoTrans, -1, 2, 2, 4, 2, 4, 2, 4, 2},
		{"lda too small", blas.NoTrans, blas.NoTrans, 2, 3, 5, 10, 4, 15, 3, 6, 3},
		{"lda too small transposed", blas.Trans, blas.NoTrans, 2, 3, 5, 10, 1, 15, 3, 6, 3},
		{"A too short", blas.NoTrans, blas.NoTrans, 2, 3, 5, 9, 5, 15, 3, 6, 3},
		{"B too short", blas.NoTrans, blas.NoTrans, 2, 3, 5, 10, 5, 14, 3, 6, 3},
		{"C too short", blas.NoTrans, blas.NoTrans, 2, 3, 5, 10, 5, 15, 3, 5, 3},
		{"ldc too small", blas.NoTrans, blas.NoTrans, 2, 3, 5, 10, 5, 15, 3, 6, 2},
		{"too large", blas.NoTrans, blas.NoTrans, math.MaxInt32 + 1, 1, 1, 1, 1, 1, 1, 1, 1},
	}
	for _, c := range bad {
		err := checkGemm(c.tA, c.tB, c.m, c.n, c.k, int64(c.a*f), c.lda, int64(c.b*f), c.ldb, int64(c.c*f), c.ldc)
		if !errors.Is(err, ErrSize) {
			t.Errorf("%s: got %v, want an error wrapping ErrSize", c.name, err)
		}
	}
}

func TestDeviceMemSlice(t *testing.T) {
	d := &Device{ordinal: 3}
	m := DeviceMem{ptr: 0x1000, size: 100, dev: d}
	s := m.Slice(10, 20)
	if s.Ptr() != 0x100a || s.Size() != 20 || s.Device() != d {
		t.Fatalf("Slice(10, 20) = ptr %#x size %d", s.Ptr(), s.Size())
	}
	if e := m.Slice(100, 0); e.Size() != 0 || e.Ptr() != 0x1000+100 {
		t.Errorf("empty slice at the end: %+v", e)
	}
	if err := s.Free(); !errors.Is(err, ErrSize) {
		t.Errorf("Free of a slice: %v, want ErrSize", err)
	}
	if err := (DeviceMem{}).Free(); err != nil {
		t.Errorf("Free of the zero DeviceMem: %v", err)
	}
	for _, r := range [][2]int64{{-1, 1}, {0, 101}, {90, 11}, {101, 0}, {5, -1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Slice(%d, %d) of 100 bytes did not panic", r[0], r[1])
				}
			}()
			m.Slice(r[0], r[1])
		}()
	}
}

func TestHostMemViews(t *testing.T) {
	// The views only reinterpret memory, so Go memory stands in for pinned
	// memory here (nothing is passed to CUDA).
	backing := make([]float64, 4)
	h := HostMem{p: unsafe.Pointer(&backing[0]), size: 32}
	f := HostSlice[float64](h)
	if len(f) != 4 {
		t.Fatalf("HostSlice[float64] len %d, want 4", len(f))
	}
	f[2] = 1.5
	if backing[2] != 1.5 {
		t.Error("HostSlice does not alias the memory")
	}
	if b := h.Bytes(); len(b) != 32 {
		t.Errorf("Bytes len %d, want 32", len(b))
	}
	if c := HostSlice[complex128](h.Slice(0, 24)); len(c) != 1 {
		t.Errorf("partial trailing element: len %d, want 1", len(c))
	}
	s := h.Slice(8, 16)
	if g := HostSlice[float64](s); len(g) != 2 || &g[1] != &backing[2] {
		t.Error("Slice(8, 16) does not start at element 1")
	}
	if err := s.Free(); !errors.Is(err, ErrSize) {
		t.Errorf("Free of a slice: %v, want ErrSize", err)
	}
	if HostSlice[float64](HostMem{}) != nil || (HostMem{}).Bytes() != nil {
		t.Error("views of the zero HostMem are not nil")
	}
	if err := (HostMem{}).Free(); err != nil {
		t.Errorf("Free of the zero HostMem: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("HostSlice[float64] at offset 1 did not panic")
		}
	}()
	HostSlice[float64](h.Slice(1, 8))
}

func TestNonCUDADevicesRefused(t *testing.T) {
	cpu := device.Host{Index: 0}
	if _, err := Bind(context.Background(), cpu); !errors.Is(err, ErrWrongDevice) {
		t.Errorf("Bind(cpu): %v, want ErrWrongDevice", err)
	}
	if Bound(cpu) {
		t.Error("Bound(cpu) is true")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Bind(ctx, &Device{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Bind with a cancelled context: %v, want context.Canceled", err)
	}
}

func TestZeroDeviceUnusable(t *testing.T) {
	var d Device
	if _, err := d.Alloc(8); !errors.Is(err, ErrWrongDevice) {
		t.Errorf("zero Device Alloc: %v, want ErrWrongDevice", err)
	}
	if _, err := d.Alloc(0); !errors.Is(err, ErrSize) {
		t.Errorf("Alloc(0): %v, want ErrSize", err)
	}
	if _, err := d.NewStream(); !errors.Is(err, ErrWrongDevice) {
		t.Errorf("zero Device NewStream: %v, want ErrWrongDevice", err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("Close of an unused Device: %v", err)
	}
	if _, err := d.Alloc(8); !errors.Is(err, ErrClosed) {
		t.Errorf("Alloc after Close: %v, want ErrClosed", err)
	}
}

func TestCopyArgumentChecks(t *testing.T) {
	if err := CopyToDevice(nil, DeviceMem{size: 8}, []float64{1, 2}); !errors.Is(err, ErrSize) {
		t.Errorf("CopyToDevice size mismatch: %v, want ErrSize", err)
	}
	if err := CopyFromDevice(nil, make([]int16, 3), DeviceMem{size: 8}); !errors.Is(err, ErrSize) {
		t.Errorf("CopyFromDevice size mismatch: %v, want ErrSize", err)
	}
	if err := CopyToDevice(nil, DeviceMem{size: 16}, []float64{1, 2}); !errors.Is(err, ErrWrongDevice) {
		t.Errorf("CopyToDevice to the zero DeviceMem: %v, want ErrWrongDevice", err)
	}
	if err := CopyHtoD(nil, DeviceMem{size: 16}, HostMem{size: 8}); !errors.Is(err, ErrSize) {
		t.Errorf("CopyHtoD size mismatch: %v, want ErrSize", err)
	}
	if err := CopyDtoH(nil, HostMem{size: 16}, DeviceMem{size: 8}); !errors.Is(err, ErrSize) {
		t.Errorf("CopyDtoH size mismatch: %v, want ErrSize", err)
	}
	a, b := &Device{ordinal: 0}, &Device{ordinal: 1}
	if err := CopyDtoD(nil, DeviceMem{size: 8, dev: a}, DeviceMem{size: 8, dev: b}); !errors.Is(err, ErrWrongDevice) {
		t.Errorf("CopyDtoD across devices: %v, want ErrWrongDevice", err)
	}
	s := &Stream{dev: b}
	s.h.Store(1) // looks open; the device check fails before any CUDA call
	if err := Memset(s, DeviceMem{size: 8, dev: a}, 0); !errors.Is(err, ErrWrongDevice) {
		t.Errorf("Memset on another device's stream: %v, want ErrWrongDevice", err)
	}
	if err := Memset(&Stream{dev: a}, DeviceMem{size: 8, dev: a}, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("Memset on a closed stream: %v, want ErrClosed", err)
	}
	var zero Stream
	if err := zero.Synchronize(); !errors.Is(err, ErrClosed) {
		t.Errorf("Synchronize of the zero Stream: %v, want ErrClosed", err)
	}
	var fft FFT2D
	if err := fft.SetStream(s); !errors.Is(err, ErrClosed) {
		t.Errorf("SetStream of the zero FFT2D: %v, want ErrClosed", err)
	}
	if err := fft.Forward(DeviceMem{}, DeviceMem{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Forward of the zero FFT2D: %v, want ErrClosed", err)
	}
	var bl BLAS
	if err := bl.SetStream(&zero); !errors.Is(err, ErrClosed) {
		t.Errorf("SetStream of the zero BLAS: %v, want ErrClosed", err)
	}
}

func TestLibraryNames(t *testing.T) {
	got := strings.Join(cublasSonames(), " ")
	want := "libcublas.so.13 libcublas.so.12 libcublas.so.11 /usr/local/cuda/lib64/libcublas.so.13 /usr/local/cuda/lib64/libcublas.so.12 /usr/local/cuda/lib64/libcublas.so.11"
	if got != want {
		t.Errorf("cuBLAS names %q, want %q", got, want)
	}
	if f := cufftSonames(); len(f) != 6 || f[0] != "libcufft.so.12" || f[5] != "/usr/local/cuda/lib64/libcufft.so.10" {
		t.Errorf("cuFFT names %q", f)
	}
}

func TestGridFor(t *testing.T) {
	cases := []struct {
		n     int64
		limit int
		want  uint32
	}{{0, 10, 1}, {1, 10, 1}, {256, 10, 1}, {257, 10, 2}, {256 * 100, 10, 10}, {1 << 40, maxGrid, maxGrid}}
	for _, c := range cases {
		if got := GridFor(c.n, 256, uint32(c.limit)); got != c.want {
			t.Errorf("GridFor(%d, 256, %d) = %d, want %d", c.n, c.limit, got, c.want)
		}
	}
}

func TestAsDevicesAndKinds(t *testing.T) {
	ds := []*Device{{ordinal: 0, name: "a"}, {ordinal: 1, name: "b"}}
	gs := AsDevices(ds)
	if len(gs) != 2 || gs[1].ID() != 1 || gs[1].Kind() != device.GPU || gs[0].Name() != "a" {
		t.Errorf("AsDevices = %v", gs)
	}
	if Complex.String() != "complex" || Real.String() != "real" || FFTKind(7).String() != "FFTKind(7)" {
		t.Error("FFTKind.String")
	}
}

// Since needs two live events: a closed one is refused before any driver
// call.
func TestEventSinceClosed(t *testing.T) {
	var closed Event
	if _, err := closed.Since(&closed); !errors.Is(err, ErrClosed) {
		t.Errorf("Since on closed events: %v, want ErrClosed", err)
	}
}
