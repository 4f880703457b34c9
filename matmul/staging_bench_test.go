package matmul

import (
	"runtime"
	"testing"
)

// BenchmarkStagingHost compares, on the host alone, the two ways the
// offload graph stages a block of ordinary memory for the bus: packing the
// whole block into a block-sized buffer (non-temporal stores, the
// default), or packing it band by band into a ring of small buffers
// (chunk mode, HTGS_MATMUL_CHUNK). A goroutine that reads each packed
// buffer once stands in for the bus's DMA reads, which a block-sized
// buffer sends to memory and a chunk may serve from the cache. It measures
// only the host's side (the copy, the memory traffic, the hand-offs):
// whether chunk mode wins on a GPU machine depends on its caches and on
// how its DMA reads them, which only a run there can tell (the sweep's
// chunk variants, scripts/device/dgemm.sh).
//
//	go test -run '^$' -bench StagingHost -benchtime 10x ./matmul
func BenchmarkStagingHost(b *testing.B) {
	const bs, n = 2048, 4096 // a 2048x2048 block (32 MiB) of a 4096-wide matrix
	src := make([]float64, bs*n)
	for i := range src {
		src[i] = float64(i)
	}
	workers := max(1, runtime.GOMAXPROCS(0)-1) // one core reads, as the bus would
	for _, c := range []struct {
		name      string
		kib, ring int
		nt        bool
	}{
		// The default: 3 block-sized buffers, each packed in 4 bands
		// (slabs) with non-temporal stores, a band on the bus while the
		// next is packed: a ring of 12 quarter blocks.
		{"slabs4-nt", 8 * bs * bs / 4 >> 10, 12, true},
		{"chunk1M", 1024, 4, false},
		{"chunk4M", 4096, 4, false},
		{"chunk16M", 16384, 4, false},
		{"chunk4M-nt", 4096, 4, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			per := c.kib << 7 / bs // rows per buffer
			ring := make([][]float64, c.ring)
			for i := range ring {
				ring[i] = make([]float64, per*bs)
			}
			free := make(chan int, len(ring))
			for i := range ring {
				free <- i
			}
			type band struct{ i, rows int }
			work := make(chan band, len(ring))
			done := make(chan struct{})
			go func() { // the bus: reads each band, then frees its buffer
				for bd := range work {
					readAll(ring[bd.i][:bd.rows*bs])
					free <- bd.i
				}
				close(done)
			}()
			b.SetBytes(8 * bs * bs)
			for b.Loop() {
				for r0 := 0; r0 < bs; r0 += per {
					i, rows := <-free, min(per, bs-r0)
					parallelCopyBands(ring[i], bs, src[r0*n:], n, rows, bs, workers, chunkMinBand, c.nt)
					work <- band{i, rows}
				}
				back := make([]int, 0, len(ring)) // every band of the block read
				for range ring {
					back = append(back, <-free)
				}
				for _, i := range back {
					free <- i
				}
			}
			close(work)
			<-done
		})
	}
}

// readAll reads every element of x, as a DMA read of it would.
func readAll(x []float64) {
	var s [8]float64 // independent sums, so that the loads, not the adds, bound it
	for len(x) >= 8 {
		s[0] += x[0]
		s[1] += x[1]
		s[2] += x[2]
		s[3] += x[3]
		s[4] += x[4]
		s[5] += x[5]
		s[6] += x[6]
		s[7] += x[7]
		x = x[8:]
	}
	for _, v := range x {
		s[0] += v
	}
	if s[0]+s[1]+s[2]+s[3]+s[4]+s[5]+s[6]+s[7] == -1 {
		panic("unreachable")
	}
}
