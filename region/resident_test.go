package region

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countingDevice is host memory posing as a device, counting what it is
// asked to do; gate, if not nil, holds every copy until it is closed, and
// fail makes the copies fail.
type countingDevice struct {
	HostDevice
	allocs, frees, ups, downs atomic.Int64
	gate                      chan struct{}
	fail                      error
}

func newCounting(i int) *countingDevice { return &countingDevice{HostDevice: HostDevice{Index: i}} }

func (c *countingDevice) Alloc(ctx context.Context, n int64) (Buffer, error) {
	if c.fail != nil {
		return nil, c.fail
	}
	c.allocs.Add(1)
	return c.HostDevice.Alloc(ctx, n)
}

func (c *countingDevice) Free(b Buffer) error { c.frees.Add(1); return nil }

func (c *countingDevice) wait(ctx context.Context) error {
	if c.gate == nil {
		return nil
	}
	select {
	case <-c.gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *countingDevice) Upload(ctx context.Context, dst Buffer, src []byte) error {
	if err := c.wait(ctx); err != nil {
		return err
	}
	c.ups.Add(1)
	return c.HostDevice.Upload(ctx, dst, src)
}

func (c *countingDevice) Download(ctx context.Context, dst []byte, src Buffer) error {
	if err := c.wait(ctx); err != nil {
		return err
	}
	c.downs.Add(1)
	return c.HostDevice.Download(ctx, dst, src)
}

func (c *countingDevice) counts() [4]int64 {
	return [4]int64{c.allocs.Load(), c.frees.Load(), c.ups.Load(), c.downs.Load()}
}

// addOnDevice is an "operation on the device": it adds k to every uint16
// of a HostBuffer.
func addOnDevice(t *testing.T, b Buffer, k uint16) {
	t.Helper()
	hb, ok := b.(HostBuffer)
	if !ok {
		t.Fatalf("buffer is a %T", b)
	}
	for i := 0; i < len(hb); i += 2 {
		binary.LittleEndian.PutUint16(hb[i:], binary.LittleEndian.Uint16(hb[i:])+k)
	}
}

func filled(t *testing.T, w, h int) *Dense[uint16] {
	t.Helper()
	r, err := NewDense[uint16](ID{Name: "img"}, Rect(0, 0, w, h))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := r.Data(context.Background())
	for i := range data {
		data[i] = uint16(i)
	}
	return r
}

func TestResidencyReuseAndDownload(t *testing.T) {
	ctx := context.Background()
	r := filled(t, 4, 3)
	dev := newCounting(0)
	if l := r.Where(); !l.Host || len(l.Devices) != 0 || l.String() != "host" {
		t.Fatalf("before upload: %v", l)
	}
	buf, err := r.Upload(ctx, dev)
	if err != nil {
		t.Fatal(err)
	}
	if buf.Size() != 24 || binary.LittleEndian.Uint16(buf.(HostBuffer)[22:]) != 11 {
		t.Fatalf("buffer %v", buf)
	}
	if l := r.Where(); l.String() != "host+hostgpu0" || !l.On("hostgpu0") {
		t.Errorf("after upload: %v", l)
	}
	// An operation on the device reuses the resident copy: no transfer.
	again, err := r.Upload(ctx, dev)
	if err != nil || again.(HostBuffer) == nil || &again.(HostBuffer)[0] != &buf.(HostBuffer)[0] {
		t.Fatalf("second upload: %v", err)
	}
	addOnDevice(t, buf, 100)
	if err := r.DeviceWrote(dev); err != nil {
		t.Fatal(err)
	}
	if l := r.Where(); l.String() != "hostgpu0" || r.Loaded() {
		t.Errorf("after the device wrote: %v, loaded %v", l, r.Loaded())
	}
	func() {
		defer func() {
			if p := recover(); p == nil || !strings.Contains(p.(string), "downloaded") {
				t.Errorf("At on a stale host copy: %v", p)
			}
		}()
		r.At(0, 0)
	}()
	// Host access downloads the current value; the device copy stays.
	data, err := r.Data(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if data[0] != 100 || data[11] != 111 || r.At(3, 2) != 111 {
		t.Errorf("downloaded %v", data)
	}
	if l := r.Where(); l.String() != "host+hostgpu0" {
		t.Errorf("after download: %v", l)
	}
	if _, err := r.Upload(ctx, dev); err != nil {
		t.Fatal(err)
	}
	if c := dev.counts(); c != [4]int64{1, 0, 1, 1} {
		t.Errorf("allocs, frees, uploads, downloads = %v, want one upload and one download", c)
	}
	// A change in host memory makes the device copy stale; the next upload
	// copies into the same buffer.
	data[0] = 7
	if err := r.HostWrote(); err != nil {
		t.Fatal(err)
	}
	if l := r.Where(); l.String() != "host" {
		t.Errorf("after HostWrote: %v", l)
	}
	buf2, err := r.Upload(ctx, dev)
	if err != nil || binary.LittleEndian.Uint16(buf2.(HostBuffer)) != 7 {
		t.Fatalf("re-upload: %v", err)
	}
	if c := dev.counts(); c != [4]int64{1, 0, 2, 1} {
		t.Errorf("counts after re-upload %v", c)
	}
	if err := r.EvictAll(ctx); err != nil {
		t.Fatal(err)
	}
	if c := dev.counts(); c[1] != 1 || r.Where().String() != "host" {
		t.Errorf("after EvictAll: counts %v, %v", c, r.Where())
	}
}

func TestResidencyTwoDevices(t *testing.T) {
	ctx := context.Background()
	r := filled(t, 3, 2)
	d0, d1 := newCounting(0), newCounting(1)
	b0, _ := r.Upload(ctx, d0)
	addOnDevice(t, b0, 10)
	if err := r.DeviceWrote(d0); err != nil {
		t.Fatal(err)
	}
	// d1 gets the value d0 wrote, through host memory.
	b1, err := r.Upload(ctx, d1)
	if err != nil {
		t.Fatal(err)
	}
	if binary.LittleEndian.Uint16(b1.(HostBuffer)[10:]) != 15 {
		t.Errorf("d1 holds %v", b1)
	}
	if l := r.Where(); l.String() != "host+hostgpu0+hostgpu1" {
		t.Errorf("where: %v", l)
	}
	addOnDevice(t, b1, 1)
	if err := r.DeviceWrote(d1); err != nil {
		t.Fatal(err)
	}
	if l := r.Where(); l.String() != "hostgpu1" || l.On("hostgpu0") {
		t.Errorf("after d1 wrote: %v", l)
	}
	// Evicting the only current copy downloads it first.
	if err := r.Evict(ctx, d1); err != nil {
		t.Fatal(err)
	}
	if l := r.Where(); l.String() != "host" {
		t.Errorf("after evicting d1: %v", l)
	}
	data, _ := r.Data(ctx)
	if data[5] != 16 {
		t.Errorf("data %v", data)
	}
	// d0's stale copy is refreshed in its own buffer.
	if _, err := r.Upload(ctx, d0); err != nil {
		t.Fatal(err)
	}
	if c0, c1 := d0.counts(), d1.counts(); c0 != [4]int64{1, 0, 2, 1} || c1 != [4]int64{1, 1, 1, 1} {
		t.Errorf("d0 %v, d1 %v", c0, c1)
	}
	if err := r.Evict(ctx, newCounting(5)); err != nil {
		t.Errorf("evicting from a device without a copy: %v", err)
	}
	if err := r.EvictAll(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestResidencyStorage(t *testing.T) {
	ctx := context.Background()
	in, out := NewMemory(), NewMemory()
	whole := filled(t, 4, 4)
	whole.SetOutput(in)
	if err := whole.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := BindDense[uint16](ID{Name: "img"}, Rect(0, 0, 4, 4), Rect(2, 2, 4, 4), in)
	if err != nil {
		t.Fatal(err)
	}
	r.SetOutput(out)
	if l := r.Where(); l.String() != "storage" {
		t.Errorf("bound region: %v", l)
	}
	dev := newCounting(0)
	buf, err := r.Upload(ctx, dev) // reads the ROI first
	if err != nil {
		t.Fatal(err)
	}
	if buf.Size() != 8 || binary.LittleEndian.Uint16(buf.(HostBuffer)) != 10 {
		t.Errorf("uploaded ROI %v", buf)
	}
	addOnDevice(t, buf, 1000)
	if err := r.DeviceWrote(dev); err != nil {
		t.Fatal(err)
	}
	// Commit writes the device's value.
	if err := r.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := OpenDense[uint16](ctx, out, ID{Name: "img", Type: Dense2D}, Rect(2, 2, 4, 4))
	if err != nil {
		t.Fatal(err)
	}
	if err := got.Stage(ctx); err != nil {
		t.Fatal(err)
	}
	if got.At(3, 3) != 1015 {
		t.Errorf("committed %d", got.At(3, 3))
	}
	// Stage downloads too.
	addOnDevice(t, buf, 1)
	_ = r.DeviceWrote(dev)
	if err := r.Stage(ctx); err != nil || r.At(2, 2) != 1011 {
		t.Errorf("Stage: %v, %d", err, r.At(2, 2))
	}
	// A new ROI frees the device copies.
	if err := r.SetROI(Rect(0, 0, 4, 4)); err != nil {
		t.Fatal(err)
	}
	if c := dev.counts(); c[1] != 1 || r.Where().String() != "storage" {
		t.Errorf("after SetROI: %v, %v", c, r.Where())
	}
}

func TestResidencyAsync(t *testing.T) {
	ctx := context.Background()
	r := filled(t, 8, 8)
	dev := newCounting(0)
	dev.gate = make(chan struct{})
	up := r.UploadAsync(ctx, dev)
	select {
	case <-up.Done():
		t.Fatal("upload finished before the device copied")
	case <-time.After(time.Millisecond):
	}
	if up.Buffer() != nil {
		t.Error("buffer before the upload ended")
	}
	short, cancel := context.WithCancel(ctx)
	cancel()
	if err := up.Wait(short); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait with a cancelled context: %v", err)
	}
	close(dev.gate)
	if err := up.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	buf := up.Buffer()
	if buf == nil || buf.Size() != 128 {
		t.Fatalf("buffer %v", buf)
	}
	addOnDevice(t, buf, 3)
	_ = r.DeviceWrote(dev)
	down := r.DownloadAsync(ctx)
	if err := down.Wait(ctx); err != nil || down.Buffer() != nil {
		t.Fatalf("download: %v", err)
	}
	if l := r.Where(); l.String() != "host+hostgpu0" || r.At(7, 7) != 66 {
		t.Errorf("after async download: %v, %d", l, r.At(7, 7))
	}
	// An asynchronous upload stopped by its context fails and leaves the
	// region as it was.
	r2 := filled(t, 2, 2)
	d2 := newCounting(1)
	d2.gate = make(chan struct{})
	cctx, stop := context.WithCancel(ctx)
	tr := r2.UploadAsync(cctx, d2)
	stop()
	if err := tr.Wait(ctx); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "img") {
		t.Errorf("cancelled upload: %v", err)
	}
	if l := r2.Where(); l.String() != "host" {
		t.Errorf("after a failed upload: %v", l)
	}
}

func TestResidencyErrors(t *testing.T) {
	ctx := context.Background()
	r := filled(t, 2, 2)
	dev := newCounting(0)
	if err := r.DeviceWrote(dev); !errors.Is(err, ErrNotResident) || !strings.Contains(err.Error(), "img") {
		t.Errorf("DeviceWrote without a copy: %v", err)
	}
	buf, _ := r.Upload(ctx, dev)
	_ = r.DeviceWrote(dev)
	if err := r.HostWrote(); !errors.Is(err, ErrNotResident) {
		t.Errorf("HostWrote on a stale host copy: %v", err)
	}
	if err := r.SetROI(Rect(0, 0, 1, 1)); !errors.Is(err, ErrNotResident) {
		t.Errorf("SetROI with the data on a device only: %v", err)
	}
	_ = buf
	boom := errors.New("out of device memory")
	bad := newCounting(3)
	bad.fail = boom
	if _, err := r.Upload(ctx, bad); !errors.Is(err, boom) || !strings.Contains(err.Error(), "hostgpu3") || !strings.Contains(err.Error(), "img") {
		t.Errorf("failed allocation: %v", err)
	}
	if _, err := r.Upload(ctx, nil); err == nil {
		t.Error("nil device accepted")
	}
	// A device that cannot copy: its buffer is a different type.
	if err := (HostDevice{}).Upload(ctx, fakeBuf{}, []byte{1}); err == nil {
		t.Error("foreign buffer accepted")
	}
	if err := (HostDevice{}).Download(ctx, []byte{1}, fakeBuf{}); err == nil {
		t.Error("foreign buffer accepted")
	}
	if err := r.EvictAll(ctx); err != nil {
		t.Fatal(err)
	}
}

type fakeBuf struct{}

func (fakeBuf) Size() int64 { return 1 }

func TestResidency1DAnd3D(t *testing.T) {
	ctx := context.Background()
	dev := newCounting(0)
	for _, b := range []Box{Span(0, 5), Cube(0, 0, 0, 2, 2, 2)} {
		r, err := NewDense[float32](ID{Name: "v"}, b)
		if err != nil {
			t.Fatal(err)
		}
		buf, err := r.Upload(ctx, dev)
		if err != nil || buf.Size() != int64(4*b.Len()) {
			t.Fatalf("%v: %v, %v", b, buf, err)
		}
		hb := buf.(HostBuffer)
		binary.LittleEndian.PutUint32(hb, 0x40490fdb) // pi
		_ = r.DeviceWrote(dev)
		data, _ := r.Data(ctx)
		if data[0] < 3.14 || data[0] > 3.15 {
			t.Errorf("%v: %v", b, data)
		}
	}
}

func TestResidencyReserve(t *testing.T) {
	ctx := context.Background()
	in := NewMemory()
	whole := filled(t, 2, 2)
	whole.SetOutput(in)
	if err := whole.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// An output region bound to storage, never read: the operation on the
	// device overwrites it, nothing is read or uploaded.
	r, err := BindDense[uint16](ID{Name: "img"}, Rect(0, 0, 2, 2), Rect(0, 0, 2, 2), in)
	if err != nil {
		t.Fatal(err)
	}
	dev := newCounting(0)
	buf, err := r.Reserve(ctx, dev)
	if err != nil || buf.Size() != 8 {
		t.Fatalf("Reserve: %v, %v", buf, err)
	}
	if l := r.Where(); l.String() != "storage" {
		t.Errorf("after Reserve: %v", l)
	}
	for i := range 4 {
		binary.LittleEndian.PutUint16(buf.(HostBuffer)[2*i:], uint16(40+i))
	}
	if err := r.DeviceWrote(dev); err != nil {
		t.Fatal(err)
	}
	if l := r.Where(); l.String() != "hostgpu0" {
		t.Errorf("after the device wrote: %v", l)
	}
	data, err := r.Data(ctx)
	if err != nil || data[3] != 43 {
		t.Fatalf("data %v, %v", data, err)
	}
	if again, _ := r.Reserve(ctx, dev); &again.(HostBuffer)[0] != &buf.(HostBuffer)[0] {
		t.Error("Reserve allocated again")
	}
	if c := dev.counts(); c != [4]int64{1, 0, 0, 1} {
		t.Errorf("allocs, frees, uploads, downloads = %v", c)
	}
	if _, err := r.Reserve(ctx, nil); err == nil {
		t.Error("nil device accepted")
	}
}
