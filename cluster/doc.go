// Package cluster runs task copies on worker processes, on this machine or
// others, through NATS JetStream: the Manager–Worker model of Region
// Templates, on a message broker instead of a home-made runtime.
//
// # The graph's side
//
// A [Client] connects a process that runs graphs to a NATS server (a
// nats-server executable run by [StartServerProcess], the embedded one of
// package natsserver, or a real cluster). A [Remote] is a task
// whose Execute runs elsewhere; it sits in a graph like any task:
//
//	client, err := cluster.NewClient(ctx, nc)
//	r, err := cluster.NewRemote[Tile, Features](client, "features", cluster.Version("v2"))
//	feats := graph.AddTask(g, "features", 64, r.Task)
//
// Each input is encoded with the task's [Codec] ([Gob] by default) and
// published to the namespace's work stream, a JetStream work queue, on the
// subject of the task's name, with a message ID so that a retried publish is
// stored once. The Execute that sent it waits for the result, which comes
// back on the client's own result subject, and emits the outputs
// downstream. The node's threads are therefore the number of inputs the
// graph keeps in flight; they cost a goroutine each.
//
// # The workers' side
//
// A worker process is a normal Go program that registers named task
// implementations and serves them:
//
//	w := cluster.NewWorker(cluster.WorkerName("node7"))
//	cluster.Handle(w, "features", newFeatures, cluster.Version("v2"), cluster.Copies(8))
//	err := w.Serve(ctx, nc)
//
// All workers of a task share one durable pull consumer, so each input
// goes to one worker. A worker pulls an input only when one of its copies
// is free: its Copies are its window, the demand-driven window of Region
// Templates, and the consumer's [MaxAckPending] bounds the window of all
// workers together. Copies keep the task phases: Initialize and Shutdown run
// once per copy, Execute once per input, and the outputs a copy emits go
// back together when its Execute returns.
//
// # Direct requests
//
// A small input (up to [DirectLimit], 64 KiB by default) skips the streams
// while the task has a free worker copy: while fewer of the Remote's inputs
// are in flight than the live workers have copies of the task (the worker
// directory says how many), the input goes as a core NATS request on the
// task's call subject, to the queue group of its workers, and the result
// comes back on the client's own reply subject, with no stream in
// between: two crossings of the server each way instead of two through
// JetStream each way. A worker hands the request to a free copy, or
// answers "busy"; a busy answer, no worker listening (the server's 503),
// or a worker silent for longer than the task's AckWait (while a direct
// request runs, its worker reports every third of it: silence means it
// died, or the server was lost) sends the input through the work stream,
// which redelivers it from then on. The first result counts, a later one
// is dropped. Under load, inputs queue in the work stream as before.
//
// # Pipeline clones on workers
//
// Inside an execution pipeline, a Remote made with [PerClone] sends each
// input to the workers serving its clone (task.Info.Clone), registered
// with [Clone]: the decomposition rule routes inputs to clones as usual,
// and each clone, with the state its worker copies keep, runs on its own
// workers — a band of rows per node instead of per GPU.
//
// # Large payloads
//
// A payload (input or outputs) larger than [InlineLimit] is put in the
// namespace's JetStream Object Store and the message carries its name; the
// receiver reads it and the client deletes it. Storage can be memory (the
// default) or files ([FileStorage]) and replicated ([Replicas]).
//
// # Faults
//
// A worker acknowledges an input only after its result is stored in the
// result stream. A worker that dies (SIGKILL, a lost host) leaves its
// inputs unacknowledged, and JetStream delivers them to another worker once
// their [AckWait] has passed; while a task runs, its worker reports progress
// every third of the ack wait, so a long task keeps its input. A result is
// published with the input's message ID: the stream drops a second result
// for the same input (from a worker that died after storing its result,
// before acknowledging), and the client drops any result nobody waits for,
// so each input counts once downstream. An input that kills every worker
// that takes it is given up after [MaxDeliver] deliveries, and its Execute
// fails with [ErrPoison].
//
// A program that starts its workers itself hands them to a [Supervisor]:
// it reports a worker process that dies (name, pid, exit status), restarts
// it, and fails the run only when no worker has served the task for its
// [WorkerTimeout]; the workers serve under [Supervised], which ends when
// their supervisor goes.
//
// A server restart loses nothing with [FileStorage]: clients and workers
// reconnect, a client publishes an unacknowledged input again under the
// same message ID, and a worker gives back an input whose result it could
// not store. With three servers ([ServerCluster] on one machine, or a real
// cluster) and [Replicas](3), losing one server does not stop a run.
//
// # Global data regions
//
// [Regions] is a region storage on JetStream (dense regions in chunks,
// sparse regions and polygon sets as objects), which every worker opens to
// read only the ROI it needs and write its outputs back; stages use it as
// they use region.Memory or region.Disk.
//
// # Errors and security
//
// A task's error or panic on a worker comes back as a [*RemoteError] naming
// the task, the worker and its host, and fails the graph like a local
// task's error. A worker refuses, logs and answers with an error a message
// whose protocol, task version or codec differs from its registration
// ([ErrMismatch]) or that does not decode ([ErrMalformed]); a foreign
// message without a valid reply subject is logged and dropped. No message
// crashes a worker. A Remote whose task no live worker serves, while other
// workers are registered, fails with [ErrNoWorker] listing what they serve.
//
// The embedded server listens on 127.0.0.1 only and requires a token
// generated at start; [Server.AuthURL] is the one string a local worker
// needs. Against a real cluster, connect with nats.Connect and the usual
// NATS credentials, NKeys or TLS options: the package takes a *nats.Conn and
// never sees them.
package cluster
