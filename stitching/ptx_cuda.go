//go:build cuda

package stitching

import _ "embed"

// refineImage is kernels/refine.cu compiled (kernels/gen.sh) into a fat
// binary: machine code for sm_80 and sm_90, and the PTX (kernels/refine.ptx)
// that the driver JIT-compiles for other GPUs.
//
//go:embed kernels/refine.fatbin
var refineImage string
