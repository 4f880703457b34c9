package main

// MIST compatibility: MIST's output names, its headless option names, time
// slices, assembling from a positions file and the statistics file. See
// docs/mist.md for what differs from MIST and why.

import (
	"flag"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gohtgs/htgs/examples/internal/cli"
	"github.com/gohtgs/htgs/stitching"
	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/tileio"
	"github.com/gohtgs/htgs/tiled"
)

// defaultPrefix is MIST's default outFilePrefix.
const defaultPrefix = "img-"

// outNames are the names of one time slice's outputs, as MIST names them:
// PREFIX + what + "-" + T + ext, T zero-padded to the width of the largest
// slice number of the run. A run without time slices is slice 1 of 1, as in
// MIST ("img-global-positions-1.txt").
type outNames struct {
	global, relative, noOpt, mosaic, preview string
}

func sliceNames(prefix string, t, maxT int) outNames {
	ts := fmt.Sprintf("%0*d", len(strconv.Itoa(maxT)), t)
	return outNames{
		global:   prefix + "global-positions-" + ts + ".txt",
		relative: prefix + "relative-positions-" + ts + ".txt",
		noOpt:    prefix + "relative-positions-no-optimization-" + ts + ".txt",
		mosaic:   prefix + "stitched-" + ts + ".ome.tif",
		preview:  prefix + "stitched-" + ts + "-preview.png",
	}
}

// sliceNames are the names of slice t's outputs in this run: the
// mosaic's as -format names it.
func (c *config) sliceNames(t int) outNames {
	n := sliceNames(c.prefix, t, c.maxSlice())
	n.mosaic = c.format.mosaicName(n.mosaic)
	return n
}

func (n outNames) list() []string {
	return []string{n.global, n.relative, n.noOpt, n.mosaic, n.preview}
}

func statsName(prefix string) string { return prefix + "statistics.txt" }
func logName(prefix string) string   { return prefix + "log.txt" }

// mistBool is a MIST boolean option: it takes a value ("--outputFullImage
// false" or "--outputFullImage=false"), as MIST's options all do, unlike a
// Go bool flag.
type mistBool struct{ p *bool }

func (b mistBool) String() string {
	if b.p == nil {
		return "false"
	}
	return strconv.FormatBool(*b.p)
}

func (b mistBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false")
	}
	*b.p = v
	return nil
}

// mistIgnored are MIST options that change how MIST runs (its FFT library,
// GPUs, logging, its GUI), not what it computes: they are accepted with a
// note and ignored.
var mistIgnored = map[string]string{
	"programType":                  "the FFT is chosen with -fft, GPUs with -gpu",
	"loadFFTWPlan":                 "FFTW plans are not saved",
	"saveFFTWPlan":                 "FFTW plans are not saved",
	"fftwPlanType":                 "FFTW plans are made with FFTW_ESTIMATE",
	"planPath":                     "FFTW plans are not saved",
	"fftwLibraryPath":              "libfftw3 is found by the system's loader",
	"fftwLibraryName":              "libfftw3 is found by the system's loader",
	"fftwLibraryFilename":          "libfftw3 is found by the system's loader",
	"cudaDevice":                   "-gpu uses every GPU",
	"isUseDoublePrecision":         "the computation is in double precision",
	"isUseBioFormats":              "tiles are read as TIFF or PNG",
	"isEnableCudaExceptions":       "no CUDA exceptions here",
	"isSuppressModelWarningDialog": "there is no dialog",
	"headless":                     "always headless",
	"logLevel":                     "the log holds what the run printed",
	"debugLevel":                   "the log holds what the run printed",
	"displayStitching":             "there is no display",
	"outputMeta":                   "the positions are always written",
	"blendingAlpha":                "linear blending has a fixed profile",
	"translationRefinementMethod":  "refinement is always the hill-climbing search of the stage model's window",
	"isTimeSlicesEnabled":          "time slices are on when the pattern has {t}",
}

// mistConfig holds the MIST options that are not plain aliases of ours.
type mistConfig struct {
	patternType                   string
	startTile, startRow, startCol int // startTile, startTileRow, startTileCol
	subRow, subCol                int // startRow, startCol
	extentW, extentH              int
	assembleNoOverlap             bool
	imgPyramid                    bool
	ignored                       map[string]string // option -> value
	peaks                         int
}

// ignoredValue records an ignored MIST option's value.
type ignoredValue struct {
	m    map[string]string
	name string
}

func (v ignoredValue) String() string { return "" }
func (v ignoredValue) Set(s string) error {
	v.m[v.name] = s
	return nil
}

// addMISTFlags registers MIST's headless option names on fs: aliases of
// our flags where the meaning is the same, and the rest into c.mist.
func addMISTFlags(fs *flag.FlagSet, c *config) {
	m := &c.mist
	m.ignored = map[string]string{}
	alias := func(mist, ours string) {
		f := fs.Lookup(ours)
		fs.Var(f.Value, mist, "MIST's name of -"+ours)
	}
	alias("gridWidth", "cols")
	alias("gridHeight", "rows")
	alias("imageDir", "dir")
	alias("filenamePattern", "pattern")
	alias("outputPath", "out")
	alias("outFilePrefix", "prefix")
	alias("globalPositionsFile", "global-positions")
	alias("timeSlices", "timeslices")
	alias("stageRepeatability", "repeatability")
	alias("horizontalOverlap", "horizontal-overlap")
	alias("verticalOverlap", "vertical-overlap")
	alias("overlapUncertainty", "overlap-uncertainty")
	alias("blendingMode", "blend")
	alias("gridOrigin", "origin")
	alias("numberingPattern", "numbering")
	alias("numCPUThreads", "workers")
	fs.Var(mistBool{&c.mosaic}, "outputFullImage", "MIST's name of -mosaic (true or false)")
	fs.Var(mistBool{&c.assemble}, "assembleFromMetadata", "MIST's name of -assemble-from-metadata (true or false)")
	fs.Var(mistBool{&m.assembleNoOverlap}, "assembleNoOverlap", "MIST: not supported (only false)")
	fs.Var(mistBool{&m.imgPyramid}, "outputImgPyramid", "MIST: not supported (only false)")
	fs.StringVar(&m.patternType, "filenamePatternType", "", "MIST: ROWCOL ({r}/{c} pattern) or SEQUENTIAL ({p} pattern)")
	fs.IntVar(&m.startTile, "startTile", 0, "MIST: number of the first tile of a SEQUENTIAL pattern")
	fs.IntVar(&m.startRow, "startTileRow", 0, "MIST: number of the first row of a ROWCOL pattern")
	fs.IntVar(&m.startCol, "startTileCol", 0, "MIST: number of the first column of a ROWCOL pattern")
	fs.IntVar(&m.subRow, "startRow", 0, "MIST: subgrid; not supported (only 0)")
	fs.IntVar(&m.subCol, "startCol", 0, "MIST: subgrid; not supported (only 0)")
	fs.IntVar(&m.extentW, "extentWidth", 0, "MIST: subgrid; not supported (only the grid width)")
	fs.IntVar(&m.extentH, "extentHeight", 0, "MIST: subgrid; not supported (only the grid height)")
	fs.IntVar(&m.peaks, "numFFTPeaks", 0, "MIST: peaks of the correlation examined per pair (0: 2)")
	f := &c.format
	fs.StringVar(&f.mistCompression, "compressionMode", "", "MIST: UNCOMPRESSED or ZLIB (-compression none or deflate); LZW, JPEG and JPEG_2000_LOSSY are written as deflate")
	fs.StringVar(&f.mistUnit, "unit", "", "MIST: unit of --unitX and --unitY, such as MICROMETER (the default) or NANOMETER")
	fs.Float64Var(&f.mistUnitX, "unitX", 0, "MIST: width of a pixel in --unit (the mosaic's PhysicalSizeX; see -pixel-size)")
	fs.Float64Var(&f.mistUnitY, "unitY", 0, "MIST: height of a pixel in --unit (the mosaic's PhysicalSizeY)")
	names := make([]string, 0, len(mistIgnored))
	for n := range mistIgnored {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fs.Var(ignoredValue{m.ignored, n}, n, "MIST: ignored ("+mistIgnored[n]+")")
	}
}

// isMISTFlag reports whether name is one of MIST's option names.
func isMISTFlag(name string) bool {
	return name != "" && name[0] >= 'a' && name[0] <= 'z' && strings.ToLower(name) != name
}

// checkMIST applies the MIST options that were given (set) onto c.
func checkMIST(c *config, set map[string]bool) error {
	m := &c.mist
	mistMode := false
	for n := range set {
		if isMISTFlag(n) || n == "headless" || n == "unit" {
			mistMode = true
		}
	}
	if !mistMode {
		return nil
	}
	if m.subRow != 0 || m.subCol != 0 {
		return cli.Usagef("--startRow/--startCol %d/%d: subgrids are not supported; stitch the whole grid (give 0, or leave them out)", m.subRow, m.subCol)
	}
	if (set["extentWidth"] && m.extentW != c.cols) || (set["extentHeight"] && m.extentH != c.rows) {
		return cli.Usagef("--extentWidth/--extentHeight %d x %d: subgrids are not supported; give the grid's size (%d x %d) or leave them out", m.extentW, m.extentH, c.cols, c.rows)
	}
	if m.assembleNoOverlap {
		return cli.Usagef("--assembleNoOverlap true is not supported (tiles are placed at their computed or given positions)")
	}
	if m.imgPyramid {
		return cli.Usagef("--outputImgPyramid true is not supported (the mosaic is one TIFF)")
	}
	if m.peaks < 0 {
		return cli.Usagef("--numFFTPeaks %d: must be at least 0", m.peaks)
	}
	// MIST counts tiles, rows and columns from startTile/startTileRow/
	// startTileCol, 0 unless given.
	pat, err := tileio.ParsePattern(c.pattern, 0)
	if err != nil {
		return cli.UsageError{Err: err}
	}
	switch strings.ToUpper(m.patternType) {
	case "", "ROWCOL", "SEQUENTIAL":
	default:
		return cli.Usagef("--filenamePatternType %q: must be ROWCOL or SEQUENTIAL", m.patternType)
	}
	if m.patternType != "" && pat.Sequential() != strings.EqualFold(m.patternType, "SEQUENTIAL") {
		want := "{r} and {c} (such as {rrr} and {ccc})"
		if pat.Sequential() {
			want = "no {p} (a sequential pattern needs --filenamePatternType SEQUENTIAL)"
		} else {
			want = "{p} (such as {ppp})"
		}
		return cli.Usagef("--filenamePattern %q does not fit --filenamePatternType %s: want %s", c.pattern, m.patternType, want)
	}
	// MIST numbers from 0 unless told otherwise; that default applies
	// when MIST's naming options are used, not because, say, --unitX is.
	mistNaming := set["filenamePattern"] || set["filenamePatternType"] || set["startTile"] || set["startTileRow"] || set["startTileCol"]
	if !set["start"] && mistNaming {
		if pat.Sequential() {
			c.start = m.startTile
		} else {
			if m.startRow != m.startCol {
				return cli.Usagef("--startTileRow %d and --startTileCol %d: rows and columns must be numbered from the same number", m.startRow, m.startCol)
			}
			c.start = m.startRow
		}
	}
	if m.peaks > 0 {
		c.peaks = m.peaks
	}
	if err := mistMosaicFormat(c, set); err != nil {
		return err
	}
	names := make([]string, 0, len(m.ignored))
	for n := range m.ignored {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		c.notes = append(c.notes, fmt.Sprintf("%s: note: --%s %s ignored (%s)", prog, n, m.ignored[n], mistIgnored[n]))
	}
	return nil
}

// mistMosaicFormat maps MIST's --compressionMode onto -compression and
// --unit, --unitX and --unitY onto the mosaic's physical pixel size.
func mistMosaicFormat(c *config, set map[string]bool) error {
	f := &c.format
	if set["compressionMode"] {
		if set["compression"] {
			return cli.Usagef("-compression and --compressionMode both give the mosaic's compression: give one")
		}
		switch mode := strings.ToUpper(f.mistCompression); mode {
		case "UNCOMPRESSED":
			f.compression = tiled.CompressionNone
		case "ZLIB":
			f.compression = tiled.CompressionDeflate
		case "LZW", "JPEG", "JPEG_2000_LOSSY":
			f.compression = tiled.CompressionDeflate
			c.notes = append(c.notes, fmt.Sprintf("%s: note: --compressionMode %s written as deflate (lossless; -compression none, deflate or zstd)", prog, f.mistCompression))
		default:
			return cli.Usagef("--compressionMode %q: must be UNCOMPRESSED, LZW, JPEG, JPEG_2000_LOSSY or ZLIB", f.mistCompression)
		}
	}
	unit := "µm"
	if set["unit"] {
		u, err := tiled.LengthUnit(f.mistUnit)
		if err != nil {
			return cli.Usagef("--unit %s: must be one of MIST's units, KILOMETER to PICOMETER", f.mistUnit)
		}
		unit = u
	}
	if !set["unitX"] && !set["unitY"] {
		if set["unit"] {
			c.notes = append(c.notes, fmt.Sprintf("%s: note: --unit %s without --unitX/--unitY: the mosaic carries no pixel size", prog, f.mistUnit))
		}
		return nil
	}
	x, y := f.mistUnitX, f.mistUnitY
	if !set["unitY"] {
		y = x
	}
	if !set["unitX"] {
		x = y
	}
	if !(x > 0 && y > 0) || math.IsInf(x, 0) || math.IsInf(y, 0) {
		return cli.Usagef("--unitX %v --unitY %v: pixel sizes must be above 0", x, y)
	}
	f.sizeX, f.sizeY, f.unit = x, y, unit
	return nil
}

// sliceStats is what the statistics file reports of one time slice.
type sliceStats struct {
	t              int
	stitch, output time.Duration
	res            *stitching.Result // nil when assembled from positions
	positionsFrom  string
}

// writeStatistics writes MIST's statistics file: the system, the timing,
// each slice's stage model (overlap, repeatability, valid translations)
// and the parameters of the run, one "name: value" per line with MIST's
// names.
func writeStatistics(w io.Writer, c *config, fftDesc string, total time.Duration, stats []sliceStats) error {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("System information:")
	p("Go Version: %s", runtime.Version())
	p("Operating System: %s %s", runtime.GOOS, runtime.GOARCH)
	p("CPU threads used: %d", c.workers)
	exec := "htgs task graphs, FFT " + fftDesc
	switch {
	case c.registeredOnGPU():
		exec = "htgs task graphs, FFT, PCIAM and CCF on the GPUs"
	case c.gpu:
		exec += ", registered live as the tiles came (-watch)"
	}
	p("Execution type: %s", exec)
	p("")
	p("Execution timing and general information:")
	p("Statistics Output Version: htgs-1")
	p("")
	p("Total time for experiment (ms): %d", total.Milliseconds())
	for _, s := range stats {
		if c.timeSlices != "" {
			p("Time slice: %d", s.t)
		}
		if s.res == nil {
			p("Positions read from: %s", s.positionsFrom)
			p("Output (ms): %d", s.output.Milliseconds())
			p("")
			continue
		}
		p("Stitching (ms): %d", s.stitch.Milliseconds())
		p("Output (ms): %d", s.output.Milliseconds())
		p("")
		md := s.res.Model
		for _, d := range []struct {
			name string
			dm   align.DirectionModel
		}{{"North", md.North}, {"West", md.West}} {
			dm := d.dm
			p("%s repeatability: %d", d.name, md.Repeatability)
			if v := fmtParam(dm.Overlap); v != "" {
				p("%s overlap: %s", d.name, v)
			}
			if dm.Pairs > 0 {
				p("%s valid tiles after filter: %d out of %d (%.2f%%)", d.name, dm.Valid, dm.Pairs, 100*float64(dm.Valid)/float64(dm.Pairs))
			}
			if v := fmtParam(dm.Threshold); v != "" {
				p("%s min filter threshold: %s", d.name, v)
			}
			p("")
		}
		for _, warning := range s.res.Warnings() {
			p("Warning: %s", warning)
		}
		// Estimated position uncertainty of each tile in pixels (-1: no
		// pair confirms it), one line per grid row.
		for r := 0; r < s.res.Rows && len(s.res.Uncertainty) == s.res.Rows*s.res.Cols; r++ {
			u := make([]string, s.res.Cols)
			for c := range u {
				u[c] = strconv.Itoa(s.res.Uncertainty[r*s.res.Cols+c])
			}
			p("Position uncertainty (px) of row %d: %s", r, strings.Join(u, " "))
		}
		p("")
	}
	p("Stitching Run-time parameters:")
	typ := "ROWCOL"
	if pat, err := tileio.ParsePattern(c.pattern, c.start); err == nil && pat.Sequential() {
		typ = "SEQUENTIAL"
	}
	// The overlaps the run used: -horizontal-overlap and
	// -vertical-overlap, else -overlap; one estimated from the
	// translations is left out here (its value is under "overlap" above).
	opt := align.Options{Overlap: c.overlap, HorizontalOverlap: c.hOverlap, VerticalOverlap: c.vOverlap, OverlapUncertainty: c.uncertainty}
	hOv, vOv := opt.EffectiveOverlaps()
	params := [][2]string{
		{"gridWidth", strconv.Itoa(c.cols)},
		{"gridHeight", strconv.Itoa(c.rows)},
		{"startTile", strconv.Itoa(c.start)},
		{"imageDir", c.dir},
		{"filenamePattern", c.pattern},
		{"filenamePatternType", typ},
		{"gridOrigin", c.origin},
		{"numberingPattern", c.numbering},
		{"assembleFromMetadata", strconv.FormatBool(c.assemble)},
		{"globalPositionsFile", c.globalPositions},
		{"timeSlices", c.timeSlices},
		{"outputPath", c.out},
		{"outputFullImage", strconv.FormatBool(c.mosaic)},
		{"outFilePrefix", c.prefix},
		{"blendingMode", strings.ToUpper(c.blend.String())},
		{"stageRepeatability", strconv.Itoa(c.repeatability)},
		{"horizontalOverlap", fmtParam(hOv)},
		{"verticalOverlap", fmtParam(vOv)},
		{"overlapUncertainty", fmtParam(opt.EffectiveOverlapUncertainty())},
		{"numFFTPeaks", strconv.Itoa(c.peaks)},
		{"placement", map[bool]string{false: "global solve over every pair", true: "maximum spanning tree (MIST's)"}[c.spanningTree]},
		{"numCPUThreads", strconv.Itoa(c.workers)},
		{"reusePositions", strconv.FormatBool(c.reuse)},
	}
	for _, kv := range params {
		if kv[1] != "" {
			p("%s: %s", kv[0], kv[1])
		}
	}
	return nil
}

// fmtParam prints a number of the statistics file; NaN and infinities,
// which no output file may hold, give "" (the line is left out).
func fmtParam(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return ""
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// positionsPath returns the positions file of slice t: {t} in path is
// replaced by the slice number, padded to the placeholder's width.
func positionsPath(path string, t int) string {
	for w := 8; w >= 1; w-- {
		ph := "{" + strings.Repeat("t", w) + "}"
		path = strings.ReplaceAll(path, ph, fmt.Sprintf("%0*d", w, t))
	}
	return path
}

func hasTimePlaceholder(path string) bool { return positionsPath(path, 0) != path }

// outputsOf lists every file name a run writes into -out.
func outputsOf(c *config) []string {
	var names []string
	for _, t := range c.runSlices() {
		names = append(names, c.sliceNames(t).list()...)
	}
	return append(names, statsName(c.prefix), logName(c.prefix))
}
