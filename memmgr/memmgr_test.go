package memmgr_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/memmgr"
	"github.com/gohtgs/htgs/task"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func seq(n int) func(func(int) bool) {
	return func(yield func(int) bool) {
		for i := range n {
			if !yield(i) {
				return
			}
		}
	}
}

// countingAlloc counts allocations and frees.
type countingAlloc struct {
	allocs, frees atomic.Int64
	fail          bool
}

func (a *countingAlloc) Alloc(device.Device) ([]byte, error) {
	if a.fail {
		return nil, errors.New("out of memory")
	}
	a.allocs.Add(1)
	return make([]byte, 8), nil
}

func (a *countingAlloc) Free(device.Device, []byte) error { a.frees.Add(1); return nil }

type msg struct {
	id  int
	buf *memmgr.Buffer[[]byte]
}

// A fast producer and a slow consumer joined by a pool of 4: the number of
// buffers alive never exceeds 4, and every buffer comes back.
func TestPoolBoundsLiveBuffers(t *testing.T) {
	for _, opts := range [][]memmgr.Option{nil, {memmgr.Dynamic()}} {
		alloc := &countingAlloc{}
		var live, peak atomic.Int64
		g := graph.New[int, int]("bounded")
		pool := memmgr.New[[]byte](g, "buffers", 4, alloc, opts...)
		prod := graph.AddFunc(g, "fast", 1, func(ctx context.Context, v int, out task.Emitter[msg]) error {
			b, err := pool.Get(ctx)
			if err != nil {
				return err
			}
			n := live.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			return out.Emit(msg{v, b})
		})
		memmgr.Use(pool, prod)
		cons := graph.AddFunc(g, "slow", 2, func(_ context.Context, m msg, out task.Emitter[int]) error {
			time.Sleep(20 * time.Microsecond)
			live.Add(-1)
			if err := m.buf.Release(); err != nil {
				return err
			}
			return out.Emit(m.id)
		})
		graph.Connect(g.Input(), prod)
		graph.Connect(prod, cons)
		graph.Connect(cons, g.Output())
		n := 0
		if err := g.Run(context.Background(), seq(500), func(int) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		if n != 500 {
			t.Fatalf("%d results", n)
		}
		if p := peak.Load(); p > 4 || p < 2 {
			t.Fatalf("peak live buffers %d, want 2..4", p)
		}
		if a, f := alloc.allocs.Load(), alloc.frees.Load(); a > 4 || a != f {
			t.Fatalf("allocated %d, freed %d", a, f)
		}
	}
}

// Count(3): the buffer goes back exactly at the third release.
func TestCountRuleReturnsAtLastRelease(t *testing.T) {
	g := graph.New[int, string]("count")
	pool := memmgr.New(g, "one", 1, memmgr.Slices[byte](4))
	step := graph.AddFunc(g, "step", 1, func(ctx context.Context, _ int, out task.Emitter[string]) error {
		b, err := pool.GetShared(ctx, 3)
		if err != nil {
			return err
		}
		for i := range 3 {
			// Until the last release the only buffer is out: a Get must wait.
			tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			_, err := pool.Get(tctx)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				return errors.New("got a second buffer while the first was out")
			}
			if err := b.Release(); err != nil {
				return err
			}
			_ = i
		}
		b2, err := pool.Get(ctx) // back after the third release
		if err != nil {
			return err
		}
		if err := b.Release(); !errors.Is(err, memmgr.ErrDoubleRelease) {
			return errors.New("fourth release of a Count(3) buffer accepted")
		}
		return errors.Join(b2.Release(), out.Emit("ok"))
	})
	graph.Connect(g.Input(), step)
	graph.Connect(step, g.Output())
	var got []string
	if err := g.Run(context.Background(), seq(1), func(s string) error { got = append(got, s); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("got %v", got)
	}
}

func TestMisuse(t *testing.T) {
	var kept context.Context
	var keptPool *memmgr.Pool[[]byte]
	g := graph.New[int, int]("misuse")
	a := memmgr.New(g, "a", 2, memmgr.Slices[byte](1))
	n := graph.AddFunc(g, "user", 1, func(ctx context.Context, _ int, out task.Emitter[int]) error {
		kept, keptPool = ctx, a
		buf, err := a.Get(ctx)
		if err != nil {
			return err
		}
		if err := buf.Release(); err != nil {
			t.Errorf("release: %v", err)
		}
		if err := buf.Release(); !errors.Is(err, memmgr.ErrDoubleRelease) {
			t.Errorf("double release: %v", err)
		}
		return nil
	})
	graph.Discard(n)
	graph.Connect(g.Input(), n)
	if err := g.Run(context.Background(), seq(1), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := keptPool.Get(kept); !errors.Is(err, memmgr.ErrClosed) {
		t.Fatalf("Get after the run ended: %v", err)
	}
	if _, err := a.Get(context.Background()); !errors.Is(err, memmgr.ErrNoScope) {
		t.Fatalf("Get outside a task: %v", err)
	}
}

func TestBadPools(t *testing.T) {
	for name, mk := range map[string]func(g *graph.Graph[int, int]) *memmgr.Pool[[]byte]{
		"zero capacity": func(g *graph.Graph[int, int]) *memmgr.Pool[[]byte] {
			return memmgr.New(g, "p", 0, memmgr.Slices[byte](1))
		},
		"nil allocator": func(g *graph.Graph[int, int]) *memmgr.Pool[[]byte] {
			return memmgr.New[[]byte](g, "p", 1, nil)
		},
		"failing allocator": func(g *graph.Graph[int, int]) *memmgr.Pool[[]byte] {
			return memmgr.New[[]byte](g, "p", 1, &countingAlloc{fail: true})
		},
	} {
		g := graph.New[int, int]("bad")
		mk(g)
		if _, err := g.Start(context.Background()); err == nil {
			t.Errorf("%s: Start succeeded", name)
		} else if !strings.Contains(err.Error(), `"p"`) {
			t.Errorf("%s: error does not name the pool: %v", name, err)
		}
	}
}

func TestCancelWhileWaitingForMemory(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	blocked := make(chan struct{})
	var once sync.Once
	g := graph.New[int, int]("stuck")
	pool := memmgr.New(g, "tiny", 1, memmgr.Slices[byte](1))
	hog := graph.AddFunc(g, "hog", 1, func(ctx context.Context, _ int, out task.Emitter[int]) error {
		if _, err := pool.Get(ctx); err != nil { // never released
			return err
		}
		once.Do(func() { close(blocked) })
		_, err := pool.Get(ctx) // blocks: the pool is empty
		return err
	})
	graph.Discard(hog)
	graph.Connect(g.Input(), hog)
	var logs bytes.Buffer
	rt, err := g.Start(ctx, graph.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	_ = rt.Send(1)
	<-blocked
	time.Sleep(10 * time.Millisecond)
	t0 := time.Now()
	cancel()
	if err := rt.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v", err)
	}
	if d := time.Since(t0); d > time.Second {
		t.Fatalf("stopping took %v", d)
	}
	if !strings.Contains(logs.String(), "still out") || !strings.Contains(logs.String(), "tiny") {
		t.Fatalf("the unreleased buffer was not reported; log:\n%s", logs.String())
	}
}

// Memory-wait time is charged to the task that waited.
func TestMemoryWaitIsRecorded(t *testing.T) {
	g := graph.New[int, int]("wait")
	pool := memmgr.New(g, "p", 1, memmgr.Slices[byte](1))
	get := graph.AddFunc(g, "getter", 1, func(ctx context.Context, v int, out task.Emitter[*memmgr.Buffer[[]byte]]) error {
		b, err := pool.Get(ctx)
		if err != nil {
			return err
		}
		return out.Emit(b)
	})
	rel := graph.AddFunc(g, "releaser", 1, func(_ context.Context, b *memmgr.Buffer[[]byte], out task.Emitter[int]) error {
		time.Sleep(2 * time.Millisecond)
		return b.Release()
	})
	graph.Discard(rel)
	graph.Connect(g.Input(), get)
	graph.Connect(get, rel)
	rt, err := g.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		_ = rt.Send(i)
	}
	rt.Close()
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}
	var wait time.Duration
	for _, n := range rt.Stats().Tasks {
		if n.Name == "getter" {
			wait = n.MemoryWait
		}
	}
	if wait < 4*time.Millisecond {
		t.Fatalf("getter's memory wait %v, want >= 4ms (4 waits of ~2ms)", wait)
	}
}

// A task may get and release memory from goroutines of its own, with the
// context it was given.
func TestGetFromTaskGoroutines(t *testing.T) {
	g := graph.New[int, int]("fanout")
	a := memmgr.New(g, "a", 4, memmgr.Slices[byte](8))
	b := memmgr.New(g, "b", 4, memmgr.Slices[byte](8))
	n := graph.AddFunc(g, "spawner", 1, func(ctx context.Context, v int, out task.Emitter[int]) error {
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := a
				if i%2 == 1 {
					p = b
				}
				for range 50 {
					buf, err := p.Get(ctx)
					if err != nil {
						errs <- err
						return
					}
					if err := buf.Release(); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			return err
		}
		return out.Emit(v)
	})
	graph.Connect(g.Input(), n)
	graph.Connect(n, g.Output())
	if err := g.Run(context.Background(), seq(3), nil); err != nil {
		t.Fatal(err)
	}
}

// A reclaiming pool frees the buffers still out when the run ends: here
// the values carrying them are dropped because a downstream task fails.
// A late release of such a buffer is harmless and frees nothing twice.
func TestReclaimFreesDroppedBuffers(t *testing.T) {
	alloc := &countingAlloc{}
	g := graph.New[int, int]("reclaim")
	pool := memmgr.New[[]byte](g, "device", 4, alloc, memmgr.Dynamic(), memmgr.Reclaim())
	var kept *memmgr.Buffer[[]byte]
	var mu sync.Mutex
	get := graph.AddFunc(g, "get", 1, func(ctx context.Context, i int, out task.Emitter[msg]) error {
		buf, err := pool.GetShared(ctx, 2)
		if err != nil {
			return err
		}
		mu.Lock()
		kept = buf
		mu.Unlock()
		return out.Emit(msg{id: i, buf: buf})
	})
	memmgr.Use(pool, get)
	fail := graph.AddFunc(g, "fail", 1, func(ctx context.Context, m msg, out task.Emitter[int]) error {
		if m.id == 2 {
			return errors.New("boom")
		}
		return m.buf.Release() // one of two releases: the buffer stays out
	})
	graph.Connect(g.Input(), get)
	graph.Connect(get, fail)
	graph.Connect(fail, g.Output())
	if err := g.Run(context.Background(), seq(3), nil); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Run = %v, want boom", err)
	}
	if a, f := alloc.allocs.Load(), alloc.frees.Load(); a == 0 || a != f {
		t.Fatalf("%d buffers allocated, %d freed", a, f)
	}
	frees := alloc.frees.Load()
	if err := kept.Release(); err != nil {
		t.Fatalf("late release of a reclaimed buffer: %v", err)
	}
	if alloc.frees.Load() != frees {
		t.Fatal("a reclaimed buffer was freed twice")
	}
}

// panicAlloc panics in Alloc (after ok successful allocations) or in Free.
type panicAlloc struct {
	ok         int
	allocs     atomic.Int64
	panicAlloc bool
	panicFree  bool
}

func (a *panicAlloc) Alloc(device.Device) ([]byte, error) {
	if a.panicAlloc && a.allocs.Load() >= int64(a.ok) {
		panic("allocator exploded")
	}
	a.allocs.Add(1)
	return make([]byte, 8), nil
}

func (a *panicAlloc) Free(device.Device, []byte) error {
	if a.panicFree {
		panic("free exploded")
	}
	return nil
}

// waitWithin returns rt.Wait's error, failing the test if Wait hangs.
func waitWithin(t *testing.T, wait func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("Wait hangs")
		return nil
	}
}

// An allocator that panics inside a dynamic pool (under the pool's lock)
// fails the run with an error naming the pool; Wait does not hang.
func TestDynamicPoolAllocatorPanic(t *testing.T) {
	g := graph.New[int, int]("dyn")
	pool := memmgr.New[[]byte](g, "lazy", 4, &panicAlloc{ok: 1, panicAlloc: true}, memmgr.Dynamic())
	get := graph.AddFunc(g, "getter", 1, func(ctx context.Context, v int, out task.Emitter[int]) error {
		if _, err := pool.Get(ctx); err != nil { // never released: the second Get allocates
			return err
		}
		return out.Emit(v)
	})
	graph.Connect(g.Input(), get)
	graph.Connect(get, g.Output())
	rt, err := g.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		_ = rt.Send(i)
	}
	rt.Close()
	for range rt.Results() {
	}
	err = waitWithin(t, rt.Wait)
	var pe *task.PanicError
	if err == nil || !strings.Contains(err.Error(), `pool "lazy"`) || !strings.Contains(err.Error(), "allocator exploded") || !errors.As(err, &pe) {
		t.Fatalf("Wait = %v, want a PanicError naming the pool", err)
	}
}

// An allocator that panics while a static pool is filled makes Start fail
// with an error naming the pool, and frees what was allocated.
func TestStaticPoolAllocatorPanic(t *testing.T) {
	g := graph.New[int, int]("static")
	memmgr.New[[]byte](g, "eager", 4, &panicAlloc{ok: 2, panicAlloc: true})
	graph.Connect(g.Input(), g.Output())
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("Start panicked: %v", p)
			}
		}()
		_, err = g.Start(context.Background())
	}()
	var pe *task.PanicError
	if err == nil || !strings.Contains(err.Error(), `pool "eager"`) || !errors.As(err, &pe) {
		t.Fatalf("Start = %v, want a PanicError naming the pool", err)
	}
}

// A Free that panics when the pool is emptied at the end of the run comes
// out of Wait (and Run) as an error naming the pool, not as a panic.
func TestAllocatorFreePanic(t *testing.T) {
	g := graph.New[int, int]("frees")
	pool := memmgr.New[[]byte](g, "fragile", 2, &panicAlloc{panicFree: true})
	use := graph.AddFunc(g, "user", 1, func(ctx context.Context, v int, out task.Emitter[int]) error {
		b, err := pool.Get(ctx)
		if err != nil {
			return err
		}
		if err := b.Release(); err != nil {
			return err
		}
		return out.Emit(v)
	})
	graph.Connect(g.Input(), use)
	graph.Connect(use, g.Output())
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("Run panicked: %v", p)
			}
		}()
		err = g.Run(context.Background(), seq(3), nil)
	}()
	var pe *task.PanicError
	if err == nil || !strings.Contains(err.Error(), `pool "fragile"`) || !strings.Contains(err.Error(), "free exploded") || !errors.As(err, &pe) {
		t.Fatalf("Run = %v, want a PanicError naming the pool", err)
	}

	// A buffer released after the run ended is freed at once: a panicking
	// Free is then the error of that Release.
	g = graph.New[int, int]("late")
	pool = memmgr.New[[]byte](g, "fragile", 1, &panicAlloc{panicFree: true})
	var kept *memmgr.Buffer[[]byte]
	keep := graph.AddFunc(g, "keeper", 1, func(ctx context.Context, v int, out task.Emitter[int]) error {
		b, err := pool.Get(ctx)
		kept = b
		return err
	})
	graph.Discard(keep)
	graph.Connect(g.Input(), keep)
	if err := g.Run(context.Background(), seq(1), nil); err != nil {
		t.Fatalf("Run = %v (no buffer to free at the end)", err)
	}
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("late Release panicked: %v", p)
			}
		}()
		err = kept.Release()
	}()
	if err == nil || !strings.Contains(err.Error(), `pool "fragile"`) || !errors.As(err, &pe) {
		t.Fatalf("late Release = %v, want a PanicError naming the pool", err)
	}
}

// When Start fails, the pools already filled free their buffers.
func TestFailedStartFreesPools(t *testing.T) {
	alloc := &countingAlloc{}
	g := graph.New[int, int]("failing")
	memmgr.New[[]byte](g, "filled", 3, alloc)
	bad := graph.AddFunc(g, "bad", 0, func(context.Context, int, task.Emitter[int]) error { return nil })
	graph.Connect(g.Input(), bad)
	graph.Connect(bad, g.Output())
	if _, err := g.Start(context.Background()); err == nil {
		t.Fatal("Start succeeded with a task of 0 threads")
	}
	if a, f := alloc.allocs.Load(), alloc.frees.Load(); a != 3 || f != 3 {
		t.Fatalf("%d buffers allocated, %d freed; want 3 and 3", a, f)
	}
}

// A Free that fails (without panicking) at the end of the run is an error
// of the run too, naming the pool.
func TestAllocatorFreeErrorReachesWait(t *testing.T) {
	g := graph.New[int, int]("frees")
	memmgr.New[[]byte](g, "leaky", 1, failFree{})
	graph.Connect(g.Input(), g.Output())
	err := g.Run(context.Background(), seq(1), nil)
	if err == nil || !strings.Contains(err.Error(), `pool "leaky"`) || !strings.Contains(err.Error(), "cannot free") {
		t.Fatalf("Run = %v, want the Free error naming the pool", err)
	}
}

type failFree struct{}

func (failFree) Alloc(device.Device) ([]byte, error) { return make([]byte, 1), nil }
func (failFree) Free(device.Device, []byte) error    { return errors.New("cannot free") }
