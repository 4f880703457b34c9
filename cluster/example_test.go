package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/gohtgs/htgs/cluster"
	"github.com/gohtgs/htgs/cluster/natsserver"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/region"
	"github.com/gohtgs/htgs/task"
)

// newUpper is the task a worker serves: it upper-cases words.
func newUpper() task.Task[string, string] {
	return task.Map(func(_ context.Context, s string) (string, error) { return strings.ToUpper(s), nil })
}

// A graph with a remote task, served by a worker. Here the worker runs in
// the same process for brevity; a worker process runs the same Handle and
// Serve calls after connecting to the server's AuthURL.
func Example() {
	srv, err := natsserver.Start()
	if err != nil {
		panic(err)
	}
	defer srv.Shutdown()

	// The worker's side.
	wconn, err := srv.Connect()
	if err != nil {
		panic(err)
	}
	defer wconn.Close()
	w := cluster.NewWorker(cluster.WorkerName("worker-1"))
	if err := cluster.Handle(w, "upper", newUpper, cluster.Copies(2), cluster.Version("v1")); err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- w.Serve(ctx, wconn) }()
	defer func() { stop(); <-served }()

	// The graph's side.
	conn, err := srv.Connect()
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	client, err := cluster.NewClient(context.Background(), conn)
	if err != nil {
		panic(err)
	}
	defer client.Close()
	upper, err := cluster.NewRemote[string, string](client, "upper", cluster.Version("v1"))
	if err != nil {
		panic(err)
	}
	g := graph.New[string, string]("shout")
	node := graph.AddTask(g, "upper", 8, upper.Task) // 8 inputs in flight
	graph.Connect(g.Input(), node)
	graph.Connect(node, g.Output())

	var out []string
	err = g.Run(context.Background(), slices.Values([]string{"tiles", "regions", "nodes"}), func(s string) error {
		out = append(out, s)
		return nil
	})
	if err != nil {
		panic(err)
	}
	slices.Sort(out)
	fmt.Println(out, client.Stats().ByWorker["worker-1"])
	// Output: [NODES REGIONS TILES] 3
}

// Call runs one input on a worker outside any graph.
func ExampleRemote_Call() {
	srv, err := natsserver.Start()
	if err != nil {
		panic(err)
	}
	defer srv.Shutdown()
	conn, err := srv.Connect()
	if err != nil {
		panic(err)
	}
	defer conn.Close()

	w := cluster.NewWorker()
	split := func() task.Task[string, string] {
		return task.Func[string, string](func(_ context.Context, s string, out task.Emitter[string]) error {
			for _, f := range strings.Fields(s) {
				if err := out.Emit(f); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := cluster.Handle(w, "split", split, cluster.WithCodec(cluster.JSON())); err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- w.Serve(ctx, conn) }()
	defer func() { stop(); <-served }()

	client, err := cluster.NewClient(context.Background(), conn)
	if err != nil {
		panic(err)
	}
	defer client.Close()
	r, err := cluster.NewRemote[string, string](client, "split", cluster.WithCodec(cluster.JSON()))
	if err != nil {
		panic(err)
	}
	words, err := r.Call(context.Background(), "one worker, many outputs")
	fmt.Println(words, err)
	// Output: [one worker, many outputs] <nil>
}

// A region written by one process and read back, ROI only, by another
// (here: two connections).
func ExampleNewRegions() {
	srv, err := natsserver.Start()
	if err != nil {
		panic(err)
	}
	defer srv.Shutdown()
	ctx := context.Background()
	var conns []*nats.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	open := func() *cluster.Regions {
		conn, err := srv.Connect()
		if err != nil {
			panic(err)
		}
		conns = append(conns, conn)
		r, err := cluster.NewRegions(ctx, conn, cluster.RegionChunk(64, 64, 1))
		if err != nil {
			panic(err)
		}
		return r
	}
	manager, worker := open(), open()

	m := region.Meta{ID: region.ID{Name: "slide::mask", Type: region.Dense2D}, Elem: region.Uint8, Bounds: region.Rect(0, 0, 256, 256)}
	tile := make([]byte, 64*64)
	for i := range tile {
		tile[i] = 7
	}
	if err := manager.Write(ctx, m, region.Rect(64, 64, 128, 128), tile); err != nil {
		panic(err)
	}
	roi := make([]byte, 4) // a 2×2 ROI across the tile's corner
	if err := worker.Read(ctx, m.ID, region.Rect(63, 63, 65, 65), roi); err != nil {
		panic(err)
	}
	fmt.Println(roi)
	// Output: [0 0 0 7]
}
