package align

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// flatFieldMagic starts a flat field's binary form; its last byte is the
// format version.
var flatFieldMagic = [4]byte{'F', 'F', 'L', 1}

// flatFieldHeader is the size of the binary form before the gains: magic,
// width, height, fall-off, significance, identity flag.
const flatFieldHeader = 4 + 4 + 4 + 8 + 8 + 1

// MarshalBinary encodes the flat field (size, gains, fall-off,
// significance) so that another process can correct tiles exactly as this
// one does: [FlatField.UnmarshalBinary] restores it bit for bit. It
// implements encoding.BinaryMarshaler, which encoding/gob uses.
func (f *FlatField) MarshalBinary() ([]byte, error) {
	if f.w < 1 || f.h < 1 || len(f.gain) != f.w*f.h || uint64(f.w) > math.MaxUint32 || uint64(f.h) > math.MaxUint32 {
		return nil, fmt.Errorf("align: FlatField.MarshalBinary: invalid flat field %dx%d with %d gains", f.w, f.h, len(f.gain))
	}
	b := make([]byte, 0, flatFieldHeader+4*len(f.gain))
	b = append(b, flatFieldMagic[:]...)
	b = binary.LittleEndian.AppendUint32(b, uint32(f.w))
	b = binary.LittleEndian.AppendUint32(b, uint32(f.h))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(f.fall))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(f.significance))
	id := byte(0)
	if f.identity {
		id = 1
	}
	b = append(b, id)
	for _, g := range f.gain {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(g))
	}
	return b, nil
}

// UnmarshalBinary decodes a flat field encoded by [FlatField.MarshalBinary]
// into f. It implements encoding.BinaryUnmarshaler; data of another format
// or size is an error and leaves f as it was.
func (f *FlatField) UnmarshalBinary(data []byte) error {
	if len(data) < flatFieldHeader || [4]byte(data[:4]) != flatFieldMagic {
		return errors.New("align: FlatField.UnmarshalBinary: not a flat field (or another format version)")
	}
	w := binary.LittleEndian.Uint32(data[4:])
	h := binary.LittleEndian.Uint32(data[8:])
	n := uint64(w) * uint64(h)
	if w < 1 || h < 1 || uint64(len(data)-flatFieldHeader) != 4*n || data[28] > 1 {
		return fmt.Errorf("align: FlatField.UnmarshalBinary: %d bytes do not hold a %dx%d flat field", len(data), w, h)
	}
	gain := make([]float32, n)
	for i := range gain {
		gain[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[flatFieldHeader+4*i:]))
	}
	*f = FlatField{
		w:            int(w),
		h:            int(h),
		gain:         gain,
		fall:         math.Float64frombits(binary.LittleEndian.Uint64(data[12:])),
		significance: math.Float64frombits(binary.LittleEndian.Uint64(data[20:])),
		identity:     data[28] == 1,
	}
	return nil
}
