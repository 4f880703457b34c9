package align

import (
	"bytes"
	"encoding/gob"
	"image"
	"math"
	"reflect"
	"testing"
)

// A flat field survives MarshalBinary and UnmarshalBinary, and a gob round
// trip, bit for bit: the decoded one corrects tiles exactly as the original.
func TestFlatFieldBinaryRoundTrip(t *testing.T) {
	const w, h = 7, 5
	ff := &FlatField{w: w, h: h, gain: make([]float32, w*h), fall: 0.7123456789, significance: 12.5}
	for i := range ff.gain {
		ff.gain[i] = 1 + float32(i)/97 + 1e-7*float32(i%3)
	}
	ff.gain[3] = float32(math.Nextafter32(1, 2))
	data, err := ff.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var back FlatField
	if err := back.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, ff) {
		t.Fatalf("round trip changed the flat field:\n got %+v\nwant %+v", back, *ff)
	}

	var buf bytes.Buffer
	type message struct{ FF *FlatField }
	if err := gob.NewEncoder(&buf).Encode(message{ff}); err != nil {
		t.Fatal(err)
	}
	var m message
	if err := gob.NewDecoder(&buf).Decode(&m); err != nil {
		t.Fatal(err)
	}
	tile := image.NewGray16(image.Rect(0, 0, w, h))
	for i := range tile.Pix {
		tile.Pix[i] = byte(37 * i)
	}
	if a, b := ff.Apply(tile), m.FF.Apply(tile); !bytes.Equal(a.Pix, b.Pix) || m.FF.Falloff() != ff.Falloff() || m.FF.Identity() {
		t.Error("the flat field decoded by gob corrects differently")
	}
}

// Data that is not a flat field of the size it claims is refused, and the
// receiver keeps its value.
func TestFlatFieldUnmarshalErrors(t *testing.T) {
	ff := &FlatField{w: 2, h: 2, gain: []float32{1, 1, 1, 1}, fall: 1, identity: true}
	good, err := ff.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string][]byte{
		"empty":     nil,
		"magic":     append([]byte("XXXX"), good[4:]...),
		"truncated": good[:len(good)-1],
		"longer":    append(append([]byte{}, good...), 0, 0, 0, 0),
		"flag":      append(append(append([]byte{}, good[:28]...), 7), good[29:]...),
	}
	for name, data := range bad {
		keep := *ff
		if err := keep.UnmarshalBinary(data); err == nil {
			t.Errorf("%s: no error", name)
		}
		if !reflect.DeepEqual(&keep, ff) {
			t.Errorf("%s: the failed decode changed the receiver", name)
		}
	}
	if _, err := (&FlatField{w: 2, h: 2}).MarshalBinary(); err == nil {
		t.Error("a flat field without gains was encoded")
	}
}
