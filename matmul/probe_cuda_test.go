//go:build cuda

package matmul

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"gonum.org/v1/gonum/blas"

	"github.com/gohtgs/htgs/cuda"
)

// TestCUDAProbe measures the rates that bound the offload of ordinary
// memory, one GPU, on their own: the host copies that staging does
// (parallelCopy of a 4096x4096 block of a 16384-wide matrix into and out of
// pinned memory, by goroutines), the bus from pinned memory (each way, and
// both ways at once), the driver's own copy from pageable memory,
// cuMemHostRegister and its undoing (1 GiB in 64 MiB chunks, by
// goroutines), and cuBLAS DGEMM on resident blocks of 2048 to 8192 and on
// 4096 x 4096 blocks of C with k up to 16384. It
// prints PROBE lines; skipped unless HTGS_SWEEP=1 (about 5 s):
//
//	HTGS_SWEEP=1 go test -tags cuda -run CUDAProbe -v ./matmul
func TestCUDAProbe(t *testing.T) {
	if os.Getenv("HTGS_SWEEP") == "" {
		t.Skip("set HTGS_SWEEP=1 to probe the copy, bus, registration and DGEMM rates")
	}
	ds, err := cuda.Devices()
	if err != nil || len(ds) == 0 {
		t.Skipf("no GPU: %v", err)
	}
	d := ds[0]
	const gib = 1 << 30
	gbs := func(bytes int64, s time.Duration) float64 { return float64(bytes) / s.Seconds() / 1e9 }
	best := func(runs int, f func() error) (time.Duration, error) {
		b := time.Duration(1 << 62)
		for range runs {
			t0 := time.Now()
			if err := f(); err != nil {
				return 0, err
			}
			b = min(b, time.Since(t0))
		}
		return b, nil
	}

	// Host copies (staging's pack and unpack).
	const w, bs = 16384, 4096
	host := make([]float64, bs*w) // 4096 rows of a 16384-wide matrix: 512 MiB
	for i := range host {
		host[i] = float64(i & 1023)
	}
	pinned, err := d.AllocHost(8 * bs * bs)
	if err != nil {
		t.Fatal(err)
	}
	defer pinned.Free()
	st := cuda.HostSlice[float64](pinned)
	for _, workers := range []int{1, 4, 8, 16} {
		pack, _ := best(3, func() error { parallelCopy(st, bs, host, w, bs, bs, workers, false); return nil })
		unpack, _ := best(3, func() error { parallelCopy(host, w, st, bs, bs, bs, workers, false); return nil })
		fmt.Printf("PROBE pack   workers=%-2d %6.1f GB/s   unpack %6.1f GB/s   (4096x4096 block, stride 16384, pageable <-> pinned)\n",
			workers, gbs(8*bs*bs, pack), gbs(8*bs*bs, unpack))
	}
	// Two packs at once, as copy-in and copy-out run: 16 goroutines each.
	both, _ := best(3, func() error {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); parallelCopy(st[:bs*bs/2], bs, host, w, bs/2, bs, 16, false) }()
		parallelCopy(host[bs/2*w:], w, st[bs*bs/2:], bs, bs/2, bs, 16, false)
		wg.Wait()
		return nil
	})
	fmt.Printf("PROBE pack+unpack at once, 16+16 goroutines: %6.1f GB/s together\n", gbs(8*bs*bs, both))

	// The bus.
	s1, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	s2, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	big, err := d.AllocHost(gib)
	if err != nil {
		t.Fatal(err)
	}
	defer big.Free()
	dev1, err := d.Alloc(gib)
	if err != nil {
		t.Fatal(err)
	}
	defer dev1.Free()
	dev2, err := d.Alloc(gib)
	if err != nil {
		t.Fatal(err)
	}
	defer dev2.Free()
	half := int64(gib / 2)
	h2d, err := best(3, func() error {
		if err := cuda.CopyHtoD(s1, dev1, big); err != nil {
			return err
		}
		return s1.Synchronize()
	})
	if err != nil {
		t.Fatal(err)
	}
	d2h, err := best(3, func() error {
		if err := cuda.CopyDtoH(s1, big, dev1); err != nil {
			return err
		}
		return s1.Synchronize()
	})
	if err != nil {
		t.Fatal(err)
	}
	duplex, err := best(3, func() error {
		err := cuda.CopyHtoD(s1, dev1.Slice(0, half), big.Slice(0, half))
		err2 := cuda.CopyDtoH(s2, big.Slice(half, half), dev2.Slice(0, half))
		if err != nil || err2 != nil {
			return fmt.Errorf("%w; %w", err, err2)
		}
		if err := s1.Synchronize(); err != nil {
			return err
		}
		return s2.Synchronize()
	})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("PROBE bus pinned: to GPU %5.1f GB/s, from GPU %5.1f GB/s, both at once %5.1f GB/s each way (1 GiB)\n",
		gbs(gib, h2d), gbs(gib, d2h), gbs(half, duplex))
	pageable := make([]float64, gib/8)
	for i := range pageable {
		pageable[i] = 1
	}
	pg, err := best(2, func() error { return cuda.CopyToDevice(s1, dev1, pageable) })
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("PROBE bus pageable (driver staging): to GPU %5.1f GB/s (1 GiB)\n", gbs(gib, pg))

	// cuMemHostRegister of 1 GiB of ordinary memory in 64 MiB chunks.
	const chunk = 64 << 20 / 8
	for _, workers := range []int{1, 4, 8, 16} {
		regs := make([]cuda.HostRegion, len(pageable)/chunk)
		errs := make([]error, len(regs))
		run := func(f func(i int)) time.Duration {
			t0 := time.Now()
			var wg sync.WaitGroup
			next := make(chan int, len(regs))
			for i := range regs {
				next <- i
			}
			close(next)
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range next {
						f(i)
					}
				}()
			}
			wg.Wait()
			return time.Since(t0)
		}
		reg := run(func(i int) { regs[i], errs[i] = cuda.RegisterHost(d, pageable[i*chunk:(i+1)*chunk]) })
		unreg := run(func(i int) {
			if e := regs[i].Unregister(); e != nil && errs[i] == nil {
				errs[i] = e
			}
		})
		for _, e := range errs {
			if e != nil {
				t.Fatal(e)
			}
		}
		fmt.Printf("PROBE register workers=%-2d %6.1f GB/s   unregister %6.1f GB/s   (1 GiB in 64 MiB chunks)\n",
			workers, gbs(gib, reg), gbs(gib, unreg))
	}

	// Resident DGEMM on blocks.
	bl, err := d.NewBLAS()
	if err != nil {
		t.Fatal(err)
	}
	defer bl.Close()
	if err := bl.SetStream(s1); err != nil {
		t.Fatal(err)
	}
	// Square blocks, then a block of C's whole k-sum in one call (m = n =
	// 4096, k up to 16384: the products a C block of n = 16384 needs in
	// 4096-blocks as one call over a row panel of A and a column panel of
	// B), which says whether panels laid out contiguously on the device
	// would multiply faster than the 4096-blocks' 55-57 TFLOP/s in the
	// graph (docs/matmul.md, tenth session).
	for _, sh := range [][4]int{{2048, 2048, 2048, 32}, {4096, 4096, 4096, 8}, {8192, 8192, 8192, 2}, {4096, 4096, 8192, 4}, {4096, 4096, 16384, 2}, {8192, 8192, 4096, 2}} {
		m, n, k, reps := sh[0], sh[1], sh[2], sh[3]
		ab, bb := int64(8*m*k), int64(8*k*n)
		a, b, c := dev1.Slice(0, ab), dev1.Slice(ab, bb), dev2.Slice(0, int64(8*m*n))
		el, err := best(2, func() error {
			for range reps {
				if err := bl.Dgemm(blas.NoTrans, blas.NoTrans, m, n, k, 1, a, k, b, n, 1, c, n); err != nil {
					return err
				}
			}
			return s1.Synchronize()
		})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("PROBE dgemm resident m=%-5d n=%-5d k=%-5d %6.2f TFLOP/s (%d in a row, beta 1)\n", m, n, k, 2*float64(m)*float64(n)*float64(k)*float64(reps)/el.Seconds()/1e12, reps)
	}
	// A block of C's k-sum as the graph runs it at n = 16384: four
	// products of 4096-blocks, each from its own A and B block (distinct
	// buffers), the first with beta 0; the graph's products ran at 55.6-57
	// TFLOP/s at n = 16384 and 60.6 at 8192 against the 62.5 above on the
	// same buffers (seventh and tenth sessions): distinct buffers, or not.
	const bk = 4096
	blk := int64(8 * bk * bk)
	el, err := best(2, func() error {
		for rep := range 2 {
			c := dev2.Slice(int64(rep)*blk, blk)
			for l := range 4 {
				a, b := dev1.Slice(int64(l)*blk, blk), dev1.Slice(int64(4+l)*blk, blk)
				if err := bl.Dgemm(blas.NoTrans, blas.NoTrans, bk, bk, bk, 1, a, bk, b, bk, float64(min(l, 1)), c, bk); err != nil {
					return err
				}
			}
		}
		return s1.Synchronize()
	})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("PROBE dgemm resident k-sum of 4 distinct 4096-block pairs %6.2f TFLOP/s (x2, first beta 0)\n", 2*2*4*float64(bk)*float64(bk)*float64(bk)/el.Seconds()/1e12)
}
