package cuda

import (
	"fmt"
	"time"
	"unsafe"
)

// HostRegion is host memory that [RegisterHost] page-locked (cuMemHostRegister,
// portable): copies between it and device memory on a [Stream] run by DMA,
// asynchronously and at full bus speed, as from [HostMem], without a
// staging copy. The zero HostRegion refers to nothing.
type HostRegion struct {
	addr uintptr
	size int64
	dev  *Device
}

// Size returns the size in bytes.
func (r HostRegion) Size() int64 { return r.size }

// RegisterHost page-locks the memory of s for copies with every device
// (registration is portable; d only names the context that makes it). It
// is meant for large Go slices that are copied from or to the device many
// times: registering takes time (the kernel pins each page). s must stay
// alive, and must not be resliced into other registrations, until
// [HostRegion.Unregister]; the Go garbage collector does not move memory,
// so the registration stays valid as long as the slice is reachable.
// Registering memory that overlaps a registered region fails with the
// driver's CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED.
func RegisterHost[T Elem](d *Device, s []T) (HostRegion, error) {
	n := int64(len(s)) * elemSize[T]()
	if n == 0 {
		return HostRegion{}, fmt.Errorf("%w: RegisterHost of an empty slice", ErrSize)
	}
	c, err := d.context()
	if err != nil {
		return HostRegion{}, err
	}
	addr := uintptr(unsafe.Pointer(&s[0]))
	if err := drvHostRegister(c, addr, n); err != nil {
		return HostRegion{}, fmt.Errorf("cuda: device %d: register %d bytes of host memory: %w", d.ordinal, n, err)
	}
	return HostRegion{addr: addr, size: n, dev: d}, nil
}

// Unregister unlocks the region. Copies using it must have completed.
// Unregistering the zero HostRegion does nothing.
func (r HostRegion) Unregister() error {
	if r.dev == nil {
		return nil
	}
	c, err := r.dev.context()
	if err != nil {
		return err
	}
	if err := drvHostUnregister(c, r.addr); err != nil {
		return fmt.Errorf("cuda: device %d: unregister host memory: %w", r.dev.ordinal, err)
	}
	return nil
}

// copy2DCheck checks a rows x cols copy between host memory of hostLen
// elements with stride lds and device memory of devBytes with stride ldd.
func copy2DCheck(op string, hostLen, ldh int, devBytes int64, ldd, rows, cols int, es int64) error {
	if rows < 0 || cols < 0 || ldh < cols || ldd < cols {
		return fmt.Errorf("%w: %s: %dx%d with strides %d (host) and %d (device)", ErrSize, op, rows, cols, ldh, ldd)
	}
	if rows == 0 || cols == 0 {
		return nil
	}
	if need := (rows-1)*ldh + cols; need > hostLen {
		return fmt.Errorf("%w: %s: host slice has %d elements, the copy reaches %d", ErrSize, op, hostLen, need)
	}
	if need := int64((rows-1)*ldd+cols) * es; need > devBytes {
		return fmt.Errorf("%w: %s: device memory has %d bytes, the copy reaches %d", ErrSize, op, devBytes, need)
	}
	return nil
}

// CopyToDevice2D queues the copy of a rows x cols matrix from the Go slice
// src (row-major, stride lds elements) into dst (row-major, stride ldd) on
// s, a stream. It is asynchronous when src lies in a [HostRegion] (src
// must then stay unchanged until the copy completes); from pageable memory
// the driver stages it and the call may wait.
func CopyToDevice2D[T Elem](s *Stream, dst DeviceMem, ldd int, src []T, lds, rows, cols int) error {
	es := elemSize[T]()
	if err := copy2DCheck("CopyToDevice2D", len(src), lds, dst.size, ldd, rows, cols, es); err != nil {
		return err
	}
	if s == nil {
		return fmt.Errorf("%w: CopyToDevice2D needs a stream", ErrClosed)
	}
	h, err := s.on(dst.dev, "memory")
	if err != nil || rows == 0 || cols == 0 {
		return err
	}
	if err := drvCopy2D(s.ctx, true, dst.ptr, int64(ldd)*es, uintptr(unsafe.Pointer(&src[0])), int64(lds)*es, int64(cols)*es, int64(rows), h); err != nil {
		return fmt.Errorf("cuda: device %d: 2-D copy to device: %w", dst.dev.ordinal, err)
	}
	return nil
}

// CopyFromDevice2D queues the copy of a rows x cols matrix from src
// (row-major, stride lds elements) into the Go slice dst (stride ldd) on
// s; dst holds the data once the copy has completed. It is asynchronous
// when dst lies in a [HostRegion].
func CopyFromDevice2D[T Elem](s *Stream, dst []T, ldd int, src DeviceMem, lds, rows, cols int) error {
	es := elemSize[T]()
	if err := copy2DCheck("CopyFromDevice2D", len(dst), ldd, src.size, lds, rows, cols, es); err != nil {
		return err
	}
	if s == nil {
		return fmt.Errorf("%w: CopyFromDevice2D needs a stream", ErrClosed)
	}
	h, err := s.on(src.dev, "memory")
	if err != nil || rows == 0 || cols == 0 {
		return err
	}
	if err := drvCopy2D(s.ctx, false, src.ptr, int64(lds)*es, uintptr(unsafe.Pointer(&dst[0])), int64(ldd)*es, int64(cols)*es, int64(rows), h); err != nil {
		return fmt.Errorf("cuda: device %d: 2-D copy from device: %w", src.dev.ordinal, err)
	}
	return nil
}

// NewTimingEvent creates an event on d like [Device.NewEvent] that also
// records when it completes, for [Event.Since]: for timing work on the
// GPU itself (a trace of copies and kernels) rather than from the host.
// Such events cost a little more to record.
func (d *Device) NewTimingEvent() (*Event, error) {
	return d.newEvent("create timing event", drvEventCreateTimed)
}

// Since returns the GPU time from start's completion to e's, both made by
// [Device.NewTimingEvent] on the same device, recorded and completed
// (negative when e completed first). The driver's resolution is about
// half a microsecond.
func (e *Event) Since(start *Event) (time.Duration, error) {
	eh, err := e.handle()
	if err != nil {
		return 0, err
	}
	sh, err := start.handle()
	if err != nil {
		return 0, err
	}
	if start.ctx != e.ctx {
		return 0, fmt.Errorf("cuda: events of devices %d and %d", start.dev.ordinal, e.dev.ordinal)
	}
	ms, err := drvEventElapsed(e.ctx, sh, eh)
	if err != nil {
		return 0, fmt.Errorf("cuda: device %d: event elapsed time: %w", e.dev.ordinal, err)
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// NewBlockingEvent creates an event on d like [Device.NewEvent], whose
// Synchronize puts the calling thread to sleep until the event completes
// (CU_EVENT_BLOCKING_SYNC) instead of spinning on a core as events do by
// default: for host threads that wait for long copies while other
// goroutines need the cores.
func (d *Device) NewBlockingEvent() (*Event, error) {
	return d.newEvent("create event", drvEventCreateBlocking)
}
