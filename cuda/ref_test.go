package cuda

// CPU references for the GPU tests of the package's FFTs (gpu_test.go).

import (
	"math/cmplx"

	"gonum.org/v1/gonum/dsp/fourier"
)

// fft2 is the CPU reference: the unnormalized 2-D DFT of a rows x cols
// row-major array (rows then columns, with gonum's 1-D transforms).
func fft2(x []complex128, rows, cols int, inverse bool) []complex128 {
	out := make([]complex128, len(x))
	rowFFT, colFFT := fourier.NewCmplxFFT(cols), fourier.NewCmplxFFT(rows)
	for y := range rows {
		row := out[y*cols : (y+1)*cols]
		if inverse {
			rowFFT.Sequence(row, x[y*cols:(y+1)*cols])
		} else {
			rowFFT.Coefficients(row, x[y*cols:(y+1)*cols])
		}
	}
	col := make([]complex128, rows)
	for c := range cols {
		for y := range rows {
			col[y] = out[y*cols+c]
		}
		if inverse {
			colFFT.Sequence(col, col)
		} else {
			colFFT.Coefficients(col, col)
		}
		for y := range rows {
			out[y*cols+c] = col[y]
		}
	}
	return out
}

func maxAbs(v []complex128) float64 {
	m := 0.0
	for _, z := range v {
		m = max(m, cmplx.Abs(z))
	}
	return m
}
