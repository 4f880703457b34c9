// Package core is the machinery behind the graph, bookkeeper, memmgr and
// pipeline packages: queues, fan-out outlets, the run state with error
// propagation and quiescence detection, blueprints and their instantiation,
// and the worker loop that runs task copies. Nothing here is public API:
// the public packages wrap it without naming it in their signatures (the
// root api_test.go checks go doc for that).
//
// # Files
//
//   - doc.go: this map.
//   - blueprint.go: Blueprint (specs and edges of one graph), Spec, Kind,
//     PortRef and PortHandle (what the public Port and node types embed),
//     Connect, validation (CheckOutputs), Scope (where a blueprint is
//     instantiated) and Instantiate.
//   - handle.go: Handle/Owner (how *graph.Graph reaches its blueprint),
//     GraphSpec (nested graphs) and Group (an instance made of instances).
//   - node.go: task specs (TaskSpec), the node runtime shared by tasks and
//     bookkeepers (copies, the worker loop, Initialize/Execute/Shutdown,
//     panics, task.Error), MakeCopies.
//   - bookkeeper.go: BookkeeperSpec, AddRule and the rule runtime.
//   - multi.go: MultiSpec, tasks of several input types: one queue of
//     (input, value) items, a sink per input, one set of copies.
//   - variants.go: VariantsSpec, tasks with several implementations bound
//     to devices, and the chooser that gives each value to one of them
//     from the execution times it learnt (per implementation).
//   - pipeline.go: PipelineSpec, the router (decomposition rule) and clones.
//   - inbox.go: Inbox, the FIFO queue of a node (bounded or not, counted
//     producers, close and wake-up), or a priority queue (SetPriority).
//   - outlet.go: Outlet, the fan-out of a producer port to its consumers.
//   - run.go: Run, one execution: context, first error (and when the run
//     stopped), quiescence of cyclic graphs, OnFinish hooks, Watcher, Wait
//     (and AbandonAfter, which lets it give up on copies that ignore
//     their context: the hooks then run when the last of them returns).
//   - shape.go: the cached shape of a blueprint started many times (copy
//     contexts, task.Info), kept by the blueprint itself.
//   - reuse.go: Frame, the instantiated form of a blueprint that
//     graph.Graph.Run keeps between runs (queues and outlets reset, task
//     copies made anew, their goroutines parked instead of ended), the
//     blueprint's pool of idle frames and its release.
//   - stats.go: always-on counters per copy (CopyStats, State), NodeStats
//     and PoolStats.
//   - topology.go: TopoNode/TopoEdge, the instantiated graph for pictures.
//   - trace.go: the optional timeline (Trace, Track, Slice).
//
// # Lifecycle
//
// A public builder adds a Spec to a Blueprint (graph.AddTask → TaskSpec,
// bookkeeper.New → NewBookkeeperSpec, pipeline.New → PipelineSpec,
// graph.AddGraph → GraphSpec, memmgr.New → a spec of its own) and records
// edges with Connect. graph.Start makes a Run and a root Scope and calls
// Instantiate, which calls each Spec's Build(Scope) to get an Instance (its
// input sink, its output outlets), wires the edges, and validates. Then
// every Instance is Launched (goroutines start), the Run counts them down,
// and Wait runs the OnFinish hooks (pools free their memory) and returns
// the first error.
//
// # Reused runs
//
// graph.Graph.Run (not Start, whose Runtime the caller may read after
// Wait) keeps what it instantiated in a Frame when the blueprint is made
// of plain tasks only, and the next Run resets the frame instead of
// instantiating the blueprint: queues are emptied, producer counts set
// back to the wiring's, counters zeroed, and the task copies made anew by
// their factories. A copy's goroutine does not end with its node: after
// its Shutdown and the run's accounting it parks on its queue's condition
// variable (node.await) until the queue's generation moves on — the next
// run's Launch — and then starts that run when the queue wakes it (its
// first value, its close, the run's stop), or at once if its task has an
// Initialize. So Initialize and Shutdown still run once per copy and run,
// on fresh copies; what a Run no longer pays is the allocation of the
// nodes and the start and end of their goroutines. The copies of a reused
// run are counted in Run.live only, not in its WaitGroup (Run.noWG): Wait
// waits for finished, which the last of them closes once it has done its
// accounting; after that it only parks.
//
// The Run itself is renewed in place (Run.Renew) rather than allocated
// again: nothing refers to a finished run of a frame once its Wait has
// returned and the frame was given back.
//
// Hand-off. In a run of a kept frame, a copy whose last batch is being
// executed (its queue closed and empty for good) and that has no Shutdown
// does not wake a consumer whose single copy, without Initialize or
// Shutdown, is parked between runs — its output's first consumer, and the
// others whose last run spent at most cheapExecute in Execute: the value
// is queued and the inbox marked deferred (Inbox.push, CopyStats.last).
// When the producer's copy has done its run and its node's accounting
// (which closes the consumers' queues if it was their last producer),
// node.exit calls Inbox.handOff on each: a deferred consumer whose queue
// is closed (its run cannot wait for input) is handed over, the others
// are woken. The producer's goroutine then claims each consumer handed
// over (Inbox.claim, Inbox.claimedGen), if nothing woke it meanwhile, and
// runs its run (node.runClaimed), depth first with the consumers that run
// hands over in turn: a chain runs on one goroutine, and so does a tree of
// brief tasks. A second value to a deferred consumer, the run's stop, a
// copy ending in runtime.Goexit (handOff without claim), the frame's
// nudge timer NudgeAfter after a run's first deferral and the stall
// watcher after a tick without progress (Run.WakeDeferred) all wake it —
// so a task that waits inside Execute for a consumer or sibling it
// emitted to is delayed, not left waiting. A claimed run is the copy's
// run as any other (its counters, its errors and panics named by its
// task, its profiler labels set on the goroutine that runs it); the copy's
// own goroutine stays parked until the next run's Launch moves the
// queue's generation on. Outside a run of a frame (graph.Start, streaming)
// a push reads the inbox's hand-off fields and writes none: they may
// share a cache line with the consumer's copy, and a store at each value
// (clearing deferred) made streaming through trees 5-7% slower.
//
// A frame goes back to its blueprint's pool only when every goroutine of
// its run returned: a run that Wait gave up on (AbandonAfter) or a copy
// that ended in runtime.Goexit makes the frame end its goroutines instead.
// An idle frame ends its goroutines after FrameIdle (graph.Graph.Release
// does it at once), so that tests checking for leaked goroutines see none
// shortly after the last Run. Concurrent Runs of one graph each take a
// frame of their own (at most maxFrames are kept).
//
// # Node kinds: one extension style
//
// Every node kind plugs in the same way: a Spec whose Build(*Scope)
// returns an Instance. Where its runtime code lives follows one rule: a
// kind whose runtime drives task copies through the worker loop (tasks,
// bookkeepers) or re-instantiates blueprints (nested graphs, pipelines)
// lives here, because it uses the loop's internals; a kind that only needs
// the Scope (memmgr's pools: Scope.Set to publish the instance that tasks
// find through their context, Run.AddPool and Run.OnFinish) lives in its
// own package behind Spec.Build. A future remote node kind (clones on other
// machines, over NATS for instance) is of the second sort: its package
// makes a Spec whose Build returns an Instance with a local Sink (sending
// values out) and a local Outlet (receiving results), registers a finish
// hook with Run.OnFinish, and needs nothing else from core.
//
// # Layers
//
// The public packages layer as task → graph → bookkeeper, memmgr,
// pipeline, with core under graph. Two pieces of knowledge go upwards on
// purpose: task.Info carries the pipeline clone and device, because a task
// copy must know which device it is bound to in its Initialize; and core
// and graph know memory pools in their statistics (CopyStats.
// BeginMemoryWait, PoolStats, graph.PoolStats), because a copy blocked in
// a pool is a state of the copy, which stall reports must name, and a
// pool's levels belong in the same snapshot. memmgr supplies that data
// through hooks (Run.AddPool with PoolStats' functions, the copy's
// CopyStats from its context): core never calls memmgr.
package core
