//go:build !unix

package infile

import "os"

// nonBlock is 0 where the system has no O_NONBLOCK (no FIFOs to hang on).
const nonBlock = 0

func blocking(*os.File) error { return nil }
