//go:build cuda

package stitching

import (
	"fmt"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"testing"

	"github.com/gohtgs/htgs/cuda"
)

// pcmOrSkip returns the first GPU and the phase correlation's kernels
// loaded on it, or skips the test without a GPU.
func pcmOrSkip(t *testing.T) (*cuda.Device, *pcmKernels) {
	t.Helper()
	d := cudaOrSkip(t).devs[0]
	k, err := loadPCMKernels(d, pcmImage)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := k.close(); err != nil {
			t.Error(err)
		}
	})
	return d, k
}

// devAlloc allocates device memory freed when the test ends.
func devAlloc(t *testing.T, d *cuda.Device, bytes int64) cuda.DeviceMem {
	t.Helper()
	m, err := d.Alloc(bytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Free(); err != nil {
			t.Error(err)
		}
	})
	return m
}

// devUpload copies v into new device memory.
func devUpload[T cuda.Elem](t *testing.T, d *cuda.Device, v []T) cuda.DeviceMem {
	t.Helper()
	var z T
	m := devAlloc(t, d, int64(len(v))*int64(sizeOf(z)))
	if err := cuda.CopyToDevice(nil, m, v); err != nil {
		t.Fatal(err)
	}
	return m
}

// devDownload copies device memory of n values back.
func devDownload[T cuda.Elem](t *testing.T, m cuda.DeviceMem, n int) []T {
	t.Helper()
	v := make([]T, n)
	if err := cuda.CopyFromDevice(nil, v, m); err != nil {
		t.Fatal(err)
	}
	return v
}

func sizeOf(v any) int {
	switch v.(type) {
	case uint8:
		return 1
	case float32:
		return 4
	case float64, uint64, int64:
		return 8
	case complex128:
		return 16
	}
	panic(fmt.Sprintf("sizeOf %T", v))
}

func randComplexes(r *rand.Rand, n int) []complex128 {
	v := make([]complex128, n)
	for i := range v {
		v[i] = complex(r.NormFloat64(), r.NormFloat64())
	}
	return v
}

// The cross-power spectrum on the GPU against the CPU formula, for the
// exponents 1, 0.75 and 0.5, with exact zeros, a product that underflows,
// a value that is not finite, coefficients below a positive floor, and in
// place.
func TestCUDACrossPowerPow(t *testing.T) {
	d, k := pcmOrSkip(t)
	r := rand.New(rand.NewPCG(9, 10))
	const n = 100_003
	a, b := randComplexes(r, n), randComplexes(r, n)
	b[0], a[1] = 0, 0
	a[2], b[2] = complex(1e-200, 0), complex(0, 1e-200)
	a[3] = complex(math.Inf(1), 0)
	for i := 10; i < 1000; i += 7 {
		b[i] *= 1e-9
	}
	want := func(i int, floor, beta float64) complex128 {
		c := a[i] * cmplx.Conj(b[i])
		m := cmplx.Abs(c)
		if !(m > floor) || math.IsInf(m, 0) {
			return 0
		}
		return c / complex(math.Pow(m, beta), 0)
	}
	da, db := devUpload(t, d, a), devUpload(t, d, b)
	dst := devAlloc(t, d, 16*n)
	for _, beta := range []float64{1, 0.75, 0.5} {
		for _, floor := range []float64{0, 1e-6} {
			if err := k.crossPowerPow(nil, dst, da, db, floor, beta); err != nil {
				t.Fatal(err)
			}
			got := devDownload[complex128](t, dst, n)
			zeros := 0
			for i := range got {
				w := want(i, floor, beta)
				if cmplx.Abs(got[i]-w) > 1e-12*(1+cmplx.Abs(w)) {
					t.Fatalf("beta %g, floor %g: element %d = %v, CPU %v", beta, floor, i, got[i], w)
				}
				if got[i] == 0 {
					zeros++
				}
			}
			if floor > 0 && zeros < 140 {
				t.Errorf("beta %g, floor %g zeroed only %d coefficients", beta, floor, zeros)
			}
		}
	}
	if err := k.crossPowerPow(nil, da, da, db, 0, 0.75); err != nil {
		t.Fatal(err)
	}
	got := devDownload[complex128](t, da, n)
	for i := range got {
		if w := want(i, 0, 0.75); cmplx.Abs(got[i]-w) > 1e-12*(1+cmplx.Abs(w)) {
			t.Fatalf("in place: element %d = %v, CPU %v", i, got[i], w)
		}
	}
}

// maxRef is the max reduction's definition: the largest non-NaN value,
// first index on ties; NaN, -1 when there is none.
func maxRef(v []float64) (float64, int) {
	best, idx := math.NaN(), -1
	for i, x := range v {
		if x != x {
			continue
		}
		if idx < 0 || x > best {
			best, idx = x, i
		}
	}
	return best, idx
}

// The max reduction on the GPU gives maxRef's value and index, ties and
// NaN included, for sizes around the block and part counts and special
// arrays, on a stream and on the default stream.
func TestCUDAMaxReducer(t *testing.T) {
	d, k := pcmOrSkip(t)
	red, err := k.newMaxReducer(d)
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check := func(name string, v []float64, s *cuda.Stream) {
		t.Helper()
		got, gi, err := red.max(s, devUpload(t, d, v))
		if err != nil {
			t.Fatal(err)
		}
		want, wi := maxRef(v)
		if gi != wi || !(got == want || (math.IsNaN(got) && math.IsNaN(want))) {
			t.Errorf("%s: (%g, %d), CPU (%g, %d)", name, got, gi, want, wi)
		}
	}
	r := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{1, 255, 256, 257, 1000, 256*1024 + 17, 3_000_001} {
		v := make([]float64, n)
		for i := range v {
			v[i] = r.NormFloat64()
		}
		if n > 10 {
			m, _ := maxRef(v)
			v[n/3], v[n-1] = m+1, m+1 // a tie: the first index must win
			v[n/5] = math.NaN()
		}
		check(fmt.Sprintf("n=%d", n), v, s)
	}
	for name, v := range map[string][]float64{
		"all NaN":      {math.NaN(), math.NaN()},
		"all -Inf":     {math.Inf(-1), math.Inf(-1), math.Inf(-1)},
		"NaN first":    {math.NaN(), -5, -3, -3},
		"+Inf":         {1, math.Inf(1), 2},
		"negative max": {-3, -2, -7},
	} {
		check(name, v, nil)
	}
	if err := red.close(); err != nil {
		t.Fatal(err)
	}
	if err := red.close(); err != nil {
		t.Fatal(err)
	}
}

// The local maxima on the GPU against a CPU scan: maxima of the circular
// 3x3 neighbourhood, first index on ties, on matrices with plateaus.
func TestCUDALocalMax(t *testing.T) {
	d, k := pcmOrSkip(t)
	r := rand.New(rand.NewPCG(21, 22))
	for _, sz := range [][2]int{{1, 1}, {2, 3}, {37, 29}, {256, 192}} {
		w, h := sz[0], sz[1]
		m := make([]float64, w*h)
		for i := range m {
			m[i] = float64(r.IntN(5)) // many ties
		}
		out := devAlloc(t, d, int64(8*w*h))
		if err := k.localMax(nil, out, devUpload(t, d, m), w, h); err != nil {
			t.Fatal(err)
		}
		got := devDownload[float64](t, out, w*h)
		for i := range m {
			x, y := i%w, i/w
			best := true
			for dy := -1; dy <= 1 && best; dy++ {
				for dx := -1; dx <= 1; dx++ {
					j := ((y+dy+h)%h)*w + (x+dx+w)%w
					if j != i && (m[j] > m[i] || (m[j] == m[i] && j < i)) {
						best = false
						break
					}
				}
			}
			want := math.Inf(-1)
			if best {
				want = m[i]
			}
			if got[i] != want {
				t.Fatalf("%dx%d: element %d = %g, want %g", w, h, i, got[i], want)
			}
		}
	}
}

// The pixels' conversion on the GPU reads big-endian 16-bit pixels, sums
// them, and with gains corrects them as correctRef does (gains around 1,
// some far out, NaN and infinite ones), writing the corrected pixels back.
func TestCUDAGray16ToFloat(t *testing.T) {
	d, k := pcmOrSkip(t)
	const w, h = 67, 41
	const n = w * h
	r := rand.New(rand.NewPCG(9, 10))
	raw := make([]uint8, 2*n)
	for i := range raw {
		raw[i] = uint8(r.Uint32())
	}
	px := func(b []uint8, i int) uint16 { return uint16(b[2*i])<<8 | uint16(b[2*i+1]) }
	f := devAlloc(t, d, 8*n)
	sum := devAlloc(t, d, 8)
	gains := make([]float32, n)
	for i := range gains {
		gains[i] = float32(0.5 + r.Float64())
	}
	gains[0], gains[1], gains[2], gains[3] = float32(math.NaN()), float32(math.Inf(1)), -1, 1e6
	for _, withGain := range []bool{false, true} {
		pix := devUpload(t, d, raw)
		var g cuda.DeviceMem
		if withGain {
			g = devUpload(t, d, gains)
		}
		if err := cuda.Memset(nil, sum, 0); err != nil {
			t.Fatal(err)
		}
		if err := k.gray16ToFloat(nil, f, pix, g, sum); err != nil {
			t.Fatal(err)
		}
		got, back := devDownload[float64](t, f, n), devDownload[uint8](t, pix, 2*n)
		var want uint64
		for i := range n {
			c := px(raw, i)
			if withGain {
				c = correctRef(c, gains[i])
			}
			if got[i] != float64(c) || px(back, i) != c {
				t.Fatalf("gains %v: pixel %d: %v and %d written back, want %d", withGain, i, got[i], px(back, i), c)
			}
			want += uint64(c)
		}
		if s := devDownload[uint64](t, sum, 1)[0]; s != want {
			t.Fatalf("gains %v: pixel sum %d, want %d", withGain, s, want)
		}
	}
	if err := k.gray16ToFloat(nil, devAlloc(t, d, 8), devAlloc(t, d, 4), cuda.DeviceMem{}, cuda.DeviceMem{}); err == nil {
		t.Error("2 pixels into 1 float64 accepted")
	}
}
