package cli

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestListenAddrBindsLoopbackByDefault(t *testing.T) {
	for in, want := range map[string]string{
		":8080":          "127.0.0.1:8080",
		"8080":           "127.0.0.1:8080",
		":0":             "127.0.0.1:0",
		"0.0.0.0:8080":   "0.0.0.0:8080",
		"localhost:9000": "localhost:9000",
		"[::]:8080":      "[::]:8080",
		"[::1]:8080":     "[::1]:8080",
	} {
		got, err := ListenAddr(in)
		if err != nil || got != want {
			t.Errorf("ListenAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ListenAddr("a:b:c"); err == nil {
		t.Error("a:b:c accepted")
	}
	if err := CheckHTTP("", true); err == nil {
		t.Error("-http-wait without -http accepted")
	}
}

func TestServeLiveBeforeAndWithoutRun(t *testing.T) {
	var out strings.Builder
	l, err := ServeLive("prog", ":0", &out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(l.URL, "http://127.0.0.1:") || !strings.Contains(out.String(), l.URL) {
		t.Errorf("URL %q, printed %q", l.URL, out.String())
	}
	resp, err := http.Get(l.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "Waiting for the graph") {
		t.Errorf("before the run: %q", b)
	}
	http.DefaultClient.CloseIdleConnections()
	l.Close(context.Background(), false, io.Discard)
	var none *Live
	none.Observe(nil)
	none.Close(context.Background(), true, io.Discard)
}
