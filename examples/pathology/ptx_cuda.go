//go:build cuda

package main

import _ "embed"

//go:embed kernels/pathology.ptx
var embeddedPTX string

// pathologyPTX returns the PTX of kernels/pathology.cu.
func pathologyPTX() string { return embeddedPTX }
