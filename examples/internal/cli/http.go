package cli

import (
	"context"
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
// other shows the current one: Observe switches. A nil *Live does nothing,
// so programs call it whether or not -http was given.
type Live struct {
	URL string

	mu  sync.Mutex
	h   http.Handler
	srv *http.Server
	end chan struct{}
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

// ServeHTTP serves the current run's view at "/"; before the first run, a
// page that waits for it.
func (l *Live) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/" {
		http.NotFound(w, req)
		return
	}
	l.mu.Lock()
	h := l.h
	l.mu.Unlock()
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
