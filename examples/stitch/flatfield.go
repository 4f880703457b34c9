package main

import (
	"context"
	"flag"
	"fmt"
	"image"
	"io"
	"os"

	"github.com/gohtgs/htgs/examples/internal/cli"
	"github.com/gohtgs/htgs/internal/outfile"
	"github.com/gohtgs/htgs/stitching"
	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/tileio"
)

// The values of -flat-field that are not a file.
const (
	flatEstimate = "estimate"
	flatNone     = "none"
)

func addFlatFieldFlags(fs *flag.FlagSet, c *config) {
	fs.StringVar(&c.flatField, "flat-field", flatEstimate, "illumination correction: estimate (on a grid of up to 64 tiles from every tile but the last line acquired, per -numbering and -origin, else from 64 spread over the first half of the acquisition: -watch then registers the final pairs from the last line, or mid-plate, on), none (as MIST), or a FILE written by -save-flat-field (the microscope's flat field, known before the acquisition: -watch then registers the final pairs as the tiles arrive)")
	fs.StringVar(&c.saveFlatField, "save-flat-field", "", "write the flat field the run used into this `file`, for -flat-field FILE")
}

// stitchSlice stitches the grid of src: the live stitch's Result with
// -watch, with -flat-field FILE the tiles corrected with it, else
// stitchGrid's.
func stitchSlice(ctx context.Context, c *config, src *tileio.TileSet, t int, opt align.Options, gopt stitching.GraphOptions, stdout io.Writer) (*stitching.Result, error) {
	switch {
	case c.watched != nil && c.watched.res != nil:
		return c.watched.res, nil // stitched as the tiles came
	case c.givenFF != nil:
		s, err := givenSource(c, src)
		if err != nil {
			return nil, err
		}
		res, err := stitching.Stitch(ctx, s, opt, gopt)
		if err != nil {
			return nil, err
		}
		res.FlatField = c.givenFF // the correction the registration used
		return res, nil
	}
	return stitchGrid(ctx, c, src, t, opt, gopt, stdout)
}

// checkFlatField checks -flat-field and -save-flat-field, and reads the
// flat field of -flat-field FILE.
func checkFlatField(c *config) error {
	switch c.flatField {
	case flatEstimate:
		return nil
	case flatNone:
		if c.saveFlatField != "" {
			return cli.Usagef("-save-flat-field: -flat-field none corrects nothing, so there is no flat field to save")
		}
		return nil
	case "":
		return cli.Usagef("-flat-field needs estimate, none or a FILE")
	}
	if c.cl.worker || c.cl.distributed() {
		return cli.Usagef("-flat-field FILE: not with -cluster, -nats or -worker (their registration estimates the flat field)")
	}
	data, err := os.ReadFile(c.flatField)
	if err != nil {
		return fmt.Errorf("-flat-field: %w", err)
	}
	ff := new(align.FlatField)
	if err := ff.UnmarshalBinary(data); err != nil {
		return fmt.Errorf("-flat-field %s: %w (write one with -save-flat-field)", c.flatField, err)
	}
	c.givenFF = ff
	return nil
}

// givenSource is src corrected with the flat field of -flat-field FILE,
// which must have the tiles' size; src itself with no such file.
func givenSource(c *config, src tileio.TileSource) (tileio.TileSource, error) {
	if c.givenFF == nil {
		return src, nil
	}
	return &givenCorrected{TileSource: stitching.CorrectedSource(src, c.givenFF), ff: c.givenFF, file: c.flatField}, nil
}

// givenCorrected is a source corrected with a flat field read from file;
// a tile of another size than the flat field's is an error.
type givenCorrected struct {
	tileio.TileSource
	ff   *align.FlatField
	file string
}

// Load loads tile (row, col) corrected, after checking the flat field's
// size against the tiles'.
func (g *givenCorrected) Load(row, col int) (*image.Gray16, error) {
	if w, h := g.TileSize(); len(g.ff.Gains()) != w*h {
		return nil, fmt.Errorf("-flat-field %s holds %d gains, the tiles are %d x %d", g.file, len(g.ff.Gains()), w, h)
	}
	return g.TileSource.Load(row, col)
}

// noFlatField is align.Options.NoFlatField for -flat-field: no estimate
// with none, nor with a FILE (the tiles come corrected).
func noFlatField(c *config) bool { return c.flatField != flatEstimate }

// saveFlatField writes the flat field of a run to -save-flat-field.
func saveFlatField(c *config, ff *align.FlatField, stdout io.Writer) error {
	if c.saveFlatField == "" || ff == nil {
		return nil
	}
	data, err := ff.MarshalBinary()
	if err != nil {
		return fmt.Errorf("-save-flat-field: %w", err)
	}
	if err := outfile.WriteFile(c.saveFlatField, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}); err != nil {
		return fmt.Errorf("-save-flat-field: %w", err)
	}
	what := "the identity: no correction"
	if !ff.Identity() {
		what = fmt.Sprintf("fall-off to %.0f%% at the darkest", 100*ff.Falloff())
	}
	fmt.Fprintf(stdout, "flat field (%s) saved in %s: give it with -flat-field %s\n", what, c.saveFlatField, c.saveFlatField)
	return nil
}
