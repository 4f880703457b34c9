//go:build cuda

package stitching

import _ "embed"

// refinePTX is kernels/refine.cu compiled to PTX (kernels/gen.sh), which
// the driver JIT-compiles for the GPU at hand.
//
//go:embed kernels/refine.ptx
var refinePTX string
