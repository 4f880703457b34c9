package cluster

import (
	"bytes"
	"context"
	"encoding"
	"encoding/gob"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"runtime/metrics"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gohtgs/htgs/internal/fuzzrun"
)

// hostileGobMap is a 26-byte gob message of a map[string]int whose count
// claims 2^24 entries (it holds one): encoding/gob sizes the map from the
// count before reading any entry.
func hostileGobMap() []byte {
	// The type message a gob encoder sends for map[string]int (id 64).
	msg := []byte{0x0d, 0x7f, 0x04, 0x01, 0x02, 0xff, 0x80, 0x00, 0x01, 0x0c, 0x01, 0x04, 0x00, 0x00}
	// The value message: id 64, the singleton's zero delta, the count
	// 0x01000000, one entry "a": 1.
	body := []byte{0xff, 0x80, 0x00, 0xfc, 0x01, 0x00, 0x00, 0x00, 0x01, 'a', 0x02}
	return append(append(msg, byte(len(body))), body...)
}

// allocatedBy returns about the bytes f allocates (large allocations
// exactly; small ones as their spans fill), without stopping the world.
func allocatedBy(f func()) uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	a := s[0].Value.Uint64()
	f()
	metrics.Read(s)
	return s[0].Value.Uint64() - a
}

// A gob message whose map count exceeds its bytes is refused as
// ErrMalformed before decoding, instead of allocating about 850 MiB.
func TestGobRefusesHostileMapCount(t *testing.T) {
	data := hostileGobMap()
	var m map[string]int
	var err error
	n := allocatedBy(func() { err = Gob().Unmarshal(data, &m) })
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "map of 16777216 items") {
		t.Errorf("got %v, want ErrMalformed naming the map's count", err)
	}
	if n > 1<<20 {
		t.Errorf("decoding a %d-byte message allocated %d bytes", len(data), n)
	}
	// The same message with its true count decodes.
	good := bytes.Replace(data, []byte{0xfc, 0x01, 0x00, 0x00, 0x00}, []byte{0x01}, 1)
	good[14] -= 4
	if err := Gob().Unmarshal(good, &m); err != nil || len(m) != 1 || m["a"] != 1 {
		t.Fatalf("the honest message: %v, %v", m, err)
	}
}

// The hostile map count is refused also when a kept decoder has read the
// same type descriptions (only the value is walked then).
func TestGobRefusesHostileMapCountKept(t *testing.T) {
	data := hostileGobMap()
	good := bytes.Replace(data, []byte{0xfc, 0x01, 0x00, 0x00, 0x00}, []byte{0x01}, 1)
	good[14] -= 4
	gt, _, ok1 := gobSplit(good)
	ht, _, ok2 := gobSplit(data)
	if !ok1 || !ok2 || !bytes.Equal(gt, ht) {
		t.Fatalf("the two messages do not share their type descriptions (%v %v)", ok1, ok2)
	}
	var m map[string]int
	if err := Gob().Unmarshal(good, &m); err != nil || m["a"] != 1 {
		t.Fatalf("the honest message: %v, %v", m, err)
	}
	var err error
	n := allocatedBy(func() { err = Gob().Unmarshal(data, &m) })
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "map of 16777216 items") {
		t.Errorf("got %v, want ErrMalformed naming the map's count", err)
	}
	if n > 1<<20 {
		t.Errorf("decoding a %d-byte message allocated %d bytes", len(data), n)
	}
	m = nil
	if err := Gob().Unmarshal(good, &m); err != nil || m["a"] != 1 {
		t.Fatalf("the honest message after the refusal: %v, %v", m, err)
	}
}

// A gob message nested deeper than gobMaxDepth is refused.
func TestGobRefusesDeepNesting(t *testing.T) {
	type node struct{ Next *node }
	var n *node
	for range gobMaxDepth + 10 {
		n = &node{Next: n}
	}
	data, err := Gob().Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	var got node
	if err := Gob().Unmarshal(data, &got); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "nested") {
		t.Fatalf("got %v, want the nesting refused", err)
	}
}

// gobWide has the kinds of values gobCheck follows: arrays, slices, maps of
// structs, byte strings, complex numbers, an encoding.BinaryMarshaler
// (time.Time), a GobEncoder (big.Int) and interfaces holding registered
// types whose definitions travel inside the value.
type gobWide struct {
	A     [3]int16
	B     []byte
	C     complex128
	D     map[string][]gobItem
	E     time.Time
	F     *big.Int
	G     []gobShape
	H     map[int]any
	I     bool
	J     float32
	K     [2]map[uint8]string
	Empty struct{}
}

func init() {
	gob.Register([]gobItem{})
	gob.Register(map[string]float64{})
}

// gobSamples are messages of many shapes, as the codec encodes them.
func gobSamples(tb testing.TB) [][]byte {
	vals := []any{
		&gobItem{N: 1, Name: "x", Tags: []string{"a"}, Attrs: map[string]int{"k": 2}, Next: &gobItem{N: -1, Shape: gobDisc{2}}, Shape: gobRect{1, 2}},
		&gobWide{
			A: [3]int16{1, -2, 3}, B: []byte("bytes"), C: complex(1, -2),
			D: map[string][]gobItem{"d": {{N: 4, Shape: gobRect{3, 4}}, {Name: "e"}}},
			E: time.Date(2024, 5, 6, 7, 8, 9, 10, time.UTC), F: big.NewInt(-12345678901234),
			G: []gobShape{gobRect{1, 1}, gobDisc{3}, nil},
			H: map[int]any{1: "one", 2: []gobItem{{N: 2}}, 3: map[string]float64{"pi": 3.14}},
			I: true, J: 1.5, K: [2]map[uint8]string{{1: "a"}, {}},
		},
		&gobWide{},
		&map[string]int{"a": 1, "b": 2},
		&[]answer{{1, 1}, {2, 4}},
		&job{N: 7, Sleep: time.Second},
		new(string),
		&[]string{"", "x"},
		new(any),
		big.NewInt(-5),
		&[2]time.Time{time.Unix(5, 6).UTC(), {}},
		&[]any{gobRect{1, 2}, nil, map[string]float64{"x": 1}},
		&[3]struct{}{},
		&map[[2]int8]map[string]struct{ A []byte }{{1, -1}: {"k": {A: []byte{0, 255}}}},
	}
	var out [][]byte
	for _, v := range vals {
		data, err := Gob().Marshal(v)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, data)
	}
	return out
}

// gobCheck accepts every message the codec encodes, and they decode equal
// to what was sent.
func TestGobCheckAcceptsEncoded(t *testing.T) {
	for i, data := range gobSamples(t) {
		if err := gobCheck(data); err != nil {
			t.Errorf("sample %d (%d bytes): %v", i, len(data), err)
		}
	}
	in := &gobWide{D: map[string][]gobItem{"x": {{N: 1, Shape: gobDisc{1}}}}, H: map[int]any{5: map[string]float64{"e": 2.7}}, F: big.NewInt(3)}
	data, _ := Gob().Marshal(in)
	var out gobWide
	if err := Gob().Unmarshal(data, &out); err != nil || normalWide(out) != normalWide(*in) || out.F.Cmp(in.F) != 0 {
		t.Fatalf("round trip: %+v, %v", out, err)
	}
}

// An input object larger than the worker's MaxPayload is refused, as
// ErrMalformed naming the limit, before the worker reads it.
func TestMaxPayloadRefusesLargeObject(t *testing.T) {
	s := startServer(t)
	nc := connect(t, s)
	serveInProcess(t, nc, "w", registerV1, InlineLimit(1<<10), MaxPayload(64<<10))
	c := newClient(t, nc, InlineLimit(1<<10))
	r, err := NewRemote[[]byte, []byte](c, "reverse", Version("v1"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if outs, err := r.Call(ctx, make([]byte, 32<<10)); err != nil || len(outs) != 1 {
		t.Fatalf("32 KiB by reference: %d outputs, %v", len(outs), err)
	}
	_, err = r.Call(ctx, make([]byte, 128<<10))
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "MaxPayload") {
		t.Fatalf("128 KiB input, 64 KiB limit: got %v", err)
	}
	if _, err := newConfig([]Option{MaxPayload(0)}); err == nil {
		t.Error("MaxPayload(0) accepted")
	}
}

// FuzzGobUnmarshal: the gob codec never panics on a hostile message, a
// message it decodes allocates at most 1 KiB per byte (plus 1 MiB) however
// large the counts it claims, a refusal wraps ErrMalformed, and what it
// decodes re-encodes to a message that decodes to the same value.
func FuzzGobUnmarshal(f *testing.F) {
	fuzzrun.Prepare(f)
	for _, s := range gobSamples(f) {
		f.Add(s)
	}
	f.Add(hostileGobMap())
	codec := Gob()
	f.Fuzz(func(t *testing.T, data []byte) {
		data = data[:min(len(data), 1024)] // inputs stay small, so minimizing is fast
		var v gobWide
		var err error
		n := allocatedBy(func() { err = codec.Unmarshal(data, &v) })
		if limit := uint64(1<<20 + 1024*len(data)); n > limit {
			t.Fatalf("%d-byte message allocated %d bytes (err %v)", len(data), n, err)
		}
		if cerr := gobCheck(data); cerr != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("gobCheck refused (%v), Unmarshal returned %v", cerr, err)
			}
			return
		}
		if err != nil {
			return
		}
		again, err := codec.Marshal(&v)
		if err != nil {
			return // e.g. a nil pointer inside an interface, which gob cannot encode
		}
		if err := gobCheck(again); err != nil {
			t.Fatalf("gobCheck refuses the codec's own encoding: %v", err)
		}
		var w gobWide
		if err := codec.Unmarshal(again, &w); err != nil {
			t.Fatalf("re-encoded value does not decode: %v", err)
		}
		if !reflect.DeepEqual(normalWide(v), normalWide(w)) {
			t.Fatalf("round trip: %+v became %+v", v, w)
		}
	})
}

// normalWide prints v in one form for what gob does not distinguish
// (nil and empty maps and slices, a nil pointer and a zero value it would
// not send, NaN payloads), with map keys sorted, for comparison.
func normalWide(v gobWide) string {
	var b strings.Builder
	canon(&b, reflect.ValueOf(v))
	return b.String()
}

func canon(b *strings.Builder, v reflect.Value) {
	if !v.IsValid() {
		b.WriteString("nil")
		return
	}
	if v.CanInterface() {
		switch x := v.Interface().(type) {
		case gob.GobEncoder:
			if v.Kind() != reflect.Pointer || !v.IsNil() {
				data, err := x.GobEncode()
				fmt.Fprintf(b, "%T%x%v", x, data, err)
				return
			}
		case encoding.BinaryMarshaler:
			data, err := x.MarshalBinary()
			fmt.Fprintf(b, "%T%x%v", x, data, err)
			return
		}
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		if v.Kind() == reflect.Interface {
			fmt.Fprintf(b, "%s:", v.Elem().Type())
		}
		canon(b, v.Elem())
	case reflect.Map:
		keys := make([]string, 0, v.Len())
		vals := map[string]string{}
		for it := v.MapRange(); it.Next(); {
			var k, e strings.Builder
			canon(&k, it.Key())
			canon(&e, it.Value())
			keys = append(keys, k.String())
			vals[k.String()] = e.String()
		}
		slices.Sort(keys)
		b.WriteString("map{")
		for _, k := range keys {
			fmt.Fprintf(b, "%s:%s,", k, vals[k])
		}
		b.WriteString("}")
	case reflect.Slice, reflect.Array:
		b.WriteString("[")
		for i := range v.Len() {
			canon(b, v.Index(i))
			b.WriteString(",")
		}
		b.WriteString("]")
	case reflect.Struct:
		b.WriteString("{")
		for i := range v.NumField() {
			canon(b, v.Field(i))
			b.WriteString(",")
		}
		b.WriteString("}")
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) {
			b.WriteString("NaN")
		} else {
			fmt.Fprint(b, math.Float64bits(f))
		}
	case reflect.Complex64, reflect.Complex128:
		c := v.Complex()
		canon(b, reflect.ValueOf(real(c)))
		b.WriteString("+i")
		canon(b, reflect.ValueOf(imag(c)))
	default:
		fmt.Fprintf(b, "%#v", v)
	}
}

// FuzzJSONUnmarshal: the JSON codec never panics on a hostile message,
// allocates at most 256 bytes per byte of it (plus 1 MiB; encoding/json
// sizes nothing from a count), and what it decodes re-encodes to a
// message that decodes to the same value.
func FuzzJSONUnmarshal(f *testing.F) {
	fuzzrun.Prepare(f)
	for _, v := range []map[string][]answer{nil, {}, {"a": {{1, 1}, {2, 4}}, "b": nil, "c": {}}} {
		data, err := JSON().Marshal(&v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"x":[{"N":1e400},{"Square":-0}],"x":null}`))
	codec := JSON()
	f.Fuzz(func(t *testing.T, data []byte) {
		data = data[:min(len(data), 1024)]
		var v map[string][]answer
		var err error
		if n := allocatedBy(func() { err = codec.Unmarshal(data, &v) }); n > uint64(1<<20+256*len(data)) {
			t.Fatalf("%d-byte message allocated %d bytes", len(data), n)
		}
		if err != nil {
			return
		}
		again, err := codec.Marshal(&v)
		if err != nil {
			t.Fatalf("decoded value does not encode: %v", err)
		}
		var w map[string][]answer
		if err := codec.Unmarshal(again, &w); err != nil || !reflect.DeepEqual(v, w) {
			t.Fatalf("round trip: %v became %v (%v)", v, w, err)
		}
	})
}
