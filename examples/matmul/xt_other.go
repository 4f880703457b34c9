//go:build !cuda

package main

import (
	"context"
	"errors"
	"io"

	"github.com/gohtgs/htgs/matmul"
)

// compareXt needs the cuda package: a build with -tags cuda.
func compareXt(context.Context, io.Writer, *options, *matmul.Dense, *matmul.Dense, *matmul.Dense, matmul.Config, *matmul.Report) error {
	return errors.New("needs a build with -tags cuda")
}
