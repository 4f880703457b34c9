//go:build cuda

package cuda

import (
	_ "embed"
	"errors"
	"testing"
)

// axpbPTX is testdata/axpb.cu compiled with
// nvcc -ptx -arch=compute_70 -O3: x[i] = a*x[i] + b, with a double a and
// a float b, so that Launch's argument slots of both sizes are checked.
//
//go:embed testdata/axpb.ptx
var axpbPTX string

func firstDevice(t *testing.T) *Device {
	t.Helper()
	ds, err := Devices()
	if err != nil {
		t.Skipf("no CUDA device: %v", err)
	}
	for _, d := range ds[1:] {
		_ = d.Close()
	}
	t.Cleanup(func() { _ = ds[0].Close() })
	return ds[0]
}

func TestModuleLaunch(t *testing.T) {
	d := firstDevice(t)
	m, err := d.LoadModule(axpbPTX)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	f, err := m.Function("htgs_test_axpb")
	if err != nil {
		t.Fatal(err)
	}
	if f2, err := m.Function("htgs_test_axpb"); err != nil || f2 != f {
		t.Errorf("second lookup: %p, %v; want the same Function", f2, err)
	}
	if _, err := m.Function("no_such_kernel"); err == nil {
		t.Error("lookup of a missing kernel succeeded")
	}
	const n = 100_003
	x := make([]float64, n)
	for i := range x {
		x[i] = float64(i)
	}
	buf, err := d.Alloc(8 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := CopyToDevice(s, buf, x); err != nil {
		t.Fatal(err)
	}
	// A small grid: the kernel strides over the rest.
	if err := f.Launch(s, GridFor(n, 128, 64), 128, buf, int64(n), 2.0, float32(0.5)); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil { // s does not synchronize with the legacy stream
		t.Fatal(err)
	}
	if err := f.Launch(nil, GridFor(n, 256, 0), 256, buf.Ptr(), n, -1.0, float32(1)); err != nil {
		t.Fatal(err)
	}
	if err := CopyFromDevice(s, x, buf); err != nil {
		t.Fatal(err)
	}
	for i, v := range x {
		if want := -(2*float64(i) + 0.5) + 1; v != want {
			t.Fatalf("x[%d] = %v, want %v", i, v, want)
		}
	}
	// The kernel works in page-locked host memory in place, through
	// HostMem.DevicePtr (unified addressing): no copy.
	h, err := d.AllocHost(8 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Free()
	hx := HostSlice[float64](h)
	for i := range hx {
		hx[i] = float64(i)
	}
	if err := f.Launch(s, GridFor(n, 256, 0), 256, h.DevicePtr(), int64(n), 3.0, float32(-1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	for i, v := range hx {
		if want := 3*float64(i) - 1; v != want {
			t.Fatalf("mapped host memory: x[%d] = %v, want %v", i, v, want)
		}
	}
	if err := f.Launch(s, 1, 1, "x"); err == nil {
		t.Error("Launch accepted a string argument")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Launch(s, 1, 1, buf, int64(0), 1.0, float32(0)); !errors.Is(err, ErrClosed) {
		t.Errorf("Launch after Close: %v, want ErrClosed", err)
	}
	if _, err := m.Function("htgs_test_axpb"); !errors.Is(err, ErrClosed) {
		t.Errorf("Function after Close: %v, want ErrClosed", err)
	}
}
