//go:build cuda

package matmul_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/gohtgs/htgs/matmul"
)

// BenchmarkMatmulCUDA: in-memory products with the cuda kernel (the offload
// graph: copy-in, device pools with release counts, cuBLAS per block,
// copy-out, accumulation on the CPU, one pipeline clone per GPU) against
// one cuBLAS call on the whole matrices (copies in and out included).
// Target ratio (call/graph) >= 0.9. "budget" limits the device pools to the
// size of one matrix, a third of what the three need, so that the graph
// re-streams B panel by panel. Built only with -tags cuda; skipped without
// a GPU:
//
//	go test -tags cuda -run '^$' -bench MatmulCUDA -benchtime 2x ./matmul
func BenchmarkMatmulCUDA(b *testing.B) {
	k, err := matmul.LookupKernel("cuda")
	if errors.Is(err, matmul.ErrUnavailable) {
		b.Skip(err)
	}
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		n, bs  int
		budget bool
	}{{8192, 2048, false}, {16384, 4096, false}, {16384, 2048, true}} {
		name := fmt.Sprintf("n=%d/bs=%d", tc.n, tc.bs)
		if tc.budget {
			name += "/budget"
		}
		b.Run(name, func(b *testing.B) {
			n := tc.n
			a, bm, c, ref := matmul.Random(n, n, 1), matmul.Random(n, n, 2), matmul.NewDense(n, n), matmul.NewDense(n, n)
			cfg := matmul.Config{BlockSize: tc.bs, Kernel: k, Buffers: &matmul.BufferCache{}}
			if tc.budget {
				cfg.DeviceMemory = 8 * int64(n) * int64(n)
			}
			var plan string
			ctx := context.Background()
			t := matmulTimed(b,
				func() error {
					rep, err := matmul.Multiply(ctx, a, bm, c, cfg)
					if err == nil {
						plan = rep.Plan.String()
					}
					return err
				},
				func() error { return k.(matmul.Gemmer).Gemm(0, a, bm, ref) })
			b.Logf("%s; plan: %s", matmul.Describe(k), plan)
			b.ReportMetric(gflops(b, n, t[0]), "graph-GFLOP/s")
			b.ReportMetric(gflops(b, n, t[1]), "call-GFLOP/s")
			b.ReportMetric(t[1].Seconds()/t[0].Seconds(), "ratio")
			if cmp, err := matmul.Compare(a, bm, c, ref); err != nil || !cmp.OK {
				b.Fatalf("graph and one call differ: %+v %v", cmp, err)
			}
		})
	}
}
