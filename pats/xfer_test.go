package pats

import (
	"fmt"
	"strings"
	"testing"
)

// xferFlows returns n flows of two independent operations: "wide", with
// the larger compute speedup (100: wideCPU over wideGPU microseconds) but
// an input of wideBytes whose upload takes about as long as its CPU time,
// or longer, and "narrow", with a speedup of 10 (narrowCPU over narrowCPU/10
// microseconds) and little data. Plain PATS gives the GPU "wide";
// counting the data movement, "narrow" saves more CPU time per unit of GPU
// time.
func xferFlows(n int, wideBytes int64, wideCPU, narrowCPU int) []*Flow {
	wide, narrow := hybrid("wide", 100), hybrid("narrow", 10)
	fs := make([]*Flow, n)
	for i := range fs {
		f := NewFlow(fmt.Sprint(i))
		Add(f, wide, i, Reads(Data{Key: "big", Bytes: wideBytes}), Writes(Data{Key: "w", Bytes: 1000}), cost(wideCPU, wideCPU/100))
		Add(f, narrow, i, Reads(Data{Key: "small", Bytes: 1000}), Writes(Data{Key: "n", Bytes: 1000}), cost(narrowCPU, narrowCPU/10))
		fs[i] = f
	}
	return fs
}

// TestTransferAwareRanksByDataMovement checks in the simulator that
// TransferAware moves the GPU from the operation with the larger compute
// speedup to the one that saves more CPU time per GPU time once transfers
// count, and that the makespan improves.
func TestTransferAwareRanksByDataMovement(t *testing.T) {
	m := Machine{CPUs: 2, GPUs: 1, Bandwidth: 1e9}
	plain := mustSim(t, Config{Policy: PATS}, m, xferFlows(40, 1e8, 10000, 50000)...)
	aware := mustSim(t, Config{Policy: PATS, TransferAware: true}, m, xferFlows(40, 1e8, 10000, 50000)...)
	pw, _ := plain.Op("wide")
	aw, _ := aware.Op("wide")
	an, _ := aware.Op("narrow")
	if pw.GPU < 10 {
		t.Fatalf("plain PATS ran %d of 40 wide on the GPU; the test does not exercise the rule", pw.GPU)
	}
	// The first, before any transfer is timed, and those left when no
	// narrow is ready, may go to the GPU.
	if aw.GPU*2 > pw.GPU {
		t.Errorf("TransferAware ran %d wide on the GPU, plain PATS %d", aw.GPU, pw.GPU)
	}
	if an.GPU < 30 {
		t.Errorf("TransferAware ran %d of 40 narrow on the GPU", an.GPU)
	}
	if aware.Makespan >= plain.Makespan {
		t.Errorf("makespan %v with TransferAware, %v without", aware.Makespan, plain.Makespan)
	}
	if !strings.Contains(aware.Config, "+xfer") {
		t.Errorf("config %q does not name TransferAware", aware.Config)
	}
	// With FinishAware the cores leave to the GPU what it would finish
	// first by the same ranking: still no wide on the GPU after the first.
	fin := mustSim(t, Config{Policy: PATS, TransferAware: true, FinishAware: true}, m, xferFlows(40, 1e8, 10000, 50000)...)
	if o, _ := fin.Op("wide"); o.GPU*2 > pw.GPU {
		t.Errorf("TransferAware+FinishAware ran %d wide on the GPU, plain PATS %d", o.GPU, pw.GPU)
	}
}

// TestTransferAwareCountsStaging checks the rank's staging term: an input
// still in storage costs its staging on either device, so it lowers the
// effective speedup of its first reader (the CPU core's time and the GPU's
// both grow by it), and an input already staged costs nothing.
func TestTransferAwareCountsStaging(t *testing.T) {
	sc := testScheduler(Config{Policy: PATS, TransferAware: true}, 1, 1)
	f := NewFlow("f")
	Add(f, hybrid("a", 10), 0, Reads(Data{Key: "in", Bytes: 1000, Store: nopStore{}}), Writes(Data{Key: "out", Bytes: 1000}), cost(1000, 100))
	fs := sc.admit(f)
	n := fs.nodes[0]
	g := gpuWorker(sc)
	if got := sc.rank(g.bit(), n); got != 10 {
		t.Fatalf("rank %v before any transfer or staging was timed, want the estimate 10", got)
	}
	sc.moved(1000, us(100))    // 100 µs per 1000 bytes
	sc.stagedIn(1000, us(800)) // 800 µs per 1000 bytes
	// (1000 + 800) / (100 + 2000 bytes moved = 200 + 800).
	if got, want := sc.rank(g.bit(), n), 1800.0/1100; got < want-1e-9 || got > want+1e-9 {
		t.Errorf("rank %v with the input in storage, want %v", got, want)
	}
	n.reads[0].staged = true
	if got, want := sc.rank(g.bit(), n), 1000.0/300; got < want-1e-9 || got > want+1e-9 {
		t.Errorf("rank %v with the input staged, want %v", got, want)
	}
	n.reads[0].gpus = g.bit() // in the GPU's memory: only the output moves
	if got, want := sc.rank(g.bit(), n), 1000.0/200; got < want-1e-9 || got > want+1e-9 {
		t.Errorf("rank %v with the input on the GPU, want %v", got, want)
	}
	if got := sc.rank(0, n); got >= 1000.0/200 {
		t.Errorf("rank %v from no GPU's view counts the upload, want below %v", got, 1000.0/200)
	}
}

func TestTransferAwareNeedsPATS(t *testing.T) {
	for _, c := range []Config{{Policy: FCFS, TransferAware: true}, {Policy: PATS, TransferAware: true, Chooser: FCFS}} {
		if _, err := c.validate(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	if _, err := Simulate(Config{Policy: FCFS, TransferAware: true}, Machine{CPUs: 1}, nil); err == nil {
		t.Error("Simulate accepted TransferAware with FCFS")
	}
}

// TestManagerTransferAware runs flows like the simulator test's on a real
// manager with host units posing as a GPU and CPU cores (Sim units in
// real time), timing compute and transfers as they happen: the GPU leaves
// the wide operation to the cores there too. The wide input's upload
// (20 ms) is as long as its CPU time, so that a timer's overshoot of the
// GPU's 0.2 ms cannot make it worth a GPU's time.
func TestManagerTransferAware(t *testing.T) {
	run := func(xfer bool) (wide, narrow OpReport) {
		units := Machine{CPUs: 2, GPUs: 1, Bandwidth: 1e10}.Units(1)
		m := startManager(t, Config{Policy: PATS, TransferAware: xfer}, units...)
		for _, f := range xferFlows(12, 2e8, 20000, 10000) {
			submit(t, m, f)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		r := m.Report()
		wide, _ = r.Op("wide")
		narrow, _ = r.Op("narrow")
		if wide.CPU+wide.GPU != 12 || narrow.CPU+narrow.GPU != 12 {
			t.Fatalf("ran %d wide and %d narrow, want 12 each", wide.CPU+wide.GPU, narrow.CPU+narrow.GPU)
		}
		return wide, narrow
	}
	_, pn := run(false)
	aw, an := run(true)
	// Plain PATS: the cores take every narrow (the lowest estimate) while
	// the GPU uploads wides. Aware: the cores take the wides once a
	// transfer has been timed, and the GPU most narrows.
	if an.GPU < 4 || an.GPU <= pn.GPU {
		t.Errorf("GPU ran %d narrow with TransferAware (%d wide), %d without", an.GPU, aw.GPU, pn.GPU)
	}
}
