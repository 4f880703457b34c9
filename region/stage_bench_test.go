package region

import (
	"context"
	"fmt"
	"math"
	"testing"
	"unsafe"
)

// BenchmarkDenseStage stages one RGB tile of 2048x2048 px (12 MiB) out of
// a 2x2-tile slide in Memory storage, as each tile of the pathology
// pipeline is staged, and commits a 16-bit label image of the tile: the
// cost of moving a tile's data between storage and a stage.
func BenchmarkDenseStage(b *testing.B) {
	ctx := context.Background()
	const tile = 2048
	st := NewMemory()
	rgb := ID{Name: "bench::rgb", Type: Dense3D}
	bounds := Cube(0, 0, 0, 2*tile, 2*tile, 3)
	if err := st.Write(ctx, Meta{ID: rgb, Elem: Uint8, Bounds: bounds}, bounds, make([]byte, bounds.Len())); err != nil {
		b.Fatal(err)
	}
	roi := Cube(tile, tile, 0, 2*tile, 2*tile, 3)
	b.Run("stage-rgb", func(b *testing.B) {
		b.SetBytes(int64(roi.Len()))
		for b.Loop() {
			d, err := BindDense[uint8](rgb, bounds, roi, st)
			if err != nil {
				b.Fatal(err)
			}
			if err := d.Stage(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("commit-labels", func(b *testing.B) {
		lab := Rect(0, 0, 2*tile, 2*tile)
		d, err := NewDenseROI[uint16](ID{Name: "bench::labels", Type: Dense2D}, lab, Rect(0, 0, tile, tile))
		if err != nil {
			b.Fatal(err)
		}
		d.out = st
		b.SetBytes(2 * tile * tile)
		for b.Loop() {
			if err := d.Commit(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestEncodeNative checks that the bulk copies of little-endian machines
// and the element-by-element encoding (any machine) agree, both ways, for
// every element size, including negative and non-finite values.
func TestEncodeNative(t *testing.T) {
	check := func(name string, bulk, each []byte, back, want any) {
		t.Helper()
		if string(bulk) != string(each) {
			t.Errorf("%s: encode %x, element by element %x", name, bulk, each)
		}
		if fmt.Sprint(back) != fmt.Sprint(want) {
			t.Errorf("%s: decoded %v, want %v", name, back, want)
		}
	}
	u8 := []uint8{0, 1, 127, 255}
	u16 := []uint16{0, 1, 256, 65535}
	i32 := []int32{-2147483648, -1, 0, 1 << 20, 2147483647}
	f32 := []float32{float32(math.Inf(-1)), -1.5, 0, 3.25e7}
	f64 := []float64{math.NaN(), math.Copysign(0, -1), 1e-300, math.MaxFloat64}
	roundTrip(t, "uint8", u8, check)
	roundTrip(t, "uint16", u16, check)
	roundTrip(t, "int32", i32, check)
	roundTrip(t, "float32", f32, check)
	roundTrip(t, "float64", f64, check)
}

func roundTrip[T Elem](t *testing.T, name string, v []T, check func(string, []byte, []byte, any, any)) {
	es := int(unsafe.Sizeof(T(0)))
	bulk, each := make([]byte, len(v)*es), make([]byte, len(v)*es)
	encode(bulk, v)
	encodeEach(each, v)
	back, backEach := make([]T, len(v)), make([]T, len(v))
	decode(back, bulk)
	decodeEach(backEach, each)
	check(name, bulk, each, back, v)
	check(name+" element by element", bulk, each, backEach, v)
}
