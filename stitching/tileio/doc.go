// Package tileio reads the tiles of a stitching grid and reads and writes
// MIST's output files. It is the input and output side of package
// stitching, whose algorithm (package stitching/align) never touches a
// file.
//
//   - [TileSource] is how package stitching reads a grid; [TileSet] (tile
//     files in a directory, named by a [Pattern]: see [ParsePattern] and
//     [OpenTileSet]) and [MemoryTiles] implement it; a [Pattern]'s Layout
//     is the order the tiles are acquired in (MIST's numbering and origin),
//     which a TileSet reports ([Acquisition]; [WithAcquisition] gives it to
//     any source) and which decides the flat field's sample tiles;
//   - [LoadTile] and [DecodeTile] read one 8- or 16-bit grayscale TIFF or
//     PNG tile. They and OpenTileSet check the header before decoding any
//     pixel: a tile claiming more than [DefaultMaxTilePixels] pixels (or
//     the limit given to the ...Limit variants) is refused with an error
//     wrapping [ErrTileTooLarge], and a corrupt file gives an error, never
//     a panic;
//   - [WriteGlobalPositions] and [WriteRelativePositions] write MIST's
//     output files, [ReadGlobalPositions] and [ReadRelativePositions] parse
//     them; [RelativePositions] lists translations as records.
//
// Opening a grid reads only the file headers; tiles are decoded when
// loaded:
//
//	pat, err := tileio.ParsePattern("img_r{rrr}_c{ccc}.tif", 1) // rows and columns from 1
//	if err != nil { ... }
//	ts, err := tileio.OpenTileSet("/data/plate1", pat, 42, 59)
//	if err != nil { ... } // names the first missing, corrupt or odd-sized file
//	img, err := ts.Load(0, 0) // img_r001_c001.tif
package tileio
