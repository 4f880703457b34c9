package matmul

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// hostCopy is how blocks of ordinary (pageable) *Dense operands reach the
// devices and the blocks of C come back (matrices pinned with PinHost are
// always copied straight):
//
//   - copyStaging packs each block into a pinned staging buffer, with
//     parallel host copies, and uploads it from there (downloads unpack
//     the same way);
//   - copyRegister page-locks the operands before the product, in chunks
//     registered in parallel, then copies every block straight between
//     them and the devices (the registration counts in the product's
//     time: Report.HostPin);
//   - copyPipelined registers the chunks in the background while the
//     product runs: a block whose memory is registered by the time it is
//     copied goes straight, the others through staging.
//
// HTGS_MATMUL_HOSTCOPY selects one for a run (staging, register,
// pipelined); HTGS_MATMUL_REGISTER=1 is the older spelling of register.
type hostCopy int

const (
	copyStaging hostCopy = iota
	copyRegister
	copyPipelined
)

// defaultHostCopy is the strategy when HTGS_MATMUL_HOSTCOPY is unset.
const defaultHostCopy = copyStaging

var hostCopyNames = [...]string{copyStaging: "staging", copyRegister: "register", copyPipelined: "pipelined"}

func (h hostCopy) String() string {
	if int(h) < len(hostCopyNames) {
		return hostCopyNames[h]
	}
	return fmt.Sprintf("hostCopy(%d)", int(h))
}

// parseHostCopy returns the strategy named s.
func parseHostCopy(s string) (hostCopy, error) {
	for i, n := range hostCopyNames {
		if strings.EqualFold(strings.TrimSpace(s), n) {
			return hostCopy(i), nil
		}
	}
	return 0, fmt.Errorf("%w: host copy %q: want one of %s", ErrConfig, s, strings.Join(hostCopyNames[:], ", "))
}

// defaultPinChunk is the bytes of host memory each registration covers:
// small enough that the first blocks are registered soon after the start
// and that registrations run in parallel, large enough that the calls'
// fixed cost (and the driver's bookkeeping of regions) stays small.
const defaultPinChunk = 64 << 20

const pageSize = 4096

// pinChunk is one registration: a page-aligned piece of an operand (its
// first and last may start or end inside a page).
type pinChunk struct {
	data    []float64
	lo, hi  uintptr
	ready   atomic.Bool // registered, until the pinner closes
	release func() error
	rank    float64 // order of registration without a schedule: smaller first
	need    int     // position in the schedule's needs (orderBy); -1: not needed
}

// hostPinner page-locks the memory of the operands chunk by chunk on
// worker goroutines, and tells the copy tasks which blocks lie wholly in
// registered memory. Chunks that cannot be registered (memory registered
// by someone else) stay unregistered: their blocks go through staging.
type hostPinner struct {
	off     offloader
	chunks  []*pinChunk // by address
	order   []*pinChunk // by rank
	next    atomic.Int64
	stop    atomic.Bool
	wg      sync.WaitGroup
	workers int
	bytes   atomic.Int64 // registered
	mu      sync.Mutex
	errs    []error // registrations refused
}

// newHostPinner plans the chunks of the given views (nil ones skipped;
// overlapping ones merged) of chunk bytes each. rank orders the views'
// registrations: chunks of views of equal rank interleave by their
// position in the view, lower ranks go first.
func newHostPinner(off offloader, views [][]float64, ranks []int, chunk int64, workers int) *hostPinner {
	type span struct {
		base   *float64 // first element
		lo, hi uintptr
		rank   int
	}
	var spans []span
	for i, v := range views {
		if len(v) == 0 {
			continue
		}
		lo := uintptr(unsafe.Pointer(&v[0]))
		spans = append(spans, span{&v[0], lo, lo + uintptr(8*len(v)), ranks[i]})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].lo < spans[j].lo })
	var merged []span
	for _, s := range spans {
		if n := len(merged); n > 0 && s.lo < merged[n-1].hi {
			merged[n-1].hi = max(merged[n-1].hi, s.hi)
			merged[n-1].rank = min(merged[n-1].rank, s.rank)
			continue
		}
		merged = append(merged, s)
	}
	p := &hostPinner{off: off, workers: max(1, workers)}
	chunk = max(pageSize, chunk/pageSize*pageSize)
	for _, s := range merged {
		// The memory of a merged span lies in one allocation (its views
		// overlap), so one slice may cover it.
		all := unsafe.Slice(s.base, (s.hi-s.lo)/8)
		var cs []*pinChunk
		for lo := s.lo; lo < s.hi; {
			// Chunks end on page boundaries, so that no two share a page.
			hi := min(s.hi, (lo+uintptr(chunk))&^(pageSize-1))
			cs = append(cs, &pinChunk{data: all[(lo-s.lo)/8 : (hi-s.lo)/8], lo: lo, hi: hi})
			lo = hi
		}
		for i, c := range cs {
			c.rank = float64(s.rank) + (float64(i)+0.5)/float64(len(cs))
			c.need = -1
		}
		p.chunks = append(p.chunks, cs...)
	}
	p.order = slices.Clone(p.chunks)
	sort.SliceStable(p.order, func(i, j int) bool { return p.order[i].rank < p.order[j].rank })
	return p
}

// orderBy makes the chunks register in the order in which the blocks
// lying in them are needed (needs, in order); the chunks no block needs
// come last, in rank order. It must be called before start.
func (p *hostPinner) orderBy(needs [][]float64) {
	pos := 0
	for _, d := range needs {
		if len(d) == 0 {
			continue
		}
		lo := uintptr(unsafe.Pointer(&d[0]))
		hi := lo + uintptr(8*len(d))
		for i := sort.Search(len(p.chunks), func(i int) bool { return p.chunks[i].hi > lo }); i < len(p.chunks) && p.chunks[i].lo < hi; i++ {
			if p.chunks[i].need < 0 {
				p.chunks[i].need = pos
				pos++
			}
		}
	}
	sort.SliceStable(p.order, func(i, j int) bool {
		a, b := p.order[i], p.order[j]
		if (a.need < 0) != (b.need < 0) {
			return b.need < 0
		}
		if a.need != b.need {
			return a.need < b.need
		}
		return a.rank < b.rank
	})
}

// needOrder returns the memory of the blocks of a, b and c (nil ones
// skipped) in the order the plan's schedule needs it: a block of A or B at
// its first product, a block of C at its last, when it is downloaded. Very
// long schedules (over maxOrdered products) return nil: the pinner's own
// order serves.
func needOrder(p *Plan, a, b, c *Dense) [][]float64 {
	const maxOrdered = 1 << 20
	if p.Multiplies == 0 || p.Multiplies > maxOrdered || p.BlockSize <= 0 {
		return nil
	}
	bs := p.BlockSize
	side := func(i, n int) int { return min(bs, n-i*bs) }
	seenA := make([]bool, p.MB*p.KB)
	seenB := make([]bool, p.KB*p.NB)
	doneC := make([]int, p.MB*p.NB)
	var out [][]float64
	cur := newCursor(p)
	for {
		s, ok := cur.next()
		if !ok {
			return out
		}
		if a != nil && !seenA[s.i*p.KB+s.l] {
			seenA[s.i*p.KB+s.l] = true
			out = append(out, a.view(s.i*bs, s.l*bs, side(s.i, p.M), side(s.l, p.K)))
		}
		if b != nil && !seenB[s.l*p.NB+s.j] {
			seenB[s.l*p.NB+s.j] = true
			out = append(out, b.view(s.l*bs, s.j*bs, side(s.l, p.K), side(s.j, p.N)))
		}
		if doneC[s.i*p.NB+s.j]++; c != nil && doneC[s.i*p.NB+s.j] == p.KB {
			out = append(out, c.view(s.i*bs, s.j*bs, side(s.i, p.M), side(s.j, p.N)))
		}
	}
}

// start registers the chunks on the pinner's workers, in rank order.
func (p *hostPinner) start() {
	for range min(p.workers, len(p.order)) {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for !p.stop.Load() {
				i := int(p.next.Add(1)) - 1
				if i >= len(p.order) {
					return
				}
				c := p.order[i]
				release, err := p.off.registerHost(c.data)
				if err != nil {
					p.mu.Lock()
					p.errs = append(p.errs, err)
					p.mu.Unlock()
					continue
				}
				c.release = release
				p.bytes.Add(int64(c.hi - c.lo))
				c.ready.Store(true)
			}
		}()
	}
}

// wait waits for the workers (every chunk tried, unless closed).
func (p *hostPinner) wait() { p.wg.Wait() }

// ready reports whether the rows x cols block data (stride ld) lies
// wholly in registered memory. A nil pinner has none.
func (p *hostPinner) ready(data []float64, rows, cols, ld int) bool {
	if p == nil || rows == 0 || cols == 0 || len(data) == 0 {
		return false
	}
	lo := uintptr(unsafe.Pointer(&data[0]))
	hi := lo + uintptr(8*((rows-1)*ld+cols))
	i := sort.Search(len(p.chunks), func(i int) bool { return p.chunks[i].hi > lo })
	for ; lo < hi; i++ {
		if i >= len(p.chunks) || p.chunks[i].lo > lo || !p.chunks[i].ready.Load() {
			return false
		}
		lo = p.chunks[i].hi
	}
	return true
}

// piece is the part of a block that one copy moves: rows x cols elements
// from row r and column c of the block. A 2-D copy must lie within one
// registration (the driver treats each registered range as its own
// allocation and refuses a copy that spans two), so a block lying across
// several chunks is copied in pieces, one or more per chunk.
type piece struct{ r, c, rows, cols int }

// pieces splits the rows x cols block data (stride ld) into pieces that
// each lie within one registered chunk, in order, and reports whether the
// whole block lies in registered memory (ok false: no pieces). Runs of
// whole rows in one chunk make one piece; a row that a chunk boundary
// cuts makes one piece per chunk it touches. A nil pinner has none.
func (p *hostPinner) pieces(data []float64, rows, cols, ld int) (ps []piece, ok bool) {
	if !p.ready(data, rows, cols, ld) {
		return nil, false
	}
	base := uintptr(unsafe.Pointer(&data[0]))
	// chunk returns the chunk holding address a (ready checked that one does).
	chunk := func(a uintptr) *pinChunk {
		return p.chunks[sort.Search(len(p.chunks), func(i int) bool { return p.chunks[i].hi > a })]
	}
	for r := 0; r < rows; {
		lo := base + uintptr(8*r*ld)
		ch := chunk(lo)
		// Rows r..last end within ch: base + 8*(last*ld+cols) <= ch.hi.
		last := rows - 1
		if room := int(ch.hi-base) / 8; (last*ld + cols) > room {
			last = (room - cols) / ld
			if room < cols {
				last = -1
			}
		}
		if last >= r {
			ps = append(ps, piece{r: r, c: 0, rows: last - r + 1, cols: cols})
			r = last + 1
			continue
		}
		// Row r crosses the end of ch: one piece per chunk it touches.
		for c := 0; c < cols; {
			ch := chunk(lo + uintptr(8*c))
			n := min(cols-c, int(ch.hi-(lo+uintptr(8*c)))/8)
			ps = append(ps, piece{r: r, c: c, rows: 1, cols: n})
			c += n
		}
		r++
	}
	return ps, true
}

// all reports whether every chunk is registered.
func (p *hostPinner) all() bool {
	for _, c := range p.chunks {
		if !c.ready.Load() {
			return false
		}
	}
	return len(p.chunks) > 0
}

// close stops the registrations, waits for those under way, and
// unregisters every chunk, on as many goroutines as there are CPUs. The
// copies from and to the chunks must have completed.
func (p *hostPinner) close() error {
	if p == nil {
		return nil
	}
	p.stop.Store(true)
	p.wg.Wait()
	var todo []*pinChunk
	for _, c := range p.chunks {
		if c.ready.Swap(false) {
			todo = append(todo, c)
		}
	}
	errs := make([]error, len(todo))
	var next atomic.Int64
	var wg sync.WaitGroup
	// Nothing else runs now (the product is done): every CPU unregisters.
	for range min(max(p.workers, runtime.GOMAXPROCS(0)), len(todo)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(todo) {
					return
				}
				errs[i] = todo[i].release()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("matmul: unregistering host memory: %w", err)
	}
	return nil
}
