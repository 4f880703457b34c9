package matmul

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Source is a matrix that can be read block by block: the operands A and B.
// *npy.File and *Dense implement it. ReadBlock copies the rows x cols block
// whose top-left element is (r0, c0) into dst in row-major order, and may be
// called from several goroutines at once.
type Source interface {
	Rows() int
	Cols() int
	ReadBlock(r0, c0, rows, cols int, dst []float64) error
}

// Sink is a matrix that can be written block by block: the product C.
// *npy.Writer and *Dense implement it. WriteBlock stores src, a rows x cols
// block in row-major order, at (r0, c0); calls for disjoint blocks may run
// concurrently.
type Sink interface {
	Rows() int
	Cols() int
	WriteBlock(r0, c0, rows, cols int, src []float64) error
}

// Dense is a row-major matrix in memory: element (i, j) is
// Data[i*Stride+j]. The graphs use the blocks of a Dense operand in place
// (no copy) and accumulate into the blocks of a Dense product in place.
type Dense struct {
	R, C   int // rows and columns
	Stride int // distance between consecutive rows, at least C
	Data   []float64
}

// NewDense returns a zero rows x cols matrix. On Linux the memory of a
// matrix of 4 MiB and more is advised to use transparent huge pages (as
// numpy does): where THP is enabled only on request ("madvise"), BLAS
// calls on 4 KiB pages ran 5-10% slower.
func NewDense(rows, cols int) *Dense {
	if rows < 0 || cols < 0 {
		panic(fmt.Sprintf("matmul: negative dimensions %dx%d", rows, cols))
	}
	d := &Dense{R: rows, C: cols, Stride: cols, Data: make([]float64, rows*cols)}
	adviseHuge(d.Data)
	return d
}

// Random returns a rows x cols matrix of values uniform in [-1, 1), the
// same for the same seed. Its elements, in row-major order, are the values
// of NewRandomStream(seed), so a matrix too large for memory can be
// generated in row chunks with identical contents.
func Random(rows, cols int, seed uint64) *Dense {
	d := NewDense(rows, cols)
	NewRandomStream(seed).Fill(d.Data)
	return d
}

// RandomStream generates the values of [Random] in order.
type RandomStream struct{ r *rand.Rand }

// NewRandomStream returns the stream of values of Random(_, _, seed).
func NewRandomStream(seed uint64) *RandomStream {
	return &RandomStream{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Fill stores the next len(dst) values of the stream in dst.
func (s *RandomStream) Fill(dst []float64) {
	for i := range dst {
		dst[i] = 2*s.r.Float64() - 1
	}
}

// Rows returns the number of rows.
func (d *Dense) Rows() int { return d.R }

// Cols returns the number of columns.
func (d *Dense) Cols() int { return d.C }

// At returns element (i, j).
func (d *Dense) At(i, j int) float64 { return d.Data[i*d.Stride+j] }

// Set sets element (i, j) to v.
func (d *Dense) Set(i, j int, v float64) { d.Data[i*d.Stride+j] = v }

// check reports whether d's fields describe a valid matrix.
func (d *Dense) check(what string) error {
	switch {
	case d == nil:
		return fmt.Errorf("matmul: %s is nil", what)
	case d.R < 0 || d.C < 0:
		return fmt.Errorf("matmul: %s has negative dimensions %dx%d", what, d.R, d.C)
	case d.R > 0 && d.C > 0 && d.Stride < d.C:
		return fmt.Errorf("matmul: %s has stride %d less than its %d columns", what, d.Stride, d.C)
	case d.R > 0 && d.C > 0 && len(d.Data) < (d.R-1)*d.Stride+d.C:
		return fmt.Errorf("matmul: %s (%dx%d, stride %d) has only %d elements", what, d.R, d.C, d.Stride, len(d.Data))
	}
	return nil
}

// view returns the rows x cols block at (r0, c0) as a slice that starts at
// its first element, with d.Stride between rows.
func (d *Dense) view(r0, c0, rows, cols int) []float64 {
	if rows == 0 || cols == 0 {
		return nil
	}
	off := r0*d.Stride + c0
	return d.Data[off : off+(rows-1)*d.Stride+cols]
}

func (d *Dense) blockErr(r0, c0, rows, cols, n int) error {
	if r0 < 0 || c0 < 0 || rows < 0 || cols < 0 || rows > d.R-r0 || cols > d.C-c0 {
		return fmt.Errorf("matmul: block of %dx%d at (%d, %d) does not fit in a %dx%d matrix", rows, cols, r0, c0, d.R, d.C)
	}
	if n < rows*cols {
		return fmt.Errorf("matmul: buffer of %d elements for a %dx%d block", n, rows, cols)
	}
	return nil
}

// ReadBlock copies the rows x cols block at (r0, c0) into dst, row-major.
func (d *Dense) ReadBlock(r0, c0, rows, cols int, dst []float64) error {
	if err := d.blockErr(r0, c0, rows, cols, len(dst)); err != nil {
		return err
	}
	for i := range rows {
		copy(dst[i*cols:(i+1)*cols], d.Data[(r0+i)*d.Stride+c0:])
	}
	return nil
}

// WriteBlock copies src, a rows x cols block in row-major order, to (r0, c0).
func (d *Dense) WriteBlock(r0, c0, rows, cols int, src []float64) error {
	if err := d.blockErr(r0, c0, rows, cols, len(src)); err != nil {
		return err
	}
	for i := range rows {
		copy(d.Data[(r0+i)*d.Stride+c0:(r0+i)*d.Stride+c0+cols], src[i*cols:])
	}
	return nil
}

// Comparison is the outcome of [Compare].
type Comparison struct {
	MaxAbsErr float64 // max |C - Ref| over the elements where both are finite
	Scale     float64 // ‖A‖∞·max|B| over the finite rows of A and elements of B: bounds every finite |Σ_l a_il b_lj|
	RelErr    float64 // MaxAbsErr / Scale
	Bound     float64 // 2·γ_k, the worst-case RelErr of two correct summations
	// Mismatches counts the elements where C and Ref disagree about a
	// value that is not finite: Ref is NaN and C is not, Ref is an
	// infinity and C is not the same one, or Ref is finite and C is not.
	Mismatches int
	OK         bool // RelErr <= Bound and no mismatches
}

// Compare checks a computed product c of a (m x k) and b (k x n) against a
// reference ref. Any summation order of a k-term dot product has an error of
// at most γ_k·Σ|a_il·b_lj| with γ_k = k·u/(1-k·u) and u the unit roundoff
// (2⁻⁵³), so two correct products differ by at most
// 2·γ_k·‖A‖∞·max|B| in any element; Compare reports that relative error and
// whether it is within the bound.
//
// Operands holding NaN or infinities are compared by position: where ref is
// NaN, c must be NaN; where ref is ±Inf, c must be the same infinity; where
// ref is finite, c must be finite and within the bound. A NaN or an
// infinity in row i of A (column j of B) makes all of row i (column j) of
// the product non-finite, so the finite elements only involve the rows of A
// and the elements of B that are finite: the scale is taken over those.
func Compare(a, b, c, ref *Dense) (Comparison, error) {
	for _, m := range []struct {
		d    *Dense
		what string
	}{{a, "A"}, {b, "B"}, {c, "C"}, {ref, "the reference"}} {
		if err := m.d.check(m.what); err != nil {
			return Comparison{}, err
		}
	}
	if a.C != b.R || c.R != a.R || c.C != b.C || ref.R != c.R || ref.C != c.C {
		return Comparison{}, fmt.Errorf("matmul: Compare: shapes %dx%d · %dx%d = %dx%d (reference %dx%d) do not match",
			a.R, a.C, b.R, b.C, c.R, c.C, ref.R, ref.C)
	}
	var cmp Comparison
	cmp.MaxAbsErr, cmp.Mismatches = elementErrors(c, ref)
	cmp.Scale = maxFiniteRowSum(a) * maxFiniteAbs(b)
	cmp.Bound = math.Inf(1)
	if ku := float64(a.C) * 0x1p-53; ku < 1 { // k·u, u the unit roundoff
		cmp.Bound = 2 * ku / (1 - ku)
	}
	switch {
	case cmp.Scale > 0:
		cmp.RelErr = cmp.MaxAbsErr / cmp.Scale
	case cmp.MaxAbsErr > 0:
		cmp.RelErr = math.Inf(1)
	}
	cmp.OK = cmp.Mismatches == 0 && cmp.RelErr <= cmp.Bound
	return cmp, nil
}

// finite reports whether x is neither NaN nor an infinity.
func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// elementErrors compares c with ref element by element: the largest
// |c - ref| where both are finite, and the count of elements where they
// disagree about a value that is not finite (see Comparison.Mismatches).
func elementErrors(c, ref *Dense) (maxAbs float64, mismatches int) {
	for i := range c.R {
		for j := range c.C {
			x, r := c.At(i, j), ref.At(i, j)
			switch {
			case math.IsNaN(r):
				if !math.IsNaN(x) {
					mismatches++
				}
			case math.IsInf(r, 0):
				if x != r {
					mismatches++
				}
			case !finite(x):
				mismatches++
			default:
				maxAbs = max(maxAbs, math.Abs(x-r))
			}
		}
	}
	return maxAbs, mismatches
}

// maxFiniteRowSum is ‖A‖∞ over the rows of a that hold only finite values.
func maxFiniteRowSum(a *Dense) float64 {
	var best float64
rows:
	for i := range a.R {
		s := 0.0
		for j := range a.C {
			v := a.At(i, j)
			if !finite(v) {
				continue rows
			}
			s += math.Abs(v)
		}
		best = max(best, s)
	}
	return best
}

// maxFiniteAbs is the largest |b_ij| over the finite elements of b.
func maxFiniteAbs(b *Dense) float64 {
	var best float64
	for i := range b.R {
		for j := range b.C {
			if v := b.At(i, j); finite(v) {
				best = max(best, math.Abs(v))
			}
		}
	}
	return best
}
