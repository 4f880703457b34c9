package synth

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Level selects a preset of scene and acquisition parameters (see
// LevelParams) and of stage errors (see ConfigFor).
type Level int

const (
	// Realistic is the acceptance level and the zero value: phase-contrast
	// cell colonies separated by sparse regions, faint background texture,
	// debris, vignetting, per-tile brightness changes, shot and read noise at
	// an ordinary camera SNR, and a stage with repeatable per-row/per-column
	// offsets plus small random errors. A MIST-style stitcher is expected to
	// find at least 99% of adjacent translations exactly.
	Realistic Level = iota
	// Easy has dense cells nearly everywhere, little noise, mild vignetting
	// and an almost perfect stage. For smoke tests and demos.
	Easy
	// Hard has sparse cells with large near-featureless regions, low SNR,
	// strong vignetting, per-tile brightness flicker, camera dust (a fixed
	// pattern that pulls phase correlation towards zero shift) and a sloppy
	// stage. Some adjacent pairs are not expected to be solvable from the
	// image content alone; the stitcher's stage model has to fill them in.
	Hard
)

// String returns the lower-case name of the level.
func (l Level) String() string {
	switch l {
	case Realistic:
		return "realistic"
	case Easy:
		return "easy"
	case Hard:
		return "hard"
	}
	return fmt.Sprintf("Level(%d)", int(l))
}

// ParseLevel parses "easy", "realistic" or "hard" (case-insensitive).
func ParseLevel(s string) (Level, error) {
	for _, l := range [...]Level{Realistic, Easy, Hard} {
		if strings.EqualFold(strings.TrimSpace(s), l.String()) {
			return l, nil
		}
	}
	return 0, fmt.Errorf("synth: unknown level %q (want easy, realistic or hard)", s)
}

// Modality is the imaging modality the specimen is rendered for.
type Modality int

const (
	// PhaseContrast renders a mid-grey background with darker, textured cells
	// surrounded by bright halos, and occasional bright rounded cells.
	PhaseContrast Modality = iota
	// Fluorescence renders a dark background with bright cells and brighter
	// nuclei.
	Fluorescence
)

// String returns the lower-case name of the modality.
func (m Modality) String() string {
	switch m {
	case PhaseContrast:
		return "phase"
	case Fluorescence:
		return "fluorescence"
	}
	return fmt.Sprintf("Modality(%d)", int(m))
}

// Params are the scene and acquisition parameters. Intensities are in
// specimen units where 1 maps to Exposure times the usable DN range.
// Densities are per megapixel of specimen plane.
type Params struct {
	// Modality selects phase-contrast or fluorescence appearance.
	Modality Modality

	// ColonyDensity is the expected number of colony centres per megapixel
	// before thinning by the empty-region field.
	ColonyDensity float64
	// ColonyCells is the median number of cells per colony (log-normal).
	ColonyCells float64
	// IsolatedCells is the number of lone cells per megapixel (also thinned
	// by the empty-region field).
	IsolatedCells float64
	// EmptyFraction is the approximate fraction of the plane lying in
	// near-featureless regions (no cells, only background and debris).
	EmptyFraction float64
	// EmptyScale is the length scale (px) of the empty-region field.
	EmptyScale float64
	// CellRadius is the median cell radius (px); CellRadiusSpread its
	// relative log-normal spread.
	CellRadius, CellRadiusSpread float64
	// CellContrast is the median cell contrast (specimen units).
	CellContrast float64
	// NucleusFraction is the fraction of cells with a visible nucleus.
	NucleusFraction float64
	// CellTexture is the relative amplitude of the granular texture inside
	// cells.
	CellTexture float64
	// Background is the mean background intensity.
	Background float64
	// BackgroundTexture is the amplitude of the smoothed background noise
	// (octaves at 48, 12 and 1.7 px, plus a slow 700 px variation of the
	// background level).
	BackgroundTexture float64
	// Debris is the number of small particles (1-3 px) per megapixel; they
	// are not thinned by the empty-region field.
	Debris float64

	// Vignetting is the relative flat-field fall-off at the tile corners
	// (0: flat). It is the same for every tile.
	Vignetting float64
	// TileBrightness is the relative standard deviation of a per-tile
	// brightness factor (lamp flicker, exposure jitter).
	TileBrightness float64
	// Dust is the number of camera-fixed dust shadows (same place in every
	// tile).
	Dust int
	// Photons is the number of photo-electrons collected at intensity 1;
	// shot noise has variance proportional to the signal. 0 disables it.
	Photons float64
	// ReadNoise is the standard deviation of the Gaussian read noise in DN
	// (at the configured bit depth).
	ReadNoise float64
	// DarkLevel is the camera offset as a fraction of the DN range.
	DarkLevel float64
	// Exposure is the fraction of the DN range above DarkLevel that
	// intensity 1 maps to. Brighter pixels clip at the maximum DN.
	Exposure float64
}

// LevelParams returns the phase-contrast scene and acquisition parameters of
// a level.
func LevelParams(l Level) Params { return ModalityParams(l, PhaseContrast) }

// ModalityParams returns the scene and acquisition parameters of a level for
// the given modality. Fluorescence uses a dark background, brighter cells and
// nuclei, and otherwise the level's settings.
func ModalityParams(l Level, m Modality) Params {
	p := Params{
		Modality:          PhaseContrast,
		ColonyDensity:     8,
		ColonyCells:       50,
		IsolatedCells:     80,
		EmptyFraction:     0.2,
		EmptyScale:        900,
		CellRadius:        10,
		CellRadiusSpread:  0.3,
		CellContrast:      0.18,
		NucleusFraction:   0.6,
		CellTexture:       0.35,
		Background:        0.45,
		BackgroundTexture: 0.03,
		Debris:            600,
		Vignetting:        0.15,
		TileBrightness:    0.03,
		Dust:              0,
		Photons:           12000,
		ReadNoise:         2,
		DarkLevel:         0.025,
		Exposure:          0.7,
	}
	switch l {
	case Easy:
		p.ColonyDensity = 14
		p.IsolatedCells = 200
		p.EmptyFraction = 0.02
		p.CellContrast = 0.25
		p.BackgroundTexture = 0.04
		p.Debris = 1500
		p.Vignetting = 0.1
		p.TileBrightness = 0
		p.Photons = 50000
		p.ReadNoise = 1
	case Hard:
		p.ColonyDensity = 5
		p.ColonyCells = 35
		p.IsolatedCells = 30
		p.EmptyFraction = 0.35
		p.CellContrast = 0.14
		p.BackgroundTexture = 0.025
		p.Debris = 300
		p.Vignetting = 0.3
		p.TileBrightness = 0.06
		p.Dust = 3
		p.Photons = 6000
		p.ReadNoise = 4
	}
	if m == Fluorescence {
		p.Modality = Fluorescence
		p.Background = 0.04
		p.BackgroundTexture *= 0.5
		p.CellContrast *= 2.5
		p.NucleusFraction = 0.9
	} else if m != PhaseContrast {
		p.Modality = m // rejected by Validate
	}
	return p
}

// Config describes a synthetic tile grid.
type Config struct {
	// Rows and Cols give the grid size; tiles are numbered row-major.
	Rows, Cols int
	// TileWidth and TileHeight give the tile size in pixels.
	TileWidth, TileHeight int
	// Overlap is the nominal overlap between adjacent tiles as a fraction of
	// the tile size, e.g. 0.1. The nominal step is round(size*(1-Overlap)).
	Overlap float64
	// Jitter is the maximum absolute random stage error per tile and axis in
	// pixels (uniform, independent per tile).
	Jitter float64
	// Drift is the maximum absolute repeatable stage error in pixels: every
	// row gets one (x, y) offset and every column gets one (x, y) offset,
	// uniform in [-Drift, Drift], shared by all its tiles (MIST's
	// "repeatability" model).
	Drift float64
	// Skew is a small rotation between camera and stage axes in pixels per
	// grid step: moving one column right shifts the tile down by Skew,
	// moving one row down shifts it left by Skew.
	Skew float64
	// Level selects the scene and acquisition parameters when Params is nil.
	Level Level
	// Params overrides the level's parameters when non-nil.
	Params *Params
	// Seed makes the grid deterministic: the same Config gives the same
	// pixels on every run and for any Workers value.
	Seed uint64
	// BitDepth is the number of significant bits (8..16); pixel values lie in
	// [0, 2^BitDepth-1] in a 16-bit container.
	BitDepth int
	// Workers is the number of rendering goroutines (0: GOMAXPROCS).
	Workers int
}

// DefaultConfig returns an 8 x 10 grid of 512 x 384 tiles with 10% overlap
// at the Realistic level, 12-bit data.
func DefaultConfig() Config { return ConfigFor(Realistic) }

// ConfigFor returns the default 8 x 10 grid of 512 x 384 tiles with 10%
// overlap, 12-bit data, with the stage errors of the given level:
// Easy: jitter 1 px, no drift or skew; Realistic: jitter 2 px, drift 4 px,
// skew 0.3 px/step; Hard: jitter 4 px, drift 7 px, skew 0.5 px/step.
func ConfigFor(l Level) Config {
	c := Config{
		Rows: 8, Cols: 10,
		TileWidth: 512, TileHeight: 384,
		Overlap:  0.1,
		Jitter:   2,
		Drift:    4,
		Skew:     0.3,
		Level:    l,
		Seed:     1,
		BitDepth: 12,
	}
	switch l {
	case Easy:
		c.Jitter, c.Drift, c.Skew = 1, 0, 0
	case Hard:
		c.Jitter, c.Drift, c.Skew = 4, 7, 0.5
	}
	return c
}

// EffectiveParams returns Params if set, else the level's parameters.
func (c Config) EffectiveParams() Params {
	if c.Params != nil {
		return *c.Params
	}
	return LevelParams(c.Level)
}

// Step returns the nominal distance between the top-left corners of adjacent
// tiles in x and y.
func (c Config) Step() (dx, dy int) {
	return int(math.Round(float64(c.TileWidth) * (1 - c.Overlap))),
		int(math.Round(float64(c.TileHeight) * (1 - c.Overlap)))
}

const (
	maxTileSide = 1 << 15
	maxTiles    = 1 << 20
)

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// Validate reports the first problem with the configuration, or nil.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("synth: "+format, a...)) }
	if c.Rows < 1 || c.Cols < 1 {
		bad("grid must have at least 1 row and 1 column, got %d x %d", c.Rows, c.Cols)
	} else if c.Rows > maxTiles/c.Cols {
		bad("grid %d x %d has more than %d tiles", c.Rows, c.Cols, maxTiles)
	}
	if c.TileWidth < 16 || c.TileHeight < 16 || c.TileWidth > maxTileSide || c.TileHeight > maxTileSide {
		bad("tile size %d x %d out of range [16, %d]", c.TileWidth, c.TileHeight, maxTileSide)
	}
	if !finite(c.Overlap) || c.Overlap <= 0 || c.Overlap > 0.9 {
		bad("overlap %v must be in (0, 0.9]", c.Overlap)
	}
	if !finite(c.Jitter) || c.Jitter < 0 {
		bad("jitter %v must be a finite value >= 0", c.Jitter)
	}
	if !finite(c.Drift) || c.Drift < 0 {
		bad("drift %v must be a finite value >= 0", c.Drift)
	}
	if !finite(c.Skew) {
		bad("skew %v must be finite", c.Skew)
	}
	if c.Level < Realistic || c.Level > Hard {
		bad("unknown level %d", int(c.Level))
	}
	if c.BitDepth < 8 || c.BitDepth > 16 {
		bad("bit depth %d must be in [8, 16]", c.BitDepth)
	}
	if c.Workers < 0 {
		bad("workers %d must be >= 0", c.Workers)
	}
	if len(errs) == 0 {
		// Stage errors must never make adjacent tiles stop overlapping.
		sx, sy := c.Step()
		ox, oy := c.TileWidth-sx, c.TileHeight-sy
		worst := 2*c.Drift + 2*c.Jitter + 1 // +1 for rounding to integers
		if ox < 2 || oy < 2 {
			bad("overlap %v of %d x %d tiles is %d x %d px; need at least 2 px", c.Overlap, c.TileWidth, c.TileHeight, ox, oy)
		} else if worst >= float64(min(ox, oy)) {
			bad("stage error too large: adjacent tiles may move by up to %.1f px (2*drift + 2*jitter + 1) but the overlap is only %d x %d px", worst, ox, oy)
		}
		if math.Abs(c.Skew)+worst >= float64(min(c.TileWidth, c.TileHeight))/4 {
			bad("skew %v px/step too large for %d x %d tiles", c.Skew, c.TileWidth, c.TileHeight)
		}
	}
	if err := c.EffectiveParams().Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Validate reports problems with the parameters, or nil.
func (p Params) Validate() error {
	var errs []error
	check := func(name string, v, lo, hi float64) {
		if !finite(v) || v < lo || v > hi {
			errs = append(errs, fmt.Errorf("synth: parameter %s = %v out of range [%v, %v]", name, v, lo, hi))
		}
	}
	if p.Modality != PhaseContrast && p.Modality != Fluorescence {
		errs = append(errs, fmt.Errorf("synth: unknown modality %d", int(p.Modality)))
	}
	check("ColonyDensity", p.ColonyDensity, 0, 1000)
	check("ColonyCells", p.ColonyCells, 0, 400)
	check("IsolatedCells", p.IsolatedCells, 0, 10000)
	check("EmptyFraction", p.EmptyFraction, 0, 1)
	check("EmptyScale", p.EmptyScale, 16, 1e6)
	check("CellRadius", p.CellRadius, 1, 100)
	check("CellRadiusSpread", p.CellRadiusSpread, 0, 1)
	check("CellContrast", p.CellContrast, 0, 10)
	check("NucleusFraction", p.NucleusFraction, 0, 1)
	check("CellTexture", p.CellTexture, 0, 1)
	check("Background", p.Background, 0, 10)
	check("BackgroundTexture", p.BackgroundTexture, 0, 10)
	check("Debris", p.Debris, 0, 100000)
	check("Vignetting", p.Vignetting, 0, 0.9)
	check("TileBrightness", p.TileBrightness, 0, 0.3)
	check("Dust", float64(p.Dust), 0, 1000)
	check("Photons", p.Photons, 0, 1e9)
	check("ReadNoise", p.ReadNoise, 0, 1e4)
	check("DarkLevel", p.DarkLevel, 0, 0.5)
	check("Exposure", p.Exposure, 1e-6, 1)
	return errors.Join(errs...)
}
