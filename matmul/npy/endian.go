package npy

import (
	"encoding/binary"
	"errors"
	"io"
	"math"
	"unsafe"
)

// hostLittleEndian reports whether float64 values are stored little-endian
// in this process's memory, in which case the .npy data bytes can be read
// into and written from []float64 memory directly, with no conversion.
var hostLittleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// zeroCopy selects the direct path; tests turn it off to exercise the
// portable conversion path on little-endian machines.
var zeroCopy = hostLittleEndian

// chunkElems is the number of elements converted per I/O call on the
// portable path (256 KiB of bytes).
const chunkElems = 1 << 15

// asBytes returns the memory of s as a byte slice. Only valid for the
// zero-copy path on little-endian hosts.
func asBytes(s []float64) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*elemSize)
}

// scratch returns a conversion buffer big enough for the portable path for
// segments of n elements, or nil on the zero-copy path.
func scratch(n int) []byte {
	if zeroCopy || n == 0 {
		return nil
	}
	return make([]byte, min(n, chunkElems)*elemSize)
}

// readAtFull is ReaderAt.ReadAt that treats a full read as success even if
// the reader also reported io.EOF, and a short one as io.ErrUnexpectedEOF.
func readAtFull(r io.ReaderAt, b []byte, off int64) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readFloats fills dst with the little-endian float64 values stored at off.
// buf is the buffer returned by scratch.
func readFloats(r io.ReaderAt, off int64, dst []float64, buf []byte) error {
	if zeroCopy {
		return readAtFull(r, asBytes(dst), off)
	}
	for len(dst) > 0 {
		n := min(len(dst), len(buf)/elemSize)
		b := buf[:n*elemSize]
		if err := readAtFull(r, b, off); err != nil {
			return err
		}
		for i := range dst[:n] {
			dst[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[i*elemSize:]))
		}
		dst = dst[n:]
		off += int64(len(b))
	}
	return nil
}

// writeFloats stores src at off as little-endian float64 values. buf is the
// buffer returned by scratch.
func writeFloats(w io.WriterAt, off int64, src []float64, buf []byte) error {
	if zeroCopy {
		_, err := w.WriteAt(asBytes(src), off)
		return err
	}
	for len(src) > 0 {
		n := min(len(src), len(buf)/elemSize)
		b := buf[:n*elemSize]
		for i, v := range src[:n] {
			binary.LittleEndian.PutUint64(b[i*elemSize:], math.Float64bits(v))
		}
		if _, err := w.WriteAt(b, off); err != nil {
			return err
		}
		src = src[n:]
		off += int64(len(b))
	}
	return nil
}
