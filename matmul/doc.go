// Package matmul multiplies matrices on an HTGS task graph, block by block,
// in memory or out of core: the block DGEMM of the HTGS paper (section 4,
// Figs. 6-7), whose reads and writes overlap the computation.
//
// # The graph
//
// C = A·B with A of m x k and B of k x n is cut into square blocks of
// Config.BlockSize (smaller at the edges); MB, KB and NB count the blocks
// along m, k and n, and C(i,j) = Σ_l A(i,l)·B(l,j).
//
//	input (block loads) ─> distribute ─┬─> load A ─┐
//	                      (bookkeeper) └─> load B ─┴─> pair ─> multiply ─> accumulate bookkeeper ─> store C ─> output (blocks stored)
//	                                                  (bookkeeper)  (T copies)       │        ▲
//	                                                                                 └> accumulate (T/2 copies)
//
// The nodes:
//
//   - distribute (BK1) routes each load request to the loader of its
//     operand.
//   - load A, load B read a block into a buffer of their memory pool (or,
//     for a *Dense operand, make a view of it without copying).
//   - pair (BK2) keeps the loaded blocks and emits A(i,l)·B(l,j) as soon as
//     both are loaded, in the order of the schedule (below).
//   - multiply runs the Kernel on one block pair per call; contribution
//     l = 0 of a *Dense result is computed in place, the others into
//     buffers of the partial-product pool.
//   - the accumulate bookkeeper (BK3) pairs two partial sums of the same
//     block of C for the accumulate task, which adds one into the other and
//     sends the sum back: a cycle that ends, by quiescence, when every
//     block of C has its KB contributions. Its second rule passes complete
//     blocks to store C, which writes them to the Sink and releases them.
//
// The Hadamard (element-wise) product uses the same distribute and load
// tasks with a simpler pairing and no accumulation (see [Hadamard]).
//
// # Kernels
//
// A [Kernel] makes one [Multiplier] per copy of the multiply task; a
// multiplier may implement task.Initializer and task.Shutdowner to hold a
// per-thread resource (a GPU handle). Kernels are looked up by name
// ([LookupKernel]); only "cuda" needs a build tag to be compiled in:
//
//   - "gonum" (pure Go; the fallback of "auto"). gonum's Dgemm (blas/gonum, and
//     blas64.Gemm on top of it) is itself parallel: when C has at least
//     four 64x64 blocks it starts a goroutine per block, up to GOMAXPROCS
//     at a time. Inside a thread pool of T copies that oversubscribes the
//     cores, so the kernel calls Dgemm on 64x128 tiles (two 64-blocks,
//     below gonum's threshold), which run serially on the calling
//     goroutine; TestGonumKernelIsSerial checks, with the runtime's count
//     of created goroutines, that a block product starts none. The 64x128
//     tiles with a k-depth of 256 also run faster than gonum's own 64x64x64
//     sub-blocks (about 9.5 against 8 GFLOP/s on one core here).
//   - "openblas" (every build, cgo or not; Debian's libopenblas0-pthread at
//     run time): one cblas_dgemm per block, single-threaded (the task
//     copies are the parallelism) unless Config.BLASThreads says otherwise;
//     the library's thread count is process-wide, set to 1 at load and by
//     each multiplier before its call. By default, with operands in
//     memory, the product is one block multiplied by one call on every CPU
//     (Config.BLASThreads): what OpenBLAS runs fastest. "auto", the default (nil Config.Kernel),
//     is this kernel when the library loads and "gonum" otherwise. The
//     library is loaded at first use through purego
//     (dlopen without cgo), not linked: OpenBLAS chooses its CPU
//     kernels in a constructor that runs when it is loaded, reading
//     OPENBLAS_CORETYPE, and a linked library is initialized by the
//     dynamic loader before any code of the program runs. Unless
//     OPENBLAS_CORETYPE is already set, the loader sets it (in Go's and in
//     the C library's environment) from the CPU's features first (SkylakeX with AVX-512 F/CD/BW/DQ/VL, Haswell with
//     AVX2 and FMA), which is what OpenBLAS detects on CPUs it knows: on
//     CPU models it does not know it falls back to its Prescott (SSE3)
//     kernels, several times slower (Debian 12's 0.3.21 does recognize the
//     development VM's CPU, family 6 model 167, as SkylakeX by itself).
//     Set OPENBLAS_CORETYPE yourself to override the choice; the kernel's
//     String (and the program's output) reports the core in use.
//   - "cuda" (build tag cuda; see package cuda): the product runs on every
//     GPU of the machine, in the offload graph below.
//
// # GPUs: the offload graph
//
// With the cuda kernel the loaders and the pairing bookkeeper stay on the
// host, and the products go to an execution pipeline with one clone per GPU:
//
//	pair ─> devices pipeline ──────────────────────────────────────────────> accumulate bookkeeper ...
//	        [clone d on GPU d: copy in ─> multiply (C += A·B on the GPU) ─> copy out (2 copies)]
//	             │ "A on device", "B on device",     │ "C on device"      │ "staging out"
//	             │ "staging in" (pinned)
//
// Row panels give GPU d the block rows i with i mod GPUs = d (column panels
// the block columns): the resident operand is split among the GPUs and the
// streamed one goes to each of them; all the products of a block of C run
// on one GPU. The copy-in task packs a block into a pinned staging buffer
// (several goroutines copy bands of rows, with non-temporal stores) the
// first time one of the GPU's products needs it, in slabs of rows (4 by
// default), queueing each slab's upload on a copy stream as soon as it is
// packed, into a device buffer got with the number of that GPU's products
// that use it as release count, so a block crosses the bus once per load
// and GPU however many products use it. The multiply task queues the products on a compute
// stream with cuBLAS, adding into a device block of C (beta = 1 after the
// first) that stays until its last product; the copy-out task then
// downloads it once, through pinned staging, into the result, unpacking
// each slab while the next one is on the bus. Every buffer
// carries an event: the compute stream waits for a block's upload, the copy
// stream for the last product that read a buffer before refilling it, so
// uploads for the next products run while the current ones compute, and
// no task waits for the GPU but to refill a staging buffer or download C.
// Matrices page-locked with PinHost skip the staging: their blocks go
// straight by 2-D copies. For ordinary memory HTGS_MATMUL_HOSTCOPY picks
// staging (the default), register (page-lock A, B and C in chunks before
// the product) or pipelined (page-lock the chunks while the product runs,
// staging the blocks not yet locked); a block lying across several chunks
// is copied in one piece per chunk, since a copy may not span two
// registrations (docs/matmul.md has the measurements). HTGS_MATMUL_CHUNK
// stages through a ring of small pinned buffers instead of buffers of a
// block (chunk mode), HTGS_MATMUL_SLABFIRST runs a one-panel plan slab by
// slab along the inner dimension (Plan.SlabFirst), HTGS_MATMUL_SLABLEAD=N
// only its first N block columns, the last column's blocks of C one by one
// (Plan.SlabLead; page-locked A and B take a lead of 2 by default, else
// slab first), and HTGS_MATMUL_TRACE=DIR writes a trace of every copy and product as the
// devices timed them (offload_tuning.go lists the knobs).
// Config.DeviceMemory bounds the device pools per GPU; the plan then picks
// the traversal, among those that fit both memory budgets, that reads and
// uploads the fewest bytes (Plan.UploadBytes; Plan.DownloadBytes is |C|,
// and Plan.BusBytes compares both with |A| + |B| + |C|), and
// Report.UploadBytes, DownloadBytes and DeviceBusy tell what the run did.
// The graph is tested on every machine with host memory and goroutines
// posing as GPUs and streams.
//
// # Out of core: traversal, memory and I/O volume
//
// Operands that are not *Dense are read block by block (an *npy.File reads
// with pread), and a result that is not *Dense is written block by block
// (*npy.Writer), so the matrices may be larger than memory. Memory pools
// bound the blocks alive; Config.MemoryBudget bounds the pools, and the
// plan ([Plan]) picks the traversal with the fewest bytes read that fits:
//
//   - RowPanels: a panel of P block rows of A stays in memory (P·KB
//     blocks, plus P for the next panel's first blocks) while B streams
//     past it, column of blocks after column of blocks; each A block is
//     read once and used NB times, B is read once per panel. Bytes read:
//     8·(m·k + ⌈MB/P⌉·k·n).
//   - ColumnPanels: the transpose; bytes read 8·(k·n + ⌈NB/Q⌉·m·k).
//   - Streamed, when not even one block row fits: every product reads its
//     two blocks; bytes read 8·(m·k·NB + k·n·MB).
//
// C is written once, 8·m·n bytes. With no budget (or *Dense operands) A
// stays whole: each matrix is read once. The streamed operand's pool holds
// max(4, 2T) blocks, enough for the loader to read ahead of T multiply
// copies.
//
// Partial products need memory too, and a careless order deadlocks: if
// every partial buffer holds an unfinished sum while the products that
// would finish them wait for a buffer, nothing moves. The pairing
// bookkeeper therefore emits products strictly in schedule order (panel,
// then j, l, i for row panels), the multiply copies take them in FIFO
// order, and the loaders (one copy each) take pool buffers in request
// order. Then at most P + T blocks of C are open at once (the panel's
// blocks at the schedule's frontier plus one per product still running
// behind it), each holding one buffer once the accumulations in flight
// drain (which needs no new buffer), and a pool of P + 2T + 2 partial
// buffers always has one for a waiting product. TestPlanSchedules checks
// the schedule, the release counts and the absence of stalls on random
// shapes and budgets.
//
// # Performance
//
// The speedups measured against single library calls, in memory and out of
// core, and how to reproduce them, are in docs/matmul.md.
package matmul
