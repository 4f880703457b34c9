package matmul

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"unsafe"
)

// offloadTuning holds the knobs of the offload graph that measurements on
// a GPU decide. Each has a default and an environment variable that
// overrides it for a run (read when Multiply plans the product), so that
// one session on a GPU machine can compare them:
//
//	HTGS_MATMUL_PACK=N      goroutines per staging copy (pack and unpack);
//	                        default min(16, GOMAXPROCS/devices)
//	HTGS_MATMUL_STAGING=N   pinned staging buffers of each copy-in task
//	                        (default 3)
//	HTGS_MATMUL_COPYOUT=N   copies of each device's copy-out task, and
//	                        staging buffers for downloads (default 2)
//	HTGS_MATMUL_SLABS=N     bands of rows each staged block is packed and
//	                        uploaded in (downloaded and unpacked), each
//	                        band's copy on the bus while the next band is
//	                        packed (default defaultSlabs, 4)
//	HTGS_MATMUL_SLABMIN=N   fewest elements in a band (default 1<<20: 8 MiB)
//	HTGS_MATMUL_STREAM=0|1  pack and unpack with non-temporal stores (the
//	                        destination's lines are not read first: a
//	                        third less memory traffic; default
//	                        defaultStream, on, but for the packing in
//	                        chunk mode, whose chunks should stay in the
//	                        cache)
//	HTGS_MATMUL_CHUNK=K     chunk mode: stage blocks through a ring of
//	                        pinned buffers of K KiB (rounded to whole rows
//	                        of a block) instead of buffers of a block, a
//	                        band of rows per buffer, so that a band is still
//	                        in the host's cache when the bus reads it (or
//	                        when it is unpacked); the copies then store
//	                        through the cache unless HTGS_MATMUL_STREAM=1
//	                        (the unpacking into C streams, as without
//	                        chunks). HTGS_MATMUL_STAGING, SLABS and SLABMIN do not
//	                        apply. Default 0: off
//	HTGS_MATMUL_RING=N      buffers in each copy task's ring in chunk mode
//	                        (default defaultRing, 4)
//	HTGS_MATMUL_HOSTCOPY=S  how the blocks of ordinary *Dense operands move
//	                        (see hostCopy): staging (pack into pinned
//	                        buffers), register (page-lock A, B and C with
//	                        cuMemHostRegister before the product, in chunks
//	                        on parallel goroutines, then 2-D copies straight
//	                        between them and the devices: no packing, no
//	                        staging) or pipelined (register the chunks while
//	                        the product runs; blocks not yet registered go
//	                        through staging). Default: defaultHostCopy.
//	                        Matrices pinned with PinHost are copied straight
//	                        whatever it says.
//	HTGS_MATMUL_REGISTER=1  the same as HTGS_MATMUL_HOSTCOPY=register
//	HTGS_MATMUL_PINCHUNK=K  KiB of host memory per registration (default
//	                        65536: 64 MiB)
//	HTGS_MATMUL_PINWORKERS=N goroutines registering chunks (default: the
//	                        CPUs with register, a quarter of them, at least
//	                        2, with pipelined, which packs at the same time)
//	HTGS_MATMUL_BLOCKSYNC=1 host threads waiting for the GPU (for a
//	                        staging buffer, a download, the busy meter)
//	                        sleep instead of spinning on a core (cuda
//	                        kernel; default 0)
//	HTGS_MATMUL_SPIN=US     a copy task waiting for the GPU (a staging
//	                        buffer free, a download done) polls its event
//	                        for up to US microseconds before it waits in
//	                        the driver (cuda.Event.Wait), keeping its P:
//	                        in the driver's call the Go scheduler may give
//	                        the P to a packer and the task waits for one
//	                        afterwards, as pathology's GPU worker did
//	                        (docs/pats/hardware.md, seventh session).
//	                        Default 0: off until a GPU has measured it
//	HTGS_MATMUL_SLABFIRST=S the slab-first order (Plan.SlabFirst): 1
//	                        whenever the device memory allows, pinned when
//	                        A and B are page-locked too (the default), 0
//	                        never. When named, it wins over the slab lead
//	HTGS_MATMUL_SLABLEAD=N  the first N streamed block columns slab first,
//	                        the rest in the panel order, the last column's
//	                        blocks of C one after another (Plan.SlabLead)
//	                        where the device memory allows; 0: off. By
//	                        default 2 when A and B are page-locked (tried
//	                        before slab first, which takes the plans the
//	                        lead does not apply to), else off
//	HTGS_MATMUL_TRACE=DIR   time every copy and product on the devices
//	                        and write a trace and its summary to DIR for
//	                        each product (offload_trace.go; for diagnosis:
//	                        the stamps cost a little)
//	HTGS_MATMUL_DEVCACHE=0  free device blocks at the end of each product
//	                        instead of keeping them for the next (the cuda
//	                        kernel keeps them by default)
type offloadTuning struct {
	packWorkers  int
	stagingIn    int
	copyOut      int
	slabs        int  // bands per staged block
	slabMin      int  // fewest elements in a band
	stream       bool // packing with non-temporal stores
	unpackStream bool // unpacking with non-temporal stores
	chunk        int  // elements per staging buffer in chunk mode (0: off)
	ring         int  // staging buffers per copy task in chunk mode
	hostCopy     hostCopy
	pinChunk     int64 // bytes
	pinWorkers   int
	devCache     bool
	trace        string // folder of the device traces ("": none)
	slabFirst    string // HTGS_MATMUL_SLABFIRST: "1", "pinned", "0" (never), "" (the default: pinned)
	slabLead     int    // HTGS_MATMUL_SLABLEAD: columns slab first (0: off, -1: the default)
}

// defaultSlabs is the number of bands a staged block is copied in, and
// defaultSlabMin the fewest elements of a band (smaller DMA copies waste
// the bus); defaultStream whether the staging copies store
// non-temporally.
//
// Measured on an H200 (16 cores) from ordinary memory, GPU call 3 of issue
// 35: n = 16384, 4096-blocks: 34.8 TFLOP/s as before, 36.2 streaming, 37.1
// in 4 bands, 41.9 / 41.3 / 39.0 in 4 / 8 / 16 bands streaming; n = 8192,
// 4096-blocks: 17.4, 19.6 streaming, 23.3 / 23.6 in 4 / 8 bands streaming.
const (
	defaultSlabs   = 4
	defaultSlabMin = 1 << 20
	defaultStream  = true
	defaultRing    = 4
)

// defaultPinnedSlabLead is the slab lead (Plan.SlabLead) of plans whose A
// and B are page-locked, where it applies (more than that many block
// columns); the others of those plans run slab first.
//
// Measured on an H200 (16 cores), tenth session: at n = 16384 in
// 4096-blocks from page-locked memory, TestCUDASweep (4 timed runs, best;
// the variants forward then reversed) gave the panel order 48.85 / 49.31
// TFLOP/s, slab first 50.50 / 50.60, lead 1 49.49 / 49.40, lead 2 53.42 /
// 52.82, lead 3 53.03 / 53.05 (resident cuBLAS 65.4); the CLI with -pin,
// alternated, 3 rounds: panel order 48.74-48.83, lead 2 52.87-52.93, lead
// 3 52.77-53.44. At n = 8192 in 4096-blocks (two block columns: no lead
// applies) slab first 34.01 / 34.10 against 32.70 / 32.84 in panel order
// (and 34.14 vs 33.10 in the session's first call). From ordinary memory
// the lead gained nothing (16384: 34.7-37.6 against 36.3-37.2), so those
// plans keep the panel order.
const defaultPinnedSlabLead = 2

// wantSlabFirst reports whether a device plan should run slab first
// (Plan.SlabFirst) when the device memory allows, given whether A and B
// are copied straight from page-locked memory: by default when both are.
func (t offloadTuning) wantSlabFirst(directA, directB bool) bool {
	switch strings.ToLower(t.slabFirst) {
	case "1", "true", "yes", "on":
		return true
	case "pinned", "":
		return directA && directB
	}
	return false
}

// lead returns the slab lead (Plan.SlabLead) a device plan should try,
// given whether A and B are copied straight from page-locked memory:
// HTGS_MATMUL_SLABLEAD when set, else defaultPinnedSlabLead when both
// are, else 0 (none).
func (t offloadTuning) lead(directA, directB bool) int {
	switch {
	case t.slabLead >= 0:
		return t.slabLead
	case directA && directB:
		return defaultPinnedSlabLead
	}
	return 0
}

// staging returns the size in float64s and the number of the staging
// buffers of each device's copy-in task and of its copy-out tasks, for
// blocks of A, B and C of at most sizeA, sizeB and sizeC elements: a
// block each, or in chunk mode the ring of chunks of whole rows (at least
// one row of the widest block, at most a block) of each task copy.
func (t offloadTuning) staging(p *Plan, sizeA, sizeB, sizeC int) (in, out, nIn, nOut int) {
	if t.chunk <= 0 {
		return max(sizeA, sizeB), sizeC, t.stagingIn, t.copyOut
	}
	row := min(p.BlockSize, max(p.K, p.N))
	chunk := max(row, t.chunk/row*row)
	ring := max(1, t.ring)
	// No larger than a block: small blocks go through the ring whole.
	return min(chunk, max(sizeA, sizeB, row)), min(chunk, max(sizeC, row)), ring, t.copyOut * ring
}

// envInt returns the positive integer in $name, or def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(strings.TrimSpace(os.Getenv(name))); err == nil && v > 0 {
		return v
	}
	return def
}

// envCount returns $name as an integer >= 0 (0 meaning off), or def when
// unset or not one.
func envCount(name string, def int) int {
	if v, err := strconv.Atoi(strings.TrimSpace(os.Getenv(name))); err == nil && v >= 0 {
		return v
	}
	return def
}

// envBool returns $name as a boolean (1, true, yes, on), or def when unset.
func envBool(name string, def bool) bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv(name))) {
	case "":
		return def
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// tuningFor returns the knobs for a product on devices devices.
// An invalid HTGS_MATMUL_HOSTCOPY leaves the default (hostCopyFromEnv
// reports it).
func tuningFor(devices int) offloadTuning {
	hc, _ := hostCopyFromEnv()
	cpus := runtime.GOMAXPROCS(0)
	pinWorkers := cpus
	if hc == copyPipelined {
		pinWorkers = max(2, cpus/4)
	}
	chunk := envInt("HTGS_MATMUL_CHUNK", 0) << 7 // KiB to float64s
	return offloadTuning{
		chunk:        chunk,
		ring:         envInt("HTGS_MATMUL_RING", defaultRing),
		packWorkers:  envInt("HTGS_MATMUL_PACK", max(1, min(maxCopyWorkers, cpus/max(1, devices)))),
		stagingIn:    envInt("HTGS_MATMUL_STAGING", stagingInBuffers),
		copyOut:      envInt("HTGS_MATMUL_COPYOUT", copyOutThreads),
		slabs:        envInt("HTGS_MATMUL_SLABS", defaultSlabs),
		slabMin:      envInt("HTGS_MATMUL_SLABMIN", defaultSlabMin),
		stream:       envBool("HTGS_MATMUL_STREAM", defaultStream && chunk == 0),
		unpackStream: envBool("HTGS_MATMUL_STREAM", defaultStream),
		hostCopy:     hc,
		pinChunk:     int64(envInt("HTGS_MATMUL_PINCHUNK", defaultPinChunk>>10)) << 10,
		pinWorkers:   envInt("HTGS_MATMUL_PINWORKERS", pinWorkers),
		devCache:     envBool("HTGS_MATMUL_DEVCACHE", true),
		trace:        strings.TrimSpace(os.Getenv("HTGS_MATMUL_TRACE")),
		slabFirst:    strings.TrimSpace(os.Getenv("HTGS_MATMUL_SLABFIRST")),
		slabLead:     envCount("HTGS_MATMUL_SLABLEAD", -1),
	}
}

// hostCopyFromEnv returns the strategy HTGS_MATMUL_HOSTCOPY names (or
// HTGS_MATMUL_REGISTER=1 asks for), or defaultHostCopy.
func hostCopyFromEnv() (hostCopy, error) {
	if v := os.Getenv("HTGS_MATMUL_HOSTCOPY"); strings.TrimSpace(v) != "" {
		hc, err := parseHostCopy(v)
		if err != nil {
			return defaultHostCopy, fmt.Errorf("HTGS_MATMUL_HOSTCOPY: %w", err)
		}
		return hc, nil
	}
	if envBool("HTGS_MATMUL_REGISTER", false) {
		return copyRegister, nil
	}
	return defaultHostCopy, nil
}

// hostPins records the host memory that PinHost registered with an
// offload kernel's devices, by address and length of the slice.
type hostPins struct {
	mu   sync.Mutex
	pins map[pinSpan]int // registrations of each span
}

type pinSpan struct {
	addr uintptr
	n    int
}

func spanOf(d []float64) pinSpan {
	if len(d) == 0 {
		return pinSpan{}
	}
	return pinSpan{uintptr(unsafe.Pointer(&d[0])), len(d)}
}

func (h *hostPins) add(d []float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pins == nil {
		h.pins = map[pinSpan]int{}
	}
	h.pins[spanOf(d)]++
}

func (h *hostPins) remove(d []float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := spanOf(d)
	if h.pins[s]--; h.pins[s] <= 0 {
		delete(h.pins, s)
	}
}

// covers reports whether d lies within the pinned spans (one or several
// adjacent ones).
func (h *hostPins) covers(d []float64) bool {
	if len(d) == 0 {
		return false
	}
	s := spanOf(d)
	lo, hi := s.addr, s.addr+uintptr(8*s.n)
	h.mu.Lock()
	defer h.mu.Unlock()
	for lo < hi {
		next := lo
		for p := range h.pins {
			if end := p.addr + uintptr(8*p.n); p.addr <= lo && end > next {
				next = end
			}
		}
		if next == lo {
			return false
		}
		lo = next
	}
	return true
}

// within reports whether d lies within one pinned span.
func (h *hostPins) within(d []float64) bool {
	return h.anySpan(d, func(lo, hi, plo, phi uintptr) bool { return plo <= lo && hi <= phi })
}

// overlaps reports whether any of d lies within a pinned span.
func (h *hostPins) overlaps(d []float64) bool {
	return h.anySpan(d, func(lo, hi, plo, phi uintptr) bool { return plo < hi && lo < phi })
}

// anySpan reports whether some pinned span [plo, phi) and d's memory
// [lo, hi) satisfy match (false for an empty d).
func (h *hostPins) anySpan(d []float64, match func(lo, hi, plo, phi uintptr) bool) bool {
	if len(d) == 0 {
		return false
	}
	s := spanOf(d)
	lo, hi := s.addr, s.addr+uintptr(8*s.n)
	h.mu.Lock()
	defer h.mu.Unlock()
	for p := range h.pins {
		if match(lo, hi, p.addr, p.addr+uintptr(8*p.n)) {
			return true
		}
	}
	return false
}

// PinHost page-locks the memory of the given matrices for the devices of
// an offload kernel (the cuda kernel: cuMemHostRegister), so that products
// on them copy blocks straight between the matrices and the devices, by
// DMA, without packing them into staging buffers. Pinning takes time (the
// operating system locks every page), which a caller multiplying the same
// matrices several times pays once. The matrices must stay alive and
// unchanged in place (same Data) until unpin is called, after the
// products using them have returned. Kernels that do not run on devices
// need no pinning: PinHost does nothing for them.
func PinHost(k Kernel, ms ...*Dense) (unpin func() error, err error) {
	off, ok := k.(offloader)
	if !ok {
		return func() error { return nil }, nil
	}
	var undo []func() error
	unpin = func() error {
		var first error
		for i := len(undo) - 1; i >= 0; i-- {
			if err := undo[i](); err != nil && first == nil {
				first = err
			}
		}
		undo = nil
		return first
	}
	// Each matrix once (a matrix may be given twice, or be pinned
	// already); the registrations run at once.
	var todo [][]float64
	var seen hostPins
	for _, m := range ms {
		if m == nil || len(m.Data) == 0 || off.hostPins().covers(m.Data) || seen.covers(m.Data) {
			continue
		}
		todo = append(todo, m.Data)
		seen.add(m.Data)
	}
	releases := make([]func() error, len(todo))
	errs := make([]error, len(todo))
	var wg sync.WaitGroup
	for i, data := range todo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			releases[i], errs[i] = off.registerHost(data)
		}()
	}
	wg.Wait()
	for i, data := range todo {
		if errs[i] != nil {
			continue
		}
		off.hostPins().add(data)
		release := releases[i]
		undo = append(undo, func() error {
			off.hostPins().remove(data)
			return release()
		})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(fmt.Errorf("matmul: PinHost: %w", err), unpin())
	}
	return unpin, nil
}

// pinnedOperands returns which of the operands are *Dense matrices
// pinned with PinHost, whose blocks are copied straight between host
// memory and the devices (direct), and the other non-empty *Dense ones.
func pinnedOperands(off offloader, a, b Source, c Sink) (direct [3]bool, others [3]*Dense) {
	for i, m := range []any{a, b, c} {
		d, ok := m.(*Dense)
		if !ok || d.R == 0 || d.C == 0 {
			continue
		}
		if off.hostPins().covers(d.view(0, 0, d.R, d.C)) {
			direct[i] = true
			continue
		}
		others[i] = d
	}
	return direct, others
}

// pinOperands returns, with the register and pipelined strategies, the
// pinner that page-locks the memory of the operands not pinned already
// (others, from pinnedOperands) chunk by chunk, in the order plan needs
// them: before it returns with register, in the background with
// pipelined; nil with staging. The caller closes it after the product.
func pinOperands(off offloader, tune offloadTuning, plan *Plan, others [3]*Dense) *hostPinner {
	var views [3][]float64
	for i, d := range others {
		if d != nil {
			views[i] = d.view(0, 0, d.R, d.C)
		}
	}
	if tune.hostCopy == copyStaging || views[0] == nil && views[1] == nil && views[2] == nil {
		return nil
	}
	// In the order of the schedule's needs; without one, A and B
	// interleaved, then C, whose blocks come back last.
	pins := newHostPinner(off, views[:], []int{0, 0, 1}, tune.pinChunk, tune.pinWorkers)
	pins.orderBy(needOrder(plan, others[0], others[1], others[2]))
	pins.start()
	if tune.hostCopy == copyRegister {
		pins.wait()
	}
	return pins
}
