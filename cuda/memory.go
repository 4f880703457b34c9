package cuda

import (
	"fmt"
	"runtime"
	"unsafe"
)

// DevicePtr is a device memory address (a CUdeviceptr).
type DevicePtr uint64

// Elem is the element types that may be copied between Go slices and
// device memory: fixed-size numbers without pointers.
type Elem interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64 |
		~float32 | ~float64 | ~complex64 | ~complex128
}

// elemSize returns the size in bytes of one T.
func elemSize[T Elem]() int64 {
	var v T
	return int64(unsafe.Sizeof(v))
}

// DeviceMem is a block of device memory: an allocation made by
// [Device.Alloc] (directly or through a memory pool's allocator from
// package cudapool), or a slice of one. It is a small value; copies refer
// to the same memory. The zero DeviceMem refers to nothing.
type DeviceMem struct {
	ptr    DevicePtr
	size   int64
	dev    *Device
	sliced bool // made by Slice: not an allocation, cannot be freed
}

// Ptr returns the device address of the first byte.
func (m DeviceMem) Ptr() DevicePtr { return m.ptr }

// Size returns the size in bytes.
func (m DeviceMem) Size() int64 { return m.size }

// Device returns the device the memory is on (nil for the zero DeviceMem).
func (m DeviceMem) Device() *Device { return m.dev }

// Slice returns the n bytes of m starting at byte off. It panics if the
// range is not within m, like slicing a Go slice out of range. A slice
// cannot be freed; free the allocation it came from.
func (m DeviceMem) Slice(off, n int64) DeviceMem {
	if off < 0 || n < 0 || off > m.size || n > m.size-off {
		panic(fmt.Sprintf("cuda: DeviceMem.Slice(%d, %d) out of range [0, %d]", off, n, m.size))
	}
	return DeviceMem{ptr: m.ptr + DevicePtr(off), size: n, dev: m.dev, sliced: true}
}

// Alloc allocates bytes bytes of device memory.
func (d *Device) Alloc(bytes int64) (DeviceMem, error) {
	if bytes <= 0 {
		return DeviceMem{}, fmt.Errorf("%w: Alloc(%d): size must be positive", ErrSize, bytes)
	}
	c, err := d.context()
	if err != nil {
		return DeviceMem{}, err
	}
	p, err := drvMemAlloc(c, bytes)
	if err != nil {
		return DeviceMem{}, fmt.Errorf("cuda: device %d: alloc %d bytes: %w", d.ordinal, bytes, err)
	}
	return DeviceMem{ptr: p, size: bytes, dev: d}, nil
}

// Free releases the memory. Freeing the zero DeviceMem does nothing;
// freeing a slice is an error. Free waits for work still using the memory
// to finish (cuMemFree synchronizes). Free an allocation once.
func (m DeviceMem) Free() error {
	if m.dev == nil {
		return nil
	}
	if m.sliced {
		return fmt.Errorf("%w: Free of a DeviceMem made by Slice", ErrSize)
	}
	c, err := m.dev.context()
	if err != nil {
		return err
	}
	if err := drvMemFree(c, m.ptr); err != nil {
		return fmt.Errorf("cuda: device %d: free: %w", m.dev.ordinal, err)
	}
	return nil
}

// HostMem is a block of page-locked (pinned) host memory, which the GPU
// reads and writes by DMA: copies between HostMem and [DeviceMem] on a
// [Stream] run asynchronously and at full bus speed. It is allocated
// portable (usable with every device). Like [DeviceMem] it is a small
// value; the zero HostMem refers to nothing.
type HostMem struct {
	p      unsafe.Pointer // C memory, never Go memory
	size   int64
	dev    *Device
	sliced bool
}

// Size returns the size in bytes.
func (h HostMem) Size() int64 { return h.size }

// Bytes returns the memory as a byte slice (nil for the zero HostMem). The
// slice is valid until Free.
func (h HostMem) Bytes() []byte {
	if h.p == nil {
		return nil
	}
	return unsafe.Slice((*byte)(h.p), h.size)
}

// Slice returns the n bytes of h starting at byte off; it panics if the
// range is not within h. A slice cannot be freed.
func (h HostMem) Slice(off, n int64) HostMem {
	if off < 0 || n < 0 || off > h.size || n > h.size-off {
		panic(fmt.Sprintf("cuda: HostMem.Slice(%d, %d) out of range [0, %d]", off, n, h.size))
	}
	if h.p == nil {
		return HostMem{}
	}
	return HostMem{p: unsafe.Add(h.p, off), size: n, dev: h.dev, sliced: true}
}

// DevicePtr returns the address at which kernels read and write h in
// place, across the bus and without a copy: under unified addressing,
// which CUDA enables in every 64-bit process, the page-locked memory of
// AllocHost is mapped into every device's address space at its host
// address. Each access of a kernel crosses the bus, so it suits small
// data a kernel writes once in a while, such as a flag or a counter,
// which the host then reads after waiting for the kernel (an [Event] or a
// [Stream.Synchronize]) with no copy queued behind other transfers. The
// zero HostMem gives 0.
func (h HostMem) DevicePtr() DevicePtr { return DevicePtr(uintptr(h.p)) }

// HostSlice returns h as a []T of len h.Size()/sizeof(T) (a trailing
// partial element is left out). It panics if h is not aligned for T (only
// possible for a slice at an odd offset: allocations are page aligned).
// The slice is valid until h is freed.
func HostSlice[T Elem](h HostMem) []T {
	if h.p == nil {
		return nil
	}
	es := elemSize[T]()
	if uintptr(h.p)%uintptr(es) != 0 {
		panic(fmt.Sprintf("cuda: HostSlice: memory not aligned for %d-byte elements", es))
	}
	return unsafe.Slice((*T)(h.p), h.size/es)
}

// AllocHost allocates bytes bytes of pinned host memory (cuMemHostAlloc,
// portable). Pinned memory is a scarce system resource: allocate it for
// buffers that are reused, as in a memory pool.
func (d *Device) AllocHost(bytes int64) (HostMem, error) {
	if bytes <= 0 {
		return HostMem{}, fmt.Errorf("%w: AllocHost(%d): size must be positive", ErrSize, bytes)
	}
	c, err := d.context()
	if err != nil {
		return HostMem{}, err
	}
	p, err := drvHostAlloc(c, bytes)
	if err != nil {
		return HostMem{}, fmt.Errorf("cuda: device %d: pinned alloc %d bytes: %w", d.ordinal, bytes, err)
	}
	return HostMem{p: p, size: bytes, dev: d}, nil
}

// Free releases pinned memory. Freeing the zero HostMem does nothing;
// freeing a slice is an error. Free an allocation once, after the copies
// using it have completed.
func (h HostMem) Free() error {
	if h.p == nil {
		return nil
	}
	if h.sliced {
		return fmt.Errorf("%w: Free of a HostMem made by Slice", ErrSize)
	}
	c, err := h.dev.context()
	if err != nil {
		return err
	}
	if err := drvHostFree(c, h.p); err != nil {
		return fmt.Errorf("cuda: free pinned memory: %w", err)
	}
	return nil
}

// target resolves where an operation on memory of device d runs: the
// context, the stream handle (0: legacy default stream) and whether the
// call must wait for completion (always for a nil stream).
func target(s *Stream, d *Device) (ctx, stream uintptr, wait bool, err error) {
	if d == nil {
		return 0, 0, false, fmt.Errorf("%w: zero DeviceMem", ErrWrongDevice)
	}
	if s == nil {
		ctx, err = d.context()
		return ctx, 0, true, err
	}
	h, err := s.on(d, "memory")
	if err != nil {
		return 0, 0, false, err
	}
	return s.ctx, h, false, nil
}

// checkCopy checks that a copy moves equal sizes.
func checkCopy(op string, dst, src int64) error {
	if dst != src {
		return fmt.Errorf("%w: %s: destination has %d bytes, source %d", ErrSize, op, dst, src)
	}
	return nil
}

// CopyHtoD queues a copy of src (pinned) to dst on s; the sizes must be
// equal. With a stream the copy is asynchronous: src must not be changed,
// nor freed, until it has completed (s.Synchronize, or an [Event]). With
// a nil s the call waits for completion.
func CopyHtoD(s *Stream, dst DeviceMem, src HostMem) error {
	if err := checkCopy("CopyHtoD", dst.size, src.size); err != nil {
		return err
	}
	ctx, st, wait, err := target(s, dst.dev)
	if err != nil || dst.size == 0 {
		return err
	}
	if err := drvCopyHtoD(ctx, dst.ptr, src.p, dst.size, st, wait); err != nil {
		return fmt.Errorf("cuda: device %d: copy host to device: %w", dst.dev.ordinal, err)
	}
	return nil
}

// CopyDtoH queues a copy of src to dst (pinned) on s; the sizes must be
// equal. With a stream the copy is asynchronous: dst holds the data once
// it has completed. With a nil s the call waits for completion.
func CopyDtoH(s *Stream, dst HostMem, src DeviceMem) error {
	if err := checkCopy("CopyDtoH", dst.size, src.size); err != nil {
		return err
	}
	ctx, st, wait, err := target(s, src.dev)
	if err != nil || src.size == 0 {
		return err
	}
	if err := drvCopyDtoH(ctx, dst.p, src.ptr, src.size, st, wait); err != nil {
		return fmt.Errorf("cuda: device %d: copy device to host: %w", src.dev.ordinal, err)
	}
	return nil
}

// CopyDtoD queues a copy between two buffers of one device on s; the sizes
// must be equal. With a nil s the call waits for completion.
func CopyDtoD(s *Stream, dst, src DeviceMem) error {
	if err := checkCopy("CopyDtoD", dst.size, src.size); err != nil {
		return err
	}
	if dst.dev != nil && src.dev != nil && dst.dev.ordinal != src.dev.ordinal {
		return fmt.Errorf("%w: CopyDtoD between devices %d and %d", ErrWrongDevice, src.dev.ordinal, dst.dev.ordinal)
	}
	ctx, st, wait, err := target(s, dst.dev)
	if err != nil || dst.size == 0 {
		return err
	}
	if err := drvCopyDtoD(ctx, dst.ptr, src.ptr, dst.size, st, wait); err != nil {
		return fmt.Errorf("cuda: device %d: copy device to device: %w", dst.dev.ordinal, err)
	}
	return nil
}

// Memset queues setting every byte of dst to value on s. With a nil s the
// call waits for completion.
func Memset(s *Stream, dst DeviceMem, value byte) error {
	ctx, st, wait, err := target(s, dst.dev)
	if err != nil || dst.size == 0 {
		return err
	}
	if err := drvMemset(ctx, dst.ptr, value, dst.size, st, wait); err != nil {
		return fmt.Errorf("cuda: device %d: memset: %w", dst.dev.ordinal, err)
	}
	return nil
}

// CopyToDevice copies the Go slice src to dst, whose size must be
// len(src)*sizeof(T) bytes. The copy is queued on s (after the work
// already queued there) and the call waits for it, so src may be reused
// when it returns. Ordinary Go memory is pageable, so the copy is staged by
// the driver and cannot overlap other work; use [HostMem] and [CopyHtoD]
// for that. src may be any Go memory, a field of a struct included: it is
// pinned for the call.
func CopyToDevice[T Elem](s *Stream, dst DeviceMem, src []T) error {
	n := int64(len(src)) * elemSize[T]()
	if err := checkCopy("CopyToDevice", dst.size, n); err != nil {
		return err
	}
	ctx, st, _, err := target(s, dst.dev)
	if err != nil || n == 0 {
		return err
	}
	var pin runtime.Pinner
	pin.Pin(&src[0])
	defer pin.Unpin()
	if err := drvCopyGoHtoD(ctx, dst.ptr, uintptr(unsafe.Pointer(&src[0])), n, st); err != nil {
		return fmt.Errorf("cuda: device %d: copy to device: %w", dst.dev.ordinal, err)
	}
	return nil
}

// CopyFromDevice copies src into the Go slice dst, whose size
// len(dst)*sizeof(T) must equal src's. The copy is queued on s (after the
// work already queued there) and the call waits for it.
func CopyFromDevice[T Elem](s *Stream, dst []T, src DeviceMem) error {
	n := int64(len(dst)) * elemSize[T]()
	if err := checkCopy("CopyFromDevice", n, src.size); err != nil {
		return err
	}
	ctx, st, _, err := target(s, src.dev)
	if err != nil || n == 0 {
		return err
	}
	var pin runtime.Pinner
	pin.Pin(&dst[0])
	defer pin.Unpin()
	if err := drvCopyGoDtoH(ctx, uintptr(unsafe.Pointer(&dst[0])), src.ptr, n, st); err != nil {
		return fmt.Errorf("cuda: device %d: copy from device: %w", src.dev.ordinal, err)
	}
	return nil
}
