package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/task"
)

// testPNG is a w x h PNG of one grey level.
func testPNG(t *testing.T, w, h int, v uint8) []byte {
	t.Helper()
	img := image.NewGray(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = v
	}
	img.SetGray(0, 0, color.Gray{255 - v})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func httpGet(t *testing.T, url string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/html") // as a browser asks
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// slowRun starts a graph of one task that takes 5 ms per value, fed
// until the returned stop is called (which also waits for the run).
func slowRun(t *testing.T) (*graph.Runtime[int, int], func()) {
	t.Helper()
	g := graph.New[int, int]("acquire")
	w := graph.AddFunc(g, "register", 1, func(_ context.Context, v int, out task.Emitter[int]) error {
		time.Sleep(5 * time.Millisecond)
		return out.Emit(v)
	})
	graph.Connect(g.Input(), w)
	graph.Connect(w, g.Output())
	rt, err := g.Start(context.Background(), graph.WithoutStallReport())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		defer rt.Close()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
				if rt.Send(i) != nil {
					return
				}
			}
		}
	}()
	go func() {
		for range rt.Results() {
		}
	}()
	return rt, func() {
		close(done)
		<-fed
		if err := rt.Wait(); err != nil {
			t.Error(err)
		}
	}
}

// serveObserved serves a live view of a running graph until the test ends.
func serveObserved(t *testing.T) *Live {
	t.Helper()
	l, err := ServeLive("prog", ":0", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	rt, stop := slowRun(t)
	t.Cleanup(func() {
		stop()
		http.DefaultClient.CloseIdleConnections()
		l.Close(context.Background(), false, io.Discard)
	})
	l.Observe(rt.Execution)
	return l
}

// TestLivePreviewRoutes: before a Preview, "/" is the graph's view and
// /preview.png does not exist; after it, "/" is the page of both, the
// graph's view moves to /graph/ (its formats still answer at "/"), and
// /preview.json counts the versions.
func TestLivePreviewRoutes(t *testing.T) {
	l := serveObserved(t)

	if code, _, _ := httpGet(t, l.URL+"preview.png"); code != http.StatusNotFound {
		t.Errorf("preview.png before any preview: %d, want 404", code)
	}
	if _, _, body := httpGet(t, l.URL); !strings.Contains(body, "htgs live view") || strings.Contains(body, "Mosaic so far") {
		t.Errorf("/ before a preview is not the graph's view: %.200q", body)
	}
	one := testPNG(t, 40, 30, 100)
	l.Preview(one, "12 of 48 tiles in")
	if _, _, body := httpGet(t, l.URL); !strings.Contains(body, "Mosaic so far") || !strings.Contains(body, `src="graph/"`) {
		t.Errorf("/ after a preview is not the page of both: %.200q", body)
	}
	if code, ct, body := httpGet(t, l.URL+"preview.png"); code != 200 || ct != "image/png" || body != string(one) {
		t.Errorf("preview.png: %d %s, %d bytes, want the PNG given (%d bytes)", code, ct, len(body), len(one))
	}
	var p struct {
		Version int
		Status  string
	}
	_, _, body := httpGet(t, l.URL+"preview.json")
	if err := json.Unmarshal([]byte(body), &p); err != nil || p.Version != 1 || p.Status != "12 of 48 tiles in" {
		t.Errorf("preview.json: %q (%v)", body, err)
	}
	if _, _, body := httpGet(t, l.URL+"graph/"); !strings.Contains(body, "htgs live view") {
		t.Errorf("/graph/ is not the graph's view: %.200q", body)
	}
	if _, ct, body := httpGet(t, l.URL+"?format=json"); !strings.Contains(ct, "json") || !strings.Contains(body, "register") {
		t.Errorf("/?format=json after a preview: %s %.200q", ct, body)
	}
	if code, _, _ := httpGet(t, l.URL+"elsewhere"); code != http.StatusNotFound {
		t.Errorf("/elsewhere: %d, want 404", code)
	}
	var none *Live
	none.Preview(one, "nothing") // a nil Live does nothing
}

// TestLivePreviewInBrowser opens the page in Chromium: the graph's table
// fills in its frame, the picture shows, and a new Preview replaces the
// picture and the status without reloading the page.
func TestLivePreviewInBrowser(t *testing.T) {
	chrome := ""
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(n); err == nil {
			chrome = p
			break
		}
	}
	if chrome == "" {
		t.Skip("no Chromium found (install Debian's chromium package): skipping the browser test of the preview")
	}
	l := serveObserved(t)
	l.Preview(testPNG(t, 40, 30, 100), "12 of 48 tiles in")

	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.Headless,
		chromedp.WindowSize(1200, 800), chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true))
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()

	// waitFor evaluates js until it returns true.
	waitFor := func(what, js string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			var ok bool
			if err := chromedp.Run(bctx, chromedp.Evaluate(js, &ok)); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				var page string
				_ = chromedp.Run(bctx, chromedp.Evaluate(`document.body.innerText`, &page))
				t.Fatalf("%s: not after 15 s; the page says %.300q", what, page)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if err := chromedp.Run(bctx, chromedp.Navigate(l.URL)); err != nil {
		t.Fatal(err)
	}
	waitFor("the picture", `(() => { const m = document.getElementById('mosaic'); return m.complete && m.naturalWidth === 40 })()`)
	waitFor("the status", `document.getElementById('status').textContent === '12 of 48 tiles in'`)
	waitFor("the graph's table in its frame", `(() => { const d = document.getElementById('graph').contentDocument; return !!d && d.querySelectorAll('#tasks tbody tr[data-name]').length > 0 && d.body.innerText.includes('register') })()`)

	l.Preview(testPNG(t, 64, 32, 50), "30 of 48 tiles in")
	waitFor("the new picture", `(() => { const m = document.getElementById('mosaic'); return m.complete && m.naturalWidth === 64 && m.dataset.version === '2' })()`)
	waitFor("the new status", `document.getElementById('status').textContent === '30 of 48 tiles in'`)
	var reloaded bool
	if err := chromedp.Run(bctx, chromedp.Evaluate(`performance.getEntriesByType('navigation').length !== 1`, &reloaded)); err != nil || reloaded {
		t.Errorf("the page reloaded (%v)", err)
	}
}
