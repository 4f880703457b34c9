// Package htgs is the root of a Hybrid Task Graph Scheduler for Go: an
// algorithm becomes a graph of typed tasks that runs on every CPU core (and
// GPU) until it ends by itself. This package holds no code; it documents
// how the module's packages fit together.
//
// # Layers
//
// Drawn from the imports (go list -deps shows them): a package imports
// only packages on its own floor or below.
//
//	applications   stitching (and stitching/align, tileio, compose, mosaic,
//	               synth)   matmul (and matmul/npy)   pathology ──▶ pats
//	                  │                                 (CPU/GPU scheduling)
//	extensions     cap (CAP tile graphs) ──▶ tiled (out-of-core images)
//	               cluster (tasks run by worker processes) ──▶ region, task
//	               graph/observe (opt-in: HTTP live view, Graphviz, trace)
//	               cuda/cudapool (memmgr pools of GPU memory) ──▶ cuda
//	                  │
//	framework      bookkeeper   memmgr   pipeline ──▶ graph
//	                  │
//	runtime        internal/core: queues, workers, termination, errors
//	                  │
//	model          task (what a task is) ──▶ device (CPU hosts, GPUs)
//	               region (data regions) ──▶ device (and cuda with -tags cuda)
//	               cuda (the CUDA driver binding) ──▶ device
//
// The framework floor and everything below it link only the standard
// library, and neither net/http nor os/exec (api_test.go checks it); a
// program that wants the live view or trace files imports graph/observe,
// as one imports net/http/pprof. Users write tasks, join them with the
// framework's packages, and never see internal/core.
//
// cuda, the CUDA binding (a stub unless built with -tags cuda), is a driver
// beside device and imports no other package of the framework (its tests
// check it); cuda/cudapool, above both, makes its device and pinned memory
// for memmgr's pools.
//
//   - task: what a task is: Execute, and the optional Initialize,
//     CanTerminate and Shutdown phases.
//   - graph: build graphs (AddTask, AddFunc, AddGraph, Connect) and run
//     them (Start, Send, Close, Results, Wait), with statistics, stall
//     reports, DOT text, the topology and the timeline as data.
//   - bookkeeper, memmgr, pipeline: the other HTGS edges and nodes: rule
//     tasks that keep a computation's state, bounded buffer pools, and a
//     subgraph cloned once per device.
//   - internal/core: the machinery under all four: queues, the worker loop,
//     error propagation and termination by quiescence (cycles included).
//   - graph/observe: the live view over HTTP, the picture drawn by
//     Graphviz, and the timeline in the Chrome trace format.
//   - device and cuda: the compute devices execution pipelines run on.
//   - cluster: tasks whose inputs run on worker processes over NATS (a
//     task.Placer, so that statistics and pictures name the workers).
//   - tiled and cap: images larger than memory (on-disk tiles, pyramidal
//     BigTIFF) and CAP's tile-parallel graphs over them (Process, Gather,
//     Exchange), built on graph and memmgr; stitching/compose composes
//     mosaics, and stitching/mosaic plans and writes them (in memory or
//     out of core through tiled).
//   - region: region templates, the data model (dense and sparse arrays,
//     polygon sets) that pats' stages and cluster's workers share.
//   - stitching, matmul, pats, pathology: applications built on the
//     above; stitching's algorithm is in stitching/align and its tile
//     files and MIST output files in stitching/tileio; pathology is the
//     PATS paper's nuclei workload (operations, GPU kernels, tracing) on
//     pats, region and cluster.
//
// The programs in examples/ are flags and wiring over these packages;
// their shared command-line helpers are in examples/internal.
//
// # Where to start
//
// Run the two commands of the README (go run ./examples/stitch, then
// go test ./...). Then read, in order: the task package's documentation,
// the graph package's (and its examples), docs/model.md for the execution
// model, docs/memory-and-pipelines.md for memory edges and pipelines, and
// one application: matmul/graph.go is the smallest complete one, stitching
// the main one. The programs in examples/ show the command-line side.
//
// The module is not published: use it from a checkout, with a replace
// directive or a go.work file (see README.md).
package htgs
