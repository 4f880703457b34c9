package main

import (
	"fmt"
	"io"

	"github.com/gohtgs/htgs/pathology"
)

// runCPUOps is -cpu-ops: it times every operation on one core on a
// generated tile of -tile-size pixels (4096 unless given) and prints one
// line per operation, "op NAME: MS ms" (wall time, or with -cpu-time the
// thread's CPU time; pathology.OpTile.Time). With -out DIR it first writes
// the tile and the inputs of the operations OpenCV can do as .npy files
// into DIR (pathology.OpTile.WriteInputs).
func runCPUOps(o *options, stdout io.Writer) error {
	size := o.tileSize
	if !o.set["tile-size"] {
		size = 4096
	}
	t := pathology.NewOpTile(size, o.seed)
	if o.out != "" {
		if err := t.WriteInputs(o.out); err != nil {
			return err
		}
	}
	times, err := t.Time(3, o.cpuTime)
	if err != nil {
		return fmt.Errorf("-cpu-ops: %w", err)
	}
	for _, op := range times {
		fmt.Fprintf(stdout, "op %s: %.2f ms\n", op.Op, float64(op.Median)/1e6)
	}
	return nil
}
