package cluster

import (
	"bytes"
	"encoding"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
)

// Codec turns task inputs and outputs into bytes and back. The codec's name
// travels with every message, and a worker refuses a message encoded with a
// codec other than the one its task was registered with ([ErrMismatch]).
//
// Marshal receives a pointer to the value (an input, or the slice of a
// task's outputs) and Unmarshal a pointer to fill. Implementations must be
// safe for concurrent use.
type Codec interface {
	Name() string
	Marshal(v any) ([]byte, error)
	Unmarshal(data []byte, v any) error
}

// Gob returns the default codec, encoding/gob. Each message is encoded on
// its own, so it carries its type description (some hundred bytes); for
// small hot payloads a codec such as [JSON] or a hand-written one is lighter.
// Decoding keeps decoders that have read a message's type description and
// gives them only the value of the next message with the same description,
// so that a stream of messages of one type compiles its decoder once.
func Gob() Codec {
	return gobCodec{enc: &gobEncoders{idle: map[reflect.Type][]*gobEncoder{}, plain: map[reflect.Type]bool{}}}
}

// JSON returns a codec using encoding/json.
func JSON() Codec { return jsonCodec{} }

type gobCodec struct {
	enc *gobEncoders // kept encoders of this codec
}

func (gobCodec) Name() string { return "gob" }

// Marshal encodes v as one gob stream: the descriptions of its types, then
// its value. A value whose type holds no interface is encoded by a kept
// encoder, which has sent its type descriptions once: it writes only the
// value, after the descriptions it wrote the first time (the same bytes a
// new encoder writes, without describing the types again).
func (c gobCodec) Marshal(v any) ([]byte, error) {
	t := reflect.TypeOf(v)
	if c.enc == nil || t == nil || !c.enc.isPlain(t) {
		var b bytes.Buffer
		if err := gob.NewEncoder(&b).Encode(v); err != nil {
			return nil, err
		}
		return b.Bytes(), nil
	}
	e := c.enc.get(t)
	if e == nil {
		e = &gobEncoder{}
		e.enc = gob.NewEncoder(&e.buf)
		if err := e.enc.Encode(v); err != nil {
			return nil, err
		}
		out := bytes.Clone(e.buf.Bytes())
		if types, _, ok := gobSplit(out); ok {
			e.types = types
			c.enc.put(t, e)
		}
		return out, nil
	}
	e.buf.Reset()
	if err := e.enc.Encode(v); err != nil {
		return nil, err // e is dropped: a failed encoder may be out of step
	}
	out := make([]byte, 0, len(e.types)+e.buf.Len())
	out = append(append(out, e.types...), e.buf.Bytes()...)
	c.enc.put(t, e)
	return out, nil
}

// gobEncoder is a gob encoder that has sent the type descriptions of one
// type (types, as written), with the buffer it writes into.
type gobEncoder struct {
	buf   bytes.Buffer
	enc   *gob.Encoder
	types []byte
}

// gobEncoders keeps idle encoders by the type they encode.
type gobEncoders struct {
	mu    sync.Mutex
	idle  map[reflect.Type][]*gobEncoder
	plain map[reflect.Type]bool // gobPlain of the first gobKinds types met
}

// isPlain returns gobPlain(t), which it computes once for each of the
// first gobKinds types (a walk of the type with method look-ups, several
// µs: most of a small value's encoding).
func (c *gobEncoders) isPlain(t reflect.Type) bool {
	c.mu.Lock()
	p, ok := c.plain[t]
	c.mu.Unlock()
	if ok {
		return p
	}
	p = gobPlain(t, map[reflect.Type]bool{})
	c.mu.Lock()
	if len(c.plain) < gobKinds {
		c.plain[t] = p
	}
	c.mu.Unlock()
	return p
}

func (c *gobEncoders) get(t reflect.Type) *gobEncoder {
	c.mu.Lock()
	defer c.mu.Unlock()
	es := c.idle[t]
	if len(es) == 0 {
		return nil
	}
	e := es[len(es)-1]
	es[len(es)-1] = nil
	c.idle[t] = es[:len(es)-1]
	return e
}

func (c *gobEncoders) put(t reflect.Type, e *gobEncoder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	es, ok := c.idle[t]
	if !ok && len(c.idle) >= gobKinds || len(es) >= gobPerKind {
		return
	}
	c.idle[t] = append(es, e)
}

// gobPlain reports whether a value of type t encodes the same way with a
// kept encoder, which describes each type once, as with a new one: no
// interface anywhere in it (a kept encoder describes an interface's
// concrete type only the first time it meets it). A type that encodes
// itself (GobEncoder, BinaryMarshaler, TextMarshaler) is plain: its value
// is bytes.
func gobPlain(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return true
	}
	seen[t] = true
	if t.Implements(gobEncoderType) || t.Implements(binaryMarshalerType) || t.Implements(textMarshalerType) {
		return true
	}
	if p := reflect.PointerTo(t); p.Implements(gobEncoderType) || p.Implements(binaryMarshalerType) || p.Implements(textMarshalerType) {
		return true
	}
	switch t.Kind() {
	case reflect.Interface, reflect.Func, reflect.Chan, reflect.UnsafePointer:
		return false
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return gobPlain(t.Elem(), seen)
	case reflect.Map:
		return gobPlain(t.Key(), seen) && gobPlain(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() && !gobPlain(f.Type, seen) {
				return false
			}
		}
	}
	return true
}

var (
	gobEncoderType      = reflect.TypeFor[gob.GobEncoder]()
	binaryMarshalerType = reflect.TypeFor[encoding.BinaryMarshaler]()
	textMarshalerType   = reflect.TypeFor[encoding.TextMarshaler]()
)

func (gobCodec) Unmarshal(data []byte, v any) error {
	types, value, ok := gobSplit(data)
	if !ok {
		if err := gobCheck(data); err != nil {
			return err
		}
		return gob.NewDecoder(bytes.NewReader(data)).Decode(v)
	}
	// gobCheck(data) in two steps: the type descriptions, then the value.
	// A kept decoder has read these very descriptions, checked when it
	// was made: it keeps what they define, and only the value is walked.
	d := gobDecoders.get(types)
	if d == nil {
		w := gobWalk{data: types}
		if err := w.definitions(); err != nil {
			return gobMalformed(data, err)
		}
		d = &gobDecoder{ids: slices.Clip(w.ids), types: slices.Clip(w.types)}
		if err := d.check(value); err != nil {
			return gobMalformed(data, err)
		}
		// The first message with these types: a new decoder reads them
		// and the value, and is kept for the next message like it.
		d.r.Reset(data)
		d.dec = gob.NewDecoder(&d.r)
	} else {
		if err := d.check(value); err != nil {
			gobDecoders.put(types, d) // it has read nothing
			return gobMalformed(data, err)
		}
		d.r.Reset(value)
	}
	if err := d.dec.Decode(v); err != nil {
		return err // d is dropped: a failed decoder may be out of step
	}
	if d.r.Len() == 0 {
		gobDecoders.put(types, d)
	}
	return nil
}

// gobDecoder is a gob decoder that has read the type descriptions of a
// message, with the reader it reads from, and the types those
// descriptions define (for gobCheck's walk of a value; shared, never
// changed: their slices are full, so a walk that defines more copies
// them).
type gobDecoder struct {
	r     bytes.Reader
	dec   *gob.Decoder
	ids   []int32
	types []*gobType
}

// check walks value, a message holding one value, with the types d's
// descriptions define, as gobCheck does.
func (d *gobDecoder) check(value []byte) error {
	w := gobWalk{data: value, ids: d.ids, types: d.types}
	return w.stream()
}

// gobCache keeps idle decoders by the type descriptions they have read (the
// bytes of those messages: a type's description is the same in every
// message a process encodes).
type gobCache struct {
	mu   sync.Mutex
	idle map[string][]*gobDecoder
}

// Bounds of gobCache: the kinds of messages (distinct type descriptions)
// and the idle decoders of each.
const (
	gobKinds   = 256
	gobPerKind = 16
)

var gobDecoders = gobCache{idle: map[string][]*gobDecoder{}}

func (c *gobCache) get(types []byte) *gobDecoder {
	c.mu.Lock()
	defer c.mu.Unlock()
	ds := c.idle[string(types)]
	if len(ds) == 0 {
		return nil
	}
	d := ds[len(ds)-1]
	ds[len(ds)-1] = nil
	c.idle[string(types)] = ds[:len(ds)-1]
	return d
}

func (c *gobCache) put(types []byte, d *gobDecoder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ds, ok := c.idle[string(types)]
	if !ok && len(c.idle) >= gobKinds || len(ds) >= gobPerKind {
		return
	}
	c.idle[string(types)] = append(ds, d)
}

// gobSplit splits a gob stream holding one value into the messages that
// describe its types and the message that holds the value. ok is false if
// data is not such a stream (no description, a second value, trailing
// bytes, a malformed length): it is then decoded as a whole.
func gobSplit(data []byte) (types, value []byte, ok bool) {
	for i := 0; i < len(data); {
		n, w := gobUint(data[i:])
		if w == 0 || n == 0 || n > uint64(len(data)-i-w) {
			return nil, nil, false
		}
		msg := data[i+w : i+w+int(n)]
		id, iw := gobUint(msg)
		if iw == 0 {
			return nil, nil, false
		}
		if id&1 == 0 { // a type id ≥ 0: the value
			if i == 0 || i+w+int(n) != len(data) {
				return nil, nil, false
			}
			return data[:i], data[i:], true
		}
		i += w + int(n) // a negative id: a type's description
	}
	return nil, nil, false
}

// gobUint decodes a gob unsigned integer at the start of b and returns it
// with its width in bytes, 0 if b does not start with one.
func gobUint(b []byte) (uint64, int) {
	if len(b) == 0 {
		return 0, 0
	}
	if b[0] < 0x80 {
		return uint64(b[0]), 1
	}
	n := -int(int8(b[0]))
	if n > 8 || len(b) < 1+n {
		return 0, 0
	}
	var x uint64
	for _, c := range b[1 : 1+n] {
		x = x<<8 | uint64(c)
	}
	return x, 1 + n
}

type jsonCodec struct{}

func (jsonCodec) Name() string                       { return "json" }
func (jsonCodec) Marshal(v any) ([]byte, error)      { return json.Marshal(v) }
func (jsonCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// Bounds of gobCheck.
const (
	// gobMaxDepth bounds the nesting of values (and of interface values'
	// type definitions) gobCheck follows.
	gobMaxDepth = 10000
	// gobMaxTypes bounds the types one message may define.
	gobMaxTypes = 4096
)

// Kinds of the types a gob stream defines (the field of its wireType that
// is set).
const (
	gobArray = iota + 1
	gobSlice
	gobStruct
	gobMap
	gobExternal // GobEncoder, BinaryMarshaler or TextMarshaler: a byte string
)

// gobType is a type a gob stream defines: its kind, the ids of its element
// (key and element for a map), its length (an array) or its fields'
// types (a struct).
type gobType struct {
	kind      int
	key, elem int32
	n         uint64
	fields    []int32
}

// gobWalk follows a gob stream the way encoding/gob's Decoder reads it,
// without building any value, to bound what decoding it allocates.
type gobWalk struct {
	data     []byte
	pos, end int     // the read position; the end of the current message
	ids      []int32 // the defined type ids, and their types
	types    []*gobType
}

// gobCheck reads the gob stream data up to its first value and refuses it
// if decoding it could allocate more than a valid stream of its length:
// a map, slice, array or string whose count exceeds the bytes left in its
// message (encoding/gob sizes a map from its count before reading any
// entry, so that 26 bytes can claim 2^24 entries and allocate 850 MiB).
// It also refuses nesting deeper than gobMaxDepth and malformed streams
// (an unknown type id, a truncated message). The error wraps ErrMalformed.
func gobCheck(data []byte) error {
	w := gobWalk{data: data}
	if err := w.stream(); err != nil {
		return gobMalformed(data, err)
	}
	return nil
}

// gobMalformed is gobCheck's refusal of data.
func gobMalformed(data []byte, err error) error {
	return fmt.Errorf("%w: gob message of %d bytes: %v", ErrMalformed, len(data), err)
}

// definitions reads the type descriptions that make all of w's data (the
// types of gobSplit), as stream does before a value.
func (w *gobWalk) definitions() error {
	for w.pos < len(w.data) {
		if err := w.next(); err != nil {
			return err
		}
		id, err := w.int()
		if err != nil {
			return err
		}
		if id >= 0 {
			return errors.New("a value among the type definitions")
		}
		if err := w.define(-id); err != nil {
			return err
		}
		if w.pos != w.end {
			return errors.New("extra data after a type definition")
		}
	}
	return nil
}

func (w *gobWalk) stream() error {
	for {
		if err := w.next(); err != nil {
			return err
		}
		id, err := w.int()
		if err != nil {
			return err
		}
		if id < 0 {
			if err := w.define(-id); err != nil {
				return err
			}
			if w.pos != w.end {
				return errors.New("extra data after a type definition")
			}
			continue
		}
		return w.topValue(id, 0)
	}
}

// topValue reads a message's value of type id: a struct, or any other
// type as a singleton, after a zero field delta.
func (w *gobWalk) topValue(id int32, depth int) error {
	t, err := w.lookup(id)
	if err != nil {
		return err
	}
	if t == nil || t.kind != gobStruct {
		if d, err := w.uint(); err != nil || d != 0 {
			return errors.New("non-zero delta for a singleton value")
		}
	}
	return w.value(id, depth)
}

// next starts the next message: it reads its length and sets w.end.
func (w *gobWalk) next() error {
	w.end = len(w.data)
	n, err := w.uint()
	if err != nil {
		return err
	}
	if n == 0 || n > uint64(len(w.data)-w.pos) {
		return fmt.Errorf("message length %d with %d bytes left", n, len(w.data)-w.pos)
	}
	w.end = w.pos + int(n)
	return nil
}

func (w *gobWalk) left() int { return w.end - w.pos }

func (w *gobWalk) uint() (uint64, error) {
	x, n := gobUint(w.data[w.pos:w.end])
	if n == 0 {
		return 0, fmt.Errorf("truncated or invalid unsigned integer at byte %d", w.pos)
	}
	w.pos += n
	return x, nil
}

func (w *gobWalk) int() (int32, error) {
	x, err := w.uint()
	if err != nil {
		return 0, err
	}
	i := int64(x >> 1)
	if x&1 != 0 {
		i = ^i
	}
	if i != int64(int32(i)) {
		return 0, fmt.Errorf("type id %d out of range", i)
	}
	return int32(i), nil
}

// count reads a count of items taking at least size bytes each.
func (w *gobWalk) count(what string, size int) (uint64, error) {
	n, err := w.uint()
	if err != nil {
		return 0, err
	}
	if n > uint64(w.left()/size) {
		return 0, fmt.Errorf("%s of %d items with %d bytes left in its message", what, n, w.left())
	}
	return n, nil
}

func (w *gobWalk) skipBytes(what string) error {
	n, err := w.count(what, 1)
	if err != nil {
		return err
	}
	w.pos += int(n)
	return nil
}

// lookup returns the defined type id, nil for a basic type (bool to
// interface).
func (w *gobWalk) lookup(id int32) (*gobType, error) {
	if id >= 1 && id <= 8 {
		return nil, nil
	}
	if i := slices.Index(w.ids, id); i >= 0 && w.types[i].kind != 0 {
		return w.types[i], nil
	}
	return nil, fmt.Errorf("unknown type id %d", id)
}

// fields reads a struct's fields (field delta, value) up to its zero
// delta, calling f with each field number.
func (w *gobWalk) fields(f func(field uint64) error) error {
	field := uint64(0) // one more than the field number
	for {
		d, err := w.uint()
		if err != nil {
			return err
		}
		if d == 0 {
			return nil
		}
		if d > 1<<20 || field+d > 1<<20 {
			return fmt.Errorf("field delta %d", d)
		}
		field += d
		if err := f(field - 1); err != nil {
			return err
		}
	}
}

// define reads the wireType defining id: a struct of 7 optional fields
// (one of which is set), each a struct starting with a CommonType.
func (w *gobWalk) define(id int32) error {
	if id < 64 || slices.Contains(w.ids, id) {
		return fmt.Errorf("duplicate type id %d", id)
	}
	if len(w.types) >= gobMaxTypes {
		return fmt.Errorf("more than %d types", gobMaxTypes)
	}
	t := &gobType{}
	w.ids = append(w.ids, id)
	w.types = append(w.types, t)
	return w.fields(func(kind uint64) error {
		if kind > 6 {
			return fmt.Errorf("type %d: wireType field %d", id, kind)
		}
		if t.kind != 0 {
			return fmt.Errorf("type %d: two kinds", id)
		}
		k := min(int(kind)+1, gobExternal)
		t.kind = k
		return w.fields(func(f uint64) error {
			switch {
			case f == 0: // CommonType{Name string; Id int}
				return w.fields(func(f uint64) error {
					switch f {
					case 0:
						return w.skipBytes("type name")
					case 1:
						_, err := w.int()
						return err
					}
					return fmt.Errorf("type %d: CommonType field %d", id, f)
				})
			case k == gobArray && f == 1, k == gobSlice && f == 1, k == gobMap && f == 2:
				e, err := w.int()
				t.elem = e
				return err
			case k == gobMap && f == 1:
				e, err := w.int()
				t.key = e
				return err
			case k == gobArray && f == 2:
				n, err := w.int()
				if n < 0 {
					return fmt.Errorf("type %d: array length %d", id, n)
				}
				t.n = uint64(n)
				return err
			case k == gobStruct && f == 1: // []fieldType{Name string; Id int}
				n, err := w.count("struct fields", 1)
				if err != nil {
					return err
				}
				t.fields = make([]int32, n)
				for i := range t.fields {
					err := w.fields(func(f uint64) error {
						switch f {
						case 0:
							return w.skipBytes("field name")
						case 1:
							e, err := w.int()
							t.fields[i] = e
							return err
						}
						return fmt.Errorf("type %d: fieldType field %d", id, f)
					})
					if err != nil {
						return err
					}
				}
				return nil
			}
			return fmt.Errorf("type %d: field %d of a kind %d type", id, f, k)
		})
	})
}

// value reads a value of type id.
func (w *gobWalk) value(id int32, depth int) error {
	if depth > gobMaxDepth {
		return fmt.Errorf("values nested more than %d deep", gobMaxDepth)
	}
	switch id {
	case 1, 2, 3, 4: // bool, int, uint, float
		_, err := w.uint()
		return err
	case 5, 6: // bytes, string
		return w.skipBytes("string")
	case 7: // complex
		if _, err := w.uint(); err != nil {
			return err
		}
		_, err := w.uint()
		return err
	case 8:
		return w.iface(depth)
	}
	t, err := w.lookup(id)
	if err != nil {
		return err
	}
	switch t.kind {
	case gobArray, gobSlice:
		n, err := w.count("array or slice", 1)
		if err != nil {
			return err
		}
		if t.kind == gobArray && n != t.n {
			return fmt.Errorf("array of %d elements, its type has %d", n, t.n)
		}
		for range n {
			if err := w.value(t.elem, depth+1); err != nil {
				return err
			}
		}
		return nil
	case gobMap:
		n, err := w.count("map", 2)
		if err != nil {
			return err
		}
		for range n {
			if err := w.value(t.key, depth+1); err != nil {
				return err
			}
			if err := w.value(t.elem, depth+1); err != nil {
				return err
			}
		}
		return nil
	case gobStruct:
		field := uint64(0) // one more than the field number
		for {
			d, err := w.uint()
			if err != nil {
				return err
			}
			if d == 0 {
				return nil
			}
			if d > uint64(len(t.fields))-field {
				return fmt.Errorf("field %d of a struct of %d fields", field-1+d, len(t.fields))
			}
			field += d
			if err := w.value(t.fields[field-1], depth+1); err != nil {
				return err
			}
		}
	}
	return w.skipBytes("encoded value") // gobExternal
}

// iface reads an interface value: the concrete type's name, then (unless
// the name is empty, a nil value) the definitions of the types it needs,
// its type id, its byte count and the value, as Decoder.decodeInterface.
func (w *gobWalk) iface(depth int) error {
	n, err := w.count("interface type name", 1)
	if err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	w.pos += int(n)
	for {
		if w.left() == 0 {
			if err := w.next(); err != nil {
				return err
			}
		}
		id, err := w.int()
		if err != nil {
			return err
		}
		if id >= 0 {
			if _, err := w.count("interface value", 1); err != nil {
				return err
			}
			return w.topValue(id, depth+1)
		}
		if err := w.define(-id); err != nil {
			return err
		}
		if w.left() > 0 {
			if _, err := w.uint(); err != nil {
				return err
			}
		}
	}
}
