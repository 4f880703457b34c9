// Package pats schedules hybrid operations — operations with a CPU and a
// GPU implementation — on the CPU cores and GPUs of a node, after the
// worker resource manager of Teodoro et al. (performance-aware task
// scheduling, PATS) and HyperFlow's time statistics and depth-first
// preference.
//
// # Model
//
// An application is a hierarchical dataflow. A coarse stage instance, such
// as one tile going through segmentation, expands into a [Flow]: a graph of
// fine-grained operation instances ([Step]s, made with [Add]) whose
// dependencies follow from the data ([Data]) each declares it reads and
// writes. Each instance is an instance of a hybrid operation ([Op]): one
// logical operation with an implementation per device kind and an estimated
// GPU-vs-CPU speedup.
//
// A [Manager] owns one worker per processing unit ([Unit]: a CPU core or a
// GPU) and runs the ready instances of every flow submitted to it. When a
// worker is idle the manager picks a ready instance for it according to the
// [Config]:
//
//   - FCFS: the instance that became ready first.
//   - PATS: the ready queue is ordered by estimated speedup; an idle CPU core
//     takes the lowest, an idle GPU the highest. Only the order of the
//     estimates matters.
//   - Locality: after an operation on a GPU, prefer a ready operation reading
//     data already in that GPU's memory; with PATS, only if its speedup Sd
//     satisfies Sd >= Sq * (1 - TransferImpact), Sq being the best speedup
//     of the others. The GPU keeps its copies for later readers, within
//     half its memory.
//   - TransferAware: PATS ranks by an effective speedup that counts the
//     data a GPU placement moves and the inputs still to be staged,
//     (C + S) / (G + X + S): the CPU time saved per unit of GPU time.
//   - Prefetch: a GPU pipelines operations through upload, process and
//     download, overlapping transfers with computation; storage inputs of a
//     flow are staged as soon as the flow is admitted.
//   - StageAhead: storage inputs are staged from admission, as with
//     Prefetch, without its pipelining.
//   - Learn: speedups are learned online as the ratio of the mean CPU and
//     GPU compute times of each operation (time statistics), so estimates
//     need not be given.
//   - DepthFirst: ties go to the oldest flow, which bounds the memory held
//     by partially processed stage instances.
//   - Window: at most this many flows are in progress; a larger window gives
//     PATS more choice.
//
// An application can also supply its own policy, a [device.Chooser] set
// as Config.Chooser: given an idle unit and the ready operations it can
// run, it returns the one to run. FCFS and PATS implement it as well, and
// since graph.AddVariants takes the same interface (graph.Choose), they
// also schedule a graph task with a CPU and a GPU implementation: with
// PATS its GPU implementation takes the waiting values of the highest
// estimated speedup, its CPU one those of the lowest.
//
// A stage instance can create further instances at run time, depending on
// its results: [Flow.Spawn] gives a flow a function called when it has
// completed, which returns the flows to run next (features only for the
// tiles where nuclei were found, say). They count in the window, are
// admitted before later submissions, and the submitted flow's [Job]
// covers them.
//
// A [Task] plugs the manager into a task graph: each copy of the task
// expands its input into a flow and waits for it, so the number of copies
// is the window of stage instances in progress.
//
// # Simulation
//
// Without GPUs, [Sim] units emulate CPU cores and GPUs in real time: they run
// the implementation for their kind on the host and wait for the modelled
// [Cost] (and transfer time) of each instance. [Simulate] runs flows in
// virtual time on a [Machine] with the same scheduling code: it is
// deterministic and runs thousands of operations in milliseconds, which is
// what the experiments in docs/pats use.
package pats
