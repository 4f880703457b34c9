package region

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// waiting reports how many operations hold or wait for a box of l.
func (l *boxLock) waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ops)
}

// untilWaiting polls until n operations hold or wait for a box of l.
func untilWaiting(t *testing.T, l *boxLock, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for l.waiting() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d operations in the lock, want %d", l.waiting(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestBoxLock checks which operations a boxLock lets run together. A
// lock taken with a cancelled context succeeds only if it need not wait,
// which tells, without timing, whether an operation would wait.
func TestBoxLock(t *testing.T) {
	bg := context.Background()
	done, cancel := context.WithCancel(bg)
	cancel()
	var l boxLock
	left, right := Rect(0, 0, 8, 8), Rect(8, 0, 16, 8)
	both := Rect(4, 0, 12, 8)
	w, err := l.lock(bg, left, true)
	if err != nil {
		t.Fatal(err)
	}
	// A disjoint write and a disjoint read go on beside a held write.
	for _, write := range []bool{true, false} {
		op, err := l.lock(done, right, write)
		if err != nil {
			t.Fatalf("write=%v of a disjoint box waited: %v", write, err)
		}
		l.unlock(op)
	}
	// Overlapping reads and writes wait for it, and leave nothing behind.
	for _, write := range []bool{true, false} {
		if _, err := l.lock(done, both, write); !errors.Is(err, context.Canceled) {
			t.Fatalf("write=%v overlapping a held write: err %v, want it to wait", write, err)
		}
	}
	if n := l.waiting(); n != 1 {
		t.Fatalf("%d operations in the lock after the cancelled ones, want 1", n)
	}
	// An empty box conflicts with nothing.
	if op, err := l.lock(done, Rect(4, 4, 4, 4), true); err != nil {
		t.Fatalf("empty box waited: %v", err)
	} else {
		l.unlock(op)
	}
	l.unlock(w)

	// Reads share a box; a write waits for them.
	r1, err := l.lock(bg, both, false)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := l.lock(done, left, false)
	if err != nil {
		t.Fatalf("read overlapping a held read waited: %v", err)
	}
	if _, err := l.lock(done, right, true); !errors.Is(err, context.Canceled) {
		t.Fatalf("write overlapping held reads: err %v, want it to wait", err)
	}
	l.unlock(r2)
	l.unlock(r1)
	if n := l.waiting(); n != 0 {
		t.Fatalf("%d operations in an idle lock", n)
	}
}

// TestBoxLockOrder checks that a waiting write is not overtaken by a later
// read of its box, and that it runs once what it waits for ends.
func TestBoxLockOrder(t *testing.T) {
	bg := context.Background()
	done, cancel := context.WithCancel(bg)
	cancel()
	var l boxLock
	w1, err := l.lock(bg, Rect(0, 0, 8, 8), true)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *boxOp)
	go func() {
		op, err := l.lock(bg, Rect(4, 0, 12, 8), true) // waits for w1
		if err != nil {
			t.Error(err)
		}
		got <- op
	}()
	untilWaiting(t, &l, 2)
	// This read overlaps only the waiting write, which came first.
	if _, err := l.lock(done, Rect(10, 0, 16, 8), false); !errors.Is(err, context.Canceled) {
		t.Fatalf("read of a box a waiting write came for first: err %v, want it to wait", err)
	}
	select {
	case <-got:
		t.Fatal("a write overlapping a held write did not wait")
	default:
	}
	l.unlock(w1)
	w2 := <-got
	if w2 == nil {
		t.FailNow()
	}
	l.unlock(w2)
}

// TestMemoryDisjointWritesRunTogether holds a box of a region in Memory
// and checks that a write of a disjoint box completes meanwhile, that an
// overlapping one waits and is cancelled by its context, and that the
// region's creation does not wait for anything.
func TestMemoryDisjointWritesRunTogether(t *testing.T) {
	ctx := context.Background()
	st := NewMemory()
	m := Meta{ID: ID{Name: "lab", Type: Dense2D}, Elem: Uint16, Bounds: Rect(0, 0, 64, 64)}
	if err := st.Write(ctx, m, Rect(0, 0, 0, 0), nil); err != nil {
		t.Fatal(err)
	}
	r := st.regions[m.ID]
	held, err := r.boxes.lock(ctx, Rect(0, 0, 64, 32), true)
	if err != nil {
		t.Fatal(err)
	}
	lower := Rect(0, 32, 64, 64)
	finished := make(chan error, 1)
	go func() { finished <- st.Write(ctx, m, lower, pattern(lower)) }()
	select {
	case err := <-finished:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a write of a disjoint box waited for a held box")
	}
	cctx, cancel := context.WithCancel(ctx)
	over := Rect(0, 16, 64, 48)
	go func() { finished <- st.Write(cctx, m, over, pattern(over)) }()
	untilWaiting(t, &r.boxes, 2)
	cancel()
	if err := <-finished; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled overlapping write: %v", err)
	}
	r.boxes.unlock(held)
	got := make([]byte, 2*lower.Len())
	if err := st.Read(ctx, m.ID, lower, got); err != nil || !slices.Equal(got, pattern(lower)) {
		t.Fatalf("the disjoint write's box reads back other data (err %v)", err)
	}
}

// TestMemoryConcurrentUse writes, overwrites and reads the tiles of a
// region from many goroutines at once (run it with -race: an overlapping
// copy let through would be a data race) and checks every tile's final
// content and the order of overlapping writes.
func TestMemoryConcurrentUse(t *testing.T) {
	ctx := context.Background()
	st := NewMemory()
	const tile, n = 16, 4
	m := Meta{ID: ID{Name: "slide", Type: Dense2D}, Elem: Uint16, Bounds: Rect(0, 0, n*tile, n*tile)}
	var wg sync.WaitGroup
	errs := make(chan error, 4*n*n)
	for i := range n * n {
		b := Rect(i%n*tile, i/n*tile, i%n*tile+tile, i/n*tile+tile)
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 3 { // the last of a goroutine's writes wins
				if err := st.Write(ctx, m, b, make([]byte, 2*b.Len())); err != nil {
					errs <- err
				}
			}
			if err := st.Write(ctx, m, b, pattern(b)); err != nil {
				errs <- err
			}
		}()
		go func() { // a read across this tile and its neighbours
			defer wg.Done()
			rb := b.Grow(tile / 2).Intersect(m.Bounds)
			if err := st.Read(ctx, m.ID, rb, make([]byte, 2*rb.Len())); err != nil && !errors.Is(err, ErrNotFound) {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := make([]byte, 2*m.Bounds.Len())
	if err := st.Read(ctx, m.ID, m.Bounds, got); err != nil {
		t.Fatal(err)
	}
	if want := pattern(m.Bounds); !slices.Equal(got, want) {
		t.Error("the slide reads back other data than its tiles' last writes")
	}
	if n := st.regions[m.ID].boxes.waiting(); n != 0 {
		t.Errorf("%d operations left in the region's lock", n)
	}
}

// BenchmarkMemoryCommitTiles commits the 16-bit labels of 2048^2 tiles
// into one slide-wide region from GOMAXPROCS goroutines at once, as the
// pathology pipeline's completed tiles are committed: "parallel" is
// Memory as it is, "serial" the same writes one at a time (as Memory did
// under its lock until the eleventh session).
func BenchmarkMemoryCommitTiles(b *testing.B) {
	ctx := context.Background()
	const tile, n = 2048, 4
	m := Meta{ID: ID{Name: "bench::labels", Type: Dense2D}, Elem: Uint16, Bounds: Rect(0, 0, n*tile, n*tile)}
	data := make([]byte, 2*tile*tile)
	for _, serial := range []bool{false, true} {
		name := map[bool]string{false: "parallel", true: "serial"}[serial]
		b.Run(name, func(b *testing.B) {
			st := NewMemory()
			if err := st.Write(ctx, m, m.Bounds, make([]byte, m.Bytes())); err != nil {
				b.Fatal(err)
			}
			var mu sync.Mutex
			var next int
			var nmu sync.Mutex
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					nmu.Lock()
					i := next % (n * n)
					next++
					nmu.Unlock()
					box := Rect(i%n*tile, i/n*tile, i%n*tile+tile, i/n*tile+tile)
					if serial {
						mu.Lock()
					}
					err := st.Write(ctx, m, box, data)
					if serial {
						mu.Unlock()
					}
					if err != nil {
						panic(fmt.Sprint(err))
					}
				}
			})
		})
	}
}
