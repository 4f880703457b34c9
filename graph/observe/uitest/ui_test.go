package uitest_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.uber.org/goleak"

	"github.com/gohtgs/htgs/bookkeeper"
	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/graph/observe"
	"github.com/gohtgs/htgs/memmgr"
	"github.com/gohtgs/htgs/pipeline"
	"github.com/gohtgs/htgs/task"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// chromium finds a Chromium or Chrome binary: $HTGS_CHROME, then the usual
// names.
func chromium() string {
	if p := os.Getenv("HTGS_CHROME"); p != "" {
		return p
	}
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

// slowGraph streams values through a nested graph (a thread pool of 2), a
// pipeline of 2 clones each with a memory pool, and a bookkeeper: every
// kind of node the view draws. Each value takes a few milliseconds.
func slowGraph() *graph.Graph[int, int] {
	inner := graph.New[int, int]("prepare")
	sq := graph.AddFunc(inner, "decode", 2, func(_ context.Context, v int, out task.Emitter[int]) error {
		time.Sleep(3 * time.Millisecond)
		return out.Emit(v)
	})
	graph.Connect(inner.Input(), sq)
	graph.Connect(sq, inner.Output())

	clone := graph.New[int, int]("gpu")
	pool := memmgr.New(clone, "tiles", 4, memmgr.Slices[int](16))
	work := graph.AddFunc(clone, "fft", 1, func(ctx context.Context, v int, out task.Emitter[int]) error {
		b, err := pool.Get(ctx)
		if err != nil {
			return err
		}
		b.Data[0] = v
		time.Sleep(4 * time.Millisecond)
		if err := b.Release(); err != nil {
			return err
		}
		return out.Emit(b.Data[0])
	})
	memmgr.Use(pool, work)
	graph.Connect(clone.Input(), work)
	graph.Connect(work, clone.Output())

	g := graph.New[int, int]("demo")
	n := graph.AddGraph(g, "prepare", inner)
	p := pipeline.New(g, "gpus", clone, device.Hosts(2), pipeline.ByKey(func(v int) int { return v }))
	bk := bookkeeper.New[int](g, "pairs")
	even := bookkeeper.AddRule(bk, "even", func() bookkeeper.Rule[int, int] {
		return bookkeeper.RuleFunc[int, int](func(_ context.Context, v int, out task.Emitter[int]) error {
			if v%2 == 0 {
				return out.Emit(v)
			}
			return nil
		})
	})
	write := graph.AddFunc(g, "write", 1, func(_ context.Context, v int, out task.Emitter[int]) error {
		time.Sleep(time.Millisecond)
		return out.Emit(v)
	})
	graph.Connect(g.Input(), n)
	graph.Connect(n, p)
	graph.Connect(p, bk)
	graph.Connect(even, write)
	graph.Connect(write, g.Output())
	return g
}

// TestLiveViewInBrowser opens the live view of a running graph in headless
// Chromium: the page names every task, its counters rise while the graph
// runs, the stall banner shows while the graph waits for input, and the
// counters stop when the run ends. It saves screenshots (Graphviz layout
// when dot is installed, and the built-in layout) to $HTGS_SCREENSHOT
// (and the same name with "-builtin") or to a temporary folder.
func TestLiveViewInBrowser(t *testing.T) {
	chrome := chromium()
	if chrome == "" {
		t.Skip("no Chromium found (install Debian's chromium package, or set HTGS_CHROME): skipping the browser test")
	}
	rt, err := slowGraph().Start(context.Background(), graph.WithTrace(), graph.WithoutStallReport())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: observe.Handler(rt.Execution)}
	var serving sync.WaitGroup
	serving.Add(1)
	go func() { defer serving.Done(); _ = srv.Serve(ln) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
		}
		serving.Wait()
	}()

	// The feeder: values for 2 s, a pause that the view reports as a
	// stall, values again until told to stop, then Close.
	pause, resume, stop := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var feeding sync.WaitGroup
	feeding.Add(1)
	go func() {
		defer feeding.Done()
		defer rt.Close()
		i := 0
		send := func(d time.Duration, until <-chan struct{}) {
			tick := time.NewTicker(d)
			defer tick.Stop()
			for {
				select {
				case <-until:
					return
				case <-tick.C:
					_ = rt.Send(i)
					i++
				}
			}
		}
		send(3*time.Millisecond, pause)
		<-resume
		send(3*time.Millisecond, stop)
	}()
	results := make(chan int, 1)
	go func() {
		n := 0
		for range rt.Results() {
			n++
		}
		results <- n
	}()
	var stopOnce sync.Once
	finish := func() {
		stopOnce.Do(func() {
			select {
			case <-pause:
			default:
				close(pause)
			}
			select {
			case <-resume:
			default:
				close(resume)
			}
			close(stop)
		})
	}
	defer func() { finish(); feeding.Wait() }()

	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.Headless,
		chromedp.WindowSize(1400, 1000), chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true))
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer bcancel()

	url := "http://" + ln.Addr().String() + "/"
	if err := chromedp.Run(bctx, chromedp.Navigate(url),
		chromedp.WaitVisible(`#tasks tbody tr`, chromedp.ByQuery)); err != nil {
		t.Fatalf("opening %s: %v", url, err)
	}

	// Every task is named, in the table and in the picture.
	stats := rt.Stats()
	var rows []string
	var graphText string
	if err := chromedp.Run(bctx,
		chromedp.Sleep(700*time.Millisecond), // the first picture (dot takes a moment)
		chromedp.Evaluate(`Array.from(document.querySelectorAll('#tasks tbody tr')).map(r => r.dataset.name)`, &rows),
		chromedp.Evaluate(`document.getElementById('graph').textContent`, &graphText)); err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(stats.Tasks) {
		t.Errorf("table has %d rows %q, the run %d tasks", len(rows), rows, len(stats.Tasks))
	}
	for _, ts := range stats.Tasks {
		if !contains(rows, ts.Name) {
			t.Errorf("task %q missing from the table %q", ts.Name, rows)
		}
		short := ts.Name[strings.LastIndex(ts.Name, "/")+1:]
		if !strings.Contains(graphText, short) {
			t.Errorf("task %q missing from the picture", short)
		}
	}
	for _, p := range stats.Pools {
		if short := p.Name[strings.LastIndex(p.Name, "/")+1:]; !strings.Contains(graphText, short) {
			t.Errorf("pool %q missing from the picture", p.Name)
		}
	}

	// Counters rise while it runs.
	in1 := itemsIn(t, bctx)
	sleep(t, bctx, 800*time.Millisecond)
	in2 := itemsIn(t, bctx)
	if in2 <= in1 {
		t.Errorf("items in did not rise while running: %d then %d", in1, in2)
	}
	shot := os.Getenv("HTGS_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "live.png")
	}
	screenshot(t, bctx, shot)
	var timeline bool
	if err := chromedp.Run(bctx, chromedp.Evaluate(`!document.getElementById('tl').hidden && !document.getElementById('notrace')`, &timeline)); err != nil || !timeline {
		t.Errorf("no timeline shown for a traced run (%v)", err)
	}

	// The built-in layout names every task too.
	var builtin string
	if err := chromedp.Run(bctx,
		chromedp.Evaluate(`(() => { const s = document.getElementById('layout'); s.value = 'builtin'; s.dispatchEvent(new Event('change')); return true })()`, nil),
		chromedp.Sleep(500*time.Millisecond),
		chromedp.Evaluate(`(document.getElementById('builtin') || {}).textContent || ''`, &builtin)); err != nil {
		t.Fatal(err)
	}
	for _, ts := range stats.Tasks {
		if short := ts.Name[strings.LastIndex(ts.Name, "/")+1:]; !strings.Contains(builtin, short) {
			t.Errorf("task %q missing from the built-in layout", short)
		}
	}
	if !strings.Contains(builtin, "busy") || !strings.Contains(builtin, "compute") {
		t.Errorf("built-in layout shows no counters: %.200q", builtin)
	}
	screenshot(t, bctx, strings.TrimSuffix(shot, ".png")+"-builtin.png")

	// A pause in the input: the stall banner appears, then goes.
	close(pause)
	if err := chromedp.Run(bctx, chromedp.WaitVisible(`#stall`, chromedp.ByID)); err != nil {
		t.Fatalf("no stall banner: %v", err)
	}
	var stallText string
	if err := chromedp.Run(bctx, chromedp.Text(`#stalltext`, &stallText, chromedp.ByID)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stallText, "waiting for input") || !strings.Contains(stallText, "no progress for") {
		t.Errorf("stall banner says %q", stallText)
	}
	close(resume)
	if err := chromedp.Run(bctx, chromedp.WaitNotVisible(`#stall`, chromedp.ByID)); err != nil {
		t.Fatalf("stall banner stays: %v", err)
	}
	sleep(t, bctx, time.Second)
	finish()
	n := <-results
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}

	// Counters stop when it ends, at the run's final values.
	if err := chromedp.Run(bctx, chromedp.WaitVisible(`body[data-state="done"]`, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	end1 := itemsIn(t, bctx)
	sleep(t, bctx, 1200*time.Millisecond)
	end2 := itemsIn(t, bctx)
	var want int64
	for _, ts := range rt.Stats().Tasks {
		want += ts.ItemsIn
	}
	if end1 != end2 || end1 != want {
		t.Errorf("after the run: items in %d then %d, want %d", end1, end2, want)
	}
	var status string
	if err := chromedp.Run(bctx, chromedp.Text(`#status`, &status, chromedp.ByID)); err != nil || status != "done" {
		t.Errorf("status %q (%v), want done", status, err)
	}
	t.Logf("%d outputs; screenshots %s", n, shot)

	bcancel()
	acancel()
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func sleep(t *testing.T, ctx context.Context, d time.Duration) {
	t.Helper()
	if err := chromedp.Run(ctx, chromedp.Sleep(d)); err != nil {
		t.Fatal(err)
	}
}

// itemsIn sums the "in" column of the page's task table.
func itemsIn(t *testing.T, ctx context.Context) int64 {
	t.Helper()
	var cells []string
	if err := chromedp.Run(ctx, chromedp.Evaluate(`Array.from(document.querySelectorAll('#tasks td.in')).map(c => c.textContent)`, &cells)); err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, c := range cells {
		v, err := strconv.ParseInt(strings.ReplaceAll(c, ",", ""), 10, 64)
		if err != nil {
			t.Fatalf("cell %q: %v", c, err)
		}
		sum += v
	}
	return sum
}

func screenshot(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	var png []byte
	if err := chromedp.Run(ctx, chromedp.FullScreenshot(&png, 100)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(errors.Join(err))
	}
	t.Logf("screenshot %s", path)
}
