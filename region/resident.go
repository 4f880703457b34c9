package region

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/gohtgs/htgs/device"
)

// ErrNotResident reports an operation on a device copy of a region that
// the device does not hold, or host access to data whose current value is
// only on a device.
var ErrNotResident = errors.New("region data not resident there")

// Buffer is a block of device memory allocated by a [DeviceMemory]. An
// operation's device implementation type-asserts it to the concrete type
// of its device binding (a CUDA allocation, say) to launch kernels on it.
type Buffer interface {
	// Size returns the buffer's size in bytes.
	Size() int64
}

// DeviceMemory is the memory of a device (a GPU) that region data can live
// in: the device-side allocation and copy functions a device binding
// provides. A CUDA device provides them with its allocator and copies; on
// machines without a GPU, host memory can pose as a device ([HostDevice]).
//
// Devices are told apart by Name. The copy functions return when the copy
// is complete; asynchronous transfers ([Dense.UploadAsync],
// [Dense.DownloadAsync]) call them on a goroutine of their own.
type DeviceMemory interface {
	device.Device
	// Alloc allocates bytes of device memory.
	Alloc(ctx context.Context, bytes int64) (Buffer, error)
	// Free releases a buffer Alloc returned.
	Free(b Buffer) error
	// Upload copies src from host memory into dst, which has len(src)
	// bytes.
	Upload(ctx context.Context, dst Buffer, src []byte) error
	// Download copies src into dst in host memory, which has src's size.
	Download(ctx context.Context, dst []byte, src Buffer) error
}

// HostDevice is host memory posing as a device: its buffers are byte
// slices ([HostBuffer]) and its copies are copy calls. It lets code that
// keeps regions on GPUs run, and be tested, on machines without one.
type HostDevice struct {
	Index int // ID and name suffix: "hostgpu" + Index
}

// HostBuffer is the buffer of a [HostDevice]: the "device" bytes.
type HostBuffer []byte

// Size implements Buffer.
func (b HostBuffer) Size() int64 { return int64(len(b)) }

// ID returns the index.
func (h HostDevice) ID() int { return h.Index }

// Kind returns device.GPU: it poses as one.
func (h HostDevice) Kind() device.Kind { return device.GPU }

// Name returns "hostgpu" followed by the index.
func (h HostDevice) Name() string { return fmt.Sprintf("hostgpu%d", h.Index) }

// Memory returns 0: unknown.
func (h HostDevice) Memory() int64 { return 0 }

// Alloc returns a zeroed HostBuffer.
func (h HostDevice) Alloc(ctx context.Context, bytes int64) (Buffer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return make(HostBuffer, bytes), nil
}

// Free does nothing; the garbage collector reclaims the buffer.
func (h HostDevice) Free(Buffer) error { return nil }

// Upload copies src into dst, a HostBuffer of the same size.
func (h HostDevice) Upload(ctx context.Context, dst Buffer, src []byte) error {
	b, ok := dst.(HostBuffer)
	if !ok || len(b) != len(src) {
		return fmt.Errorf("%s: upload %d bytes into a %T of %d", h.Name(), len(src), dst, dst.Size())
	}
	copy(b, src)
	return ctx.Err()
}

// Download copies src, a HostBuffer, into dst of the same size.
func (h HostDevice) Download(ctx context.Context, dst []byte, src Buffer) error {
	b, ok := src.(HostBuffer)
	if !ok || len(b) != len(dst) {
		return fmt.Errorf("%s: download a %T of %d into %d bytes", h.Name(), src, src.Size(), len(dst))
	}
	copy(dst, b)
	return ctx.Err()
}

// Location says where the current value of a region's data is.
type Location struct {
	// Host reports that host memory holds it. Neither Host nor any device
	// means it is still in the input storage, not read yet.
	Host bool
	// Devices are the devices holding it, in the order of their first
	// upload.
	Devices []string
}

// On reports whether the device named name holds the current value.
func (l Location) On(name string) bool { return slices.Contains(l.Devices, name) }

// String formats the location as "host+hostgpu0", "hostgpu1" or "storage".
func (l Location) String() string {
	var parts []string
	if l.Host {
		parts = append(parts, "host")
	}
	parts = append(parts, l.Devices...)
	if len(parts) == 0 {
		return "storage"
	}
	s := parts[0]
	for _, p := range parts[1:] {
		s += "+" + p
	}
	return s
}

// devCopy is a region's copy on one device.
type devCopy struct {
	dev   DeviceMemory
	buf   Buffer
	valid bool // holds the current value
}

// Transfer is an asynchronous upload or download of a region's data.
type Transfer struct {
	done chan struct{}
	buf  Buffer
	err  error
}

// Done is closed when the transfer has ended.
func (t *Transfer) Done() <-chan struct{} { return t.done }

// Wait waits for the transfer to end and returns its error, or returns
// ctx's error first (the transfer goes on).
func (t *Transfer) Wait(ctx context.Context) error {
	select {
	case <-t.done:
		return t.err
	case <-ctx.Done():
		return fmt.Errorf("region: waiting for a transfer: %w", ctx.Err())
	}
}

// Buffer returns, once an upload has ended without error, the device
// buffer holding the data (nil before, and for a download).
func (t *Transfer) Buffer() Buffer {
	select {
	case <-t.done:
		return t.buf
	default:
		return nil
	}
}

func async(ctx context.Context, f func(context.Context) (Buffer, error)) *Transfer {
	t := &Transfer{done: make(chan struct{})}
	go func() {
		defer close(t.done)
		t.buf, t.err = f(ctx)
	}()
	return t
}

// Where returns where the current value of the region's data is: in host
// memory, on devices, or still in storage.
func (d *Dense[T]) Where() Location {
	d.mu.Lock()
	defer d.mu.Unlock()
	l := Location{Host: d.loaded && !d.stale}
	for _, c := range d.copies {
		if c.valid {
			l.Devices = append(l.Devices, c.dev.Name())
		}
	}
	return l
}

// Upload makes the region's data resident on dev and returns the device
// buffer holding it, for an operation on dev to read (and write, followed
// by [Dense.DeviceWrote]). Data already current on dev is reused without a
// copy; a buffer already allocated there is reused for the copy. The data
// comes from host memory, read from the input storage first if needed, or
// from the device holding the current value, through host memory.
//
// Until the region is evicted (Evict, EvictAll) or its ROI changes, the
// buffer stays allocated on dev. Transfers of one region run one at a
// time; accessors wait for them.
func (d *Dense[T]) Upload(ctx context.Context, dev DeviceMemory) (Buffer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.uploadLocked(ctx, dev)
}

// Reserve returns the region's buffer on dev without copying the data
// there, allocating it if dev holds none: for an operation on dev that
// overwrites the whole ROI, and then calls DeviceWrote. Until then the
// buffer does not count as holding the data.
func (d *Dense[T]) Reserve(ctx context.Context, dev DeviceMemory) (Buffer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if dev == nil {
		return nil, fmt.Errorf("region: reserve %v: nil device", d.id)
	}
	if c := d.copyOn(dev); c != nil {
		return c.buf, nil
	}
	c, err := d.allocCopy(ctx, dev)
	if err != nil {
		return nil, err
	}
	return c.buf, nil
}

// UploadAsync is Upload on a goroutine of its own: the copy overlaps with
// what the caller does until it waits for the Transfer.
func (d *Dense[T]) UploadAsync(ctx context.Context, dev DeviceMemory) *Transfer {
	return async(ctx, func(ctx context.Context) (Buffer, error) { return d.Upload(ctx, dev) })
}

// Download makes host memory hold the current value of the region's data,
// copying it from a device if only devices hold it; the device copies stay
// resident and current. Data, Stage and Commit download by themselves.
func (d *Dense[T]) Download(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.downloadLocked(ctx)
}

// DownloadAsync is Download on a goroutine of its own.
func (d *Dense[T]) DownloadAsync(ctx context.Context) *Transfer {
	return async(ctx, func(ctx context.Context) (Buffer, error) { return nil, d.Download(ctx) })
}

// DeviceWrote records that an operation on dev changed the region's data
// in dev's buffer: that copy is now the only current one. Host memory and
// other devices get the new value by Download and Upload. It fails with
// ErrNotResident if dev holds no copy.
func (d *Dense[T]) DeviceWrote(dev DeviceMemory) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.copyOn(dev)
	if c == nil {
		return fmt.Errorf("region: %v: %s wrote it: %w", d.id, dev.Name(), ErrNotResident)
	}
	for _, o := range d.copies {
		o.valid = o == c
	}
	if !d.loaded { // never read: the host copy is made on download
		d.data, d.loaded = d.hostMemory(), true
	}
	d.stale = true
	return nil
}

// HostWrote records that the data was changed in host memory (through the
// slice Data returns, or Set): device copies are out of date and the next
// Upload copies again, into the buffer already allocated. It fails with
// ErrNotResident if host memory does not hold the current value.
func (d *Dense[T]) HostWrote() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.loaded || d.stale {
		return fmt.Errorf("region: %v: written in host memory: %w", d.id, ErrNotResident)
	}
	for _, c := range d.copies {
		c.valid = false
	}
	return nil
}

// Evict frees the region's buffer on dev, downloading it first if it holds
// the only current value. Evicting from a device without a copy does
// nothing.
func (d *Dense[T]) Evict(ctx context.Context, dev DeviceMemory) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.copyOn(dev)
	if c == nil {
		return nil
	}
	if c.valid && d.stale && d.validCopies() == 1 {
		if err := d.downloadLocked(ctx); err != nil {
			return err
		}
	}
	return d.freeCopy(c)
}

// EvictAll frees the region's buffers on every device, downloading the
// current value first if only devices hold it.
func (d *Dense[T]) EvictAll(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.downloadLocked(ctx); err != nil {
		return err
	}
	var errs []error
	for _, c := range slices.Clone(d.copies) {
		errs = append(errs, d.freeCopy(c))
	}
	return errors.Join(errs...)
}

func (d *Dense[T]) copyOn(dev DeviceMemory) *devCopy {
	name := dev.Name()
	for _, c := range d.copies {
		if c.dev.Name() == name {
			return c
		}
	}
	return nil
}

func (d *Dense[T]) validCopies() int {
	n := 0
	for _, c := range d.copies {
		if c.valid {
			n++
		}
	}
	return n
}

func (d *Dense[T]) freeCopy(c *devCopy) error {
	i := slices.Index(d.copies, c)
	d.copies = slices.Delete(d.copies, i, i+1)
	if err := c.dev.Free(c.buf); err != nil {
		return fmt.Errorf("region: %v: free on %s: %w", d.id, c.dev.Name(), err)
	}
	return nil
}

func (d *Dense[T]) dataBytes() int64 { return int64(d.roi.Len()) * int64(unsafe.Sizeof(T(0))) }

func (d *Dense[T]) uploadLocked(ctx context.Context, dev DeviceMemory) (Buffer, error) {
	if dev == nil {
		return nil, fmt.Errorf("region: upload %v: nil device", d.id)
	}
	c := d.copyOn(dev)
	if c != nil && c.valid {
		return c.buf, nil
	}
	if err := d.loadLocked(ctx); err != nil { // host memory current
		return nil, err
	}
	if c == nil {
		var err error
		if c, err = d.allocCopy(ctx, dev); err != nil {
			return nil, err
		}
	}
	b := make([]byte, d.dataBytes())
	encode(b, d.data)
	if err := dev.Upload(ctx, c.buf, b); err != nil {
		return nil, fmt.Errorf("region: upload %v to %s: %w", d.id, dev.Name(), err)
	}
	c.valid = true
	return c.buf, nil
}

// allocCopy allocates a (not yet current) copy of the ROI on dev.
func (d *Dense[T]) allocCopy(ctx context.Context, dev DeviceMemory) (*devCopy, error) {
	size := d.dataBytes()
	buf, err := dev.Alloc(ctx, size)
	if err != nil {
		return nil, fmt.Errorf("region: %v: allocate %d bytes on %s: %w", d.id, size, dev.Name(), err)
	}
	c := &devCopy{dev: dev, buf: buf}
	d.copies = append(d.copies, c)
	return c, nil
}

// downloadLocked makes host memory current, from a device copy if the
// host's is stale.
func (d *Dense[T]) downloadLocked(ctx context.Context) error {
	if !d.stale {
		return nil
	}
	var src *devCopy
	for _, c := range d.copies {
		if c.valid {
			src = c
			break
		}
	}
	if src == nil { // cannot happen: stale host implies a current copy
		return fmt.Errorf("region: download %v: %w", d.id, ErrNotResident)
	}
	b := make([]byte, d.dataBytes())
	if err := src.dev.Download(ctx, b, src.buf); err != nil {
		return fmt.Errorf("region: download %v from %s: %w", d.id, src.dev.Name(), err)
	}
	decode(d.data, b)
	d.stale = false
	return nil
}

// dropCopies frees every device copy (the ROI changes); host memory must
// be current.
func (d *Dense[T]) dropCopies() error {
	var errs []error
	for _, c := range slices.Clone(d.copies) {
		errs = append(errs, d.freeCopy(c))
	}
	return errors.Join(errs...)
}
