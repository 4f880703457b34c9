//go:build cuda

package pathology

import _ "embed"

// embeddedPTX is kernels/pathology.cu compiled by scripts/gen-cuda-ptx.sh
// into a fat binary: machine code for sm_80 and sm_90, and the PTX
// (kernels/pathology.ptx) for the driver to JIT-compile elsewhere.
//
//go:embed kernels/pathology.fatbin
var embeddedPTX string

// pathologyPTX returns the module image of kernels/pathology.cu.
func pathologyPTX() string { return embeddedPTX }
