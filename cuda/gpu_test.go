//go:build cuda

package cuda

// Tests that need a GPU. They are compiled only with -tags cuda and skip,
// with the reason, when no CUDA device is usable; build them here with
// scripts/build-cuda-tests.sh and run the binary on a GPU machine.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/gohtgs/htgs/device"
)

// gpus returns this machine's CUDA devices, closed when the test ends, or
// skips the test when there are none.
func gpus(tb testing.TB) []*Device {
	tb.Helper()
	ds, err := Devices()
	if err != nil {
		if !errors.Is(err, ErrNoDevice) {
			tb.Fatalf("Devices() failed with an error that does not wrap ErrNoDevice: %v", err)
		}
		tb.Skipf("no CUDA device: %v", err)
	}
	tb.Cleanup(func() {
		for _, d := range ds {
			if err := d.Close(); err != nil {
				tb.Errorf("Close %v: %v", d, err)
			}
		}
	})
	return ds
}

func gpu(tb testing.TB) *Device { tb.Helper(); return gpus(tb)[0] }

// must fails the test on err.
func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// alloc allocates device memory freed at the end of the test.
func alloc(tb testing.TB, d *Device, bytes int64) DeviceMem {
	tb.Helper()
	m, err := d.Alloc(bytes)
	must(tb, err)
	tb.Cleanup(func() {
		if err := m.Free(); err != nil {
			tb.Errorf("Free: %v", err)
		}
	})
	return m
}

// upload allocates device memory holding v.
func upload[T Elem](tb testing.TB, d *Device, v []T) DeviceMem {
	tb.Helper()
	m := alloc(tb, d, int64(len(v))*elemSize[T]())
	must(tb, CopyToDevice(nil, m, v))
	return m
}

// download returns the n values of T held in m.
func download[T Elem](tb testing.TB, m DeviceMem) []T {
	tb.Helper()
	v := make([]T, m.Size()/elemSize[T]())
	must(tb, CopyFromDevice(nil, v, m))
	return v
}

func randFloats(r *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = 2*r.Float64() - 1
	}
	return v
}

func randComplex(r *rand.Rand, n int) []complex128 {
	v := make([]complex128, n)
	for i := range v {
		v[i] = complex(2*r.Float64()-1, 2*r.Float64()-1)
	}
	return v
}

// TestNoDeviceIsReported runs where there is no GPU: it checks that the
// failure is an error (not a crash) that says what is missing.
func TestNoDeviceIsReported(t *testing.T) {
	ds, err := Devices()
	if err == nil {
		for _, d := range ds {
			_ = d.Close()
		}
		t.Skip("a CUDA device is present")
	}
	if !errors.Is(err, ErrNoDevice) || errors.Is(err, ErrNoCUDA) {
		t.Fatalf("Devices() = %v, want an error wrapping ErrNoDevice (and not ErrNoCUDA: this build has the tag)", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "libcuda") && !strings.Contains(msg, "cuInit") && !strings.Contains(msg, "no devices") {
		t.Errorf("error %q names neither libcuda.so.1, cuInit nor the device count", msg)
	}
	t.Logf("as expected without a GPU: %v", err)
}

func TestLibraryOpenFailureIsReported(t *testing.T) {
	err := tryDlopen("libhtgs-does-not-exist.so.1")
	if !errors.Is(err, ErrLibrary) || !strings.Contains(err.Error(), "libhtgs-does-not-exist.so.1") {
		t.Errorf("tryDlopen of a missing library = %v, want ErrLibrary naming it", err)
	}
	if err := tryDlopen("libc.so.6"); err != nil {
		t.Errorf("tryDlopen(libc.so.6) = %v", err)
	}
}

func TestDevices(t *testing.T) {
	ds := gpus(t)
	v, err := DriverVersion()
	must(t, err)
	t.Logf("driver supports CUDA %d.%d", v/1000, v%1000/10)
	if v < 11000 {
		t.Errorf("driver version %d < 11000", v)
	}
	for i, d := range ds {
		t.Logf("%v, %d SMs", d, d.Multiprocessors())
		var dev device.Device = d
		if dev.ID() != i || dev.Kind() != device.GPU || dev.Name() == "" || dev.Memory() <= 0 {
			t.Errorf("device %d: ID %d Kind %v Name %q Memory %d", i, dev.ID(), dev.Kind(), dev.Name(), dev.Memory())
		}
		if major, _ := d.ComputeCapability(); major < 5 || d.Multiprocessors() < 1 {
			t.Errorf("device %d: compute capability %d, %d SMs", i, major, d.Multiprocessors())
		}
		free, total, err := d.MemInfo()
		must(t, err)
		if total <= 0 || free <= 0 || free > total || total > d.Memory()+(1<<30) {
			t.Errorf("device %d: MemInfo free %d total %d, Memory %d", i, free, total, d.Memory())
		}
	}
}

func TestBind(t *testing.T) {
	d := gpu(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if Bound(d) {
		t.Fatal("Bound before Bind")
	}
	unbind, err := Bind(context.Background(), d)
	must(t, err)
	if !Bound(d) {
		t.Error("not Bound after Bind")
	}
	// Calls made while bound, and a nested Bind, keep the binding.
	m := upload(t, d, []float64{1, 2, 3})
	if got := download[float64](t, m); got[2] != 3 {
		t.Errorf("round trip while bound: %v", got)
	}
	inner, err := Bind(context.Background(), d)
	must(t, err)
	inner()
	inner() // idempotent
	if !Bound(d) {
		t.Error("nested unbind undid the outer Bind")
	}
	unbind()
	if Bound(d) {
		t.Error("Bound after unbind")
	}
	unbind()
}

// TestBindConcurrent runs GPU work from many goroutines, bound and not,
// at once.
func TestBindConcurrent(t *testing.T) {
	d := gpu(t)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- func() error {
				if g%2 == 0 {
					unbind, err := Bind(context.Background(), d)
					if err != nil {
						return err
					}
					defer unbind()
				}
				s, err := d.NewStream()
				if err != nil {
					return err
				}
				defer s.Close()
				m, err := d.Alloc(8 * 1000)
				if err != nil {
					return err
				}
				defer m.Free()
				want := make([]float64, 1000)
				for i := range want {
					want[i] = float64(g*1000 + i)
				}
				for range 20 {
					if err := CopyToDevice(s, m, want); err != nil {
						return err
					}
					got := make([]float64, 1000)
					if err := CopyFromDevice(s, got, m); err != nil {
						return err
					}
					for i := range got {
						if got[i] != want[i] {
							return fmt.Errorf("goroutine %d: element %d = %g, want %g", g, i, got[i], want[i])
						}
					}
				}
				return nil
			}()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func TestRoundTripPageable(t *testing.T) {
	d := gpu(t)
	r := rand.New(rand.NewPCG(1, 2))
	want := randFloats(r, 1<<20+3)
	m := upload(t, d, want)
	got := download[float64](t, m)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("float64 element %d: %g, want %g", i, got[i], want[i])
		}
	}
	s, err := d.NewStream()
	must(t, err)
	defer s.Close()
	cw := randComplex(r, 4097)
	cm := alloc(t, d, 16*4097)
	must(t, CopyToDevice(s, cm, cw))
	cg := make([]complex128, 4097)
	must(t, CopyFromDevice(s, cg, cm))
	for i := range cw {
		if cg[i] != cw[i] {
			t.Fatalf("complex128 element %d: %v, want %v", i, cg[i], cw[i])
		}
	}
	// Part of a buffer, and a type of another size.
	u := []uint16{1, 2, 3, 65535}
	must(t, CopyToDevice(s, cm.Slice(16, 8), u))
	ug := make([]uint16, 4)
	must(t, CopyFromDevice(s, ug, cm.Slice(16, 8)))
	if ug[3] != 65535 || ug[0] != 1 {
		t.Errorf("uint16 round trip through a slice: %v", ug)
	}
	if err := CopyToDevice(s, cm, []float64{1}); !errors.Is(err, ErrSize) {
		t.Errorf("size mismatch: %v, want ErrSize", err)
	}
}

// TestPinnedPipeline moves data through upload, device-to-device and
// download streams ordered only by events, in chunks, as a three-stage GPU
// pipeline does, and checks every byte.
func TestPinnedPipeline(t *testing.T) {
	d := gpu(t)
	const chunks, chunk = 8, 1 << 20 // bytes per chunk
	in, err := d.AllocHost(chunks * chunk)
	must(t, err)
	defer in.Free()
	out, err := d.AllocHost(chunks * chunk)
	must(t, err)
	defer out.Free()
	src := in.Bytes()
	for i := range src {
		src[i] = byte(i*7 + i>>13)
	}
	clear(out.Bytes())
	stage1 := alloc(t, d, chunks*chunk)
	stage2 := alloc(t, d, chunks*chunk)
	var streams [3]*Stream
	for i := range streams {
		streams[i], err = d.NewStream()
		must(t, err)
		defer streams[i].Close()
	}
	up, mid, down := streams[0], streams[1], streams[2]
	for c := int64(0); c < chunks; c++ {
		off := c * chunk
		must(t, CopyHtoD(up, stage1.Slice(off, chunk), in.Slice(off, chunk)))
		uploaded, err := d.NewEvent()
		must(t, err)
		defer uploaded.Close()
		must(t, uploaded.Record(up))
		must(t, mid.Wait(uploaded))
		must(t, CopyDtoD(mid, stage2.Slice(off, chunk), stage1.Slice(off, chunk)))
		copied, err := d.NewEvent()
		must(t, err)
		defer copied.Close()
		must(t, copied.Record(mid))
		must(t, down.Wait(copied))
		must(t, CopyDtoH(down, out.Slice(off, chunk), stage2.Slice(off, chunk)))
	}
	done, err := d.NewEvent()
	must(t, err)
	defer done.Close()
	must(t, done.Record(down))
	// Waited for by polling (a long spin: the copies take a few ms):
	// once Wait returns, every byte is there, and Done says so.
	must(t, done.Wait(time.Second))
	if ok, err := done.Done(); err != nil || !ok {
		t.Fatalf("Done after Wait: %v, %v", ok, err)
	}
	got := out.Bytes()
	for i := range src {
		if got[i] != src[i] {
			t.Fatalf("byte %d: %d, want %d", i, got[i], src[i])
		}
	}
	// Memset on a stream, then a synchronous download.
	must(t, Memset(up, stage1.Slice(8, 16), 0xab))
	must(t, up.Synchronize())
	b := download[byte](t, stage1.Slice(0, 32))
	for i, v := range b {
		want := src[i]
		if i >= 8 && i < 24 {
			want = 0xab
		}
		if v != want {
			t.Fatalf("after Memset byte %d = %#x, want %#x", i, v, want)
		}
	}
}

func TestClosed(t *testing.T) {
	d := gpu(t)
	s, err := d.NewStream()
	must(t, err)
	must(t, s.Close())
	must(t, s.Close())
	if err := s.Synchronize(); !errors.Is(err, ErrClosed) {
		t.Errorf("Synchronize after Close: %v, want ErrClosed", err)
	}
	e, err := d.NewEvent()
	must(t, err)
	must(t, e.Close())
	if err := e.Record(nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Record after Close: %v, want ErrClosed", err)
	}
	if _, err := e.Done(); !errors.Is(err, ErrClosed) {
		t.Errorf("Done after Close: %v, want ErrClosed", err)
	}
	if err := e.Wait(time.Millisecond); !errors.Is(err, ErrClosed) {
		t.Errorf("Wait after Close: %v, want ErrClosed", err)
	}
	// A second set of Device values shares the primary context; closing
	// it leaves the first usable.
	ds, err := Devices()
	must(t, err)
	m, err := ds[0].Alloc(1024)
	must(t, err)
	must(t, m.Free())
	must(t, ds[0].Close())
	if _, err := ds[0].Alloc(8); !errors.Is(err, ErrClosed) {
		t.Errorf("Alloc after Close: %v, want ErrClosed", err)
	}
	m2 := upload(t, d, []int32{7})
	if got := download[int32](t, m2); got[0] != 7 {
		t.Errorf("first Device after closing the second: %v", got)
	}
}

func TestDgemm(t *testing.T) {
	d := gpu(t)
	b, err := d.NewBLAS()
	must(t, err)
	defer b.Close()
	t.Logf("using %s", b.Library())
	r := rand.New(rand.NewPCG(3, 4))
	type tcase struct {
		tA, tB  blas.Transpose
		m, n, k int
		pad     int // extra columns of storage in every matrix
		beta    float64
	}
	var cases []tcase
	for _, tA := range []blas.Transpose{blas.NoTrans, blas.Trans} {
		for _, tB := range []blas.Transpose{blas.NoTrans, blas.Trans} {
			cases = append(cases, tcase{tA, tB, 67, 45, 83, 0, 0}, tcase{tA, tB, 33, 71, 29, 3, 0.5})
		}
	}
	cases = append(cases, tcase{blas.NoTrans, blas.NoTrans, 1, 1, 1, 0, 0}, tcase{blas.NoTrans, blas.NoTrans, 512, 512, 512, 0, 1})
	s, err := d.NewStream()
	must(t, err)
	defer s.Close()
	for ci, c := range cases {
		ar, ac := c.m, c.k
		if c.tA != blas.NoTrans {
			ar, ac = c.k, c.m
		}
		br, bc := c.k, c.n
		if c.tB != blas.NoTrans {
			br, bc = c.n, c.k
		}
		A := blas64.General{Rows: ar, Cols: ac, Stride: ac + c.pad, Data: randFloats(r, ar*(ac+c.pad))}
		B := blas64.General{Rows: br, Cols: bc, Stride: bc + c.pad, Data: randFloats(r, br*(bc+c.pad))}
		C := blas64.General{Rows: c.m, Cols: c.n, Stride: c.n + c.pad, Data: randFloats(r, c.m*(c.n+c.pad))}
		dA, dB, dC := upload(t, d, A.Data), upload(t, d, B.Data), upload(t, d, C.Data)
		const alpha = 1.25
		if ci%2 == 0 {
			must(t, b.SetStream(nil))
		} else {
			must(t, b.SetStream(s))
		}
		must(t, b.Dgemm(c.tA, c.tB, c.m, c.n, c.k, alpha, dA, A.Stride, dB, B.Stride, c.beta, dC, C.Stride))
		must(t, s.Synchronize())
		got := download[float64](t, dC)
		blas64.Gemm(c.tA, c.tB, alpha, A, B, c.beta, C)
		tol := 1e-13 * float64(c.k+1) * 4
		for i := range C.Data {
			if math.Abs(got[i]-C.Data[i]) > tol {
				t.Fatalf("case %+v: element %d (row %d col %d) = %.17g, CPU %.17g", c, i, i/C.Stride, i%C.Stride, got[i], C.Data[i])
			}
		}
	}
	small := alloc(t, d, 8)
	if err := b.Dgemm(blas.NoTrans, blas.NoTrans, 2, 2, 2, 1, small, 2, small, 2, 0, small, 2); !errors.Is(err, ErrSize) {
		t.Errorf("Dgemm with an 8-byte buffer: %v, want ErrSize", err)
	}
}

func TestFFT2DComplex(t *testing.T) {
	d := gpu(t)
	r := rand.New(rand.NewPCG(5, 6))
	for _, sz := range [][2]int{{8, 8}, {64, 48}, {100, 72}, {13, 17}} {
		rows, cols := sz[0], sz[1]
		p, err := d.NewFFT2D(rows, cols, Complex)
		must(t, err)
		defer p.Close()
		if sz[0] == 8 {
			t.Logf("using %s", p.Library())
		}
		x := randComplex(r, rows*cols)
		in := upload(t, d, x)
		spec := alloc(t, d, p.SpectrumBytes())
		must(t, p.Forward(spec, in))
		got := download[complex128](t, spec)
		want := fft2(x, rows, cols, false)
		tol := 1e-12 * maxAbs(want) * math.Log2(float64(rows*cols))
		for i := range want {
			if cmplx.Abs(got[i]-want[i]) > tol {
				t.Fatalf("%dx%d forward coefficient (%d, %d) = %v, CPU %v", rows, cols, i/cols, i%cols, got[i], want[i])
			}
		}
		// In-place inverse gives rows*cols times the input.
		must(t, p.Inverse(spec, spec))
		back := download[complex128](t, spec)
		n := float64(rows * cols)
		for i := range x {
			if cmplx.Abs(back[i]/complex(n, 0)-x[i]) > 1e-12 {
				t.Fatalf("%dx%d inverse element %d = %v, want %v", rows, cols, i, back[i]/complex(n, 0), x[i])
			}
		}
		if err := p.Forward(spec, in.Slice(0, 16)); !errors.Is(err, ErrSize) {
			t.Errorf("Forward with a short input: %v, want ErrSize", err)
		}
	}
}

func TestFFT2DReal(t *testing.T) {
	d := gpu(t)
	r := rand.New(rand.NewPCG(7, 8))
	s, err := d.NewStream()
	must(t, err)
	defer s.Close()
	for _, sz := range [][2]int{{8, 8}, {64, 45}, {104, 139}} {
		rows, cols := sz[0], sz[1]
		hw := cols/2 + 1
		p, err := d.NewFFT2D(rows, cols, Real)
		must(t, err)
		defer p.Close()
		must(t, p.SetStream(s))
		if p.SpatialBytes() != int64(rows*cols*8) || p.SpectrumBytes() != int64(rows*hw*16) {
			t.Fatalf("sizes %d, %d", p.SpatialBytes(), p.SpectrumBytes())
		}
		x := randFloats(r, rows*cols)
		in := upload(t, d, x)
		spec := alloc(t, d, p.SpectrumBytes())
		must(t, p.Forward(spec, in))
		must(t, s.Synchronize())
		got := download[complex128](t, spec)
		xc := make([]complex128, len(x))
		for i, v := range x {
			xc[i] = complex(v, 0)
		}
		full := fft2(xc, rows, cols, false)
		tol := 1e-12 * maxAbs(full) * math.Log2(float64(rows*cols))
		for ky := range rows {
			for kx := range hw {
				g, w := got[ky*hw+kx], full[ky*cols+kx]
				if cmplx.Abs(g-w) > tol {
					t.Fatalf("%dx%d D2Z coefficient (%d, %d) = %v, CPU %v", rows, cols, ky, kx, g, w)
				}
			}
		}
		out := alloc(t, d, p.SpatialBytes())
		must(t, p.Inverse(out, spec))
		must(t, s.Synchronize())
		back := download[float64](t, out)
		n := float64(rows * cols)
		for i := range x {
			if math.Abs(back[i]/n-x[i]) > 1e-12 {
				t.Fatalf("%dx%d Z2D element %d = %g, want %g", rows, cols, i, back[i]/n, x[i])
			}
		}
	}
}

// BenchmarkDgemm multiplies two n x n matrices already on the GPU with one
// cuBLAS call: the number the matmul task graph is compared to.
func BenchmarkDgemm(b *testing.B) {
	d := gpu(b)
	h, err := d.NewBLAS()
	must(b, err)
	defer h.Close()
	s, err := d.NewStream()
	must(b, err)
	defer s.Close()
	must(b, h.SetStream(s))
	r := rand.New(rand.NewPCG(1, 1))
	for _, n := range []int{1024, 2048, 4096, 8192} {
		ha, hb := randFloats(r, n*n), randFloats(r, n*n)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			A, B := upload(b, d, ha), upload(b, d, hb)
			C := alloc(b, d, int64(8*n*n))
			must(b, h.Dgemm(blas.NoTrans, blas.NoTrans, n, n, n, 1, A, n, B, n, 0, C, n)) // warm up
			must(b, s.Synchronize())
			b.ResetTimer()
			for range b.N {
				must(b, h.Dgemm(blas.NoTrans, blas.NoTrans, n, n, n, 1, A, n, B, n, 0, C, n))
			}
			must(b, s.Synchronize())
			b.ReportMetric(2*float64(n)*float64(n)*float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkDgemmWithTransfers includes moving A and B (pinned) to the GPU
// and C back, as a whole-matrix GPU multiply from host memory costs.
func BenchmarkDgemmWithTransfers(b *testing.B) {
	d := gpu(b)
	h, err := d.NewBLAS()
	must(b, err)
	defer h.Close()
	s, err := d.NewStream()
	must(b, err)
	defer s.Close()
	must(b, h.SetStream(s))
	for _, n := range []int{2048, 8192} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			bytes := int64(8 * n * n)
			var host [3]HostMem
			for i := range host {
				host[i], err = d.AllocHost(bytes)
				must(b, err)
				defer host[i].Free()
			}
			A, B, C := alloc(b, d, bytes), alloc(b, d, bytes), alloc(b, d, bytes)
			b.SetBytes(3 * bytes)
			b.ResetTimer()
			for range b.N {
				must(b, CopyHtoD(s, A, host[0]))
				must(b, CopyHtoD(s, B, host[1]))
				must(b, h.Dgemm(blas.NoTrans, blas.NoTrans, n, n, n, 1, A, n, B, n, 0, C, n))
				must(b, CopyDtoH(s, host[2], C))
				must(b, s.Synchronize())
			}
			b.ReportMetric(2*float64(n)*float64(n)*float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkCopy measures host<->device bandwidth from pinned and from
// pageable (ordinary Go) memory.
func BenchmarkCopy(b *testing.B) {
	d := gpu(b)
	s, err := d.NewStream()
	must(b, err)
	defer s.Close()
	const size = 64 << 20
	dm := alloc(b, d, size)
	pinned, err := d.AllocHost(size)
	must(b, err)
	defer pinned.Free()
	pageable := make([]byte, size)
	for i := range pageable {
		pageable[i] = byte(i)
	}
	copy(pinned.Bytes(), pageable)
	run := func(name string, f func() error) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(size)
			for range b.N {
				must(b, f())
			}
			must(b, s.Synchronize())
		})
	}
	run("pinned/HtoD", func() error {
		if err := CopyHtoD(s, dm, pinned); err != nil {
			return err
		}
		return s.Synchronize()
	})
	run("pinned/DtoH", func() error {
		if err := CopyDtoH(s, pinned, dm); err != nil {
			return err
		}
		return s.Synchronize()
	})
	run("pageable/HtoD", func() error { return CopyToDevice(s, dm, pageable) })
	run("pageable/DtoH", func() error { return CopyFromDevice(s, pageable, dm) })
}

// BenchmarkFFT2DForward is the forward real FFT of one 1392x1040 tile.
func BenchmarkFFT2DForward(b *testing.B) {
	d := gpu(b)
	const rows, cols = 1040, 1392
	p, err := d.NewFFT2D(rows, cols, Real)
	must(b, err)
	defer p.Close()
	s, err := d.NewStream()
	must(b, err)
	defer s.Close()
	must(b, p.SetStream(s))
	in := upload(b, d, randFloats(rand.New(rand.NewPCG(3, 3)), rows*cols))
	out := alloc(b, d, p.SpectrumBytes())
	b.ResetTimer()
	for range b.N {
		must(b, p.Forward(out, in))
	}
	must(b, s.Synchronize())
}

// CopyToDevice and CopyFromDevice accept Go memory inside a struct that
// also holds pointers: cgo's pointer check once made such a copy panic
// ("argument of cgo function has Go pointer to unpinned Go pointer").
func TestCopyGoMemoryInsideStruct(t *testing.T) {
	d := gpu(t)
	type holder struct {
		name *string
		vals [4]float64
		next *holder
	}
	name := "x"
	h := &holder{name: &name, vals: [4]float64{1, 2, 3, math.Inf(-1)}}
	h.next = h
	m := alloc(t, d, 32)
	must(t, CopyToDevice(nil, m, h.vals[:]))
	back := &holder{name: &name}
	must(t, CopyFromDevice(nil, back.vals[:], m))
	if back.vals != h.vals {
		t.Fatalf("round trip through a struct field: %v, want %v", back.vals, h.vals)
	}
}
