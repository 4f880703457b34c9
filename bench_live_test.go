package htgs_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/graph/observe"
)

// BenchmarkPipeline8GraphLive is BenchmarkPipeline8Graph watched by the
// live view: a client fetches ?format=live five times a second, as the
// page does, while the values stream. Its ratio to BenchmarkPipeline8Graph
// is what the view costs a run; run both interleaved with a long
// -benchtime (e.g. -benchtime 2s -count 1, several rounds) so that each
// run sees several updates:
//
//	go test -run '^$' -bench 'Pipeline8Graph(Live)?$' -benchtime 2s .
func BenchmarkPipeline8GraphLive(b *testing.B) {
	b.ReportAllocs()
	b.ResetTimer()
	rt, err := pipelineGraph(graph.QueueCap(64)).Start(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(observe.Handler(rt.Execution))
	stop := make(chan struct{})
	var polling sync.WaitGroup
	var polls int
	polling.Add(1)
	go func() {
		defer polling.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			resp, err := http.Get(srv.URL + "/?format=live")
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				polls++
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	go feed(b, rt.Send, rt.Close)
	n := 0
	for range rt.Results() {
		n++
	}
	err = rt.Wait()
	b.StopTimer()
	close(stop)
	polling.Wait()
	srv.Client().CloseIdleConnections()
	http.DefaultClient.CloseIdleConnections()
	srv.Close()
	if err != nil || n != b.N {
		b.Fatalf("err %v, %d of %d", err, n, b.N)
	}
	b.ReportMetric(float64(polls), "polls")
}

// BenchmarkLiveRequest is the server's side of one update of the live view
// (?format=live: a Stats snapshot and its JSON) for the 8-stage pipeline in
// the middle of a run. Five a second cost 5 × this per second of one core.
func BenchmarkLiveRequest(b *testing.B) {
	rt, err := pipelineGraph(graph.QueueCap(64)).Start(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	h := observe.Handler(rt.Execution)
	req := httptest.NewRequest(http.MethodGet, "/?format=live", nil)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
	}
	b.StopTimer()
	rt.Close()
	for range rt.Results() {
	}
	if err := rt.Wait(); err != nil {
		b.Fatal(err)
	}
}
