package stitching

import (
	"errors"
	"math"
	"testing"

	"github.com/gohtgs/htgs/cuda"
)

// The phase correlation's kernel wrappers refuse bad arguments before they
// launch anything, in every build: exponents and floors out of range, a
// matrix of no size, missing tables, buffers that are not device memory,
// a closed reducer. (The kernels themselves are compared with the CPU on a
// GPU: pcm_cuda_test.go.)
func TestPCMArgumentChecks(t *testing.T) {
	k := &pcmKernels{} // no module: any launch would fail
	var z cuda.DeviceMem
	for _, f := range []float64{-1, math.NaN(), math.Inf(1)} {
		if err := k.crossPowerPow(nil, z, z, z, f, 1); !errors.Is(err, errKernelArg) {
			t.Errorf("cross power, floor %g: %v, want errKernelArg", f, err)
		}
	}
	for _, beta := range []float64{0, -0.5, 1.5, math.NaN()} {
		if err := k.crossPowerPow(nil, z, z, z, 0, beta); !errors.Is(err, errKernelArg) {
			t.Errorf("cross power, exponent %g: %v, want errKernelArg", beta, err)
		}
	}
	if err := k.crossPowerPow(nil, z, z, z, 0, 0.75); err != nil {
		t.Errorf("cross power of empty buffers: %v, want nothing to do", err)
	}
	if err := k.localMax(nil, z, z, 0, 3); !errors.Is(err, errKernelArg) {
		t.Errorf("local maxima of a 0x3 matrix: %v, want errKernelArg", err)
	}
	if err := k.localMax(nil, z, z, 2, 2); !errors.Is(err, errKernelArg) {
		t.Errorf("local maxima of 2x2 in empty buffers: %v, want errKernelArg", err)
	}
	if err := k.subtractSmooth(nil, z, z, z, nil); !errors.Is(err, errKernelArg) {
		t.Errorf("smooth component without tables: %v, want errKernelArg", err)
	}
	if err := k.subtractSmooth(nil, z, z, z, &smoothTables{w: 4, h: 3}); !errors.Is(err, errKernelArg) {
		t.Errorf("smooth component into an empty spectrum: %v, want errKernelArg", err)
	}
	if err := k.gray16ToFloat(nil, z, z, z, z); !errors.Is(err, errKernelArg) {
		t.Errorf("pixels to float64 in zero DeviceMems: %v, want errKernelArg", err)
	}
	r := &maxReducer{k: k}
	if _, _, err := r.max(nil, z); !errors.Is(err, errKernelArg) {
		t.Errorf("max of a closed reducer: %v, want errKernelArg", err)
	}
	if err := r.close(); err != nil {
		t.Errorf("closing a closed reducer: %v", err)
	}
}

// correctRef is the flat-field correction of htgs_gray16_to_f64 (and of
// align.FlatField) on the CPU.
func correctRef(v uint16, gain float32) uint16 {
	r := float32(float32(v)*gain) + 0.5
	switch {
	case r >= 65535:
		return 65535
	case r > 0:
		return uint16(r)
	}
	return 0
}

// The reference rounds half up, clamps, and maps NaN to 0.
func TestCorrectReference(t *testing.T) {
	for _, c := range []struct {
		v    uint16
		g    float32
		want uint16
	}{{100, 1.5, 150}, {3, 0.5, 2}, {1, 0.49, 0}, {60000, 2, 65535}, {7, float32(math.NaN()), 0}, {7, -2, 0}, {65535, 1, 65535}} {
		if got := correctRef(c.v, c.g); got != c.want {
			t.Errorf("correct(%d, %v) = %d, want %d", c.v, c.g, got, c.want)
		}
	}
}
