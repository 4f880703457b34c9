//go:build !cuda

package cuda

import (
	"errors"
	"strings"
	"testing"
)

func TestStubDevicesReportsNoCUDA(t *testing.T) {
	ds, err := Devices()
	if ds != nil {
		t.Errorf("Devices() returned %d devices in a build without the cuda tag", len(ds))
	}
	if !errors.Is(err, ErrNoCUDA) || !errors.Is(err, ErrNoDevice) {
		t.Fatalf("Devices() error %v does not wrap both ErrNoCUDA and ErrNoDevice", err)
	}
	if !strings.Contains(err.Error(), "built without the cuda tag") {
		t.Errorf("error %q does not say why", err)
	}
	if _, err := DriverVersion(); !errors.Is(err, ErrNoCUDA) {
		t.Errorf("DriverVersion() error %v does not wrap ErrNoCUDA", err)
	}
}

func TestStubLibrariesAndDevices(t *testing.T) {
	// A Device that claims to be valid still cannot reach CUDA.
	d := &Device{name: "fake", valid: true}
	if _, err := d.Alloc(8); !errors.Is(err, ErrNoCUDA) {
		t.Errorf("Alloc: %v, want ErrNoCUDA", err)
	}
	if _, err := d.NewBLAS(); !errors.Is(err, ErrNoCUDA) {
		t.Errorf("NewBLAS: %v, want ErrNoCUDA", err)
	}
	if _, err := d.NewFFT2D(4, 4, Real); !errors.Is(err, ErrNoCUDA) {
		t.Errorf("NewFFT2D: %v, want ErrNoCUDA", err)
	}
	if Bound(d) {
		t.Error("Bound is true without CUDA")
	}
}
