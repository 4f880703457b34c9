package pats

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gohtgs/htgs/device"
)

func d(key string, bytes int64) Data { return Data{Key: key, Bytes: bytes} }

func TestFlowDependencies(t *testing.T) {
	f := NewFlow("deps")
	op := hybrid("op", 1)
	a := Add(f, op, 0, Writes(d("x", 1)))
	b := Add(f, op, 0, Reads(d("x", 1)), Writes(d("y", 1)))               // RAW on x
	c := Add(f, op, 0, Reads(d("x", 1)))                                  // RAW on x only
	e := Add(f, op, 0, Writes(d("x", 1)))                                 // WAW on a, WAR on b and c
	g := Add(f, op, 0, Reads(d("x", 1), d("y", 1)), After(a))             // RAW on e and b, explicit a
	h := Add(f, op, 0, Reads(d("in", 5), d("in", 5)), Writes(d("in", 5))) // reads input once, rewrites it
	want := map[*Step][]*Step{a: nil, b: {a}, c: {a}, e: {a, b, c}, g: {a, e, b}, h: nil}
	for s, deps := range want {
		if !slices.Equal(s.deps, deps) {
			t.Errorf("step %d deps = %v, want %v", s.Index(), indices(s.deps), indices(deps))
		}
	}
	if len(h.reads) != 1 || h.reads[0].writer != nil || h.writes[0].writer != h {
		t.Error("in-place update of an input is wrong")
	}
	// A stored datum is an output even when the flow reads it.
	Add(f, op, 0, Writes(Data{Key: "s", Bytes: 1, Store: nopStore{}}))
	Add(f, op, 0, Reads(d("s", 1)))
	if f.Err() != nil || f.Len() != 8 || b.Op() != "op" {
		t.Errorf("Err %v, Len %d, Op %q", f.Err(), f.Len(), b.Op())
	}
	// Outputs: the last versions of written keys that have a store or no
	// reader; x and y are intermediate.
	c0 := testScheduler(Config{}, 1, 0)
	fs := c0.admit(f)
	var finals []string
	for _, dt := range fs.data {
		if dt.final {
			finals = append(finals, dt.key)
		}
	}
	slices.Sort(finals)
	if !slices.Equal(finals, []string{"in", "s"}) {
		t.Errorf("final data = %v", finals)
	}
}

type nopStore struct{}

func (nopStore) Stage(context.Context) error  { return nil }
func (nopStore) Commit(context.Context) error { return nil }

func indices(ss []*Step) []int {
	var out []int
	for _, s := range ss {
		out = append(out, s.Index())
	}
	return out
}

func TestFlowErrors(t *testing.T) {
	other := NewFlow("other")
	foreign := Add(other, hybrid("x", 1), 0)
	cases := []struct {
		name  string
		build func(f *Flow)
		want  string
	}{
		{"nil op", func(f *Flow) { Add[int](f, nil, 0) }, "nil operation"},
		{"no name", func(f *Flow) { Add(f, &Op[int]{Impls: hybrid("", 1).Impls}, 0) }, "without a name"},
		{"no impl", func(f *Flow) { Add(f, &Op[int]{Name: "x"}, 0) }, "no implementation"},
		{"nil impl", func(f *Flow) { Add(f, &Op[int]{Name: "x", Impls: map[device.Kind]Impl[int]{device.CPU: nil}}, 0) }, "nil cpu implementation"},
		{"bad speedup", func(f *Flow) { Add(f, hybrid("x", -2), 0) }, "speedup estimate"},
		{"negative cost", func(f *Flow) { Add(f, hybrid("x", 1), 0, cost(-1, 1)) }, "negative cost"},
		{"foreign after", func(f *Flow) { Add(f, hybrid("x", 1), 0, After(foreign)) }, "another flow"},
		{"empty key", func(f *Flow) { Add(f, hybrid("x", 1), 0, Reads(d("", 1))) }, "empty key"},
		{"double write", func(f *Flow) { Add(f, hybrid("x", 1), 0, Writes(d("k", 1), d("k", 1))) }, "written twice"},
	}
	for _, c := range cases {
		f := NewFlow(c.name)
		c.build(f)
		if err := f.Err(); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("%s: Err = %v, want mention of %q and the flow name", c.name, err, c.want)
		}
		if _, err := Simulate(Config{}, Machine{CPUs: 1}, []*Flow{f}); err == nil {
			t.Errorf("%s: Simulate accepted a malformed flow", c.name)
		}
	}
	// A GPU-only step cannot run on a machine without GPUs.
	f := NewFlow("gpu-only")
	Add(f, only("k", device.GPU), 0)
	if _, err := Simulate(Config{}, Machine{CPUs: 2}, []*Flow{f}); err == nil || !strings.Contains(err.Error(), "no implementation for the available devices") {
		t.Errorf("GPU-only step on CPUs: %v", err)
	}
	// A flow runs once.
	g := NewFlow("once")
	Add(g, hybrid("x", 1), 0)
	mustSim(t, Config{}, Machine{CPUs: 1}, g)
	if _, err := Simulate(Config{}, Machine{CPUs: 1}, []*Flow{g}); !errors.Is(err, errFlowUsed) {
		t.Errorf("second run of a flow: %v", err)
	}
	if _, err := Simulate(Config{TransferImpact: 2}, Machine{CPUs: 1}, nil); err == nil {
		t.Error("transfer impact 2 accepted")
	}
	if _, err := Simulate(Config{}, Machine{}, nil); err == nil {
		t.Error("machine without units accepted")
	}
}

// independent returns one flow of independent steps of the given speedups,
// each costing cpu µs on a CPU and cpu/speedup µs on a GPU.
func independent(name string, cpu int, speedups ...float64) *Flow {
	f := NewFlow(name)
	for i, s := range speedups {
		Add(f, hybrid(string(rune('A'+i)), s), i, cost(cpu, int(float64(cpu)/s)))
	}
	return f
}

func TestPATSOrdering(t *testing.T) {
	c := testScheduler(Config{Policy: PATS}, 1, 1)
	c.admit(independent("f", 100, 2, 10, 5, 1.5, 10))
	cpu, gpu := cpuWorker(c), gpuWorker(c)
	var gpuOrder, cpuOrder []string
	for range 2 {
		n := c.pick(gpu)
		c.take(gpu, n)
		gpuOrder = append(gpuOrder, n.step.op)
		m := c.pick(cpu)
		c.take(cpu, m)
		cpuOrder = append(cpuOrder, m.step.op)
	}
	// GPU: highest first, ties in ready order (B before E); CPU: lowest first.
	if !slices.Equal(gpuOrder, []string{"B", "E"}) || !slices.Equal(cpuOrder, []string{"D", "A"}) {
		t.Errorf("GPU took %v, CPU took %v; want [B E] and [D A]", gpuOrder, cpuOrder)
	}
	if n := c.pick(cpu); n == nil || n.step.op != "C" {
		t.Errorf("last pick = %v, want C", n)
	}

	// FCFS: both take in ready order.
	c = testScheduler(Config{Policy: FCFS}, 1, 1)
	c.admit(independent("f", 100, 2, 10, 5))
	cpu, gpu = cpuWorker(c), gpuWorker(c)
	n1 := c.pick(gpu)
	c.take(gpu, n1)
	n2 := c.pick(cpu)
	if n1.step.op != "A" || n2.step.op != "B" {
		t.Errorf("FCFS took %s then %s, want A then B", n1.step.op, n2.step.op)
	}
}

func TestSingleImplementationRestricts(t *testing.T) {
	c := testScheduler(Config{Policy: PATS}, 1, 1)
	f := NewFlow("f")
	Add(f, only("cpuOnly", device.CPU), 0)
	Add(f, hybrid("fast", 50), 0)
	Add(f, only("gpuOnly", device.GPU), 0)
	c.admit(f)
	cpu, gpu := cpuWorker(c), gpuWorker(c)
	if n := c.pick(gpu); n.step.op != "gpuOnly" {
		t.Errorf("GPU picked %s, want the GPU-only op (ranked above any estimate)", n.step.op)
	}
	if n := c.pick(cpu); n.step.op != "cpuOnly" {
		t.Errorf("CPU picked %s, want the CPU-only op", n.step.op)
	}
	r := mustSim(t, Config{Policy: PATS}, Machine{CPUs: 3, GPUs: 1}, func() *Flow {
		f := NewFlow("g")
		for range 5 {
			Add(f, only("gpuOnly", device.GPU), 0, cost(10, 10))
			Add(f, only("cpuOnly", device.CPU), 0, cost(10, 10))
		}
		return f
	}())
	g, _ := r.Op("gpuOnly")
	cp, _ := r.Op("cpuOnly")
	if g.CPU != 0 || g.GPU != 5 || cp.GPU != 0 || cp.CPU != 5 {
		t.Errorf("restricted ops ran on the wrong kind: %+v %+v", g, cp)
	}
}

// locality builds the state of the data-locality rule: GPU worker w has just
// computed P, which wrote X; ready are D (reads X) and Q (reads Y from host).
func locality(t *testing.T, cfg Config, sd, sq float64) (c *scheduler, w *worker, dNode, qNode *node) {
	t.Helper()
	c = testScheduler(cfg, 1, 1)
	f := NewFlow("loc")
	Add(f, hybrid("Q", sq), 0, Reads(d("Y", 100)))
	Add(f, only("P", device.GPU), 0, Writes(d("X", 100)))
	Add(f, hybrid("D", sd), 0, Reads(d("X", 100)))
	fs := c.admit(f)
	w = gpuWorker(c)
	p := fs.nodes[1]
	c.take(w, p)
	if downs := c.computed(w, p, us(1), nil); len(downs) != 0 && cfg.Locality {
		t.Fatalf("with locality, computing P downloaded %v", downs)
	}
	return c, w, fs.nodes[2], fs.nodes[0]
}

func TestLocalityRule(t *testing.T) {
	cases := []struct {
		name   string
		cfg    Config
		sd, sq float64
		want   string
	}{
		{"reuse within impact", Config{Policy: PATS, Locality: true, TransferImpact: 0.2}, 5, 6, "D"},       // 5 >= 6*0.8
		{"reuse at the bound", Config{Policy: PATS, Locality: true, TransferImpact: 0.5}, 3, 6, "D"},        // 3 >= 3
		{"better elsewhere", Config{Policy: PATS, Locality: true, TransferImpact: 0.2}, 4, 6, "Q"},          // 4 < 4.8
		{"reuse is best anyway", Config{Policy: PATS, Locality: true, TransferImpact: 0}, 9, 6, "D"},        // plain PATS agrees
		{"no locality", Config{Policy: PATS}, 5, 6, "Q"},                                                    // highest speedup
		{"fcfs always reuses", Config{Policy: FCFS, Locality: true, TransferImpact: 0}, 1, 100, "D"},        // Q is older, D reuses
		{"fcfs without locality", Config{Policy: FCFS}, 1, 100, "Q"},                                        // Q became ready first
		{"impact one always reuses", Config{Policy: PATS, Locality: true, TransferImpact: 1}, 0.1, 90, "D"}, // Sq*(1-1) = 0
	}
	for _, tc := range cases {
		c, w, _, _ := locality(t, tc.cfg, tc.sd, tc.sq)
		if n := c.pick(w); n == nil || n.step.op != tc.want {
			t.Errorf("%s: GPU picked %v, want %s", tc.name, n.step.op, tc.want)
		}
	}
	// Taking Q instead evicts X, which D still needs: X is downloaded and
	// Y uploaded. Taking D reuses X: no transfer.
	c, w, dn, qn := locality(t, Config{Policy: PATS, Locality: true, TransferImpact: 0.2}, 4, 6)
	a := c.take(w, qn)
	if len(a.evict) != 1 || a.evict[0].key != "X" || len(a.upload) != 1 || a.upload[0].key != "Y" {
		t.Errorf("taking Q: evict %v upload %v; want evict X, upload Y", keys(a.evict), keys(a.upload))
	}
	if c.eligible(cpuWorker(c), dn) {
		t.Error("D is eligible on the CPU before X has been downloaded")
	}
	c.downloaded(a.evict[0], nil)
	if !c.eligible(cpuWorker(c), dn) {
		t.Error("D is not eligible on the CPU after X was downloaded")
	}
	// The GPU keeps its copy of X (written back, not evicted): D may
	// still run there without an upload.
	if !c.reuses(w, dn) {
		t.Error("taking Q dropped the GPU's copy of X")
	}
	c.computed(w, qn, us(1), nil)
	if a := c.take(w, dn); len(a.upload) != 0 {
		t.Errorf("taking D after Q: upload %v; want none, X is kept", keys(a.upload))
	}
	c, w, dn, _ = locality(t, Config{Policy: PATS, Locality: true, TransferImpact: 0.2}, 5, 6)
	if a := c.take(w, dn); len(a.evict) != 0 || len(a.upload) != 0 {
		t.Errorf("taking D: evict %v upload %v; want no transfer", keys(a.evict), keys(a.upload))
	}
}

func keys(ds []*datum) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.key)
	}
	return out
}

// chain returns a flow A -> B -> C of GPU-only steps passing 1000-byte data.
func chain(name string) *Flow {
	f := NewFlow(name)
	Add(f, only("A", device.GPU), 0, Writes(d("x", 1000)), cost(10, 10))
	Add(f, only("B", device.GPU), 0, Reads(d("x", 1000)), Writes(d("y", 1000)), cost(10, 10))
	Add(f, only("C", device.GPU), 0, Reads(d("y", 1000)), Writes(d("z", 1000)), cost(10, 10))
	return f
}

// oneGPU transfers 1000 bytes in 1 µs.
var oneGPU = Machine{GPUs: 1, Bandwidth: 1e9}

func TestTransfersWithAndWithoutLocality(t *testing.T) {
	r := mustSim(t, Config{}, oneGPU, chain("plain"))
	// Each op: upload its input, compute, download its output:
	// (10 + 1) + (1 + 10 + 1) + (1 + 10 + 1).
	if r.Uploads != 2 || r.Downloads != 3 || r.Makespan != us(35) {
		t.Errorf("without locality: %d uploads, %d downloads, makespan %v; want 2, 3, 35µs", r.Uploads, r.Downloads, r.Makespan)
	}
	r = mustSim(t, Config{Locality: true}, oneGPU, chain("dl"))
	// x and y stay on the GPU; only the output z comes back.
	if r.Uploads != 0 || r.Downloads != 1 || r.Makespan != us(31) {
		t.Errorf("with locality: %d uploads, %d downloads, makespan %v; want 0, 1, 31µs", r.Uploads, r.Downloads, r.Makespan)
	}
	if r.PeakDeviceBytes != 2000 {
		t.Errorf("peak GPU memory %d, want 2000 (one input and one output)", r.PeakDeviceBytes)
	}
}

// separate returns n independent GPU-only steps, each reading its own
// 1000-byte input and writing a 1000-byte output.
func separate(n int) *Flow {
	f := NewFlow("sep")
	for i := range n {
		k := string(rune('a' + i))
		Add(f, only("op", device.GPU), 0, Reads(d("in"+k, 1000)), Writes(d("out"+k, 1000)), cost(10, 10))
	}
	return f
}

func TestPrefetchOverlapsTransfers(t *testing.T) {
	serial := mustSim(t, Config{}, oneGPU, separate(3))
	if serial.Makespan != us(36) { // 3 x (1 up + 10 + 1 down)
		t.Errorf("serial makespan %v, want 36µs", serial.Makespan)
	}
	// Upload of the next input and download of the previous output overlap
	// the current computation: 1 + 3*10 + 1.
	pre := mustSim(t, Config{Prefetch: true}, oneGPU, separate(3))
	if pre.Makespan != us(32) {
		t.Errorf("prefetch makespan %v, want 32µs", pre.Makespan)
	}
	if pre.Uploads != 3 || pre.Downloads != 3 {
		t.Errorf("prefetch moved %d up, %d down; want 3 and 3", pre.Uploads, pre.Downloads)
	}
}

func TestSimulatePATSvsFCFS(t *testing.T) {
	m := Machine{CPUs: 1, GPUs: 1}
	// A: 30 on CPU, 15 on GPU; B: 100 / 10; C: 50 / 10.
	flow := func() *Flow {
		f := NewFlow("f")
		Add(f, hybrid("A", 2), 0, cost(30, 15))
		Add(f, hybrid("B", 10), 0, cost(100, 10))
		Add(f, hybrid("C", 5), 0, cost(50, 10))
		return f
	}
	// PATS: GPU runs B then C (20), CPU runs A (30).
	p := mustSim(t, Config{Policy: PATS}, m, flow())
	// FCFS: GPU takes A then C (25), the CPU is stuck with B (100).
	f := mustSim(t, Config{Policy: FCFS}, m, flow())
	if p.Makespan != us(30) || f.Makespan != us(100) {
		t.Errorf("makespans PATS %v FCFS %v; want 30µs and 100µs", p.Makespan, f.Makespan)
	}
	for _, c := range []struct {
		r        *Report
		op       string
		cpu, gpu int
	}{{p, "A", 1, 0}, {p, "B", 0, 1}, {p, "C", 0, 1}, {f, "A", 0, 1}, {f, "B", 1, 0}} {
		if o, _ := c.r.Op(c.op); o.CPU != c.cpu || o.GPU != c.gpu {
			t.Errorf("%s: %s ran %d on CPU, %d on GPU; want %d, %d", c.r.Config, c.op, o.CPU, o.GPU, c.cpu, c.gpu)
		}
	}
	if p.Units[0].Busy != us(30) || p.Units[1].Busy != us(20) || p.Units[1].Ops != 2 {
		t.Errorf("unit reports %+v", p.Units)
	}
}

// twoStage returns n flows In -> A -> M -> B -> Out on one CPU.
func twoStage(n int) []*Flow {
	var fs []*Flow
	for i := range n {
		f := NewFlow("t" + string(rune('0'+i)))
		Add(f, hybrid("A", 1), 0, Reads(d("in", 100)), Writes(d("m", 1000)), cost(10, 10))
		Add(f, hybrid("B", 1), 0, Reads(d("m", 1000)), Writes(d("out", 10)), cost(10, 10))
		fs = append(fs, f)
	}
	return fs
}

func TestDepthFirstBoundsMemory(t *testing.T) {
	m := Machine{CPUs: 1}
	bf := mustSim(t, Config{}, m, twoStage(4)...)
	df := mustSim(t, Config{DepthFirst: true}, m, twoStage(4)...)
	// Breadth-first runs every A first: four intermediates (and the last
	// input) live at once. Depth-first finishes each flow before the next.
	if bf.PeakHostBytes != 4100 || df.PeakHostBytes != 1100 {
		t.Errorf("peak host memory: breadth-first %d, depth-first %d; want 4100 and 1100", bf.PeakHostBytes, df.PeakHostBytes)
	}
	if bf.Makespan != df.Makespan {
		t.Errorf("makespans differ: %v vs %v", bf.Makespan, df.Makespan)
	}
	// A window of one flow bounds memory the same way.
	w1 := mustSim(t, Config{Window: 1}, m, twoStage(4)...)
	if w1.PeakHostBytes != 1100 || w1.Flows != 4 {
		t.Errorf("window 1: peak %d, flows %d", w1.PeakHostBytes, w1.Flows)
	}
}

func TestLearnedSpeedups(t *testing.T) {
	truth := map[string]float64{"slow": 2, "mid": 5, "fast": 20}
	var flows []*Flow
	for i := range 30 {
		f := NewFlow("tile" + string(rune('A'+i%26)) + string(rune('0'+i/26)))
		prev := ""
		for _, name := range []string{"slow", "mid", "fast"} {
			s := truth[name]
			op := &Op[int]{Name: name, Impls: hybrid(name, 0).Impls} // no estimate given
			opts := []StepOption{Writes(d(name, 10)), cost(1000, int(1000/s))}
			if prev != "" {
				opts = append(opts, Reads(d(prev, 10)))
			}
			Add(f, op, 0, opts...)
			prev = name
		}
		flows = append(flows, f)
	}
	r := mustSim(t, Config{Policy: PATS, Learn: true, Window: 8}, Machine{CPUs: 3, GPUs: 1}, flows...)
	for name, s := range truth {
		o, ok := r.Op(name)
		if !ok || o.CPU == 0 || o.GPU == 0 {
			t.Fatalf("%s was not timed on both kinds: %+v", name, o)
		}
		if o.Learned < s*0.99 || o.Learned > s*1.01 || o.Given != 0 {
			t.Errorf("%s learned speedup %.3f, want %v", name, o.Learned, s)
		}
	}
	fast, _ := r.Op("fast")
	slow, _ := r.Op("slow")
	if fast.GPUShare() <= slow.GPUShare() {
		t.Errorf("learned PATS sends %.0f%% of fast and %.0f%% of slow to the GPU", 100*fast.GPUShare(), 100*slow.GPUShare())
	}
}

func TestSimulateIgnoresStorage(t *testing.T) {
	f := NewFlow("stored")
	Add(f, hybrid("a", 2), 0, Reads(Data{Key: "in", Bytes: 10, Store: nopStore{}}), Writes(Data{Key: "out", Bytes: 10, Store: nopStore{}}), cost(10, 5))
	r := mustSim(t, Config{Prefetch: true}, Machine{CPUs: 1, GPUs: 1}, f)
	if r.Flows != 1 || r.Makespan != us(5) {
		t.Errorf("flow with stored data: %d flows in %v", r.Flows, r.Makespan)
	}
}

func TestSimulateDeterministic(t *testing.T) {
	run := func() *Report {
		var fs []*Flow
		for i := range 20 {
			f := NewFlow("f")
			Add(f, hybrid("a", 3), i, Reads(d("in", 500)), Writes(d("m", 500)), cost(30+i, 10))
			Add(f, hybrid("b", 8), i, Reads(d("m", 500)), Writes(d("n", 500)), cost(80, 10+i%3))
			Add(f, hybrid("c", 1.5), i, Reads(d("m", 500), d("n", 500)), Writes(d("out", 50)), cost(15, 10))
			fs = append(fs, f)
		}
		return mustSim(t, Config{Policy: PATS, Locality: true, TransferImpact: 0.1, Prefetch: true, Window: 5}, Machine{CPUs: 3, GPUs: 2, Bandwidth: 1e8, Latency: time.Microsecond}, fs...)
	}
	a, b := run(), run()
	if !reflect.DeepEqual(a, b) {
		t.Errorf("two identical simulations differ:\n%v\n%v", a, b)
	}
	if a.Flows != 20 || a.Failed != 0 {
		t.Errorf("flows %d failed %d", a.Flows, a.Failed)
	}
}

// finishFlows returns n flows of two hybrid operations: b (speedup 2, 40
// and 20 ms) then a (speedup 50, 1 s on a CPU core, 20 ms on a GPU).
func finishFlows(n int) []*Flow {
	a, b := hybrid("a", 50), hybrid("b", 2)
	var fs []*Flow
	for i := range n {
		f := NewFlow(string(rune('A' + i)))
		Add(f, b, 0, Writes(d("x", 1)), cost(40000, 20000))
		Add(f, a, 0, Reads(d("x", 1)), cost(1000000, 20000))
		fs = append(fs, f)
	}
	return fs
}

// With speedups this large, plain PATS lets an idle core take an a that
// the GPU would finish in 20 ms, and the flow waits a second for it;
// FinishAware leaves it to the GPU once a's GPU time is known.
func TestFinishAware(t *testing.T) {
	m := Machine{CPUs: 1, GPUs: 1}
	plain := mustSim(t, Config{Policy: PATS}, m, finishFlows(10)...)
	aware := mustSim(t, Config{Policy: PATS, FinishAware: true}, m, finishFlows(10)...)
	oa, _ := aware.Op("a")
	op, _ := plain.Op("a")
	if op.CPU == 0 {
		t.Fatalf("plain PATS ran no a on the CPU core; the test does not exercise the rule")
	}
	if oa.CPU != 0 {
		t.Errorf("FinishAware ran %d a on the CPU core, want 0", oa.CPU)
	}
	if aware.Makespan >= plain.Makespan {
		t.Errorf("makespan %v with FinishAware, %v without", aware.Makespan, plain.Makespan)
	}
	if !strings.Contains(aware.Config, "+finish") {
		t.Errorf("config %q does not name FinishAware", aware.Config)
	}
	// A backlog longer than a core's time is shared: with 200 a ready at
	// once, the GPU has seconds of work ahead, so the core takes some a
	// besides the one it takes before any is timed.
	a := hybrid("a", 50)
	var fs []*Flow
	for i := range 200 {
		f := NewFlow(fmt.Sprint(i))
		Add(f, a, 0, cost(1000000, 20000))
		fs = append(fs, f)
	}
	big := mustSim(t, Config{Policy: PATS, FinishAware: true}, m, fs...)
	if o, _ := big.Op("a"); o.CPU < 2 {
		t.Errorf("FinishAware ran %d a on the core with a backlog of seconds on the GPU", o.CPU)
	}
}

// The simulator models staging: without Prefetch or StageAhead the worker
// taking the first reader stages the input; with either the flow's inputs
// are staged in the background from admission.
func TestSimStaging(t *testing.T) {
	mk := func() []*Flow {
		f := NewFlow("s")
		Add(f, only("r", device.CPU), 0, Reads(Data{Key: "in", Bytes: 1e6, Store: nopStore{}}), cost(1000, 0))
		return []*Flow{f}
	}
	m := Machine{CPUs: 1, StageBandwidth: 1e9} // 1 ms for the input
	for _, cfg := range []Config{{}, {Prefetch: true}, {StageAhead: true}} {
		r := mustSim(t, cfg, m, mk()...)
		if r.Makespan != 2*time.Millisecond {
			t.Errorf("%v: makespan %v, want 2ms", cfg, r.Makespan)
		}
	}
	if r := mustSim(t, Config{}, Machine{CPUs: 1}, mk()...); r.Makespan != time.Millisecond {
		t.Errorf("without a staging rate: makespan %v, want 1ms", r.Makespan)
	}
}

// A worker that takes a reader of an input another worker is still
// staging waits for that staging to end, as a real worker waits on the
// other's read of the store (stageOnce), and the waiting is the
// difference: core 0 takes "a" and stages the input (100 ms), core 1
// takes "b" at once; "b" can start only at 100 ms and ends at 150 ms
// (without the wait it would end at 50 ms, and the run at 101 ms).
func TestSimStagingWait(t *testing.T) {
	f := NewFlow("s")
	in := Data{Key: "in", Bytes: 1e8, Store: nopStore{}}
	Add(f, only("a", device.CPU), 0, Reads(in), Writes(Data{Key: "x", Bytes: 1}), cost(1000, 0))
	Add(f, only("b", device.CPU), 0, Reads(in), Writes(Data{Key: "y", Bytes: 1}), cost(50000, 0))
	r := mustSim(t, Config{}, Machine{CPUs: 2, StageBandwidth: 1e9}, f)
	if want := 150 * time.Millisecond; r.Makespan != want {
		t.Errorf("makespan %v, want %v: b waits for the staging a's core started", r.Makespan, want)
	}
}

// twoStoredFlows returns two flows of one 10 ms CPU operation each, whose
// output of 1 MB has a store.
func twoStoredFlows() []*Flow {
	var fs []*Flow
	for i := range 2 {
		f := NewFlow(fmt.Sprint(i))
		Add(f, only("a", device.CPU), 0, Writes(Data{Key: "out", Bytes: 1e6, Store: nopStore{}}), cost(10000, 0))
		fs = append(fs, f)
	}
	return fs
}

// A completed flow's outputs with a store are committed at the machine's
// CommitBandwidth, and the flow keeps its place in the window until then:
// with a window of one, each flow's 10 ms of work is followed by its 10
// ms commit before the next is admitted (40 ms); with a window of two the
// second flow computes while the first commits (30 ms); without a commit
// rate the commits are free (20 ms).
func TestSimCommits(t *testing.T) {
	mk := twoStoredFlows
	for _, c := range []struct {
		window int
		bw     float64
		want   time.Duration
	}{{1, 1e8, 40 * time.Millisecond}, {2, 1e8, 30 * time.Millisecond}, {1, 0, 20 * time.Millisecond}} {
		r := mustSim(t, Config{Window: c.window}, Machine{CPUs: 1, CommitBandwidth: c.bw}, mk()...)
		if r.Makespan != c.want {
			t.Errorf("window %d, commits at %g B/s: makespan %v, want %v", c.window, c.bw, r.Makespan, c.want)
		}
		if r.Flows != 2 {
			t.Errorf("window %d: %d flows done, want 2", c.window, r.Flows)
		}
	}
}

// Machine.CommitStreams: two flows that complete together on two cores
// commit one after the other on one stream (10 ms of work, then two 10
// ms commits: 30 ms) and at once on two or more (20 ms).
func TestSimCommitStreams(t *testing.T) {
	mk := twoStoredFlows
	for _, c := range []struct {
		streams int
		want    time.Duration
	}{{0, 30 * time.Millisecond}, {1, 30 * time.Millisecond}, {2, 20 * time.Millisecond}, {8, 20 * time.Millisecond}} {
		r := mustSim(t, Config{Window: 2}, Machine{CPUs: 2, CommitBandwidth: 1e8, CommitStreams: c.streams}, mk()...)
		if r.Makespan != c.want {
			t.Errorf("%d commit streams: makespan %v, want %v", c.streams, r.Makespan, c.want)
		}
	}
	if _, err := Simulate(Config{}, Machine{CPUs: 1, CommitStreams: -1}, mk()); err == nil {
		t.Error("a negative CommitStreams was accepted")
	}
}

// A flow's outputs are written one by one, and on one stream the flows
// that complete together interleave them: flows 0 and 1 (10 ms of work,
// two 10 ms outputs each) complete at 10 ms, their outputs go 0, 1, 0, 1,
// so flow 0 frees its place in the window at 40 ms, and flow 2 (30 ms of
// work, no stored output) ends at 70 ms; with a stream each, flow 0 is
// committed at 30 ms and flow 2 ends at 60 ms.
func TestSimCommitsInterleave(t *testing.T) {
	mk := func() []*Flow {
		var fs []*Flow
		for i := range 2 {
			f := NewFlow(fmt.Sprint(i))
			Add(f, only("a", device.CPU), 0, Writes(Data{Key: "o1", Bytes: 1e6, Store: nopStore{}}, Data{Key: "o2", Bytes: 1e6, Store: nopStore{}}), cost(10000, 0))
			fs = append(fs, f)
		}
		f := NewFlow("2")
		Add(f, only("a", device.CPU), 0, cost(30000, 0))
		return append(fs, f)
	}
	for _, c := range []struct {
		streams int
		want    time.Duration
	}{{1, 70 * time.Millisecond}, {2, 60 * time.Millisecond}} {
		r := mustSim(t, Config{Window: 2}, Machine{CPUs: 2, CommitBandwidth: 1e8, CommitStreams: c.streams}, mk()...)
		if r.Makespan != c.want {
			t.Errorf("%d commit streams: makespan %v, want %v", c.streams, r.Makespan, c.want)
		}
	}
}

// With Learn and no estimates, FinishAware lets one core take the first
// CPU sample of an operation and leaves the others' copies to the GPU
// until the sample is in.
func TestFinishAwareLearn(t *testing.T) {
	a := hybrid("a", 0)
	var fs []*Flow
	for i := range 20 {
		f := NewFlow(fmt.Sprint(i))
		Add(f, a, 0, cost(1000000, 20000))
		fs = append(fs, f)
	}
	r := mustSim(t, Config{Policy: PATS, Learn: true, FinishAware: true}, Machine{CPUs: 4, GPUs: 1}, fs...)
	if o, _ := r.Op("a"); o.CPU != 1 {
		t.Errorf("%d a on CPU cores, want 1 (the first sample)", o.CPU)
	}
}

// Of the workers that stage one input at once, only the one that read
// the store is told so: the others waited, and their wait is no
// staging of the bytes (the rate FinishAware estimates stagings with).
func TestStageOnceCountsOneStaging(t *testing.T) {
	var s stageOnce
	var wg sync.WaitGroup
	var mu sync.Mutex
	stagers := 0
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			staged, err := s.do(context.Background(), nopStore{})
			if err != nil {
				t.Error(err)
			}
			if staged {
				mu.Lock()
				stagers++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if stagers != 1 {
		t.Errorf("%d calls staged, want 1", stagers)
	}
}

// With Prefetch, background staging takes no unit's time unless the
// machine charges it to the cores (StageOnCores): two flows, each a 10 ms
// operation on a core reading an input whose staging takes 10 ms. Free
// staging: both inputs are in at 10 ms, the core computes until 30 ms.
// On the core: it stages both (20 ms), then computes (40 ms). Without a
// core (a GPU alone) the stagings stay in the background.
func TestSimStageOnCores(t *testing.T) {
	mk := func(k device.Kind) []*Flow {
		var fs []*Flow
		for i := range 2 {
			f := NewFlow(fmt.Sprint(i))
			Add(f, only("r", k), 0, Reads(Data{Key: "in", Bytes: 1e6, Store: nopStore{}}), cost(10000, 10000))
			fs = append(fs, f)
		}
		return fs
	}
	m := Machine{CPUs: 1, StageBandwidth: 1e8} // 10 ms per input
	free := mustSim(t, Config{Prefetch: true}, m, mk(device.CPU)...)
	m.StageOnCores = true
	cores := mustSim(t, Config{Prefetch: true}, m, mk(device.CPU)...)
	if free.Makespan != 30*time.Millisecond || cores.Makespan != 40*time.Millisecond {
		t.Errorf("makespan %v with free staging (want 30ms), %v with staging on the core (want 40ms)", free.Makespan, cores.Makespan)
	}
	gpu := mustSim(t, Config{Prefetch: true}, Machine{GPUs: 1, StageBandwidth: 1e8, StageOnCores: true}, mk(device.GPU)...)
	if gpu.Makespan != 30*time.Millisecond {
		t.Errorf("GPU alone: makespan %v, want 30ms (stagings in the background)", gpu.Makespan)
	}
	// StageAhead stages in the background as Prefetch does: on the core
	// with StageOnCores, for free without.
	if r := mustSim(t, Config{StageAhead: true}, m, mk(device.CPU)...); r.Makespan != 40*time.Millisecond {
		t.Errorf("StageAhead, staging on the core: makespan %v, want 40ms", r.Makespan)
	}
	if r := mustSim(t, Config{StageAhead: true}, Machine{CPUs: 1, StageBandwidth: 1e8}, mk(device.CPU)...); r.Makespan != 30*time.Millisecond {
		t.Errorf("StageAhead, free staging: makespan %v, want 30ms", r.Makespan)
	}
	// A GPU without prefetch, the stagings in the background: 10 ms for
	// the first input, then the two runs (the second input staged
	// meanwhile); staging at the first reader, the GPU stages each
	// (40 ms).
	gpuAhead := mustSim(t, Config{StageAhead: true}, Machine{GPUs: 1, StageBandwidth: 1e8}, mk(device.GPU)...)
	gpuFirst := mustSim(t, Config{}, Machine{GPUs: 1, StageBandwidth: 1e8}, mk(device.GPU)...)
	if gpuAhead.Makespan != 30*time.Millisecond || gpuFirst.Makespan != 40*time.Millisecond {
		t.Errorf("GPU: makespan %v staged ahead (want 30ms), %v staged by the GPU's worker (want 40ms)", gpuAhead.Makespan, gpuFirst.Makespan)
	}
	// Without Prefetch the worker stages as before: the option changes nothing.
	a := mustSim(t, Config{}, Machine{CPUs: 1, StageBandwidth: 1e8}, mk(device.CPU)...)
	b := mustSim(t, Config{}, m, mk(device.CPU)...)
	if a.Makespan != b.Makespan {
		t.Errorf("without Prefetch: makespan %v, with StageOnCores %v", a.Makespan, b.Makespan)
	}
}

// The storage writes one flow's outputs at a time: two flows that complete
// together on two cores (10 ms) commit one after the other (10 ms each),
// so the makespan is 30 ms, not 20.
func TestSimCommitsQueue(t *testing.T) {
	var fs []*Flow
	for i := range 2 {
		f := NewFlow(fmt.Sprint(i))
		Add(f, only("a", device.CPU), 0, Writes(Data{Key: "out", Bytes: 1e6, Store: nopStore{}}), cost(10000, 0))
		fs = append(fs, f)
	}
	r := mustSim(t, Config{Window: 2}, Machine{CPUs: 2, CommitBandwidth: 1e8}, fs...)
	if want := 30 * time.Millisecond; r.Makespan != want {
		t.Errorf("makespan %v, want %v: the second commit waits for the first", r.Makespan, want)
	}
}

// With Locality a GPU keeps the data of a flow while it runs another's
// operation: A1 (speedup 50) writes xa, then B1 (10) outranks A2 (1, reads
// xa) and runs first; xa stays on the GPU, so A2 and B2 upload nothing
// (evicting xa on B1's take re-uploaded it for A2), and with no core to
// read them nothing but the outputs comes back.
func TestLocalityKeepsCopies(t *testing.T) {
	flow := func(name string, first float64) *Flow {
		f := NewFlow(name)
		Add(f, hybrid(name+"1", first), 0, Writes(d("x", 1000)), cost(100, 10))
		Add(f, hybrid(name+"2", 1), 0, Reads(d("x", 1000)), Writes(d("out", 1000)), cost(100, 10))
		return f
	}
	r := mustSim(t, Config{Policy: PATS, Locality: true, TransferImpact: 0.1}, oneGPU, flow("a", 50), flow("b", 10))
	if r.Uploads != 0 {
		t.Errorf("%d uploads, want 0: the GPU kept both flows' x", r.Uploads)
	}
	if r.Downloads != 2 {
		t.Errorf("%d downloads, want 2 (the outputs)", r.Downloads)
	}
}

// memGPU is a simulated GPU that reports a memory size.
type memGPU struct {
	Sim
	mem int64
}

func (g memGPU) Memory() int64 { return g.mem }

// A GPU keeps copies for later readers within half its memory, dropping
// the oldest first: with room for 2500 bytes, taking R (which writes 1000)
// over X and Y (1000 each, still to be read) drops X, the oldest
// (downloading it), and keeps Y; S then uploads X alone.
func TestLocalityKeepsWithinMemory(t *testing.T) {
	cfg, err := Config{Policy: PATS, Locality: true}.validate()
	if err != nil {
		t.Fatal(err)
	}
	sims := Machine{GPUs: 1}.sims()
	c := newScheduler(cfg, []device.Device{memGPU{Sim: sims[0], mem: 5000}})
	f := NewFlow("mem")
	Add(f, only("P", device.GPU), 0, Writes(d("X", 1000)))
	Add(f, only("Q", device.GPU), 0, Writes(d("Y", 1000)))
	Add(f, only("R", device.GPU), 0, Writes(d("Z", 1000)))
	Add(f, only("S", device.GPU), 0, Reads(d("X", 1000), d("Y", 1000), d("Z", 1000)))
	fs := c.admit(f)
	w := gpuWorker(c)
	for _, n := range fs.nodes[:2] {
		c.take(w, n)
		c.computed(w, n, us(1), nil)
	}
	// No core waits for X or Y (S is not ready), so nothing was written
	// back; taking R drops X, downloading it, and keeps Y.
	a := c.take(w, fs.nodes[2])
	if ks := keys(a.evict); !slices.Equal(ks, []string{"X"}) {
		t.Errorf("taking R downloaded %v; want X only", ks)
	}
	if ks := keys(w.resident); slices.Contains(ks, "X") || !slices.Contains(ks, "Y") {
		t.Errorf("resident %v; want Y kept and X gone", ks)
	}
	c.computed(w, fs.nodes[2], us(1), nil)
	for _, dd := range a.evict {
		c.downloaded(dd, nil)
	}
	if a := c.take(w, fs.nodes[3]); !slices.Equal(keys(a.upload), []string{"X"}) {
		t.Errorf("taking S uploaded %v; want X only", keys(a.upload))
	}
}

// With Config.StorageOnCores the only core commits too: two flows of a
// 10-ms operation, each committing 10 ms of output, take 40 ms on one core
// (operation, commit, operation, commit, the stagings free here), against
// 30 ms when the commits run beside the core; and it stages as
// Machine.StageOnCores does.
func TestSimStorageOnCores(t *testing.T) {
	mk := func(in bool) []*Flow {
		var fs []*Flow
		for i := range 2 {
			f := NewFlow(fmt.Sprint(i))
			opts := []StepOption{Writes(Data{Key: "out", Bytes: 1e6, Store: nopStore{}}), cost(10000, 0)}
			if in {
				opts = append(opts, Reads(Data{Key: "in", Bytes: 1e6, Store: nopStore{}}))
			}
			Add(f, only("a", device.CPU), 0, opts...)
			fs = append(fs, f)
		}
		return fs
	}
	m := Machine{CPUs: 1, CommitBandwidth: 1e8}
	beside := mustSim(t, Config{Window: 2}, m, mk(false)...)
	onCore := mustSim(t, Config{Window: 2, StorageOnCores: true}, m, mk(false)...)
	if beside.Makespan != 30*time.Millisecond || onCore.Makespan != 40*time.Millisecond {
		t.Errorf("makespan %v with commits beside the core (want 30ms), %v on it (want 40ms)", beside.Makespan, onCore.Makespan)
	}
	// Two cores: the commits still run one at a time, unless CoreCommits
	// lets both cores commit at once.
	two := mustSim(t, Config{Window: 2, StorageOnCores: true}, Machine{CPUs: 2, CommitBandwidth: 1e8}, mk(false)...)
	if two.Makespan != 30*time.Millisecond {
		t.Errorf("two cores: makespan %v, want 30ms (10 ms of operations, then the commits one after the other)", two.Makespan)
	}
	both := mustSim(t, Config{Window: 2, StorageOnCores: true, CoreCommits: 2}, Machine{CPUs: 2, CommitBandwidth: 1e8}, mk(false)...)
	if both.Makespan != 20*time.Millisecond {
		t.Errorf("two cores, CoreCommits 2: makespan %v, want 20ms (10 ms of operations, then the commits at once)", both.Makespan)
	}
	// Stagings too, with Prefetch: 2 x (10 ms staging, 10 ms operation,
	// 10 ms commit) on the one core.
	m.StageBandwidth = 1e8
	staged := mustSim(t, Config{Window: 2, Prefetch: true, StorageOnCores: true}, m, mk(true)...)
	if staged.Makespan != 60*time.Millisecond {
		t.Errorf("stagings and commits on the core: makespan %v, want 60ms", staged.Makespan)
	}
	// No CPU core: no effect.
	gpuFlows := func() []*Flow {
		f := NewFlow("g")
		Add(f, only("g", device.GPU), 0, Writes(Data{Key: "out", Bytes: 1e6, Store: nopStore{}}), cost(0, 10000))
		return []*Flow{f}
	}
	a := mustSim(t, Config{}, Machine{GPUs: 1, CommitBandwidth: 1e8}, gpuFlows()...)
	b := mustSim(t, Config{StorageOnCores: true}, Machine{GPUs: 1, CommitBandwidth: 1e8}, gpuFlows()...)
	if a.Makespan != b.Makespan {
		t.Errorf("no core: makespan %v, with StorageOnCores %v", a.Makespan, b.Makespan)
	}
}

// TestEmptyFlows: a flow with no steps completes at once, in the
// simulator (which recursed without end on it) and in the manager.
func TestEmptyFlows(t *testing.T) {
	full := NewFlow("full")
	Add(full, hybrid("op", 2), 0, cost(10, 5))
	r := mustSim(t, Config{Window: 1}, Machine{CPUs: 1, GPUs: 1, Bandwidth: 1e9}, NewFlow("a"), full, NewFlow("b"))
	if r.Flows != 3 || r.Failed != 0 {
		t.Errorf("simulated: %d flows completed, %d failed, want 3 and 0", r.Flows, r.Failed)
	}
	m, err := Start(context.Background(), Config{Window: 1}, CPUUnits(1)...)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, name := range []string{"a", "b"} {
		h, err := m.Submit(context.Background(), NewFlow(name))
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Wait(context.Background()); err != nil {
			t.Errorf("manager: empty flow %s: %v", name, err)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if r := m.Report(); r.Flows != 2 {
		t.Errorf("manager: %d flows completed, want 2", r.Flows)
	}
}
