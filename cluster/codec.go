package cluster

import (
	"bytes"
	"encoding/gob"
	"encoding/json"
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
	return gob.NewDecoder(bytes.NewReader(data)).Decode(v)
}

type jsonCodec struct{}

func (jsonCodec) Name() string                       { return "json" }
func (jsonCodec) Marshal(v any) ([]byte, error)      { return json.Marshal(v) }
func (jsonCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }
