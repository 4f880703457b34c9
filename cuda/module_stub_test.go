//go:build !cuda

package cuda

import (
	"errors"
	"testing"
)

func TestStubLoadModule(t *testing.T) {
	d := &Device{name: "fake", valid: true}
	if _, err := d.LoadModule(".version 7.0\n"); !errors.Is(err, ErrNoCUDA) {
		t.Errorf("LoadModule: %v, want ErrNoCUDA", err)
	}
	var nilDev *Device
	if _, err := nilDev.LoadModule("x"); !errors.Is(err, ErrWrongDevice) {
		t.Errorf("LoadModule on nil: %v, want ErrWrongDevice", err)
	}
}

func TestKernelArgs(t *testing.T) {
	d := &Device{ordinal: 0}
	for _, c := range []struct {
		a    any
		want uint64
	}{{int(-1), ^uint64(0)}, {int32(7), 7}, {uint32(9), 9}, {uint64(1 << 40), 1 << 40}, {float32(1), 0x3f800000}, {DevicePtr(42), 42}} {
		if got, err := kernelArg(c.a, d); err != nil || got != c.want {
			t.Errorf("kernelArg(%T %v) = %#x, %v; want %#x", c.a, c.a, got, err, c.want)
		}
	}
	if _, err := kernelArg("x", d); err == nil {
		t.Error("kernelArg accepted a string")
	}
	if g := GridFor(1000, 256, 0); g != 4 {
		t.Errorf("GridFor(1000, 256) = %d, want 4", g)
	}
	if g := GridFor(1<<40, 256, 1024); g != 1024 {
		t.Errorf("GridFor limit = %d, want 1024", g)
	}
}
