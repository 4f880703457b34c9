//go:build cuda

package stitching

import _ "embed"

// refineImage is kernels/refine.cu compiled (kernels/gen.sh) into a fat
// binary: machine code for sm_80 and sm_90, and the PTX (kernels/refine.ptx)
// that the driver JIT-compiles for other GPUs.
//
//go:embed kernels/refine.fatbin
var refineImage string

// pcmImage is kernels/phasecorr.cu compiled the same way: the phase
// correlation's kernels (see pcmKernels).
//
//go:embed kernels/phasecorr.fatbin
var pcmImage string
