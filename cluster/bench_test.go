package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/region"
	"github.com/gohtgs/htgs/task"
)

// latency sends one input at a time through a one-task graph and reports
// the median and 90th percentile time from Send to the result.
func latency(b *testing.B, newTask func() task.Task[job, answer]) {
	g := graph.New[job, answer]("latency")
	sq := graph.AddTask(g, "square", 1, newTask)
	graph.Connect(g.Input(), sq)
	graph.Connect(sq, g.Output())
	rt, err := g.Start(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	one := func(i int) time.Duration {
		t0 := time.Now()
		if err := rt.Send(job{N: i + 20}); err != nil {
			b.Fatal(err)
		}
		for a := range rt.Results() {
			if a.Square != (i+20)*(i+20) {
				b.Fatalf("square(%d) = %d", i+20, a.Square)
			}
			break
		}
		return time.Since(t0)
	}
	for i := range 50 { // warm up: connections, gob types, consumers
		one(i)
	}
	d := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		d = append(d, one(i))
	}
	b.StopTimer()
	rt.Close()
	if err := rt.Wait(); err != nil {
		b.Fatal(err)
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(d[len(d)*9/10].Nanoseconds())/1e3, "p90-µs")
}

// BenchmarkItemLatency compares one small input's round trip through an
// in-process task and through a remote one served by a worker process on
// loopback (gob codec, memory streams). The difference of the medians is
// the overhead per remote item.
func BenchmarkItemLatency(b *testing.B) {
	b.Run("in-process", func(b *testing.B) { latency(b, squareTask) })
	remote := func(b *testing.B, opts ...TaskOption) {
		s := startServer(b)
		c := newClient(b, connect(b, s))
		startProc(b, s, "W", 1)
		r, _ := NewRemote[job, answer](c, "square", append([]TaskOption{Version("v1")}, opts...)...)
		waitDirect(b, c, "square")
		before := c.Stats()
		latency(b, r.Task)
		st := c.Stats()
		b.ReportMetric(100*float64(st.Direct-st.Fallback-before.Direct+before.Fallback)/float64(st.Sent-before.Sent), "%direct")
	}
	// remote: small inputs go as direct requests (DirectLimit's default).
	b.Run("remote", func(b *testing.B) { remote(b) })
	// remote-call: Remote.Call outside a graph: the item without the
	// graph's two hand-offs (Send to the task's goroutine, its output to
	// Results).
	b.Run("remote-call", func(b *testing.B) {
		s := startServer(b)
		c := newClient(b, connect(b, s))
		startProc(b, s, "W", 1)
		r, _ := NewRemote[job, answer](c, "square", Version("v1"))
		waitDirect(b, c, "square")
		call := func(i int) time.Duration {
			i += 20 // the test task panics on 13
			t0 := time.Now()
			out, err := r.Call(context.Background(), job{N: i})
			if err != nil || len(out) != 1 || out[0].Square != i*i {
				b.Fatalf("square(%d): %v %v", i, out, err)
			}
			return time.Since(t0)
		}
		for i := range 50 {
			call(i)
		}
		d := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := range b.N {
			d = append(d, call(i))
		}
		reportP50(b, d)
	})
	// remote-inproc: the same as remote with the client connected to the
	// embedded server in process (natsserver's ConnectInProcess): only the
	// worker's side crosses loopback TCP.
	b.Run("remote-inproc", func(b *testing.B) {
		s := startServer(b)
		nc, err := s.ConnectInProcess()
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(nc.Close)
		c := newClient(b, nc)
		startProc(b, s, "W", 1)
		r, _ := NewRemote[job, answer](c, "square", Version("v1"))
		waitDirect(b, c, "square")
		latency(b, r.Task)
	})
	// remote-stream: every input through the work and result streams.
	b.Run("remote-stream", func(b *testing.B) { remote(b, DirectLimit(0)) })
}

// waitDirect waits (at most 5 s) until c has read from the directory that
// a worker takes direct requests for task key.
func waitDirect(tb testing.TB, c *Client, key string) {
	tb.Helper()
	for deadline := time.Now().Add(5 * time.Second); c.directFor(key).copies == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatalf("the directory lists no worker taking direct requests for %q", key)
		}
	}
}

// BenchmarkRemoteThroughputSmall keeps 256 small inputs in flight through
// a remote task served by 1 or 4 worker processes of 8 copies each: the
// cost per item when round trips overlap, and the rate the graph's process
// (client and embedded server) sustains.
func BenchmarkRemoteThroughputSmall(b *testing.B) {
	for _, workers := range []int{1, 4} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			s := startServer(b)
			c := newClient(b, connect(b, s))
			for i := range workers {
				startProc(b, s, fmt.Sprintf("W%d", i), 8)
			}
			r, _ := NewRemote[job, answer](c, "square", Version("v1"))
			run := func(n int) {
				g := graph.New[job, answer]("small")
				sq := graph.AddTask(g, "square", 256, r.Task)
				graph.Connect(g.Input(), sq)
				graph.Connect(sq, g.Output())
				if err := g.Run(context.Background(), slices.Values(jobs(n, 0)), func(answer) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
			for len(c.Stats().ByWorker) < workers {
				run(100 * workers)
			}
			b.ResetTimer()
			t0 := time.Now()
			run(b.N)
			b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "items/s")
		})
	}
}

// BenchmarkSleepThroughput runs 10 ms sleeping tasks on 1, 2 and 4 worker
// processes of 4 copies each (a window of 4 per worker), with 64 inputs in
// flight on the graph's side. The ideal rate is workers × 4 / 10 ms.
func BenchmarkSleepThroughput(b *testing.B) {
	for _, workers := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			s := startServer(b)
			c := newClient(b, connect(b, s))
			for i := range workers {
				startProc(b, s, fmt.Sprintf("W%d", i), 4)
			}
			r, _ := NewRemote[job, answer](c, "square", Version("v1"))
			run := func(n int) {
				g := graph.New[job, answer]("sleep")
				sq := graph.AddTask(g, "square", 64, r.Task)
				graph.Connect(g.Input(), sq)
				graph.Connect(sq, g.Output())
				if err := g.Run(context.Background(), slices.Values(jobs(n, 10*time.Millisecond)), func(answer) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
			// Warm up until every worker has answered.
			for len(c.Stats().ByWorker) < workers {
				run(8 * workers)
			}
			b.ResetTimer()
			t0 := time.Now()
			run(b.N)
			el := time.Since(t0)
			rate := float64(b.N) / el.Seconds()
			b.ReportMetric(rate, "items/s")
			b.ReportMetric(rate/(float64(workers)*4/0.010)*100, "%ideal")
		})
	}
}

// BenchmarkObjectStoreRead reads a 16 MiB object from the namespace's
// object store through a client connection: the rate at which a worker
// pulls large payloads (and ROIs) by reference on loopback.
func BenchmarkObjectStoreRead(b *testing.B) {
	s := startServer(b)
	c := newClient(b, connect(b, s))
	data := make([]byte, 16<<20)
	for i := range data {
		data[i] = byte(i)
	}
	ctx := context.Background()
	if _, err := c.st.obj.PutBytes(ctx, "bench", data); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for range b.N {
		got, err := c.st.obj.GetBytes(ctx, "bench")
		if err != nil || len(got) != len(data) {
			b.Fatal(len(got), err)
		}
	}
}

// BenchmarkRegionsROIRead reads 512×512 ROIs at random from a 4096×4096
// uint8 region kept in 256×256 chunks in the JetStream region storage: the
// rate at which a worker reads only the ROI it needs.
func BenchmarkRegionsROIRead(b *testing.B) {
	s := startServer(b)
	st := newRegions(b, s)
	ctx := context.Background()
	m := region.Meta{ID: region.ID{Name: "slide::gray", Type: region.Dense2D}, Elem: region.Uint8, Bounds: region.Rect(0, 0, 4096, 4096)}
	row := make([]byte, 4096*256)
	for y := 0; y < 4096; y += 256 {
		if err := st.Write(ctx, m, region.Rect(0, y, 4096, y+256), row); err != nil {
			b.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 512*512)
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for range b.N {
		x, y := rng.IntN(4096-512), rng.IntN(4096-512)
		if err := st.Read(ctx, m.ID, region.Rect(x, y, x+512, y+512), buf); err != nil {
			b.Fatal(err)
		}
	}
}

// reportP50 reports the median of d in µs.
func reportP50(b *testing.B, d []time.Duration) {
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Nanoseconds())/1e3, "p50-µs")
}

// BenchmarkBrokerFloor measures what a remote item cannot go below on this
// machine, with no code of this package in the way: a core NATS
// request/reply between two connections (two crossings of the server), and
// a JetStream publish followed by a pull of the same message.
func BenchmarkBrokerFloor(b *testing.B) {
	b.Run("core-request", func(b *testing.B) {
		s := startServer(b)
		nc, nc2 := connect(b, s), connect(b, s)
		sub, err := nc2.Subscribe("echo", func(m *nats.Msg) { _ = m.Respond(m.Data) })
		if err != nil {
			b.Fatal(err)
		}
		defer sub.Unsubscribe()
		if err := nc2.Flush(); err != nil {
			b.Fatal(err)
		}
		d := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for range b.N {
			t0 := time.Now()
			if _, err := nc.Request("echo", []byte("x"), time.Second); err != nil {
				b.Fatal(err)
			}
			d = append(d, time.Since(t0))
		}
		reportP50(b, d)
	})
	// core-request-process: the same, answered by a worker process: the
	// floor of a direct request (DirectLimit).
	b.Run("core-request-process", func(b *testing.B) {
		s := startServer(b)
		nc := connect(b, s)
		startProc(b, s, "W", 1)
		for deadline := time.Now().Add(10 * time.Second); ; {
			if _, err := nc.Request(floorEcho, []byte("x"), time.Second); err == nil {
				break
			} else if time.Now().After(deadline) {
				b.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		for range 50 {
			if _, err := nc.Request(floorEcho, []byte("x"), time.Second); err != nil {
				b.Fatal(err)
			}
		}
		d := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for range b.N {
			t0 := time.Now()
			if _, err := nc.Request(floorEcho, []byte("x"), time.Second); err != nil {
				b.Fatal(err)
			}
			d = append(d, time.Since(t0))
		}
		reportP50(b, d)
	})
	// core-request-process-chan: the same echo, the answer received on a
	// subscription kept for the whole run whose channel the requester
	// reads itself: the connection's reader hands the answer straight to
	// the waiting goroutine (nc.Request's goes through its response
	// subscription's goroutine first).
	b.Run("core-request-process-chan", func(b *testing.B) {
		s := startServer(b)
		nc := connect(b, s)
		startProc(b, s, "W", 1)
		inbox := nc.NewInbox()
		ch := make(chan *nats.Msg, 4)
		sub, err := nc.ChanSubscribe(inbox, ch)
		if err != nil {
			b.Fatal(err)
		}
		defer sub.Unsubscribe()
		t := time.NewTimer(time.Hour)
		defer t.Stop()
		one := func() error {
			if err := nc.PublishRequest(floorEcho, inbox, []byte("x")); err != nil {
				return err
			}
			select {
			case m := <-ch:
				if m.Header.Get("Status") == "503" {
					return nats.ErrNoResponders
				}
				return nil
			case <-t.C:
				return nats.ErrTimeout
			}
		}
		for deadline := time.Now().Add(10 * time.Second); ; {
			if err := one(); err == nil {
				break
			} else if time.Now().After(deadline) {
				b.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		for range 50 {
			if err := one(); err != nil {
				b.Fatal(err)
			}
		}
		d := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for range b.N {
			t0 := time.Now()
			if err := one(); err != nil {
				b.Fatal(err)
			}
			d = append(d, time.Since(t0))
		}
		reportP50(b, d)
	})
	b.Run("js-publish-pull", func(b *testing.B) {
		s := startServer(b)
		js, _ := jetstream.New(connect(b, s))
		js2, _ := jetstream.New(connect(b, s))
		ctx := context.Background()
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "FLOOR", Subjects: []string{"floor"}, Storage: jetstream.MemoryStorage, Retention: jetstream.WorkQueuePolicy}); err != nil {
			b.Fatal(err)
		}
		cons, err := js2.CreateOrUpdateConsumer(ctx, "FLOOR", jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			b.Fatal(err)
		}
		d := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for range b.N {
			t0 := time.Now()
			if _, err := js.PublishAsync("floor", []byte("x")); err != nil {
				b.Fatal(err)
			}
			m, err := cons.Next(jetstream.FetchMaxWait(time.Second))
			if err != nil {
				b.Fatal(err)
			}
			_ = m.Ack()
			d = append(d, time.Since(t0))
		}
		reportP50(b, d)
	})
	for _, codec := range []Codec{Gob(), JSON()} {
		b.Run("call-in-process-worker-"+codec.Name(), func(b *testing.B) {
			s := startServer(b)
			serveInProcess(b, connect(b, s), "w", func(w *Worker) error {
				return Handle(w, "square", squareTask, Version("v1"), WithCodec(codec))
			})
			c := newClient(b, connect(b, s))
			r, _ := NewRemote[job, answer](c, "square", Version("v1"), WithCodec(codec))
			for range 50 {
				if _, err := r.Call(context.Background(), job{N: 2}); err != nil {
					b.Fatal(err)
				}
			}
			d := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				if _, err := r.Call(context.Background(), job{N: 2}); err != nil {
					b.Fatal(err)
				}
				d = append(d, time.Since(t0))
			}
			reportP50(b, d)
		})
	}
}

// BenchmarkCodec encodes and decodes one small input and its one output,
// as a remote item does (four codec calls).
func BenchmarkCodec(b *testing.B) {
	for _, codec := range []Codec{Gob(), JSON()} {
		b.Run(codec.Name(), func(b *testing.B) {
			for range b.N {
				in := job{N: 5}
				data, _ := codec.Marshal(&in)
				var back job
				_ = codec.Unmarshal(data, &back)
				outs := []answer{{5, 25}}
				data, _ = codec.Marshal(&outs)
				var outsBack []answer
				_ = codec.Unmarshal(data, &outsBack)
			}
		})
	}
}
