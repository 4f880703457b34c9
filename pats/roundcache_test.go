package pats

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gohtgs/htgs/device"
)

// randomFlows returns n flows of random chains and fan-outs of steps of
// ops (random speedups, one in five CPU-only), with random costs and
// data sizes, from seed.
func randomFlows(seed uint64, n int) []*Flow {
	r := rand.New(rand.NewPCG(seed, 7))
	var ops []*Op[int]
	for i := range 6 {
		if i%5 == 4 {
			ops = append(ops, only(fmt.Sprint("c", i), device.CPU))
			continue
		}
		ops = append(ops, hybrid(fmt.Sprint("h", i), 0.5+r.Float64()*40))
	}
	fs := make([]*Flow, n)
	for i := range fs {
		f := NewFlow(fmt.Sprint("f", i))
		keys := []string{"in"}
		for j := range 3 + r.IntN(6) {
			op := ops[r.IntN(len(ops))]
			in := keys[r.IntN(len(keys))]
			out := fmt.Sprint("d", j)
			reads := []Data{d(in, int64(1+r.IntN(64))<<16)}
			if r.IntN(3) == 0 {
				reads = append(reads, d("in", 1<<20))
			}
			cpu := 50 + r.IntN(500)
			Add(f, op, i, Reads(reads...), Writes(d(out, int64(1+r.IntN(64))<<16)), cost(cpu, 1+cpu/(1+r.IntN(30))))
			keys = append(keys, out)
		}
		fs[i] = f
	}
	return fs
}

// TestRoundCacheChangesNothing: sharing one choice among the cores of a
// round of picks (the GPU queue, FinishAware's answers, the pick) gives
// the same schedule as computing each afresh, over random workloads,
// machines and configurations.
func TestRoundCacheChangesNothing(t *testing.T) {
	cfgs := []Config{
		{Policy: PATS, Window: 8, FinishAware: true},
		{Policy: PATS, Window: 16, FinishAware: true, TransferAware: true},
		{Policy: PATS, Window: 12, FinishAware: true, Locality: true, Prefetch: true, TransferImpact: 0.3},
		{Policy: PATS, Window: 10, FinishAware: true, Learn: true},
		{Policy: PATS, Window: 6, DepthFirst: true},
		{Policy: FCFS, Window: 8},
	}
	for seed := range uint64(12) {
		m := Machine{CPUs: 1 + int(seed)%15, GPUs: 1 + int(seed)%3, Bandwidth: 2e9, Latency: 5 * time.Microsecond, StageBandwidth: 4e9}
		for _, cfg := range cfgs {
			ref := cfg
			ref.noRoundCache = true
			got, err := Simulate(cfg, m, randomFlows(seed, 30))
			if err != nil {
				t.Fatal(err)
			}
			want, err := Simulate(ref, m, randomFlows(seed, 30))
			if err != nil {
				t.Fatal(err)
			}
			if g, w := got.String(), want.String(); g != w || got.Makespan != want.Makespan || got.Uploads != want.Uploads || got.Downloads != want.Downloads {
				t.Errorf("seed %d, %s on %d+%d: with the round cache\n%s\nafresh\n%s", seed, cfg, m.CPUs, m.GPUs, g, w)
			}
		}
	}
}
