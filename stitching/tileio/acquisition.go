package tileio

// AcquisitionOrder is implemented by a [TileSource] that knows the order
// in which the microscope acquired its tiles: a [TileSet] and a [Watcher]
// (their [Pattern]'s Layout, MIST's numbering and origin) and a source
// returned by [WithAcquisition]. Package stitching estimates the flat
// field from the tiles acquired before the last line of that order, so
// that a live stitch has them all a line of tiles before the end.
type AcquisitionOrder interface {
	// Acquisition returns the order in which the tiles were acquired.
	Acquisition() Layout
}

// Acquisition returns the order in which the tiles of src were acquired:
// src's own when it implements [AcquisitionOrder], else row by row from
// the upper-left corner (the zero Layout).
func Acquisition(src TileSource) Layout {
	if o, ok := src.(AcquisitionOrder); ok {
		return o.Acquisition()
	}
	return Layout{}
}

// WithAcquisition returns src with the acquisition order l: a
// [TileSource] that loads, names and sizes tiles as src does and
// implements [AcquisitionOrder] (for instance a [LiveTiles] fed by a
// program that acquires column by column).
func WithAcquisition(src TileSource, l Layout) TileSource {
	return acquired{src, l}
}

// acquired is WithAcquisition's source.
type acquired struct {
	TileSource
	order Layout
}

// Acquisition returns the order given to WithAcquisition.
func (a acquired) Acquisition() Layout { return a.order }

// Acquisition returns the layout of the set's pattern: the order in which
// its tiles were acquired.
func (ts *TileSet) Acquisition() Layout { return ts.pattern.Layout }

// Acquisition returns the layout of the watched pattern: the order in
// which the tiles are expected (they may come in any other).
func (w *Watcher) Acquisition() Layout { return w.pattern.Layout }

// LastLine reports the tiles of the line a rows x cols grid acquired in
// the order l ends with: its last row, for a numbering row by row (MIST's
// HORIZONTAL ones), or its last column, for one column by column, as the
// origin makes it last (the bottom row from an upper corner, the top row
// from a lower one; the right column from a left corner, the left column
// from a right one). A numbering that is not one of MIST's four counts as
// HorizontalCombing, as [Layout.Index] does.
func (l Layout) LastLine(row, col, rows, cols int) bool {
	line := cols
	if l.Numbering == VerticalCombing || l.Numbering == VerticalContinuous {
		line = rows
	}
	return l.Index(row, col, rows, cols) >= rows*cols-line
}
