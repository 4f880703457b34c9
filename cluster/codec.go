package cluster

import (
	"bytes"
	"encoding/gob"
	"encoding/json"
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
func Gob() Codec { return gobCodec{} }

// JSON returns a codec using encoding/json.
func JSON() Codec { return jsonCodec{} }

type gobCodec struct{}

func (gobCodec) Name() string { return "gob" }

func (gobCodec) Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func (gobCodec) Unmarshal(data []byte, v any) error {
	types, value, ok := gobSplit(data)
	if !ok {
		return gob.NewDecoder(bytes.NewReader(data)).Decode(v)
	}
	d := gobDecoders.get(types)
	if d == nil {
		// The first message with these types: a new decoder reads them
		// and the value, and is kept for the next message like it.
		d = &gobDecoder{}
		d.r.Reset(data)
		d.dec = gob.NewDecoder(&d.r)
	} else {
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
// message, with the reader it reads from.
type gobDecoder struct {
	r   bytes.Reader
	dec *gob.Decoder
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
