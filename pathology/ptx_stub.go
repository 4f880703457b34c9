//go:build !cuda

package pathology

// pathologyPTX returns "": builds without the cuda tag embed no PTX and
// reach no GPU (cuda.Devices fails first).
func pathologyPTX() string { return "" }
