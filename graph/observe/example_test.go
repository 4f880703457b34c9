package observe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/graph/observe"
	"github.com/gohtgs/htgs/task"
)

// doubler is a one-task graph for the examples.
func doubler() *graph.Graph[int, int] {
	g := graph.New[int, int]("double")
	d := graph.AddFunc(g, "double", 1, func(_ context.Context, v int, out task.Emitter[int]) error {
		return out.Emit(2 * v)
	})
	graph.Connect(g.Input(), d)
	graph.Connect(d, g.Output())
	return g
}

// Serve a run's live view: mount the handler on any mux (a program would
// use http.ListenAndServe; here a test server stands in). A browser at
// the URL gets the live page; ?format=json the snapshot, graph.Stats.
func ExampleHandler() {
	rt, err := doubler().Start(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	mux.Handle("/debug/htgs", observe.Handler(rt.Execution))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for i := range 3 {
		rt.Send(i)
	}
	rt.Close()
	fmt.Println(slices.Sorted(rt.Results()))
	if err := rt.Wait(); err != nil {
		fmt.Println(err)
		return
	}
	resp, err := srv.Client().Get(srv.URL + "/debug/htgs?format=json")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	var st graph.Stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range st.Tasks {
		fmt.Printf("%s %q: in %d, out %d\n", t.Kind, t.Name, t.ItemsIn, t.ItemsOut)
	}
	// Output:
	// [0 2 4]
	// task "double": in 3, out 3
}

// Record a run's timeline with graph.WithTrace and write it, after Wait,
// for Perfetto or chrome://tracing.
func ExampleWriteTrace() {
	rt, err := doubler().Start(context.Background(), graph.WithTrace())
	if err != nil {
		fmt.Println(err)
		return
	}
	for i := range 3 {
		rt.Send(i)
	}
	rt.Close()
	for range rt.Results() {
	}
	if err := rt.Wait(); err != nil {
		fmt.Println(err)
		return
	}
	var b bytes.Buffer // a file, in a program
	if err := observe.WriteTrace(&b, rt.Execution); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(strings.Count(b.String(), `"name":"execute","cat":"task","ph":"X"`), "executes traced")
	// Output:
	// 3 executes traced
}
