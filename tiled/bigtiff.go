package tiled

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"unsafe"
)

// TIFF tag numbers and field types used by the BigTIFF writer and reader.
const (
	tagNewSubfileType  = 254
	tagImageWidth      = 256
	tagImageLength     = 257
	tagBitsPerSample   = 258
	tagCompression     = 259
	tagPhotometric     = 262
	tagSamplesPerPixel = 277
	tagPlanarConfig    = 284
	tagTileWidth       = 322
	tagTileLength      = 323
	tagTileOffsets     = 324
	tagTileByteCounts  = 325
	tagSampleFormat    = 339
	tagImageDesc       = 270
	tagXResolution     = 282
	tagYResolution     = 283
	tagResolutionUnit  = 296
	tagSoftware        = 305
	tagPredictor       = 317
	tagSubIFDs         = 330

	typeASCII    = 2
	typeShort    = 3
	typeLong     = 4
	typeRational = 5
	typeIFD      = 13
	typeLong8    = 16
	typeIFD8     = 18
)

// Levels is how many pyramid levels (full resolution included) halve an
// image of w x h until it fits in one tw x th tile.
func Levels(w, h, tw, th int) int {
	n := 1
	for w > tw || h > th {
		w, h = (w+1)/2, (h+1)/2
		n++
	}
	return n
}

// WriteBigTIFF writes im to path as an uncompressed, tiled BigTIFF with
// levels resolution levels (levels <= 0: down to one tile, see Levels):
// the full image in the first IFD, then each 2x2-mean reduction in a
// successive IFD marked NewSubfileType=1 (reduced-resolution image), the
// form libtiff, QuPath/Bio-Formats, OpenSlide's generic TIFF and Fiji read as
// a pyramid. The TIFF tiles are im's tiles (TW and TH must be multiples of
// 16). im is read row of tiles by row of tiles through a BigTIFFStream,
// which builds the reduced levels as the rows pass, so memory is about two
// rows of tiles whatever the image's height. tmpDir and budget are not
// used (no level needs a temporary image any more).
func WriteBigTIFF(path string, im *Image, levels int, tmpDir string, budget int64) error {
	if err := im.Flush(); err != nil {
		return err
	}
	s, err := CreateBigTIFF(path, im.W, im.H, im.TW, im.TH, levels, tmpDir, budget)
	if err != nil {
		return err
	}
	err = s.writeImage(im)
	if err != nil {
		s.done = true
		return s.t.finish(err)
	}
	return s.Close()
}

// tiffWriter writes a tiled BigTIFF: the header, then tile data and IFDs,
// each IFD's offset patched into the previous one's next pointer at the
// end. Rows of tiles go to the file in one write each (block), through a
// second descriptor opened with O_DIRECT where the system allows it, so
// that, like dd oflag=direct, they bypass the page cache's copy and
// write-back; everything else goes through a small buffer.
type tiffWriter struct {
	f       *os.File
	direct  *os.File     // nil: blocks go through w
	pending []chan error // the direct writes in flight, oldest first
	depth   int          // at most this many direct writes in flight (at least 1)
	off     *io.OffsetWriter
	w       *posWriter
	nextPtr int64
	patches [][2]int64 // (where, value)
}

// directAlign is the alignment of direct writes: their file offset,
// length and memory address.
const directAlign = 4096

// useDirect turns direct writes on (a variable for tests).
var useDirect = true

func newTIFFWriter(path string) (*tiffWriter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	off := io.NewOffsetWriter(f, 0)
	t := &tiffWriter{f: f, off: off, w: &posWriter{w: bufio.NewWriterSize(off, 64<<10)}}
	if d, err := openDirect(path); err == nil && hostLE && useDirect {
		t.direct = d
	} else if err == nil {
		d.Close()
	}
	// Header: II, 43, offset size 8, 0, first IFD offset (patched).
	t.w.bytes([]byte{'I', 'I', 43, 0, 8, 0, 0, 0})
	t.nextPtr = t.w.pos
	t.w.u64(0)
	return t, nil
}

// block writes b, whose memory is directAlign-aligned and whose capacity
// reaches a multiple of directAlign bytes (where direct writes are on),
// and returns its offset. Every block starts at an aligned offset (zeros
// pad the gap) and is rounded up to the alignment with zeros, direct or
// not, so the file's bytes do not depend on the file system. Direct
// writes run in the background, up to depth of them at once (the disk
// gets the next while it finishes one), while the caller fills other
// buffers: b must stay untouched until depth more blocks have been
// written or finish, which wait for it.
func (t *tiffWriter) block(b []byte) uint64 {
	if gap := (directAlign - t.w.pos%directAlign) % directAlign; gap > 0 {
		t.w.bytes(make([]byte, gap))
	}
	n := (len(b) + directAlign - 1) / directAlign * directAlign
	if t.direct == nil || t.w.err != nil {
		t.wait()
		off := uint64(t.w.pos)
		t.w.bytes(b)
		if n > len(b) {
			t.w.bytes(make([]byte, n-len(b)))
		}
		return off
	}
	if t.w.err == nil {
		t.w.err = t.w.w.Flush()
	}
	pos := t.w.pos
	full := b[:n]
	clear(full[len(b):])
	t.w.pos += int64(n)
	if _, err := t.off.Seek(t.w.pos, io.SeekStart); err != nil && t.w.err == nil {
		t.w.err = err
	}
	for len(t.pending) >= max(1, t.depth) {
		t.waitOne()
	}
	if t.w.err != nil {
		t.wait()
		return 0
	}
	done := make(chan error, 1)
	t.pending = append(t.pending, done)
	go func() {
		_, err := t.direct.WriteAt(full, pos)
		if errors.Is(err, syscall.EINVAL) {
			_, err = t.f.WriteAt(full, pos)
		}
		done <- err
	}()
	return uint64(pos)
}

// waitOne waits for the oldest direct write in flight and records its
// error.
func (t *tiffWriter) waitOne() {
	if err := <-t.pending[0]; err != nil && t.w.err == nil {
		t.w.err = err
	}
	t.pending = t.pending[1:]
}

// wait waits for the direct writes in flight, if any, and records the
// first error.
func (t *tiffWriter) wait() {
	for len(t.pending) > 0 {
		t.waitOne()
	}
	t.pending = nil
}

// alignedU16 returns n zero values whose memory starts at a multiple of
// directAlign and whose capacity reaches a multiple of directAlign bytes.
func alignedU16(n int) []uint16 {
	nb := (2*n + directAlign - 1) / directAlign * directAlign
	b := make([]byte, nb+directAlign)
	skip := (directAlign - int(uintptr(unsafe.Pointer(&b[0]))%directAlign)) % directAlign
	b = b[skip : skip+nb]
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), nb/2)[:n]
}

// alignedBytes returns n zero bytes whose memory starts at a multiple of
// directAlign and whose capacity reaches a multiple of directAlign.
func alignedBytes(n int) []byte {
	b := alignedU16((n + 1) / 2)
	return asBytes(b[:cap(b)])[:n]
}

// ifdEntry is one IFD entry: its tag, field type, value count and
// little-endian value bytes.
type ifdEntry struct {
	tag, typ uint16
	count    uint64
	data     []byte
}

// newEntry returns an entry of type typ (SHORT, LONG, LONG8 or IFD8) holding
// vals.
func newEntry(tag, typ uint16, vals ...uint64) ifdEntry {
	n := typeSize(typ)
	b := make([]byte, int64(len(vals))*n)
	for i, x := range vals {
		putVal(b[int64(i)*n:], typ, x)
	}
	return ifdEntry{tag, typ, uint64(len(vals)), b}
}

// asciiEntry returns an ASCII entry holding s and its terminating NUL.
func asciiEntry(tag uint16, s string) ifdEntry {
	return ifdEntry{tag, typeASCII, uint64(len(s) + 1), append([]byte(s), 0)}
}

// rationalEntry returns a RATIONAL entry holding num/den.
func rationalEntry(tag uint16, num, den uint32) ifdEntry {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint32(b, num)
	binary.LittleEndian.PutUint32(b[4:], den)
	return ifdEntry{tag, typeRational, 1, b}
}

// levelEntries are the entries every level's IFD has: a w x h 16-bit
// grayscale image in tw x th tiles at offs, counts bytes each,
// compressed with c, NewSubfileType 1 when reduced.
func levelEntries(reduced bool, w, h, tw, th int, offs, counts []uint64, c Compression) []ifdEntry {
	subfile := uint64(0)
	if reduced {
		subfile = 1
	}
	ents := []ifdEntry{
		newEntry(tagNewSubfileType, typeLong, subfile),
		newEntry(tagImageWidth, typeLong, uint64(w)),
		newEntry(tagImageLength, typeLong, uint64(h)),
		newEntry(tagBitsPerSample, typeShort, 16),
		newEntry(tagCompression, typeShort, uint64(c)),
		newEntry(tagPhotometric, typeShort, 1),
		newEntry(tagSamplesPerPixel, typeShort, 1),
		newEntry(tagPlanarConfig, typeShort, 1),
		newEntry(tagTileWidth, typeLong, uint64(tw)),
		newEntry(tagTileLength, typeLong, uint64(th)),
		newEntry(tagTileOffsets, typeLong8, offs...),
		newEntry(tagTileByteCounts, typeLong8, counts...),
		newEntry(tagSampleFormat, typeShort, 1),
	}
	if c.predictor() {
		ents = append(ents, newEntry(tagPredictor, typeShort, 2))
	}
	return ents
}

// ifd writes an IFD of ents (sorted by tag here), its values of more than
// 8 bytes right after it, each padded to an even length, and returns its
// offset. A linked IFD's offset goes into the previous linked IFD's next
// pointer (the header's for the first) and its own next pointer waits for
// the next linked IFD; an unlinked IFD (a SubIFD) keeps a next pointer of
// 0.
func (t *tiffWriter) ifd(ents []ifdEntry, linked bool) uint64 {
	slices.SortStableFunc(ents, func(a, b ifdEntry) int { return int(a.tag) - int(b.tag) })
	if t.w.pos%2 == 1 {
		t.w.bytes([]byte{0})
	}
	ifdPos := t.w.pos
	ifdSize := int64(8 + 20*len(ents) + 8)
	extra := ifdPos + ifdSize // out-of-line values follow the IFD
	t.w.u64(uint64(len(ents)))
	var outOfLine [][]byte
	for _, e := range ents {
		t.w.u16(e.tag)
		t.w.u16(e.typ)
		t.w.u64(e.count)
		if len(e.data) <= 8 {
			var v [8]byte
			copy(v[:], e.data)
			t.w.bytes(v[:])
		} else {
			t.w.u64(uint64(extra))
			extra += int64(len(e.data)+1) / 2 * 2
			outOfLine = append(outOfLine, e.data)
		}
	}
	if linked {
		t.patches = append(t.patches, [2]int64{t.nextPtr, ifdPos})
		t.nextPtr = t.w.pos
	}
	t.w.u64(0)
	for _, b := range outOfLine {
		t.w.bytes(b)
		if len(b)%2 == 1 {
			t.w.bytes([]byte{0})
		}
	}
	return uint64(ifdPos)
}

// finish flushes, patches the IFD pointers and closes the file, or (err
// not nil, or any failure) removes it; it returns the first error.
func (t *tiffWriter) finish(err error) error {
	t.wait()
	if err == nil {
		err = t.w.err
	}
	if err == nil {
		err = t.w.w.Flush()
	}
	for _, p := range t.patches {
		if err != nil {
			break
		}
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(p[1]))
		_, err = t.f.WriteAt(b[:], p[0])
	}
	if t.direct != nil {
		if cerr := t.direct.Close(); err == nil {
			err = cerr
		}
	}
	if cerr := t.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(t.f.Name())
	}
	return err
}

// Downsample returns a new temporary image of half im's size (rounded up),
// same tile size, each pixel the mean of a 2x2 block (edge pixels repeat),
// built tile by tile.
func Downsample(im *Image, tmpDir string, budget int64) (*Image, error) {
	out, err := CreateTemp(tmpDir, (im.W+1)/2, (im.H+1)/2, im.TW, im.TH, budget)
	if err != nil {
		return nil, err
	}
	src := make([]uint16, 4*im.TW*im.TH)
	dst := make([]uint16, im.TW*im.TH)
	for _, c := range out.Tiles() {
		x0, y0, _, _ := out.Rect(c)
		if err := im.ReadRect(2*x0, 2*y0, 2*im.TW, 2*im.TH, src, Clamp); err != nil {
			out.Close()
			return nil, err
		}
		sw := 2 * im.TW
		for y := 0; y < im.TH; y++ {
			r0 := src[2*y*sw : 2*y*sw+sw]
			r1 := src[(2*y+1)*sw : (2*y+1)*sw+sw]
			d := dst[y*im.TW : (y+1)*im.TW]
			for x := range d {
				s := uint32(r0[2*x]) + uint32(r0[2*x+1]) + uint32(r1[2*x]) + uint32(r1[2*x+1])
				d[x] = uint16((s + 2) / 4)
			}
		}
		if err := out.WriteTile(c, dst); err != nil {
			out.Close()
			return nil, err
		}
	}
	return out, nil
}

func typeSize(t uint16) int64 {
	switch t {
	case typeASCII:
		return 1
	case typeShort:
		return 2
	case typeLong, typeIFD:
		return 4
	default:
		return 8
	}
}

func putVal(b []byte, t uint16, x uint64) {
	switch t {
	case typeShort:
		binary.LittleEndian.PutUint16(b, uint16(x))
	case typeLong, typeIFD:
		binary.LittleEndian.PutUint32(b, uint32(x))
	default:
		binary.LittleEndian.PutUint64(b, x)
	}
}

type posWriter struct {
	w   *bufio.Writer
	pos int64
	err error
}

func (p *posWriter) bytes(b []byte) {
	if p.err != nil {
		return
	}
	n, err := p.w.Write(b)
	p.pos += int64(n)
	p.err = err
}

func (p *posWriter) u16(v uint16) {
	var b [2]byte
	binary.LittleEndian.PutUint16(b[:], v)
	p.bytes(b[:])
}

func (p *posWriter) u64(v uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	p.bytes(b[:])
}

// Level describes one IFD of a tiled 16-bit grayscale BigTIFF.
type Level struct {
	W, H, TW, TH int
	Reduced      bool // NewSubfileType bit 0
	// Compression of the tiles; Predictor is TIFF's horizontal
	// differencing (Predictor=2).
	Compression Compression
	Predictor   bool
	Offsets     []uint64
	Counts      []uint64
}

// TIFF is an open tiled BigTIFF file.
type TIFF struct {
	r io.ReaderAt
	f *os.File
	// Levels are the full resolution and its reduced levels: the first
	// IFD and its SubIFDs (OME-TIFF's pyramid), or, in a file without
	// SubIFDs, the top-level IFDs in file order (GeoTIFF's overviews).
	Levels []Level
	// Planes are the image's planes (an OME-TIFF's channels), each its
	// levels: a top-level IFD and its SubIFDs. Planes[0] is Levels. A
	// file without SubIFDs has one plane.
	Planes [][]Level
	// Description is the first IFD's ImageDescription (an OME-TIFF's
	// OME-XML), "" when it has none.
	Description string

	dec tileDecoder
}

// OpenBigTIFF opens a tiled 16-bit one-sample BigTIFF (little-endian),
// uncompressed or compressed with deflate or zstd, such as WriteBigTIFF
// and CreateOMETIFF make.
func OpenBigTIFF(path string) (*TIFF, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	t, err := ParseBigTIFF(f, st.Size())
	if err != nil {
		f.Close()
		return nil, err
	}
	t.f = f
	return t, nil
}

// Close closes the file.
func (t *TIFF) Close() error {
	if t.dec.zstd != nil {
		t.dec.zstd.Close()
	}
	if t.f != nil {
		return t.f.Close()
	}
	return nil
}

// ErrFormat is wrapped by every error about a file that is not a tiled
// 16-bit grayscale BigTIFF this package reads.
var ErrFormat = errors.New("tiled: not a supported tiled BigTIFF")

func formatErr(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrFormat}, a...)...)
}

// maxDescription is the longest ImageDescription ParseBigTIFF keeps.
const maxDescription = 1 << 20

// ParseBigTIFF reads the header and every IFD of a BigTIFF of size bytes,
// the first IFD's SubIFDs included. It validates what it reads (at most
// 64 IFDs in all, tile arrays within the file) and never allocates more
// than the file could describe.
func ParseBigTIFF(r io.ReaderAt, size int64) (*TIFF, error) {
	var h [16]byte
	if _, err := r.ReadAt(h[:], 0); err != nil {
		return nil, formatErr("short header")
	}
	le := binary.LittleEndian
	if h[0] != 'I' || h[1] != 'I' || le.Uint16(h[2:]) != 43 || le.Uint16(h[4:]) != 8 || le.Uint16(h[6:]) != 0 {
		return nil, formatErr("header is not little-endian BigTIFF")
	}
	p := &ifdParser{r: r, size: size, seen: map[uint64]bool{}, budget: 8*size + 1<<16}
	t := &TIFF{r: r}
	off := le.Uint64(h[8:])
	var top []Level      // the top-level IFDs
	var planes [][]Level // each top-level IFD with its SubIFDs
	subs := false
	for off != 0 {
		d, err := p.parse(off)
		if err != nil {
			return nil, err
		}
		if len(top) == 0 {
			t.Description = d.desc
		}
		top = append(top, d.level)
		plane := []Level{d.level}
		for _, so := range d.subs {
			sub, err := p.parse(so)
			if err != nil {
				return nil, err
			}
			plane = append(plane, sub.level)
			subs = true
		}
		planes = append(planes, plane)
		off = d.next
	}
	if len(top) == 0 {
		return nil, formatErr("no IFD")
	}
	if subs {
		t.Planes = planes
	} else {
		t.Planes = [][]Level{top}
	}
	t.Levels = t.Planes[0]
	return t, nil
}

// ifdParser reads the IFDs of one file, within bounds shared by all of
// them.
type ifdParser struct {
	r    io.ReaderAt
	size int64
	seen map[uint64]bool
	// budget is what the tag values read may still add up to: a few
	// times the file, since repeated entries pointing at the same bytes
	// would otherwise multiply the work and memory of one parse.
	budget int64
}

// parsedIFD is what parse reads of one IFD.
type parsedIFD struct {
	level Level
	next  uint64   // the next IFD's offset, 0 for none
	subs  []uint64 // SubIFDs' offsets
	desc  string   // ImageDescription
}

// parse reads and checks the IFD at off.
func (p *ifdParser) parse(off uint64) (parsedIFD, error) {
	var d parsedIFD
	r, size, le := p.r, p.size, binary.LittleEndian
	if len(p.seen) >= 64 || p.seen[off] {
		return d, formatErr("too many or looping IFDs")
	}
	p.seen[off] = true
	if off > uint64(size) || off+8 > uint64(size) {
		return d, formatErr("IFD offset %d outside the file", off)
	}
	var nb [8]byte
	if _, err := r.ReadAt(nb[:], int64(off)); err != nil {
		return d, formatErr("reading IFD: %v", err)
	}
	n := le.Uint64(nb[:])
	if n == 0 || n > 4096 || off+8+n*20+8 > uint64(size) {
		return d, formatErr("bad IFD entry count %d", n)
	}
	ifd := make([]byte, n*20+8)
	if _, err := r.ReadAt(ifd, int64(off)+8); err != nil {
		return d, formatErr("reading IFD: %v", err)
	}
	lv := &d.level
	bps, spp, comp, pred := uint64(1), uint64(1), uint64(1), uint64(1)
	for i := uint64(0); i < n; i++ {
		e := ifd[i*20:]
		tag, typ, cnt := le.Uint16(e), le.Uint16(e[2:]), le.Uint64(e[4:])
		switch tag {
		case tagNewSubfileType, tagImageWidth, tagImageLength, tagBitsPerSample, tagCompression,
			tagSamplesPerPixel, tagTileWidth, tagTileLength, tagTileOffsets, tagTileByteCounts,
			tagPredictor, tagSubIFDs, tagImageDesc:
		default:
			// Values this reader does not use are not read: a crafted
			// file could otherwise make every one of thousands of
			// entries read most of the file.
			continue
		}
		if p.budget -= int64(min(cnt, uint64(size)+1)) * 8; p.budget < 0 {
			return d, formatErr("tag values add up to more than the file can hold")
		}
		if tag == tagImageDesc {
			if typ == typeASCII && cnt <= maxDescription {
				b, err := readRaw(r, size, cnt, e[12:20])
				if err != nil {
					return d, err
				}
				d.desc = strings.TrimRight(string(b), "\x00")
			}
			continue
		}
		vals, err := readVals(r, size, typ, cnt, e[12:20])
		if err != nil {
			return d, err
		}
		first := uint64(0)
		if len(vals) > 0 {
			first = vals[0]
		}
		switch tag {
		case tagNewSubfileType:
			lv.Reduced = first&1 != 0
		case tagImageWidth:
			lv.W = int(min(first, 1<<31))
		case tagImageLength:
			lv.H = int(min(first, 1<<31))
		case tagBitsPerSample:
			bps = first
		case tagCompression:
			comp = first
		case tagSamplesPerPixel:
			spp = first
		case tagTileWidth:
			lv.TW = int(min(first, 1<<31))
		case tagTileLength:
			lv.TH = int(min(first, 1<<31))
		case tagTileOffsets:
			lv.Offsets = vals
		case tagTileByteCounts:
			lv.Counts = vals
		case tagPredictor:
			pred = first
		case tagSubIFDs:
			d.subs = vals
		}
	}
	switch c := Compression(comp); {
	case bps != 16 || spp != 1:
		return d, formatErr("want 16-bit, 1 sample; have %d bits, %d samples", bps, spp)
	case c != CompressionNone && c != CompressionDeflate && c != CompressionZstd:
		return d, formatErr("compression %d: want none (1), deflate (8) or zstd (50000)", comp)
	case pred != 1 && pred != 2:
		return d, formatErr("predictor %d: want none (1) or horizontal (2)", pred)
	}
	lv.Compression, lv.Predictor = Compression(comp), pred == 2
	if lv.W <= 0 || lv.H <= 0 || lv.TW <= 0 || lv.TH <= 0 || lv.TW > 1<<16 || lv.TH > 1<<16 {
		return d, formatErr("missing, zero or too large size or tile size")
	}
	nt := uint64((lv.W+lv.TW-1)/lv.TW) * uint64((lv.H+lv.TH-1)/lv.TH)
	if uint64(len(lv.Offsets)) != nt || uint64(len(lv.Counts)) != nt {
		return d, formatErr("%d tile offsets and %d counts for %d tiles", len(lv.Offsets), len(lv.Counts), nt)
	}
	tb := uint64(lv.TW) * uint64(lv.TH) * 2
	for i := range lv.Offsets {
		c := lv.Counts[i]
		ok := c == tb
		if lv.Compression != CompressionNone {
			ok = c > 0 && c <= 2*tb+1<<16 // a compressed tile is at most a little larger than its pixels
		}
		if !ok || lv.Offsets[i] > uint64(size) || lv.Offsets[i]+c > uint64(size) {
			return d, formatErr("tile %d outside the file or of the wrong size", i)
		}
	}
	d.next = le.Uint64(ifd[n*20:])
	return d, nil
}

// readRaw returns the cnt bytes of a BYTE or ASCII entry whose value
// field is inline.
func readRaw(r io.ReaderAt, size int64, cnt uint64, inline []byte) ([]byte, error) {
	if cnt <= 8 {
		return inline[:cnt], nil
	}
	at := binary.LittleEndian.Uint64(inline)
	if cnt > uint64(size) || at > uint64(size) || at+cnt > uint64(size) {
		return nil, formatErr("tag values outside the file")
	}
	b := make([]byte, cnt)
	if _, err := r.ReadAt(b, int64(at)); err != nil {
		return nil, formatErr("reading tag values: %v", err)
	}
	return b, nil
}

func readVals(r io.ReaderAt, size int64, typ uint16, cnt uint64, inline []byte) ([]uint64, error) {
	var ts int64
	switch typ {
	case typeShort:
		ts = 2
	case typeLong, typeIFD:
		ts = 4
	case typeLong8, typeIFD8:
		ts = 8
	default:
		return nil, nil // types this reader does not need
	}
	if cnt > uint64(size)/uint64(ts)+1 {
		return nil, formatErr("tag count %d too large", cnt)
	}
	total := int64(cnt) * ts
	var b []byte
	if total <= 8 {
		b = inline[:total]
	} else {
		at := binary.LittleEndian.Uint64(inline)
		if at > uint64(size) || at+uint64(total) > uint64(size) {
			return nil, formatErr("tag values outside the file")
		}
		b = make([]byte, total)
		if _, err := r.ReadAt(b, int64(at)); err != nil {
			return nil, formatErr("reading tag values: %v", err)
		}
	}
	vals := make([]uint64, cnt)
	for i := range vals {
		switch ts {
		case 2:
			vals[i] = uint64(binary.LittleEndian.Uint16(b[2*i:]))
		case 4:
			vals[i] = uint64(binary.LittleEndian.Uint32(b[4*i:]))
		default:
			vals[i] = binary.LittleEndian.Uint64(b[8*i:])
		}
	}
	return vals, nil
}

// ReadTile reads tile c of level l into dst (TW*TH values), decompressed
// and with the predictor undone. It is safe for concurrent use.
func (t *TIFF) ReadTile(l int, c Coord, dst []uint16) error {
	return t.ReadPlaneTile(0, l, c, dst)
}

// ReadPlaneTile reads tile c of level l of plane p (an OME-TIFF's channel
// p) into dst (TW*TH values).
func (t *TIFF) ReadPlaneTile(p, l int, c Coord, dst []uint16) error {
	if p < 0 || p >= len(t.Planes) {
		return fmt.Errorf("tiled: plane %d of %d", p, len(t.Planes))
	}
	if l < 0 || l >= len(t.Planes[p]) {
		return fmt.Errorf("tiled: level %d of %d", l, len(t.Planes[p]))
	}
	lv := t.Planes[p][l]
	tx := (lv.W + lv.TW - 1) / lv.TW
	if c.X < 0 || c.Y < 0 || c.X >= tx || c.Y >= (lv.H+lv.TH-1)/lv.TH {
		return fmt.Errorf("tiled: tile %v outside level %d", c, l)
	}
	n := lv.TW * lv.TH
	if len(dst) < n {
		return fmt.Errorf("tiled: ReadTile buffer of %d values for %d", len(dst), n)
	}
	i := c.Y*tx + c.X
	raw := make([]byte, lv.Counts[i])
	if _, err := t.r.ReadAt(raw, int64(lv.Offsets[i])); err != nil {
		return fmt.Errorf("tiled: reading tile %v of level %d: %w", c, l, err)
	}
	px := raw
	if lv.Compression != CompressionNone {
		px = make([]byte, 2*n)
		if err := t.dec.decode(lv.Compression, raw, px); err != nil {
			return fmt.Errorf("tile %v of level %d: %w", c, l, err)
		}
	}
	for j := range n {
		dst[j] = binary.LittleEndian.Uint16(px[2*j:])
	}
	if lv.Predictor {
		unpredict(dst[:n], lv.TW)
	}
	return nil
}
