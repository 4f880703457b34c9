package cluster

import (
	"bytes"
	"encoding/gob"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"
)

type gobShape interface{ Area() float64 }

type gobRect struct{ W, H float64 }

func (r gobRect) Area() float64 { return r.W * r.H }

type gobDisc struct{ R float64 }

func (d gobDisc) Area() float64 { return 3 * d.R * d.R }

func init() {
	gob.Register(gobRect{})
	gob.Register(gobDisc{})
}

// gobItem has the kinds of fields whose descriptions a message carries:
// nested structs, slices, maps, pointers and an interface.
type gobItem struct {
	N     int
	Name  string
	Tags  []string
	Attrs map[string]int
	Next  *gobItem
	Shape gobShape
}

// freshGob decodes data with a decoder of its own, as the codec did
// before it kept decoders.
func freshGob(data []byte, v any) error { return gob.NewDecoder(bytes.NewReader(data)).Decode(v) }

// The gob codec's kept decoders decode what a fresh decoder decodes, for
// messages of many types interleaved, by concurrent goroutines, including
// interface values whose concrete type varies from message to message.
func TestGobKeptDecodersMatchFresh(t *testing.T) {
	codec := Gob()
	var msgs [][]byte
	var want []any
	for i := range 60 {
		var v any
		switch i % 4 {
		case 0:
			var sh gobShape = gobRect{float64(i), 2}
			if i%8 == 4 {
				sh = gobDisc{float64(i)}
			}
			v = &gobItem{N: i, Name: fmt.Sprint("item", i), Tags: []string{"a", fmt.Sprint(i)}, Attrs: map[string]int{"k": i}, Next: &gobItem{N: -i}, Shape: sh}
		case 1:
			v = &gobItem{N: i, Name: "no shape", Tags: []string{"b"}, Attrs: map[string]int{"j": -i}, Next: &gobItem{N: i}}
		case 2:
			v = &[]answer{{i, i * i}, {i + 1, (i + 1) * (i + 1)}}
		case 3:
			v = &job{N: i}
		}
		data, err := codec.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, data)
		want = append(want, v)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 20 {
				for i := range msgs {
					k := (i + g*7 + round) % len(msgs)
					got := reflect.New(reflect.TypeOf(want[k]).Elem())
					if err := codec.Unmarshal(msgs[k], got.Interface()); err != nil {
						t.Errorf("message %d: %v", k, err)
						return
					}
					fresh := reflect.New(reflect.TypeOf(want[k]).Elem())
					if err := freshGob(msgs[k], fresh.Interface()); err != nil {
						t.Errorf("message %d, fresh decoder: %v", k, err)
						return
					}
					if !reflect.DeepEqual(got.Interface(), fresh.Interface()) || !reflect.DeepEqual(got.Interface(), want[k]) {
						t.Errorf("message %d: got %+v, fresh decoder %+v, sent %+v", k, got.Elem(), fresh.Elem(), want[k])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	// Messages with an interface value carry its type inside the value:
	// they are decoded whole, by a new decoder. The others are split and
	// their decoders kept.
	for k, data := range msgs {
		types, _, ok := gobSplit(data)
		if k%4 == 0 {
			if ok {
				t.Fatalf("message %d, with an interface value: split", k)
			}
			continue
		}
		if !ok {
			t.Fatalf("message %d: not split", k)
		}
		d := gobDecoders.get(types)
		if d == nil {
			t.Fatalf("message %d: no decoder kept for its types", k)
		}
		gobDecoders.put(types, d)
	}
}

// Two senders whose types differ (field order, names) send messages with
// different descriptions; each decodes into the receiver's type by field
// name, as with a fresh decoder, whichever the kept decoder saw first.
func TestGobKeptDecodersBySender(t *testing.T) {
	type recv struct {
		X int
		Y string
	}
	type senderA struct {
		X int
		Y string
	}
	type senderB struct {
		Y string
		Z float64
		X int
	}
	codec := Gob()
	for i := range 5 {
		a, _ := codec.Marshal(&senderA{X: i, Y: "a"})
		b, _ := codec.Marshal(&senderB{Y: "b", Z: 1.5, X: 10 * i})
		var ra, rb recv
		if err := codec.Unmarshal(a, &ra); err != nil || ra != (recv{i, "a"}) {
			t.Fatalf("from A: %+v, %v", ra, err)
		}
		if err := codec.Unmarshal(b, &rb); err != nil || rb != (recv{10 * i, "b"}) {
			t.Fatalf("from B: %+v, %v", rb, err)
		}
	}
}

// Malformed or truncated messages fail to decode, as with a fresh decoder,
// and leave no broken decoder behind: the next good message decodes.
func TestGobKeptDecodersAfterErrors(t *testing.T) {
	codec := Gob()
	good, _ := codec.Marshal(&job{N: 7})
	types, value, ok := gobSplit(good)
	if !ok || len(types) == 0 || len(value) == 0 {
		t.Fatalf("gobSplit of one value: %d type bytes, %d value bytes, %v", len(types), len(value), ok)
	}
	var j job
	if err := codec.Unmarshal(good, &j); err != nil || j.N != 7 {
		t.Fatalf("%+v %v", j, err)
	}
	bad := [][]byte{
		nil,
		{0x05},
		good[:len(good)-1],
		append(append([]byte{}, types...), 0x03, 0x02, 0xff, 0xff), // a value of an unknown layout
		append(append([]byte{}, good...), good...),                 // two values
		append(append([]byte{}, good...), 0x00),                    // trailing byte
	}
	for i, data := range bad {
		var got, fresh job
		err := codec.Unmarshal(data, &got)
		ferr := freshGob(data, &fresh)
		if (err == nil) != (ferr == nil) || got != fresh {
			t.Errorf("case %d: codec %+v, %v; fresh decoder %+v, %v", i, got, err, fresh, ferr)
		}
		var again job
		if err := codec.Unmarshal(good, &again); err != nil || again.N != 7 {
			t.Fatalf("after case %d: %+v %v", i, again, err)
		}
	}
	// Into the wrong type: an error, and the kept decoders still work.
	var s string
	if err := codec.Unmarshal(good, &s); err == nil {
		t.Error("a job decoded into a string")
	}
	if err := codec.Unmarshal(good, &j); err != nil || j.N != 7 {
		t.Fatalf("after a wrong type: %+v %v", j, err)
	}
}

func TestGobUint(t *testing.T) {
	for _, x := range []uint64{0, 1, 127, 128, 255, 256, 1 << 20, 1<<64 - 1} {
		enc := make([]byte, 9)
		n := putGobUint(enc, x)
		got, w := gobUint(enc[:n])
		if got != x || w != n {
			t.Errorf("gobUint(%x) = %d, %d; want %d, %d", enc[:n], got, w, x, n)
		}
	}
	if _, w := gobUint([]byte{0xfe, 1}); w != 0 {
		t.Error("truncated uint accepted")
	}
	if _, w := gobUint([]byte{0xf0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}); w != 0 {
		t.Error("16-byte uint accepted")
	}
}

// putGobUint writes x as gob does (encoding/gob's encodeUint).
func putGobUint(b []byte, x uint64) int {
	if x <= 0x7f {
		b[0] = byte(x)
		return 1
	}
	n := 0
	for y := x; y > 0; y >>= 8 {
		n++
	}
	b[0] = byte(-n)
	for i := n; i > 0; i-- {
		b[i] = byte(x)
		x >>= 8
	}
	return n + 1
}

// gobPlainItem is gobItem without the interface.
type gobPlainItem struct {
	N     int
	Name  string
	Tags  []string
	Attrs map[string]int
	Next  *gobPlainItem
	Grid  [2][3]uint16
}

// The gob codec's kept encoders write the bytes a new encoder writes, for
// values of types without interfaces (kept) and with them (a new encoder
// each time), from concurrent goroutines; the outputs decode to the input.
func TestGobKeptEncodersMatchFresh(t *testing.T) {
	codec := Gob()
	fresh := func(v any) []byte {
		var b bytes.Buffer
		if err := gob.NewEncoder(&b).Encode(v); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	values := func(i int) []any {
		p := &gobPlainItem{N: i, Name: fmt.Sprint("item", i), Tags: []string{"a", fmt.Sprint(i)}, Attrs: map[string]int{"k": i}, Grid: [2][3]uint16{{uint16(i)}}}
		p.Next = &gobPlainItem{N: -i}
		outs := []answer{{i, i * i}, {-i, i}}
		return []any{&job{N: i, Sleep: time.Duration(i)}, &outs, p, &gobItem{N: i, Shape: gobRect{float64(i), 2}}, &[]gobItem{{Shape: gobDisc{1}}}}
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				for _, v := range values(g*100 + i) {
					got, err := codec.Marshal(v)
					if err != nil {
						t.Error(err)
						return
					}
					if want := fresh(v); !bytes.Equal(got, want) {
						t.Errorf("%T %d: kept encoder wrote %x, a new one %x", v, i, got, want)
						return
					}
					back := reflect.New(reflect.TypeOf(v).Elem())
					if err := codec.Unmarshal(got, back.Interface()); err != nil || !reflect.DeepEqual(back.Interface(), v) {
						t.Errorf("%T %d: decoded %+v, %v", v, i, back.Elem().Interface(), err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if !gobPlain(reflect.TypeFor[*gobPlainItem](), map[reflect.Type]bool{}) || gobPlain(reflect.TypeFor[*gobItem](), map[reflect.Type]bool{}) {
		t.Error("gobPlain: gobPlainItem has no interface, gobItem has one")
	}
}
