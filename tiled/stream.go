package tiled

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
)

// runBytes is the most a BigTIFFStream writes at once: a run of a row's
// tiles (a variable for tests).
var runBytes = 4 << 20

// BigTIFFStream writes a pyramidal BigTIFF (the file WriteBigTIFF makes,
// or an OME-TIFF: CreateOMETIFF) from full-resolution rows that arrive in
// order, with no temporary file (or the chunks of an OME-Zarr instead:
// CreateOMEZarr, where each run's tiles go to their chunk files):
// each completed row of tiles is cut into runs of tiles of up to 4 MiB,
// each tile reduced (2x2 means) into the next level's pending rows as it
// is cut, and each run goes to the file in one sequential write (O_DIRECT
// where the file system allows, two at once while the next run is cut). A
// level's pending rows go out the same way as soon as they fill a row of
// its tiles. The levels' tiles are interleaved in the file; all IFDs
// follow them at Close. Memory is three runs and the reduced levels'
// pending rows (about one row of full-resolution tiles, TH x W pixels, in
// all), whatever the height.
type BigTIFFStream struct {
	W, H, TW, TH int

	t      *tiffWriter
	levels []*streamLevel
	bufs   [3][]uint16 // runs of tiles of a row, tile after tile: one filled while the others are written
	cur    int         // bufs[cur] is the one to fill next
	run    int         // tiles in a run (bufs hold run tiles)
	raw    []byte      // the row as little-endian bytes (big-endian hosts only)
	done   bool

	planes [][]*streamLevel // the channels written before the current one (NextChannel)

	ome     *OMETIFFOptions // nil: the plain layout (levels as top-level IFDs)
	codec   *tileCodec      // nil: tiles uncompressed
	zarr    *zarrSink       // set: tiles go to an OME-Zarr's chunks, not a TIFF
	ctiles  [][]byte        // a run's compressed tiles
	scratch [][]byte        // a run's tiles as bytes (compressed, big-endian hosts)
	obufs   [3][]byte       // compressed runs, as bufs: one filled while the others are written

	keep int      // the level KeepLevel keeps (0: none)
	kept []uint16 // its pixels, stride its width
}

// streamLevel is one pyramid level being written: its size, its tiles'
// offsets and byte counts so far and (levels past the first) its pending
// rows.
type streamLevel struct {
	w, h   int
	y      int      // first row not yet written as tiles
	rows   int      // pending rows in buf (from y)
	buf    []uint16 // pending rows, stride w (nil for level 0)
	offs   []uint64
	counts []uint64
}

// CreateBigTIFF starts a BigTIFF of a w x h image in tw x th tiles
// (multiples of 16) with levels levels (<= 0: down to one tile, see
// Levels) at path, uncompressed, the reduced levels as top-level IFDs
// marked NewSubfileType=1 (the layout GDAL's overviews and COGs use; see
// CreateOMETIFF for OME-TIFF). tmpDir and budget are not used (no level
// needs a temporary image any more); they remain for callers of the
// earlier version.
func CreateBigTIFF(path string, w, h, tw, th, levels int, tmpDir string, budget int64) (*BigTIFFStream, error) {
	return newStream(path, w, h, tw, th, levels, nil, nil)
}

// CreateOMETIFF starts a tiled pyramidal OME-TIFF (always a BigTIFF) of a
// w x h 16-bit grayscale image at path, written as a BigTIFFStream: the
// full resolution in the first top-level IFD (one per channel when
// o.Channels names several, see NextChannel), whose ImageDescription
// holds the OME-XML (size, channels, pixel type, physical pixel size),
// and each 2x2-mean reduced level in an IFD listed by its channel's
// SubIFDs tag (NewSubfileType=1), as Bio-Formats, tifffile and QuPath
// read pyramids; GDAL lists them as overviews. Tiles are compressed as o says;
// the physical pixel size also goes into XResolution, YResolution and
// ResolutionUnit (centimetres) where it is given and converts, and
// nowhere when it is not.
func CreateOMETIFF(path string, w, h int, o OMETIFFOptions) (*BigTIFFStream, error) {
	o, err := o.resolved()
	if err != nil {
		return nil, err
	}
	var codec *tileCodec
	switch o.Compression {
	case CompressionNone:
	case CompressionDeflate, CompressionZstd:
		var err error
		if codec, err = newTileCodec(o.Compression); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("tiled: cannot write %v", o.Compression)
	}
	s, err := newStream(path, w, h, o.TileW, o.TileH, o.Levels, &o, codec)
	if err != nil && codec != nil {
		codec.close()
	}
	return s, err
}

// resolved returns o with its defaults filled in (512 x 512 tiles, no
// compression) and its unit in OME's spelling, or an error for a unit or
// pixel size that cannot be written.
func (o OMETIFFOptions) resolved() (OMETIFFOptions, error) {
	if o.TileW == 0 {
		o.TileW = 512
	}
	if o.TileH == 0 {
		o.TileH = 512
	}
	if o.Compression == 0 {
		o.Compression = CompressionNone
	}
	if o.PhysicalSizeUnit != "" {
		u, err := LengthUnit(o.PhysicalSizeUnit)
		if err != nil {
			return o, err
		}
		o.PhysicalSizeUnit = u
	}
	for _, v := range []float64{o.PhysicalSizeX, o.PhysicalSizeY} {
		if !(v >= 0 && v < math.Inf(1)) {
			return o, fmt.Errorf("tiled: physical pixel size %v: want a finite size >= 0", v)
		}
	}
	return o, nil
}

// newStream starts a stream into a TIFF at path: OME-TIFF when ome is
// set, tiles compressed by codec when it is set.
func newStream(path string, w, h, tw, th, levels int, ome *OMETIFFOptions, codec *tileCodec) (*BigTIFFStream, error) {
	return newStreamTo(w, h, tw, th, levels, func(s *BigTIFFStream) error {
		s.ome, s.codec = ome, codec
		if codec != nil {
			s.ctiles = make([][]byte, s.run)
			s.scratch = make([][]byte, s.run)
		} else if !hostLE {
			s.raw = make([]byte, 2*len(s.bufs[0]))
		}
		t, err := newTIFFWriter(path)
		if err != nil {
			return err
		}
		t.depth = len(s.bufs) - 1
		s.t = t
		return nil
	})
}

// newStreamTo checks the sizes, sets up the levels and the run buffers,
// and has open set the destination up.
func newStreamTo(w, h, tw, th, levels int, open func(s *BigTIFFStream) error) (*BigTIFFStream, error) {
	if tw <= 0 || th <= 0 || tw%16 != 0 || th%16 != 0 {
		return nil, fmt.Errorf("tiled: TIFF tiles must be multiples of 16, have %dx%d", tw, th)
	}
	if w <= 0 || h <= 0 || w > 1<<31 || h > 1<<31 {
		return nil, fmt.Errorf("tiled: bad size %dx%d", w, h)
	}
	if levels <= 0 {
		levels = Levels(w, h, tw, th)
	}
	levels = min(levels, 64)
	s := &BigTIFFStream{W: w, H: h, TW: tw, TH: th}
	lw, lh := w, h
	for l := range levels {
		lv := &streamLevel{w: lw, h: lh}
		if l > 0 {
			lv.buf = make([]uint16, lw*th)
		}
		s.levels = append(s.levels, lv)
		lw, lh = (lw+1)/2, (lh+1)/2
	}
	// A row of tiles goes out in runs of at most runBytes (and at least
	// one tile), each in one write.
	s.run = min((w+tw-1)/tw, max(1, runBytes/(2*tw*th)))
	for i := range s.bufs {
		s.bufs[i] = alignedU16(s.run * tw * th)
	}
	if err := open(s); err != nil {
		return nil, fmt.Errorf("tiled: %w", err)
	}
	return s, nil
}

// check checks that rows [y0, y0+n) are the next full-resolution rows.
func (s *BigTIFFStream) check(y0, n int) error {
	next := s.levels[0].y
	switch {
	case s.done:
		return errors.New("tiled: WriteRows after Close")
	case y0 != next:
		return fmt.Errorf("tiled: rows from %d, expected %d", y0, next)
	case n <= 0 || y0+n > s.H || (n%s.TH != 0 && y0+n != s.H):
		return fmt.Errorf("tiled: %d rows from %d: want a multiple of %d or up to row %d", n, y0, s.TH, s.H)
	}
	return nil
}

// WriteRows writes the full-resolution rows [y0, y0+n) from px (row
// stride W). Rows come in order (y0 is the first row not yet written) and
// n is a multiple of TH unless the rows reach the image's last.
func (s *BigTIFFStream) WriteRows(y0, n int, px []uint16) error {
	if err := s.check(y0, n); err != nil {
		return err
	}
	if len(px) < n*s.W {
		return errors.New("tiled: WriteRows buffer too small")
	}
	for r := 0; r < n; r += s.TH {
		rows := px[r*s.W:]
		if err := s.tileRow(0, nil, func(tx, cw, y0, y1 int, dst []uint16) {
			for y := y0; y < y1; y++ {
				copy(dst[y*s.TW:y*s.TW+cw], rows[y*s.W+tx*s.TW:])
			}
		}); err != nil {
			return err
		}
	}
	return nil
}

// WriteRowsBE is WriteRows for rows of big-endian pixels (image.Gray16's
// Pix): row r of the n rows starts at pix[r*stride], W pixels.
func (s *BigTIFFStream) WriteRowsBE(y0, n int, pix []byte, stride int) error {
	if err := s.check(y0, n); err != nil {
		return err
	}
	if stride < 2*s.W || len(pix) < (n-1)*stride+2*s.W {
		return errors.New("tiled: WriteRowsBE buffer too small")
	}
	for r := 0; r < n; r += s.TH {
		rows := pix[r*stride:]
		if err := s.tileRow(0, nil, func(tx, cw, y0, y1 int, dst []uint16) {
			for y := y0; y < y1; y++ {
				swapBE(dst[y*s.TW:y*s.TW+cw], rows[y*stride+2*tx*s.TW:][:2*cw])
			}
		}); err != nil {
			return err
		}
	}
	return nil
}

// writeImage writes im (same size and tiles) as the full resolution, row
// of tiles by row of tiles.
func (s *BigTIFFStream) writeImage(im *Image) error {
	for ty := range im.TilesY() {
		if err := s.tileRow(0, func(tx int, dst []uint16) error {
			return im.ReadTile(Coord{tx, ty}, dst)
		}, nil); err != nil {
			return err
		}
	}
	return nil
}

// tileRow writes level l's next row of tiles, run by run: each run's
// tiles are filled, reduced into level l+1 and go to the file in one
// write; level l+1's row of tiles follows when it is complete. A tile
// holds cw x ch valid pixels (row stride TW) in its TW x TH slot of a run
// buffer; the padding is zeroed. Either tile fills tile tx's slot whole,
// the run's tiles by ranges in up to GOMAXPROCS goroutines, or rows fills
// its rows [y0, y1) (at most two), the run's pairs of rows by ranges in
// up to GOMAXPROCS goroutines, each pair across the run's tiles: the
// source (full rows of the image) is read row after row rather than
// TW pixels a row down a tile, and each pair is reduced while it is in
// the processor's first-level cache.
func (s *BigTIFFStream) tileRow(l int, tile func(tx int, dst []uint16) error, rows func(tx, cw, y0, y1 int, dst []uint16)) error {
	lv := s.levels[l]
	tw, th, tsz := s.TW, s.TH, s.TW*s.TH
	nx := (lv.w + tw - 1) / tw
	ch := min(th, lv.h-lv.y)
	// Level l's rows [y, y+ch) reduce into level l+1's rows [y/2,
	// ceil((y+ch)/2)), 2x2 means, the last row and column repeated where
	// level l is odd, as Downsample's clamped read. TW and TH are even,
	// so no 2x2 block straddles two tiles.
	var nv *streamLevel
	if l+1 < len(s.levels) {
		nv = s.levels[l+1]
	}
	oh := (ch + 1) / 2
	// pair fills (when rows is set), pads and reduces rows 2p and 2p+1
	// of tile tx, the run's tile i.
	pair := func(buf []uint16, tx, i, p int) {
		cw := min(tw, lv.w-tx*tw)
		dst := buf[i*tsz : (i+1)*tsz]
		y0, y1 := 2*p, min(2*p+2, ch)
		if y0 >= ch {
			clear(dst[y0*tw : (y0+2)*tw])
			return
		}
		if rows != nil {
			rows(tx, cw, y0, y1, dst)
		}
		for y := y0; y < y1; y++ {
			clear(dst[y*tw+cw : (y+1)*tw])
		}
		clear(dst[y1*tw : (y0+2)*tw])
		if nv != nil {
			reduceRow(nv.buf[(nv.rows+p)*nv.w+tx*tw/2:][:(cw+1)/2], dst[y0*tw:][:cw], dst[(y1-1)*tw:][:cw])
		}
	}
	for t0 := 0; t0 < nx; t0 += s.run {
		k := min(s.run, nx-t0)
		buf := s.bufs[s.cur][:k*tsz]
		// The writes of buf and the run before run while the next fills
		// the third (s.cur is buf's index until the run is written).
		var err error
		if tile != nil {
			err = parallel(k, tsz, func(i int) error {
				if err := tile(t0+i, buf[i*tsz:(i+1)*tsz]); err != nil {
					return err
				}
				for p := range th / 2 {
					pair(buf, t0+i, i, p)
				}
				return nil
			})
		} else {
			err = parallel(th/2, 2*k*tw, func(p int) error {
				for i := range k {
					pair(buf, t0+i, i, p)
				}
				return nil
			})
		}
		if err != nil {
			return err
		}
		switch {
		case s.zarr != nil:
			err = s.zarr.run(s, l, lv.y/th, t0, k, buf)
			s.cur = (s.cur + 1) % len(s.bufs)
		case s.codec != nil:
			err = s.writeCompressed(lv, buf, k, s.cur)
		default:
			s.writeRaw(lv, buf, k)
		}
		if err != nil {
			return err
		}
		if s.t != nil && s.t.w.err != nil {
			return s.t.w.err
		}
	}
	y := lv.y
	lv.y += ch
	if nv == nil {
		return nil
	}
	nv.rows += oh
	if y/2+oh != nv.y+nv.rows {
		return fmt.Errorf("tiled: internal error: level %d rows out of step", l+1)
	}
	if nv.rows < th && nv.y+nv.rows < nv.h {
		return nil
	}
	if s.keep == l+1 && len(s.planes) == 0 {
		copy(s.kept[nv.y*nv.w:], nv.buf[:nv.rows*nv.w])
	}
	err := s.tileRow(l+1, nil, func(tx, cw, y0, y1 int, dst []uint16) {
		for y := y0; y < y1; y++ {
			copy(dst[y*tw:y*tw+cw], nv.buf[y*nv.w+tx*tw:])
		}
	})
	nv.rows = 0
	return err
}

// writeRaw writes the k uncompressed tiles of buf, a run of level lv's
// tiles, in one block.
func (s *BigTIFFStream) writeRaw(lv *streamLevel, buf []uint16, k int) {
	tsz := s.TW * s.TH
	var off uint64
	if hostLE {
		off = s.t.block(asBytes(buf[:cap(buf)])[:2*len(buf)])
	} else {
		raw := s.raw[:2*len(buf)]
		for i, v := range buf {
			binary.LittleEndian.PutUint16(raw[2*i:], v)
		}
		off = s.t.block(raw)
	}
	for i := range k {
		lv.offs = append(lv.offs, off+uint64(2*i*tsz))
		lv.counts = append(lv.counts, uint64(2*tsz))
	}
	s.cur = (s.cur + 1) % len(s.bufs)
}

// writeCompressed compresses the k tiles of buf, a run of level lv's
// tiles, in up to GOMAXPROCS goroutines (buf is overwritten), and writes
// them one after the other in one block from obufs[idx].
func (s *BigTIFFStream) writeCompressed(lv *streamLevel, buf []uint16, k, idx int) error {
	tsz := s.TW * s.TH
	err := parallel(k, 1<<20, func(i int) error {
		c, err := s.codec.compress(s.ctiles[i], buf[i*tsz:(i+1)*tsz], s.TW, &s.scratch[i])
		s.ctiles[i] = c
		return err
	})
	if err != nil {
		return err
	}
	total := 0
	for _, c := range s.ctiles[:k] {
		total += len(c)
	}
	ob := s.obufs[idx]
	if cap(ob) < total {
		ob = alignedBytes(total + total/8)
		s.obufs[idx] = ob
	}
	ob = ob[:total]
	at := 0
	for _, c := range s.ctiles[:k] {
		at += copy(ob[at:], c)
	}
	off := s.t.block(ob)
	at = 0
	for _, c := range s.ctiles[:k] {
		lv.offs = append(lv.offs, off+uint64(at))
		lv.counts = append(lv.counts, uint64(len(c)))
		at += len(c)
	}
	s.cur = (s.cur + 1) % len(s.bufs)
	return nil
}

// swapBE sets d[i] to the big-endian pixel at src[2i:], four pixels per
// 64-bit word where the host is little-endian.
func swapBE(d []uint16, src []byte) {
	i := 0
	if hostLE {
		db := asBytes(d)
		n := len(d) / 4 * 8
		sb, ob := src[:n], db[:n]
		for j := 0; j+8 <= len(sb); j += 8 {
			v := binary.LittleEndian.Uint64(sb[j : j+8 : j+8])
			v = (v&0x00ff00ff00ff00ff)<<8 | (v>>8)&0x00ff00ff00ff00ff
			binary.LittleEndian.PutUint64(ob[j:j+8:j+8], v)
		}
		i = n / 2
	}
	for ; i < len(d); i++ {
		d[i] = uint16(src[2*i])<<8 | uint16(src[2*i+1])
	}
}

// reduceRow sets out[X] to the rounded mean of r0 and r1's columns 2X and
// 2X+1 (the last column repeated when len(r0) is odd).
func reduceRow(out, r0, r1 []uint16) {
	n := len(r0) / 2
	r0, r1 = r0[:len(r0)], r1[:len(r0)]
	X := 0
	if hostLE {
		// Two outputs per 64-bit word of four input pixels: the pairs'
		// sums in 32-bit lanes (at most 4*65535 + 2, so no lane carries
		// into the next), rounded and shifted.
		m := n / 2 * 8 // bytes of whole 4-pixel words
		b0, b1, bo := asBytes(r0)[:m], asBytes(r1)[:m], asBytes(out)[:m/2]
		const lo = 0x0000ffff0000ffff
		for j := 0; j+8 <= len(b0); j += 8 {
			w0 := binary.LittleEndian.Uint64(b0[j : j+8 : j+8])
			w1 := binary.LittleEndian.Uint64(b1[j : j+8 : j+8])
			s := w0&lo + (w0>>16)&lo + w1&lo + (w1>>16)&lo + 0x0000000200000002
			s = (s >> 2) & lo
			binary.LittleEndian.PutUint32(bo[j/2:j/2+4:j/2+4], uint32(s)|uint32(s>>16))
		}
		X = m / 4
	}
	for ; X < n; X++ {
		s := uint32(r0[2*X]) + uint32(r0[2*X+1]) + uint32(r1[2*X]) + uint32(r1[2*X+1])
		out[X] = uint16((s + 2) >> 2)
	}
	if len(r0)%2 == 1 {
		c := len(r0) - 1
		out[n] = uint16((2*uint32(r0[c]) + 2*uint32(r1[c]) + 2) >> 2)
	}
}

// parallel runs f(0..n-1), items of size pixels each, in up to
// GOMAXPROCS goroutines over ranges of items (in the caller when the work
// is small), and returns the first error.
func parallel(n, size int, f func(i int) error) error {
	k := min(runtime.GOMAXPROCS(0), n, max(1, n*size/(64<<10)))
	if k <= 1 {
		for i := range n {
			if err := f(i); err != nil {
				return err
			}
		}
		return nil
	}
	errs := make([]error, k)
	var wg sync.WaitGroup
	for j := range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := j * n / k; i < (j+1)*n/k; i++ {
				if err := f(i); err != nil {
					errs[j] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// channels is how many channels the stream takes (OMETIFFOptions.Channels).
func (s *BigTIFFStream) channels() int {
	if s.ome == nil {
		return 1
	}
	return max(1, len(s.ome.Channels))
}

// complete returns an error unless every row of every level of the
// current channel is written.
func (s *BigTIFFStream) complete() error {
	if y := s.levels[0].y; y != s.H {
		return fmt.Errorf("tiled: channel %d: %d of %d rows written", len(s.planes), y, s.H)
	}
	for l, lv := range s.levels {
		if lv.y != lv.h {
			return fmt.Errorf("tiled: channel %d: level %d has %d of %d rows", len(s.planes), l, lv.y, lv.h)
		}
	}
	return nil
}

// KeepLevel has the stream keep a copy of pyramid level l (1 up to the
// last level; level 0 is the rows written) of the first channel in
// memory, as its rows go to the file: a program that wants a small view
// of the image (a preview) then has it without reading the file back.
// It holds the level's pixels, 2 bytes each. Call it before the first
// row is written.
func (s *BigTIFFStream) KeepLevel(l int) error {
	switch {
	case l < 1 || l >= len(s.levels):
		return fmt.Errorf("tiled: KeepLevel(%d) of a stream of %d levels (want 1 to %d)", l, len(s.levels), len(s.levels)-1)
	case s.levels[0].y > 0 || len(s.planes) > 0:
		return errors.New("tiled: KeepLevel after rows are written")
	}
	s.keep, s.kept = l, make([]uint16, s.levels[l].w*s.levels[l].h)
	return nil
}

// Kept returns the level KeepLevel keeps, once the first channel is
// complete: its w x h pixels, row after row, the values written in the
// file. It returns nil before that, or without KeepLevel.
func (s *BigTIFFStream) Kept() (px []uint16, w, h int) {
	if s.keep == 0 {
		return nil, 0, 0
	}
	if lv := s.levels[s.keep]; len(s.planes) == 0 && lv.y != lv.h {
		return nil, 0, 0
	}
	lv := s.levels[s.keep]
	return s.kept, lv.w, lv.h
}

// NextChannel ends the current channel, every row of which must have been
// written, and starts the next of a stream of several channels (see
// OMETIFFOptions.Channels): WriteRows then takes its rows from row 0.
func (s *BigTIFFStream) NextChannel() error {
	switch {
	case s.done:
		return errors.New("tiled: NextChannel after Close")
	case len(s.planes)+1 >= s.channels():
		return fmt.Errorf("tiled: NextChannel after the last of %d channels", s.channels())
	}
	if err := s.complete(); err != nil {
		return err
	}
	s.planes = append(s.planes, s.levels)
	next := make([]*streamLevel, len(s.levels))
	for l, lv := range s.levels {
		next[l] = &streamLevel{w: lv.w, h: lv.h}
		if l > 0 {
			next[l].buf = lv.buf // drained: every row went out
			lv.buf = nil
		}
	}
	s.levels = next
	return nil
}

// Close writes every level's IFD and finishes the file; every row of
// every channel must have been written. On error the file is removed.
func (s *BigTIFFStream) Close() error {
	if s.done {
		return errors.New("tiled: BigTIFFStream closed twice")
	}
	s.done = true
	var err error
	if y := s.levels[0].y; y != s.H {
		err = fmt.Errorf("tiled: closed after %d of %d rows", y, s.H)
	} else if err = s.complete(); err == nil && len(s.planes)+1 != s.channels() {
		err = fmt.Errorf("tiled: closed after %d of %d channels", len(s.planes)+1, s.channels())
	}
	if s.zarr != nil {
		err = s.zarr.finish(s, err)
	} else {
		if err == nil {
			s.writeIFDs()
			err = s.t.w.err
		}
		if s.codec != nil {
			s.codec.close()
		}
		err = s.t.finish(err)
	}
	s.bufs, s.raw, s.obufs, s.ctiles, s.scratch = [3][]uint16{}, nil, [3][]byte{}, nil, nil
	for _, lv := range s.levels {
		lv.buf = nil
	}
	return err
}

// writeIFDs writes the levels' IFDs: in level order, each linked to the
// next, in the plain layout; the reduced levels' IFDs first, unlinked,
// then the full resolution's, with the OME-XML and the SubIFDs that list
// them, in OME-TIFF.
func (s *BigTIFFStream) writeIFDs() {
	comp := CompressionNone
	if s.codec != nil {
		comp = s.codec.c
	}
	if s.ome == nil {
		for l, lv := range s.levels {
			s.t.ifd(levelEntries(l > 0, lv.w, lv.h, s.TW, s.TH, lv.offs, lv.counts, comp), true)
		}
		return
	}
	// One top-level IFD per channel, in order, each after its reduced
	// levels' IFDs; the OME-XML in the first.
	for c, levels := range append(s.planes, s.levels) {
		var subs []uint64
		for _, lv := range levels[1:] {
			subs = append(subs, s.t.ifd(levelEntries(true, lv.w, lv.h, s.TW, s.TH, lv.offs, lv.counts, comp), false))
		}
		lv := levels[0]
		ents := levelEntries(false, lv.w, lv.h, s.TW, s.TH, lv.offs, lv.counts, comp)
		if c == 0 {
			ents = append(ents, asciiEntry(tagImageDesc, omeXML(s.W, s.H, *s.ome)), asciiEntry(tagSoftware, "htgs"))
		}
		if len(subs) > 0 {
			ents = append(ents, newEntry(tagSubIFDs, typeIFD8, subs...))
		}
		ents = append(ents, resolutionEntries(*s.ome)...)
		s.t.ifd(ents, true)
	}
}

// resolutionEntries are the XResolution, YResolution and ResolutionUnit
// (centimetre) entries of o's physical pixel size, or none where the size
// is not given (both sides) or does not fit a RATIONAL.
func resolutionEntries(o OMETIFFOptions) []ifdEntry {
	if o.PhysicalSizeX <= 0 || o.PhysicalSizeY <= 0 {
		return nil
	}
	unit := o.PhysicalSizeUnit
	if unit == "" {
		unit = "µm"
	}
	perCM := map[string]float64{"km": 1e-5, "hm": 1e-4, "dam": 1e-3, "m": 1e-2, "dm": 0.1, "cm": 1, "mm": 10, "µm": 1e4, "nm": 1e7, "pm": 1e10, "Å": 1e8}[unit]
	var ents []ifdEntry
	for _, a := range []struct {
		tag  uint16
		size float64
	}{{tagXResolution, o.PhysicalSizeX}, {tagYResolution, o.PhysicalSizeY}} {
		px := perCM / a.size // pixels per centimetre
		den := 1.0
		for px*den*10 < math.MaxInt32 && den < 1e6 {
			den *= 10
		}
		num := math.Round(px * den)
		if !(num >= 1 && num <= math.MaxUint32) {
			return nil
		}
		ents = append(ents, rationalEntry(a.tag, uint32(num), uint32(den)))
	}
	return append(ents, newEntry(tagResolutionUnit, typeShort, 3))
}
