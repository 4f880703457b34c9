package matmul

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

type loadKey struct {
	op            Operand
	row, col, gen int
}

// simulate checks a plan's schedule against its requests: every block
// product appears exactly once, every product's blocks are requested
// before it in their loader's order, every load is used exactly its Uses
// times, and a sequential run with the plan's pool capacities never stalls
// (loaders take buffers in request order, products run in schedule order
// as soon as their blocks are loaded and free them after their last use).
// It returns the most blocks of C that were ever open.
func simulate(t *testing.T, p Plan) (maxOpen int) {
	t.Helper()
	var reqs [2][]blockRequest
	for r := range p.requests {
		reqs[r.Operand] = append(reqs[r.Operand], r)
	}
	uses := map[loadKey]int{}
	for _, q := range reqs {
		for _, r := range q {
			k := loadKey{r.Operand, r.Row, r.Col, r.Gen}
			if _, dup := uses[k]; dup {
				t.Fatalf("%v: load %+v requested twice", p, k)
			}
			uses[k] = r.Uses
		}
	}
	capacity := [2]int{p.PoolA, p.PoolB}
	if p.InMemory {
		capacity = [2]int{1 << 30, 1 << 30}
	}
	var next [2]int // next request of each loader
	loaded := map[loadKey]int{}
	var live [2]int
	seen := map[[3]int]bool{}
	contributions := map[[2]int]int{}
	open := 0
	cur := newCursor(&p)
	for {
		s, ok := cur.next()
		if !ok {
			break
		}
		ka := loadKey{OperandA, s.i, s.l, s.genA}
		kb := loadKey{OperandB, s.l, s.j, s.genB}
		for op, k := range [2]loadKey{ka, kb} {
			for {
				if _, ok := loaded[k]; ok {
					break
				}
				if next[op] == len(reqs[op]) {
					t.Fatalf("%v: step %+v needs %+v, never requested", p, s, k)
				}
				if live[op] == capacity[op] {
					t.Fatalf("%v: stalled: pool %v full (%d) before %+v is loaded for step %+v", p, Operand(op), capacity[op], k, s)
				}
				r := reqs[op][next[op]]
				next[op]++
				loaded[loadKey{r.Operand, r.Row, r.Col, r.Gen}] = 0
				live[op]++
			}
		}
		key := [3]int{s.i, s.j, s.l}
		if seen[key] {
			t.Fatalf("%v: product %v scheduled twice", p, key)
		}
		seen[key] = true
		for op, k := range [2]loadKey{ka, kb} {
			loaded[k]++
			if loaded[k] == uses[k] {
				delete(loaded, k)
				live[op]--
			} else if loaded[k] > uses[k] {
				t.Fatalf("%v: load %+v used more than its %d uses", p, k, uses[k])
			}
		}
		c := [2]int{s.i, s.j}
		if contributions[c] == 0 {
			open++
		}
		if contributions[c]++; contributions[c] == p.KB {
			open--
		}
		maxOpen = max(maxOpen, open)
	}
	if len(seen) != p.Multiplies {
		t.Fatalf("%v: %d products scheduled, want %d", p, len(seen), p.Multiplies)
	}
	if len(loaded) != 0 || next[0] != len(reqs[0]) || next[1] != len(reqs[1]) {
		t.Fatalf("%v: loads left unused: %v; %d/%d and %d/%d requests loaded", p, loaded, next[0], len(reqs[0]), next[1], len(reqs[1]))
	}
	// The I/O the requests cause is what the plan predicts.
	if !p.InMemory {
		var read int64
		for _, q := range reqs {
			for _, r := range q {
				rows, cols := p.M, p.K
				if r.Operand == OperandB {
					rows, cols = p.K, p.N
				}
				read += 8 * int64(min(p.BlockSize, rows-r.Row*p.BlockSize)) * int64(min(p.BlockSize, cols-r.Col*p.BlockSize))
			}
		}
		if read != p.ReadBytes {
			t.Fatalf("%v: requests read %d bytes, plan says %d", p, read, p.ReadBytes)
		}
	}
	return maxOpen
}

func TestPlanSchedules(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	orders := map[Order]int{}
	for range 400 {
		m, k, n := 1+rng.IntN(40), 1+rng.IntN(40), 1+rng.IntN(40)
		bs := 1 + rng.IntN(12)
		threads := 1 + rng.IntN(4)
		cfg := Config{BlockSize: bs, Copies: threads}
		inMemory := rng.IntN(4) == 0
		if !inMemory && rng.IntN(4) != 0 {
			full := 8 * int64(m*k+k*n+m*n)
			cfg.MemoryBudget = 1 + rng.Int64N(full)
		}
		p, err := newPlan(m, k, n, inMemory, cfg)
		if err != nil {
			continue // budget below one pass: covered by TestBudgetTooSmall
		}
		orders[p.Order]++
		if cfg.MemoryBudget > 0 && p.PoolBytes > cfg.MemoryBudget {
			t.Fatalf("%v: pools of %d bytes exceed the budget %d", p, p.PoolBytes, cfg.MemoryBudget)
		}
		open := simulate(t, p)
		if open > p.Panel {
			t.Fatalf("%v: %d blocks of C open in a sequential run, want at most the panel", p, open)
		}
		if p.PoolC < min(p.Multiplies, p.Panel+threads+1) {
			t.Fatalf("%v: partial pool of %d cannot hold panel+threads+1", p, p.PoolC)
		}
	}
	for _, o := range []Order{RowPanels, ColumnPanels, Streamed} {
		if orders[o] == 0 {
			t.Errorf("no random plan used %v (%v)", o, orders)
		}
	}
}

// randomDevicePlan returns the plan of a random small product on 1 to 3
// fake GPUs, of operands in memory or not, and the number of GPUs.
func randomDevicePlan(t *testing.T, rng *rand.Rand) (Plan, int) {
	t.Helper()
	m, k, n := 1+rng.IntN(40), 1+rng.IntN(40), 1+rng.IntN(40)
	bs := 1 + rng.IntN(12)
	devices := 1 + rng.IntN(3)
	cfg := Config{BlockSize: bs, Copies: 1 + rng.IntN(3), Kernel: newFakeGPU(devices)}
	p, err := newPlan(m, k, n, rng.IntN(2) == 0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p, devices
}

// TestSlabFirstSchedules checks the slab-first order on random one-panel
// device plans: the schedule is valid (simulate), the inner index never
// goes back, every block of C is open at once before the last slab, and
// the device pool of C holds a device's share of them.
func TestSlabFirstSchedules(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	tried := 0
	for range 300 {
		p, devices := randomDevicePlan(t, rng)
		if !p.trySlabFirst(0) {
			if p.Panels == 1 && p.KB > 1 && p.Order != Streamed {
				t.Fatalf("%v: slab first refused without a budget", p)
			}
			continue
		}
		tried++
		open := simulate(t, p)
		if open != p.MB*p.NB {
			t.Fatalf("%v: %d blocks of C open at most, want all %d", p, open, p.MB*p.NB)
		}
		rows, cols := p.MB, p.NB
		if p.Order == ColumnPanels {
			rows, cols = p.NB, p.MB
		}
		if p.DevicePoolC < ceilDiv(rows, devices)*cols {
			t.Fatalf("%v: device pool C %d below a device's share %d", p, p.DevicePoolC, ceilDiv(rows, devices)*cols)
		}
		last := 0
		for cur := newCursor(&p); ; {
			s, ok := cur.next()
			if !ok {
				break
			}
			if s.l < last {
				t.Fatalf("%v: slab %d after slab %d", p, s.l, last)
			}
			last = s.l
		}
	}
	if tried < 50 {
		t.Errorf("only %d random plans could run slab first", tried)
	}
}

// TestSlabLeadSchedules checks the SlabLead order on random one-panel
// device plans of operands in memory: the schedule is valid (simulate: every product once, each
// load used as requested, no pool stalled), the lead's products come
// slab by slab before any other, the last outer index's blocks of C
// finish one after another, and the device pool of C holds the lead's
// share and a column more.
func TestSlabLeadSchedules(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	tried := 0
	for range 400 {
		p, devices := randomDevicePlan(t, rng)
		lead := 1 + rng.IntN(3)
		rows, outer := p.MB, p.NB
		if p.Order == ColumnPanels {
			rows, outer = p.NB, p.MB
		}
		if !p.trySlabLead(0, lead) {
			if p.InMemory && p.Panels == 1 && p.KB > 1 && p.Order != Streamed && lead < outer {
				t.Fatalf("%v: slab lead %d refused without a budget", p, lead)
			}
			continue
		}
		tried++
		open := simulate(t, p)
		if open > lead*rows+rows {
			t.Fatalf("%v: %d blocks of C open at once, more than the lead's %d and a column", p, open, lead*rows)
		}
		if p.DevicePoolC < ceilDiv(rows, devices)*(lead+1) {
			t.Fatalf("%v: device pool C %d below a device's share %d", p, p.DevicePoolC, ceilDiv(rows, devices)*(lead+1))
		}
		if str := map[Order]int{RowPanels: p.DevicePoolB, ColumnPanels: p.DevicePoolA}[p.Order]; str < p.KB+2 {
			t.Fatalf("%v: device pool of the streamed operand %d, below the last column's %d blocks and two", p, str, p.KB)
		}
		outerOf := func(s step) int {
			if p.Order == ColumnPanels {
				return s.i
			}
			return s.j
		}
		innerOf := func(s step) int {
			if p.Order == ColumnPanels {
				return s.j
			}
			return s.i
		}
		lastSlab, leadDone := 0, false
		var tail []step
		for cur := newCursor(&p); ; {
			s, ok := cur.next()
			if !ok {
				break
			}
			switch u := outerOf(s); {
			case u < lead:
				if leadDone {
					t.Fatalf("%v: lead product %+v after the lead", p, s)
				}
				if s.l < lastSlab {
					t.Fatalf("%v: slab %d after slab %d in the lead", p, s.l, lastSlab)
				}
				lastSlab = s.l
			default:
				leadDone = true
				if u == outer-1 {
					tail = append(tail, s)
				}
			}
		}
		for x, s := range tail { // l fastest: a block of C done every KB products
			if s.l != x%p.KB || (x > 0 && x%p.KB != 0 && innerOf(s) != innerOf(tail[x-1])) {
				t.Fatalf("%v: the last column's products out of order at %d: %+v", p, x, tail)
			}
		}
	}
	if tried < 50 {
		t.Errorf("only %d random plans could run a slab lead", tried)
	}
}

// TestPlanReadVolume checks the I/O formulas on a square product: with
// room for the whole of A, each matrix is read once; with room for a panel
// of P block rows, B is read ceil(MB/P) times.
func TestPlanReadVolume(t *testing.T) {
	const n, bs = 4096, 512 // 8x8x8 blocks of 2 MiB
	blk := int64(8 * bs * bs)
	mat := 64 * blk
	for _, tc := range []struct {
		budget int64
		passes int
	}{
		{0, 1},
		{(64 + 4 + 8 + 6) * blk, 1}, // all of A, 4 streamed B, 8+6 partials
		{(4*9 + 4 + 4 + 6) * blk, 2},
		{(2*9 + 4 + 2 + 6) * blk, 4},
		{(1*9 + 4 + 1 + 6) * blk, 8},
	} {
		p, err := newPlan(n, n, n, false, Config{BlockSize: bs, Copies: 2, MemoryBudget: tc.budget})
		if err != nil {
			t.Fatal(err)
		}
		if p.Panels != tc.passes || p.ReadBytes != mat+int64(tc.passes)*mat {
			t.Errorf("budget %d blocks: %d passes reading %d bytes, want %d passes reading %d", tc.budget/blk, p.Panels, p.ReadBytes, tc.passes, mat+int64(tc.passes)*mat)
		}
	}
}

func TestOrderString(t *testing.T) {
	for o, want := range map[Order]string{RowPanels: "row panels", ColumnPanels: "column panels", Streamed: "streamed", 7: "Order(7)"} {
		if got := fmt.Sprint(o); got != want {
			t.Errorf("%d: %q, want %q", int(o), got, want)
		}
	}
}

// A product whose one block takes long is not reported as stalled before
// it could have ended at 1 GFLOP/s; small blocks keep the graph's default.
func TestStallDelay(t *testing.T) {
	for _, c := range []struct {
		bs   int
		want time.Duration
	}{
		{0, 0},
		{512, 0},  // 0.27 s per block: the default 10 s
		{1700, 0}, // 9.8 s: still the default
		{4096, time.Duration(2 * 4096 * 4096 * 4096)},
		{1 << 20, 24 * time.Hour},
	} {
		if got := stallDelay(c.bs); got != c.want {
			t.Errorf("stallDelay(%d) = %v, want %v", c.bs, got, c.want)
		}
	}
}
