package pats

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gohtgs/htgs/device"
)

// alwaysCPU is a policy that never runs anything on a GPU.
type alwaysCPU struct{}

func (alwaysCPU) Choose(u device.Unit, ready []device.Candidate) int {
	if u.Device.Kind() == device.GPU {
		return -1
	}
	return 0
}

func (alwaysCPU) String() string { return "always-cpu" }

// longestFirst runs the candidate with the largest modelled CPU cost first
// and records what it chose.
type longestFirst struct{ chosen []string }

func (l *longestFirst) Choose(_ device.Unit, ready []device.Candidate) int {
	best := 0
	for i, c := range ready {
		if c.CPUTime > ready[best].CPUTime {
			best = i
		}
	}
	l.chosen = append(l.chosen, ready[best].Name)
	return best
}

// costed returns a flow of independent hybrid steps named A, B, ... whose
// CPU costs are the given microseconds (GPU: a tenth).
func costed(name string, cpus ...int) *Flow {
	f := NewFlow(name)
	for i, c := range cpus {
		Add(f, hybrid(string(rune('A'+i)), 10), i, cost(c, c/10))
	}
	return f
}

// mixedFlows is a workload with dependencies and varied speedups.
func mixedFlows() []*Flow {
	var fs []*Flow
	for i := range 12 {
		f := NewFlow(fmt.Sprint("t", i))
		a := hybrid("seg", 8)
		b := hybrid("open", 1.5)
		c := hybrid("feat", 15)
		Add(f, a, i, Writes(d("m", 1<<20)), cost(400+10*i, 50))
		Add(f, b, i, Reads(d("m", 1<<20)), Writes(d("n", 1<<20)), cost(100, 70))
		Add(f, c, i, Reads(d("n", 1<<20)), Writes(d("o", 1<<10)), cost(600, 40))
		fs = append(fs, f)
	}
	return fs
}

func TestChooserPolicyMatchesBuiltin(t *testing.T) {
	m := Machine{CPUs: 3, GPUs: 1, Bandwidth: 1e9}
	for _, base := range []Config{
		{Policy: FCFS, Window: 4},
		{Policy: PATS, Window: 4},
		{Policy: PATS, Window: 6, FinishAware: true, Learn: true},
	} {
		want := mustSim(t, base, m, mixedFlows()...)
		cc := base
		cc.Chooser, cc.Policy = base.Policy, FCFS
		got := mustSim(t, cc, m, mixedFlows()...)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%v as a Chooser:\n%v\nbuilt in:\n%v", base.Policy, got, want)
		}
	}
}

func TestPolicyChoose(t *testing.T) {
	cands := []device.Candidate{{Name: "a", Estimate: 3}, {Name: "b", Estimate: 1}, {Name: "c", Estimate: 9}, {Name: "d", Estimate: 1}, {Name: "e", Estimate: 9}}
	cpu, gpu := device.Unit{Device: device.Host{}}, device.Unit{Device: Sim{Type: device.GPU}}
	for _, c := range []struct {
		p    Policy
		u    device.Unit
		want int
	}{{FCFS, cpu, 0}, {FCFS, gpu, 0}, {PATS, cpu, 1}, {PATS, gpu, 2}} {
		if got := c.p.Choose(c.u, cands); got != c.want {
			t.Errorf("%v on %v chose %d, want %d", c.p, c.u.Device.Name(), got, c.want)
		}
	}
	if got := PATS.Choose(cpu, nil); got != -1 {
		t.Errorf("empty ready: %d", got)
	}
}

func TestChooserAlwaysCPUSim(t *testing.T) {
	m := Machine{CPUs: 2, GPUs: 1}
	pats := mustSim(t, Config{Policy: PATS}, m, mixedFlows()...)
	cpu := mustSim(t, Config{Chooser: alwaysCPU{}}, m, mixedFlows()...)
	var gpuOps int
	for _, o := range pats.Ops {
		gpuOps += o.GPU
	}
	if gpuOps == 0 {
		t.Fatal("PATS ran nothing on the GPU")
	}
	for _, o := range cpu.Ops {
		if o.GPU != 0 || o.CPU != 12 {
			t.Errorf("always-cpu: %s ran %d on CPUs and %d on the GPU", o.Name, o.CPU, o.GPU)
		}
	}
	if cpu.Config != "always-cpu" || cpu.Flows != 12 {
		t.Errorf("report %q with %d flows", cpu.Config, cpu.Flows)
	}
	if s := (Config{Chooser: &longestFirst{}, Window: 2}).String(); s != "custom w=2" {
		t.Errorf("String = %q", s)
	}
}

func TestChooserLongestFirstSim(t *testing.T) {
	l := &longestFirst{}
	mustSim(t, Config{Chooser: l}, Machine{CPUs: 1}, costed("f", 30, 10, 50, 20, 40))
	if want := []string{"C", "E", "A", "D", "B"}; !slices.Equal(l.chosen, want) {
		t.Errorf("longest first chose %v, want %v", l.chosen, want)
	}
	// FCFS runs them in the flow's order, in the same total time.
	r := mustSim(t, Config{Policy: FCFS}, Machine{CPUs: 1}, costed("g", 30, 10, 50, 20, 40))
	if r.Makespan != us(150) {
		t.Errorf("makespan %v", r.Makespan)
	}
}

func TestChooserStallIsReported(t *testing.T) {
	never := chooserFunc(func(device.Unit, []device.Candidate) int { return 7 })
	_, err := Simulate(Config{Chooser: never}, Machine{CPUs: 1}, []*Flow{costed("f", 1)})
	if err == nil || !strings.Contains(err.Error(), "stalled") {
		t.Errorf("a chooser choosing out of range: %v", err)
	}
}

type chooserFunc func(device.Unit, []device.Candidate) int

func (f chooserFunc) Choose(u device.Unit, r []device.Candidate) int { return f(u, r) }

func TestChooserCandidates(t *testing.T) {
	var seen [][]device.Candidate
	rec := chooserFunc(func(u device.Unit, r []device.Candidate) int {
		if u.Device.Kind() == device.GPU {
			seen = append(seen, slices.Clone(r))
		}
		return 0
	})
	c := testScheduler(Config{Chooser: rec, Locality: true}, 0, 1)
	f := NewFlow("f")
	Add(f, hybrid("w", 4), 0, Writes(d("x", 8)), cost(100, 10))
	Add(f, only("cpu", device.CPU), 0)
	Add(f, only("gpu", device.GPU), 0, Reads(d("x", 8)))
	Add(f, hybrid("other", 2), 0, Reads(d("y", 16)))
	c.admit(f)
	g := gpuWorker(c)
	n := c.pick(g)
	c.take(g, n)
	c.computed(g, n, us(10), nil)
	if n2 := c.pick(g); n2 == nil {
		t.Fatal("nothing picked after w")
	}
	if len(seen) != 2 {
		t.Fatalf("chooser called %d times", len(seen))
	}
	first := seen[0]
	if len(first) != 2 || first[0].Name != "w" || first[1].Name != "other" {
		t.Fatalf("first offer %+v", first)
	}
	w := first[0]
	if w.Group != "f" || w.Estimate != 4 || w.CPUTime != us(100) || w.GPUTime != us(10) || w.Local || w.Bytes != 8 {
		t.Errorf("candidate w = %+v", w)
	}
	second := seen[1]
	i := slices.IndexFunc(second, func(c device.Candidate) bool { return c.Name == "gpu" })
	if i < 0 || !second[i].Local || !math.IsInf(second[i].Estimate, 1) {
		t.Errorf("second offer %+v", second)
	}
}

// kindOp records the kind of unit each instance ran on.
func kindOp(j *journal, name string, cpu int) *Op[string] {
	mk := func(k device.Kind) Impl[string] {
		return func(_ context.Context, _ device.Device, s string) error {
			j.add("%s %v", s, k)
			return nil
		}
	}
	return &Op[string]{Name: name, Speedup: 10, Impls: map[device.Kind]Impl[string]{device.CPU: mk(device.CPU), device.GPU: mk(device.GPU)}}
}

func TestChooserWithCPUUnits(t *testing.T) {
	// Always CPU: a GPU unit beside two cores never runs anything.
	j := &journal{}
	m := startManager(t, Config{Chooser: alwaysCPU{}, Window: 3}, append(CPUUnits(2), Sim{Type: device.GPU})...)
	var hs []*Job
	for i := range 6 {
		f := NewFlow(fmt.Sprint("f", i))
		Add(f, kindOp(j, "a", 1), fmt.Sprint(i, "a"), Writes(d("x", 1)))
		Add(f, kindOp(j, "b", 1), fmt.Sprint(i, "b"), Reads(d("x", 1)))
		hs = append(hs, submit(t, m, f))
	}
	for _, h := range hs {
		if err := h.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	ev := j.list()
	if len(ev) != 12 {
		t.Fatalf("%d events: %v", len(ev), ev)
	}
	for _, e := range ev {
		if !strings.HasSuffix(e, " cpu") {
			t.Errorf("ran %s", e)
		}
	}
	if r := m.Report(); r.Units[2].Ops != 0 || r.Config != "always-cpu w=3" {
		t.Errorf("report: %v, units %+v", r.Config, r.Units)
	}

	// Longest first on one core: the steps of a flow admitted at once run
	// by decreasing cost instead of in order.
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Policy: FCFS}, "A B C D E"},
		{Config{Chooser: &longestFirst{}}, "C E A D B"},
	} {
		j := &journal{}
		m := startManager(t, c.cfg, CPUUnits(1)...)
		f := NewFlow("f")
		for i, cpu := range []int{30, 10, 50, 20, 40} {
			Add(f, logOp(j, string(rune('A'+i)), 0), "f", WithCost(Cost{CPU: time.Duration(cpu)}))
		}
		if err := submit(t, m, f).Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range j.list() {
			got = append(got, strings.TrimPrefix(e, "f:"))
		}
		if s := strings.Join(got, " "); s != c.want {
			t.Errorf("%v: order %s, want %s", c.cfg, s, c.want)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
