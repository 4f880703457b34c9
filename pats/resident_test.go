package pats

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/region"
)

// countingHost is region.HostDevice counting its uploads.
type countingHost struct {
	region.HostDevice
	ups atomic.Int64
}

func (c *countingHost) Upload(ctx context.Context, dst region.Buffer, src []byte) error {
	c.ups.Add(1)
	return c.HostDevice.Upload(ctx, dst, src)
}

// TestDeviceUnitWithRegionResidency drives a DeviceUnit through the
// residency of the regions themselves: Transfer uploads and downloads the
// region a datum names, the GPU implementation finds its input already
// resident (no second copy) and writes its output in a reserved buffer.
func TestDeviceUnitWithRegionResidency(t *testing.T) {
	ctx := context.Background()
	gpu := &countingHost{HostDevice: region.HostDevice{Index: 0}}
	regions := map[string]*region.Dense[uint8]{}
	unit := DeviceUnit{
		Device: gpu,
		Transfer: func(ctx context.Context, d Data, toDevice bool) error {
			r := regions[d.Key]
			if r == nil {
				return fmt.Errorf("no region %q", d.Key)
			}
			if toDevice {
				_, err := r.Upload(ctx, gpu)
				return err
			}
			return r.Download(ctx)
		},
	}
	type tile struct{ in, out *region.Dense[uint8] }
	invert := &Op[tile]{Name: "invert", Impls: map[device.Kind]Impl[tile]{
		device.GPU: func(ctx context.Context, _ device.Device, t tile) error {
			src, err := t.in.Upload(ctx, gpu) // resident: no copy
			if err != nil {
				return err
			}
			dst, err := t.out.Reserve(ctx, gpu)
			if err != nil {
				return err
			}
			for i, v := range src.(region.HostBuffer) {
				dst.(region.HostBuffer)[i] = 255 - v
			}
			return t.out.DeviceWrote(gpu)
		},
	}}
	var sums []int
	sum := &Op[tile]{Name: "sum", Impls: map[device.Kind]Impl[tile]{
		device.CPU: func(ctx context.Context, _ device.Device, t tile) error {
			data, err := t.out.Data(ctx)
			if err != nil {
				return err
			}
			s := 0
			for _, v := range data {
				s += int(v)
			}
			sums = append(sums, s)
			return nil
		},
	}}
	m := startManager(t, Config{Window: 1}, append(CPUUnits(1), unit)...)
	for i := range 3 {
		in, _ := region.NewDense[uint8](region.ID{Name: fmt.Sprintf("t%d::in", i)}, region.Rect(0, 0, 4, 4))
		out, _ := region.NewDense[uint8](region.ID{Name: fmt.Sprintf("t%d::out", i)}, region.Rect(0, 0, 4, 4))
		data, _ := in.Data(ctx)
		for k := range data {
			data[k] = uint8(i)
		}
		out.SetOutput(region.NewMemory())
		din, dout := RegionData(in), RegionData(out)
		regions[din.Key], regions[dout.Key] = in, out
		f := NewFlow(fmt.Sprint("t", i))
		Add(f, invert, tile{in, out}, Reads(din), Writes(dout))
		Add(f, sum, tile{in, out}, Reads(dout))
		if err := submit(t, m, f).Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if l := out.Where(); !l.Host || !l.On("hostgpu0") {
			t.Errorf("tile %d: output at %v", i, l)
		}
		if err := in.EvictAll(ctx); err != nil {
			t.Fatal(err)
		}
		if err := out.EvictAll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if want := []int{16 * 255, 16 * 254, 16 * 253}; fmt.Sprint(sums) != fmt.Sprint(want) {
		t.Errorf("sums %v, want %v", sums, want)
	}
	if n := gpu.ups.Load(); n != 3 {
		t.Errorf("%d uploads for 3 tiles, want 3 (the implementation reuses the resident input)", n)
	}
}
