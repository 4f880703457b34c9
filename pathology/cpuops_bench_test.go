package pathology

import (
	"flag"
	"runtime"
	"testing"
)

var benchTileSize = flag.Int("cpu-ops-size", 1024, "tile edge of BenchmarkCPUOps (pathology -cpu-ops uses 4096)")

// BenchmarkCPUOps times each operation as -cpu-ops does, on one core (a
// locked thread under GOMAXPROCS 1) on a generated tile of -cpu-ops-size
// pixels: go test -run '^$' -bench CPUOps -cpu-ops-size 4096.
func BenchmarkCPUOps(b *testing.B) {
	t := NewOpTile(*benchTileSize, 1)
	for _, op := range t.ops() {
		b.Run(op.name, func(b *testing.B) {
			onOneCore(func() {
				op.run() // warm-up
				b.ResetTimer()
				for b.Loop() {
					op.run()
				}
			})
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(t.w*t.h), "ns/px")
			runtime.KeepAlive(t)
		})
	}
}
