package cudapool

// Tests of the argument checks: they run in every build, with or without
// the cuda tag and a GPU. A zero cuda.Device passes the adapters' checks
// and fails in cuda itself, which shows what reached it.

import (
	"errors"
	"strings"
	"testing"

	"github.com/gohtgs/htgs/cuda"
	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/memmgr"
)

var (
	_ memmgr.Allocator[cuda.DeviceMem] = DeviceBuffers(1)
	_ memmgr.Allocator[cuda.HostMem]   = PinnedBuffers(1)
	_ memmgr.Allocator[cuda.DeviceMem] = DeviceBuffersOn(nil, 1)
	_ memmgr.Allocator[cuda.HostMem]   = PinnedBuffersOn(nil, 1)
)

func TestNonCUDADevicesRefused(t *testing.T) {
	cpu := device.Host{Index: 0}
	var nilGPU *cuda.Device
	for _, c := range []struct {
		name string
		err  error
	}{
		{"DeviceBuffers.Alloc(cpu)", second(DeviceBuffers(1024).Alloc(cpu))},
		{"DeviceBuffers.Alloc(nil)", second(DeviceBuffers(1024).Alloc(nil))},
		{"DeviceBuffers.Alloc(nil *cuda.Device)", second(DeviceBuffers(1024).Alloc(nilGPU))},
		{"PinnedBuffers.Alloc(cpu)", second(PinnedBuffers(1024).Alloc(cpu))},
		{"DeviceBuffersOn(nil).Alloc", second(DeviceBuffersOn(nil, 1024).Alloc(cpu))},
		{"PinnedBuffersOn(nil).Alloc", second(PinnedBuffersOn(nil, 1024).Alloc(cpu))},
		{"DeviceBuffers.Free(cpu)", DeviceBuffers(1024).Free(cpu, cuda.DeviceMem{})},
		{"PinnedBuffers.Free(cpu)", PinnedBuffers(1024).Free(cpu, cuda.HostMem{})},
	} {
		if !errors.Is(c.err, cuda.ErrWrongDevice) {
			t.Errorf("%s: %v, want an error wrapping cuda.ErrWrongDevice", c.name, c.err)
		} else if !strings.HasPrefix(c.err.Error(), "cudapool: ") {
			t.Errorf("%s: %q does not name the package", c.name, c.err)
		}
	}
	if err := second(DeviceBuffers(1024).Alloc(cpu)); !strings.Contains(err.Error(), cpu.Name()) {
		t.Errorf("DeviceBuffers.Alloc(cpu): %q does not name the device %q", err, cpu.Name())
	}
}

func TestAllocReachesCUDA(t *testing.T) {
	zero := &cuda.Device{} // unusable: cuda refuses it, whatever the build
	cpu := device.Host{Index: 0}
	// A size of 0 is refused by cuda before it looks at the device: the
	// allocators passed their size and the right device on.
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"DeviceBuffers(0).Alloc", second(DeviceBuffers(0).Alloc(zero)), cuda.ErrSize},
		{"PinnedBuffers(0).Alloc", second(PinnedBuffers(0).Alloc(zero)), cuda.ErrSize},
		{"DeviceBuffersOn(zero, 0).Alloc(cpu)", second(DeviceBuffersOn(zero, 0).Alloc(cpu)), cuda.ErrSize},
		{"PinnedBuffersOn(zero, 0).Alloc(cpu)", second(PinnedBuffersOn(zero, 0).Alloc(cpu)), cuda.ErrSize},
		{"DeviceBuffers(8).Alloc(zero)", second(DeviceBuffers(8).Alloc(zero)), cuda.ErrWrongDevice},
		{"DeviceBuffersOn(zero, 8).Alloc(cpu)", second(DeviceBuffersOn(zero, 8).Alloc(cpu)), cuda.ErrWrongDevice},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want an error wrapping %v", c.name, c.err, c.want)
		}
	}
	// The fixed allocators ignore the pool's device: the error is cuda's
	// about its zero Device, not the adapters' about the CPU.
	if err := second(DeviceBuffersOn(zero, 8).Alloc(cpu)); strings.Contains(err.Error(), cpu.Name()) {
		t.Errorf("DeviceBuffersOn(zero).Alloc(cpu) looked at the pool's device: %v", err)
	}
}

func TestFreeOfNothing(t *testing.T) {
	zero := &cuda.Device{}
	if err := DeviceBuffers(8).Free(zero, cuda.DeviceMem{}); err != nil {
		t.Errorf("DeviceBuffers.Free of the zero DeviceMem: %v", err)
	}
	if err := PinnedBuffers(8).Free(zero, cuda.HostMem{}); err != nil {
		t.Errorf("PinnedBuffers.Free of the zero HostMem: %v", err)
	}
	if err := DeviceBuffersOn(zero, 8).Free(device.Host{}, cuda.DeviceMem{}); err != nil {
		t.Errorf("DeviceBuffersOn.Free of the zero DeviceMem: %v", err)
	}
}

func TestSameOrdinal(t *testing.T) {
	if err := sameOrdinal(2, 2); err != nil {
		t.Errorf("sameOrdinal(2, 2): %v", err)
	}
	err := sameOrdinal(0, 1)
	if !errors.Is(err, cuda.ErrWrongDevice) {
		t.Fatalf("sameOrdinal(0, 1): %v, want an error wrapping cuda.ErrWrongDevice", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "device 0 freed through device 1") {
		t.Errorf("sameOrdinal(0, 1): %q does not name both devices in order", msg)
	}
}

// second returns the error of an (allocation, error) pair.
func second[T any](_ T, err error) error { return err }
