package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/graph/observe"
)

// HTTPUsage and HTTPWaitUsage are the help lines of the programs' -http and
// -http-wait flags.
const (
	HTTPUsage     = "serve a live view of the running graph at `ADDR` (\":8080\" listens on 127.0.0.1 only; give a host, e.g. 0.0.0.0:8080, to listen elsewhere)"
	HTTPWaitUsage = "with -http, keep serving the final state after the run until interrupted (Ctrl-C)"
)

// ListenAddr is the address -http ADDR listens on: an address without a
// host (":8080", or just "8080") is bound to the loopback interface,
// 127.0.0.1, so that the view is not exposed to the network unless a host
// is named (0.0.0.0:8080, [::]:8080, myhost:8080).
func ListenAddr(addr string) (string, error) {
	if !strings.Contains(addr, ":") {
		addr = ":" + addr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("-http %s: %v", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// Live serves the live view of a program's graph (observe.Handler) over
// HTTP. A program with several graphs run one after the
// other shows the current one: Observe switches. A program may also show a
// picture that changes while it runs (stitch -watch: the mosaic filling in)
// beside the graph: Preview. A nil *Live does nothing, so programs call it
// whether or not -http was given.
type Live struct {
	URL string

	mu      sync.Mutex
	h       http.Handler
	png     []byte // the latest Preview, nil before the first
	status  string
	version int
	srv     *http.Server
	end     chan struct{}
}

// ServeLive listens on ListenAddr(addr) and serves the live view there in
// the background, printing its URL to w. An empty addr serves nothing and
// returns nil.
func ServeLive(prog, addr string, w io.Writer) (*Live, error) {
	if addr == "" {
		return nil, nil
	}
	a, err := ListenAddr(addr)
	if err != nil {
		return nil, UsageError{err}
	}
	ln, err := net.Listen("tcp", a)
	if err != nil {
		return nil, fmt.Errorf("-http: %w", err)
	}
	l := &Live{end: make(chan struct{})}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	l.URL = "http://" + net.JoinHostPort(host, port) + "/"
	l.srv = &http.Server{Handler: l, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(l.end)
		_ = l.srv.Serve(ln)
	}()
	fmt.Fprintf(w, "%s: live view at %s\n", prog, l.URL)
	return l, nil
}

// Observe makes e the run shown.
func (l *Live) Observe(e *graph.Execution) {
	if l == nil || e == nil {
		return
	}
	h := observe.Handler(e)
	l.mu.Lock()
	l.h = h
	l.mu.Unlock()
}

// Preview shows png (a PNG image) and a line of status beside the graph,
// replacing the previous ones: from the first call on, "/" is a page with
// the graph's view (served at "/graph/") and the picture side by side, the
// picture reloaded whenever it changes. png is not copied: the caller
// gives it up.
func (l *Live) Preview(png []byte, status string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.png, l.status = png, status
	l.version++
	l.mu.Unlock()
}

// ServeHTTP serves the current run's view at "/" (at "/graph/" once there
// is a Preview, "/" being then the page of both); before the first run, a
// page that waits for it. "/preview.png" is the latest preview and
// "/preview.json" its version and status.
func (l *Live) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	l.mu.Lock()
	h, png, status, version := l.h, l.png, l.status, l.version
	l.mu.Unlock()
	switch req.URL.Path {
	case "/":
		if png != nil && req.URL.Query().Get("format") == "" {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("Cache-Control", "no-store")
			_, _ = io.WriteString(w, previewPage)
			return
		}
	case "/graph/":
	case "/preview.png":
		if png == nil {
			http.NotFound(w, req)
			return
		}
		w.Header().Set("Content-Type", "image/png")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(png)
		return
	case "/preview.json":
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(struct {
			Version int    `json:"version"`
			Status  string `json:"status"`
		}{version, status})
		return
	default:
		http.NotFound(w, req)
		return
	}
	if h != nil {
		h.ServeHTTP(w, req)
		return
	}
	if req.URL.Query().Get("format") == "" {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, `<!DOCTYPE html><meta http-equiv="refresh" content="1"><title>htgs</title><p style="font-family:sans-serif">Waiting for the graph to start…</p>`)
		return
	}
	http.Error(w, "the graph has not started yet", http.StatusServiceUnavailable)
}

// Close stops serving. With wait it first prints where the final state is
// and serves it until ctx is done (the programs' ctx ends on SIGINT).
func (l *Live) Close(ctx context.Context, wait bool, w io.Writer) {
	if l == nil {
		return
	}
	if wait && ctx.Err() == nil {
		fmt.Fprintf(w, "serving the final state at %s until interrupted (Ctrl-C)\n", l.URL)
		select {
		case <-ctx.Done():
		case <-l.end:
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := l.srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		_ = l.srv.Close()
	} else if err != nil {
		_ = l.srv.Close()
	}
	<-l.end
}

// CheckHTTP checks the -http and -http-wait flags.
func CheckHTTP(addr string, wait bool) error {
	if wait && addr == "" {
		return Usagef("-http-wait needs -http ADDR")
	}
	if addr != "" {
		if _, err := ListenAddr(addr); err != nil {
			return UsageError{err}
		}
	}
	return nil
}

// previewPage shows the graph's view (in a frame, from "/graph/") and the
// preview side by side; it polls /preview.json and reloads the picture
// when its version changes.
const previewPage = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>htgs live view</title>
<style>
body{margin:0;font-family:sans-serif;display:flex;height:100vh}
#graph{flex:3;border:0;height:100%}
aside{flex:2;display:flex;flex-direction:column;padding:8px;border-left:1px solid #ccc;min-width:0}
aside h2{font-size:15px;margin:4px 0}
#status{font-size:13px;color:#333;margin-bottom:6px}
#mosaic{max-width:100%;max-height:calc(100vh - 80px);object-fit:contain;background:#222;image-rendering:pixelated}
</style></head>
<body>
<iframe id="graph" src="graph/" title="the graph"></iframe>
<aside><h2>Mosaic so far</h2><div id="status">…</div><img id="mosaic" alt="the mosaic so far" src="preview.png"></aside>
<script>
let seen = -1;
async function poll() {
  try {
    const r = await fetch("preview.json", {cache: "no-store"});
    const p = await r.json();
    document.getElementById("status").textContent = p.status;
    if (p.version !== seen) {
      seen = p.version;
      document.getElementById("mosaic").src = "preview.png?v=" + p.version;
      document.getElementById("mosaic").dataset.version = p.version;
    }
  } catch (e) {
    document.getElementById("status").textContent = "the program has ended";
    return;
  }
  setTimeout(poll, 500);
}
poll();
</script>
</body></html>
`
