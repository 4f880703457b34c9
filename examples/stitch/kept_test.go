package main

import (
	"bytes"
	"encoding/binary"
	"image"
	"math"
	"sync"
	"testing"

	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/tileio"
)

// The kept tiles stay within their budget, are copies, and leave as the
// mosaic takes them; the source gives the others loaded and corrected.
func TestKeptTiles(t *testing.T) {
	const rows, cols, w, h = 2, 3, 8, 4
	tiles := make([]*image.Gray16, rows*cols)
	for i := range tiles {
		tiles[i] = image.NewGray16(image.Rect(0, 0, w, h))
		for j := range tiles[i].Pix {
			tiles[i].Pix[j] = byte(i*31 + j)
		}
	}
	mem, err := tileio.NewMemoryTiles(rows, cols, tiles, nil)
	if err != nil {
		t.Fatal(err)
	}
	tileBytes := int64(2 * w * h)
	var asked [2]int
	k := newKeptTiles(cols, func(tw, th int) int64 { asked = [2]int{tw, th}; return 2*tileBytes + tileBytes/2 })
	var wg sync.WaitGroup
	for i := range tiles {
		wg.Go(func() { k.add(i/cols, i%cols, tiles[i]) })
	}
	wg.Wait()
	k.add(0, 0, tiles[0]) // again: kept once at most
	if asked != [2]int{w, h} || k.held() != 2*tileBytes || len(k.tiles) != 2 {
		t.Fatalf("budget asked for %v, %d bytes and %d tiles held; want 2 tiles of %d x %d", asked, k.held(), len(k.tiles), w, h)
	}
	for i, kt := range k.tiles {
		if &kt.Pix[0] == &tiles[i].Pix[0] || !bytes.Equal(kt.Pix, tiles[i].Pix) {
			t.Errorf("tile %d kept is not a copy of the tile handed over", i)
		}
	}
	// A flat field of gains 1, 1.25 and 1.5, in its binary form.
	data := binary.LittleEndian.AppendUint32([]byte("FFL\x01"), w)
	data = binary.LittleEndian.AppendUint32(data, h)
	data = append(data, make([]byte, 8+8+1)...)
	for i := range w * h {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(1+float32(i%3)/4))
	}
	ff := new(align.FlatField)
	if err := ff.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	// The kept tiles were handed over corrected; the others are corrected
	// as they are loaded.
	src := &keptSource{TileSource: mem, kept: k, ff: ff}
	for i := range tiles {
		_, isKept := k.tiles[i]
		got, err := src.Load(i/cols, i%cols)
		if err != nil {
			t.Fatal(err)
		}
		want := tiles[i]
		if !isKept {
			want = ff.Apply(tiles[i])
		}
		if !bytes.Equal(got.Pix, want.Pix) {
			t.Errorf("tile %d (kept %v): not the corrected tile", i, isKept)
		}
	}
	if k.held() != 0 || len(k.tiles) != 0 || k.drop() != 2 {
		t.Errorf("after the mosaic: %d bytes, %d tiles held, %d used; want none held and 2 used", k.held(), len(k.tiles), k.used)
	}
}
