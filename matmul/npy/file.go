package npy

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
)

// pathErr attaches op and the file name to err.
func pathErr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// ioErr wraps an error from positioned I/O on name. Errors from *os.File
// already carry the name and are returned unchanged; a short read means the
// file shrank after it was opened.
func ioErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return pathErr(op, name, fmt.Errorf("%w: data section truncated: %w", ErrFormat, io.ErrUnexpectedEOF))
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return err
	}
	return pathErr(op, name, err)
}

// checkBlock validates a request for the block of rows x cols elements at
// (r0, c0) of h's matrix, stored in a buffer of n elements with consecutive
// block rows stride elements apart.
func checkBlock(h Header, r0, c0, rows, cols, stride, n int) error {
	if r0 < 0 || c0 < 0 || rows < 0 || cols < 0 || rows > h.Rows-r0 || cols > h.Cols-c0 {
		return rangeErr("block of %dx%d at (%d, %d) does not fit in a %dx%d matrix",
			rows, cols, r0, c0, h.Rows, h.Cols)
	}
	if stride < cols {
		return rangeErr("stride %d is less than block width %d", stride, cols)
	}
	if rows == 0 || cols == 0 {
		return nil
	}
	if rows > 1 && stride > (math.MaxInt-cols)/(rows-1) {
		return rangeErr("stride %d too large for %d rows", stride, rows)
	}
	if need := (rows-1)*stride + cols; n < need {
		return rangeErr("buffer has %d elements, a %dx%d block with stride %d needs %d",
			n, rows, cols, stride, need)
	}
	return nil
}

// offset returns the file offset of element (r, c).
func (h Header) offset(r, c int) int64 {
	return h.DataOffset + (int64(r)*int64(h.Cols)+int64(c))*elemSize
}

// File is an open .npy file holding a float64 matrix, read by blocks.
// Its methods other than Close may be called concurrently.
type File struct {
	f    *os.File
	name string
	hdr  Header
}

// Open opens the named .npy file for reading and validates its header and
// its size: the file must be a regular file exactly Header.FileSize bytes
// long (a shorter file has lost data; a longer one has trailing bytes that
// this package would silently ignore, so it is rejected too).
func Open(name string) (*File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	h, err := validateFile(f, name)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &File{f: f, name: name, hdr: h}, nil
}

func validateFile(f *os.File, name string) (Header, error) {
	fi, err := f.Stat()
	if err != nil {
		return Header{}, err
	}
	if !fi.Mode().IsRegular() {
		return Header{}, pathErr("open", name, fmt.Errorf("%w: not a regular file (mode %v)", ErrUnsupported, fi.Mode()))
	}
	h, err := ReadHeader(io.NewSectionReader(f, 0, fi.Size()))
	if err != nil {
		return Header{}, pathErr("open", name, err)
	}
	switch want := h.FileSize(); {
	case fi.Size() < want:
		return Header{}, pathErr("open", name, formatErr(
			"data section truncated: file is %d bytes, shape (%d, %d) needs %d",
			fi.Size(), h.Rows, h.Cols, want))
	case fi.Size() > want:
		return Header{}, pathErr("open", name, formatErr(
			"%d trailing bytes after the data of shape (%d, %d)",
			fi.Size()-want, h.Rows, h.Cols))
	}
	return h, nil
}

// Name returns the name the file was opened with.
func (f *File) Name() string { return f.name }

// Header returns the file's header.
func (f *File) Header() Header { return f.hdr }

// Rows returns the number of matrix rows.
func (f *File) Rows() int { return f.hdr.Rows }

// Cols returns the number of matrix columns.
func (f *File) Cols() int { return f.hdr.Cols }

// ReadBlock reads the rows x cols block whose top-left element is (r0, c0)
// into dst in row-major order: element (r0+i, c0+j) goes to dst[i*cols+j].
// dst must have at least rows*cols elements. A block of full rows is read
// with a single positioned read, other blocks with one read per row.
func (f *File) ReadBlock(r0, c0, rows, cols int, dst []float64) error {
	return f.ReadBlockStride(r0, c0, rows, cols, dst, cols)
}

// ReadBlockStride is like ReadBlock but stores element (r0+i, c0+j) at
// dst[i*stride+j], so that a block can be read into part of a larger
// row-major buffer. stride must be at least cols; elements of dst between
// block rows are left unchanged.
func (f *File) ReadBlockStride(r0, c0, rows, cols int, dst []float64, stride int) error {
	if err := checkBlock(f.hdr, r0, c0, rows, cols, stride, len(dst)); err != nil {
		return pathErr("read", f.name, err)
	}
	if rows == 0 || cols == 0 {
		return nil
	}
	off := f.hdr.offset(r0, c0)
	if rows == 1 || (cols == f.hdr.Cols && stride == cols) {
		n := (rows-1)*stride + cols
		return ioErr("read", f.name, readFloats(f.f, off, dst[:n], scratch(n)))
	}
	buf := scratch(cols)
	rowBytes := int64(f.hdr.Cols) * elemSize
	for i := range rows {
		seg := dst[i*stride : i*stride+cols]
		if err := readFloats(f.f, off, seg, buf); err != nil {
			return ioErr("read", f.name, err)
		}
		off += rowBytes
	}
	return nil
}

// ReadAll reads the whole matrix into a new slice in row-major order.
func (f *File) ReadAll() ([]float64, error) {
	// The element count fits in an int: ReadHeader checked it.
	data := make([]float64, f.hdr.Rows*f.hdr.Cols)
	if err := f.ReadBlock(0, 0, f.hdr.Rows, f.hdr.Cols, data); err != nil {
		return nil, err
	}
	return data, nil
}

// Close closes the file.
func (f *File) Close() error { return f.f.Close() }

// Writer writes a float64 matrix to a .npy file by blocks. Its methods
// other than Close may be called concurrently; concurrent WriteBlock calls
// must write disjoint blocks.
type Writer struct {
	f    *os.File
	name string
	hdr  Header
}

// Create creates (or truncates) the named file and sets it up to hold a
// rows x cols float64 matrix: it writes the header and extends the file to
// its full size, so that the data section reads as zeros until blocks are
// written (on most file systems the unwritten parts take no disk space).
// The caller must call Close and check its error.
func Create(name string, rows, cols int) (*Writer, error) {
	pre, err := EncodeHeader(rows, cols)
	if err != nil {
		return nil, pathErr("create", name, err)
	}
	h := Header{Major: pre[6], Minor: pre[7], Rows: rows, Cols: cols, DataOffset: int64(len(pre))}
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
	if err != nil {
		return nil, err
	}
	if _, err := f.WriteAt(pre, 0); err != nil {
		f.Close()
		os.Remove(name)
		return nil, err
	}
	if err := f.Truncate(h.FileSize()); err != nil {
		f.Close()
		os.Remove(name)
		return nil, err
	}
	return &Writer{f: f, name: name, hdr: h}, nil
}

// Name returns the name the file was created with.
func (w *Writer) Name() string { return w.name }

// Header returns the header written to the file.
func (w *Writer) Header() Header { return w.hdr }

// Rows returns the number of matrix rows.
func (w *Writer) Rows() int { return w.hdr.Rows }

// Cols returns the number of matrix columns.
func (w *Writer) Cols() int { return w.hdr.Cols }

// WriteBlock writes the rows x cols block whose top-left element is
// (r0, c0) from src in row-major order: src[i*cols+j] becomes element
// (r0+i, c0+j). src must have at least rows*cols elements. A block of full
// rows is written with a single positioned write, other blocks with one
// write per row.
func (w *Writer) WriteBlock(r0, c0, rows, cols int, src []float64) error {
	return w.WriteBlockStride(r0, c0, rows, cols, src, cols)
}

// WriteBlockStride is like WriteBlock but takes element (r0+i, c0+j) from
// src[i*stride+j], so that a block can be written from part of a larger
// row-major buffer. stride must be at least cols.
func (w *Writer) WriteBlockStride(r0, c0, rows, cols int, src []float64, stride int) error {
	if err := checkBlock(w.hdr, r0, c0, rows, cols, stride, len(src)); err != nil {
		return pathErr("write", w.name, err)
	}
	if rows == 0 || cols == 0 {
		return nil
	}
	off := w.hdr.offset(r0, c0)
	if rows == 1 || (cols == w.hdr.Cols && stride == cols) {
		n := (rows-1)*stride + cols
		return ioErr("write", w.name, writeFloats(w.f, off, src[:n], scratch(n)))
	}
	buf := scratch(cols)
	rowBytes := int64(w.hdr.Cols) * elemSize
	for i := range rows {
		seg := src[i*stride : i*stride+cols]
		if err := writeFloats(w.f, off, seg, buf); err != nil {
			return ioErr("write", w.name, err)
		}
		off += rowBytes
	}
	return nil
}

// Sync commits the file's contents to stable storage (fsync).
func (w *Writer) Sync() error { return w.f.Sync() }

// Close closes the file. Its error must be checked: a failure to write back
// data may only be reported here. Close does not sync; call Sync first when
// durability matters.
func (w *Writer) Close() error { return w.f.Close() }

// Write writes data, a rows x cols matrix in row-major order, to the named
// file, creating or truncating it. len(data) must be rows*cols. On failure
// the partially written file is removed.
func Write(name string, rows, cols int, data []float64) error {
	if checkShape(rows, cols, 0) == nil && len(data) != rows*cols {
		return pathErr("write", name, rangeErr("data has %d elements, shape (%d, %d) needs %d",
			len(data), rows, cols, rows*cols))
	}
	w, err := Create(name, rows, cols)
	if err != nil {
		return err
	}
	err = w.WriteBlock(0, 0, rows, cols, data)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
		return err
	}
	return nil
}

// Read reads the whole matrix stored in the named file and returns its shape
// and elements in row-major order.
func Read(name string) (rows, cols int, data []float64, err error) {
	f, err := Open(name)
	if err != nil {
		return 0, 0, nil, err
	}
	data, err = f.ReadAll()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, 0, nil, err
	}
	return f.Rows(), f.Cols(), data, nil
}
