package matmul

import (
	"context"
	"errors"
	"sync"
	"testing"
	"unsafe"
)

func addrOf(d []float64) uintptr { return uintptr(unsafe.Pointer(&d[0])) }

// pageAligned returns n float64s starting on a page boundary.
func pageAligned(n int) []float64 {
	d := make([]float64, n+pageSize/8)
	skip := int((pageSize - addrOf(d)%pageSize) % pageSize / 8)
	return d[skip : skip+n]
}

// TestHostPinnerChunks checks the chunks a pinner plans: they tile each
// view (overlapping views merged) without gaps or overlaps, end on page
// boundaries but at the views' ends, and are registered with A and B
// interleaved before C.
func TestHostPinnerChunks(t *testing.T) {
	a, b, c := make([]float64, 10000), make([]float64, 3000), make([]float64, 5000)
	sub := a[100:2000] // overlaps a: merged into it
	p := newHostPinner(newFakeGPU(1), [][]float64{a, b, c, sub}, []int{0, 0, 1, 0}, 4096, 2)
	covered := map[uintptr]int{} // by view start: bytes
	for i, ch := range p.chunks {
		if ch.hi <= ch.lo || uintptr(8*len(ch.data)) != ch.hi-ch.lo || addrOf(ch.data) != ch.lo {
			t.Fatalf("chunk %d: [%#x, %#x) with %d elements", i, ch.lo, ch.hi, len(ch.data))
		}
		if i > 0 && p.chunks[i-1].hi > ch.lo {
			t.Fatalf("chunks %d and %d overlap", i-1, i)
		}
		if ch.hi-ch.lo > 4096 {
			t.Errorf("chunk %d has %d bytes, more than 4096", i, ch.hi-ch.lo)
		}
		for _, v := range [][]float64{a, b, c} {
			lo, hi := addrOf(v), addrOf(v)+uintptr(8*len(v))
			if ch.lo >= lo && ch.hi <= hi {
				covered[lo] += int(ch.hi - ch.lo)
				if ch.hi != hi && ch.hi%pageSize != 0 {
					t.Errorf("chunk %d ends at %#x, inside a page and before its view's end", i, ch.hi)
				}
			}
		}
	}
	for _, v := range [][]float64{a, b, c} {
		if covered[addrOf(v)] != 8*len(v) {
			t.Errorf("view of %d elements covered by %d bytes of chunks", len(v), covered[addrOf(v)])
		}
	}
	// Every chunk of A and B before any of C.
	inC := func(ch *pinChunk) bool { return ch.lo >= addrOf(c) && ch.hi <= addrOf(c)+uintptr(8*len(c)) }
	seenC, seenA, seenB := false, false, false
	for _, ch := range p.order {
		switch {
		case inC(ch):
			seenC = true
		case seenC:
			t.Fatalf("a chunk of A or B registered after one of C")
		case ch.lo >= addrOf(b) && ch.hi <= addrOf(b)+uintptr(8*len(b)):
			seenB = true
		default:
			seenA = true
			if !seenB && ch.rank > 0.5 {
				t.Errorf("A's chunks past its middle before any of B's")
			}
		}
	}
	if !seenA || !seenB || !seenC {
		t.Errorf("order lacks a view: A %v B %v C %v", seenA, seenB, seenC)
	}
}

// TestHostPinnerReady: a block is ready only when every chunk it touches
// is registered; close unregisters everything; a chunk that cannot be
// registered leaves its blocks to staging.
func TestHostPinnerReady(t *testing.T) {
	fake := newFakeGPU(1)
	m := Random(64, 64, 1) // 32 KiB: 8 chunks of 4 KiB
	p := newHostPinner(fake, [][]float64{m.Data}, []int{0}, 4096, 3)
	if p.ready(m.view(0, 0, 16, 16), 16, 16, 64) {
		t.Fatal("ready before any registration")
	}
	p.start()
	p.wait()
	if !p.all() || fake.registrations.Load() != int64(len(p.chunks)) {
		t.Fatalf("after wait: all %v, %d registrations of %d chunks", p.all(), fake.registrations.Load(), len(p.chunks))
	}
	for _, blk := range [][4]int{{0, 0, 16, 16}, {10, 3, 40, 61}, {63, 63, 1, 1}} {
		if !p.ready(m.view(blk[0], blk[1], blk[2], blk[3]), blk[2], blk[3], 64) {
			t.Errorf("block %v not ready", blk)
		}
	}
	// A chunk lost: the blocks touching it are not ready, the others are.
	p.chunks[3].ready.Store(false)
	lo := int(p.chunks[3].lo-addrOf(m.Data)) / 8
	if p.ready(m.view(lo/64, 0, 1, 64), 1, 64, 64) {
		t.Error("block on an unregistered chunk reported ready")
	}
	p.chunks[3].ready.Store(true)
	if err := p.close(); err != nil {
		t.Fatal(err)
	}
	if len(fake.registered.pins) != 0 || p.ready(m.Data, 1, 1, 1) {
		t.Errorf("registrations left after close: %v", fake.registered.pins)
	}

	// Memory registered by someone else: its chunks stay unregistered.
	fake = newFakeGPU(1)
	m = &Dense{R: 64, C: 64, Stride: 64, Data: pageAligned(64 * 64)}
	release, err := fake.registerHost(m.Data[512:1024])
	if err != nil {
		t.Fatal(err)
	}
	p = newHostPinner(fake, [][]float64{m.Data}, []int{0}, 4096, 2)
	p.start()
	p.wait()
	if p.all() || !p.ready(m.Data, 1, 512, 512) || p.ready(m.Data[512:], 1, 512, 512) {
		t.Errorf("with a foreign registration: all %v", p.all())
	}
	if err := errors.Join(p.close(), release()); err != nil {
		t.Fatal(err)
	}
	var nilPinner *hostPinner
	if nilPinner.ready(m.Data, 1, 1, 1) || nilPinner.close() != nil {
		t.Error("nil pinner")
	}
}

// TestOffloadHostCopy runs the offload graph with each host-copy strategy
// on the fake GPUs: the product is right; the bytes moved are the plan's
// whatever the strategy; each block of C comes down once; staging
// registers nothing and copies nothing straight; register copies
// everything straight; pipelined, whose registrations are held until the
// first block of C is done, stages the first blocks and may copy later
// ones straight; and no registration outlives the run.
func TestOffloadHostCopy(t *testing.T) {
	a, b := Random(100, 70, 1), Random(70, 90, 2)
	want := reference(t, a, b)
	for _, mode := range []string{"staging", "register", "pipelined"} {
		t.Run(mode, func(t *testing.T) {
			t.Setenv("HTGS_MATMUL_HOSTCOPY", mode)
			t.Setenv("HTGS_MATMUL_PINCHUNK", "4") // KiB: many chunks per matrix
			fake := newFakeGPU(2)
			cfg := Config{BlockSize: 16, Copies: 2, Kernel: fake}
			if mode == "pipelined" {
				fake.registerGate = make(chan struct{})
				var once sync.Once
				cfg.Progress = func(int, int) { once.Do(func() { close(fake.registerGate) }) }
			}
			c := NewDense(100, 90)
			rep, err := Multiply(context.Background(), a, b, c, cfg)
			if err != nil {
				t.Fatal(err)
			}
			checkProduct(t, a, b, c, want)
			p := rep.Plan
			if rep.UploadBytes != p.UploadBytes || rep.DownloadBytes != 8*100*90 {
				t.Errorf("moved %d up, %d down; plan %d up, |C| %d", rep.UploadBytes, rep.DownloadBytes, p.UploadBytes, 8*100*90)
			}
			if rep.HostCopy != mode {
				t.Errorf("report names host copy %q", rep.HostCopy)
			}
			for _, d := range fake.devs {
				if d.twice != 0 {
					t.Errorf("%v: %d blocks of C downloaded more than once", d, d.twice)
				}
			}
			if len(fake.registered.pins) != 0 {
				t.Errorf("registrations left after the run: %d", len(fake.registered.pins))
			}
			all := rep.UploadBytes + rep.DownloadBytes
			switch mode {
			case "staging":
				if fake.registrations.Load() != 0 || rep.DirectBytes != 0 || fake.direct.Load() != 0 {
					t.Errorf("staging: %d registrations, %d bytes direct", fake.registrations.Load(), rep.DirectBytes)
				}
			case "register":
				chunks := int64(0)
				for _, n := range []int{100 * 70, 70 * 90, 100 * 90} {
					chunks += int64(ceilDiv(8*n, 4096))
				}
				if r := fake.registrations.Load(); r < chunks || r > chunks+3 {
					t.Errorf("%d registrations, want about %d", r, chunks)
				}
				if rep.DirectBytes != all || fake.staged.Load() != 0 || rep.PinnedBytes != 8*(100*70+70*90+100*90) {
					t.Errorf("register: %d of %d bytes direct, %d staged copies, %d bytes pinned", rep.DirectBytes, all, fake.staged.Load(), rep.PinnedBytes)
				}
				// Blocks of 16 rows of strides 70 and 90 span several 4 KiB
				// chunks: each went in several copies, none spanning two
				// registrations (the fake refuses those, like the driver).
				blocks := int64(p.MB*p.KB + p.KB*p.NB + p.MB*p.NB)
				if rep.DirectCopies <= blocks || rep.DirectCopies != fake.direct.Load() || fake.spanning.Load() != 0 {
					t.Errorf("register: %d direct copies (fake saw %d, %d spanning two registrations) for at least %d blocks", rep.DirectCopies, fake.direct.Load(), fake.spanning.Load(), blocks)
				}
			case "pipelined":
				if fake.staged.Load() == 0 || rep.DirectBytes >= all {
					t.Errorf("pipelined: %d staged copies, %d of %d bytes direct", fake.staged.Load(), rep.DirectBytes, all)
				}
				if fake.direct.Load() > 0 && rep.DirectBytes == 0 {
					t.Errorf("%d direct copies not counted", fake.direct.Load())
				}
			}
		})
	}
	t.Run("invalid", func(t *testing.T) {
		t.Setenv("HTGS_MATMUL_HOSTCOPY", "carrier-pigeon")
		if _, _, err := MultiplyDense(context.Background(), a, b, Config{BlockSize: 16, Kernel: newFakeGPU(1)}); !errors.Is(err, ErrConfig) {
			t.Fatalf("invalid host copy: %v, want ErrConfig", err)
		}
	})
}

// TestNeedOrder: the schedule's needs list every block of A and B once,
// before the products that use it, and every block of C once, after its
// last product; the pinner registers the chunk of the first need first.
func TestNeedOrder(t *testing.T) {
	a := &Dense{R: 100, C: 70, Stride: 70, Data: pageAligned(100 * 70)}
	b := &Dense{R: 70, C: 90, Stride: 90, Data: pageAligned(70 * 90)}
	c := &Dense{R: 100, C: 90, Stride: 90, Data: pageAligned(100 * 90)}
	fake := newFakeGPU(2)
	for _, order := range []Order{RowPanels, ColumnPanels, Streamed} {
		p, err := newPlan(100, 70, 90, true, Config{BlockSize: 16, Copies: 2, Kernel: fake})
		if err != nil {
			t.Fatal(err)
		}
		p.setOrder(order, 2)
		needs := needOrder(&p, a, b, c)
		if want := p.MB*p.KB + p.KB*p.NB + p.MB*p.NB; len(needs) != want {
			t.Fatalf("%v: %d needs, want %d", order, len(needs), want)
		}
		first := map[uintptr]int{}
		for k, d := range needs {
			if _, dup := first[addrOf(d)]; dup {
				t.Fatalf("%v: need %d repeats a block", order, k)
			}
			first[addrOf(d)] = k
		}
		// C(i,j) after A(i,l) and B(l,j) for every l.
		for i := range p.MB {
			for j := range p.NB {
				kc := first[addrOf(c.view(i*16, j*16, 1, 1))]
				for l := range p.KB {
					if first[addrOf(a.view(i*16, l*16, 1, 1))] > kc || first[addrOf(b.view(l*16, j*16, 1, 1))] > kc {
						t.Fatalf("%v: C(%d,%d) needed before A(%d,%d) or B(%d,%d)", order, i, j, i, l, l, j)
					}
				}
			}
		}
		pins := newHostPinner(fake, [][]float64{a.Data, b.Data, c.Data}, []int{0, 0, 1}, 4096, 1)
		pins.orderBy(needs)
		if ch := pins.order[0]; addrOf(needs[0]) < ch.lo || addrOf(needs[0]) >= ch.hi {
			t.Errorf("%v: first chunk registered [%#x, %#x) does not hold the first need %#x", order, ch.lo, ch.hi, addrOf(needs[0]))
		}
		for k := 1; k < len(pins.order); k++ {
			if x, y := pins.order[k-1].need, pins.order[k].need; y >= 0 && (x < 0 || x > y) {
				t.Fatalf("%v: registration order breaks the needs' order at %d (%d then %d)", order, k, x, y)
			}
		}
	}
	var p Plan
	if needOrder(&p, a, b, c) != nil {
		t.Error("needs of an empty plan")
	}
}

// TestHostPinnerPieces checks how a block lying across several chunks is
// cut into copies: the pieces cover every element of the block once, each
// lies within one chunk (a copy spanning two registrations is invalid),
// runs of whole rows in one chunk make one piece, and a block not wholly
// registered has none.
func TestHostPinnerPieces(t *testing.T) {
	const rows, cols, chunk = 120, 70, 4096 // rows of 560 bytes: chunk ends cut some
	data := pageAligned(rows * cols)
	fake := newFakeGPU(1)
	p := newHostPinner(fake, [][]float64{data}, []int{0}, chunk, 2)
	if ps, ok := p.pieces(data, 16, 16, cols); ok || ps != nil {
		t.Fatalf("pieces before any registration: %v, %v", ps, ok)
	}
	p.start()
	p.wait()
	defer func() {
		if err := p.close(); err != nil {
			t.Error(err)
		}
	}()
	cut := 0
	for _, blk := range [][4]int{{0, 0, 16, 16}, {16, 48, 16, 22}, {100, 3, 20, 67}, {0, 0, rows, cols}, {7, 69, 1, 1}} {
		r0, c0, br, bc := blk[0], blk[1], blk[2], blk[3]
		b := data[r0*cols+c0:]
		ps, ok := p.pieces(b, br, bc, cols)
		if !ok {
			t.Fatalf("block %v: not ready", blk)
		}
		seen := make([]int, br*bc)
		wholeRuns := 0
		for _, pc := range ps {
			if pc.rows < 1 || pc.cols < 1 || pc.r+pc.rows > br || pc.c+pc.cols > bc {
				t.Fatalf("block %v: piece %+v outside", blk, pc)
			}
			ext := b[pc.r*cols+pc.c : pc.r*cols+pc.c+(pc.rows-1)*cols+pc.cols]
			if !fake.registered.within(ext) {
				t.Errorf("block %v: piece %+v spans two chunks", blk, pc)
			}
			if pc.cols < bc {
				cut++
			} else {
				wholeRuns++
			}
			for r := pc.r; r < pc.r+pc.rows; r++ {
				for c := pc.c; c < pc.c+pc.cols; c++ {
					seen[r*bc+c]++
				}
			}
		}
		for i, n := range seen {
			if n != 1 {
				t.Fatalf("block %v: element %d covered %d times", blk, i, n)
			}
		}
		// At most one run of whole rows per chunk the block touches.
		touched := 0
		lo, hi := addrOf(b), addrOf(b)+uintptr(8*((br-1)*cols+bc))
		for _, ch := range p.chunks {
			if ch.lo < hi && lo < ch.hi {
				touched++
			}
		}
		if wholeRuns > touched {
			t.Errorf("block %v: %d runs of whole rows in %d chunks", blk, wholeRuns, touched)
		}
	}
	if cut == 0 {
		t.Error("no row was cut by a chunk end: the test does not exercise cut rows")
	}
}
