// Package htgs is the root of a Hybrid Task Graph Scheduler for Go: an
// algorithm becomes a graph of typed tasks that runs on every CPU core (and
// GPU) until it ends by itself. This package holds no code; it documents
// how the module's packages fit together.
//
// # Layers
//
//	applications  stitching    matmul     pats ─────────▶ region
//	              (MIST)       (DGEMM)    (CPU/GPU         (data regions,
//	                 │            │        scheduling)      storage)
//	                 ▼            ▼            ▼
//	building      bookkeeper   memmgr   pipeline ──▶ graph
//	blocks        (state       (memory  (per-device    (build, run,
//	              rules)        edges)   clones)        observe)
//	              cap (CAP tile graphs) ──▶ tiled (out-of-core images)
//	                 │            │            │            │
//	                 ▼            ▼            ▼            ▼
//	runtime       internal/core: queues, workers, termination, errors
//	                 │
//	                 ▼
//	model         task (what a task is)     cuda ──▶ device (CPU hosts, GPUs)
//
// An arrow points from a package to one it builds on. Users write tasks,
// join them with the building blocks, and never see internal/core.
//
//   - task: what a task is: Execute, and the optional Initialize,
//     CanTerminate and Shutdown phases.
//   - graph: build graphs (AddTask, AddFunc, AddGraph, Connect) and run
//     them (Start, Send, Close, Results, Wait), with statistics, DOT
//     pictures and traces.
//   - bookkeeper, memmgr, pipeline: the other HTGS edges and nodes: rule
//     tasks that keep a computation's state, bounded buffer pools, and a
//     subgraph cloned once per device.
//   - internal/core: the machinery under all four: queues, the worker loop,
//     error propagation and termination by quiescence (cycles included).
//   - device and cuda: the compute devices execution pipelines run on;
//     cuda is a stub unless built with -tags cuda.
//   - tiled and cap: images larger than memory (on-disk tiles, pyramidal
//     BigTIFF) and CAP's tile-parallel graphs over them (Pipeline, Gather,
//     Exchange), built on graph and memmgr; stitching/compose writes
//     out-of-core mosaics through tiled.
//   - stitching, matmul, pats, region: applications built on the above;
//     stitching's algorithm is in stitching/align and its tile files and
//     MIST output files in stitching/tileio.
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
