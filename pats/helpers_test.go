package pats

import (
	"context"
	"testing"
	"time"

	"github.com/gohtgs/htgs/device"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func noop(context.Context, device.Device, int) error { return nil }

// hybrid returns an operation with CPU and GPU implementations that do
// nothing.
func hybrid(name string, speedup float64) *Op[int] {
	return &Op[int]{Name: name, Speedup: speedup, Impls: map[device.Kind]Impl[int]{device.CPU: noop, device.GPU: noop}}
}

// only returns an operation with a single implementation.
func only(name string, k device.Kind) *Op[int] {
	return &Op[int]{Name: name, Impls: map[device.Kind]Impl[int]{k: noop}}
}

// cost returns a Cost of cpu and gpu microseconds.
func cost(cpu, gpu int) StepOption {
	return WithCost(Cost{CPU: time.Duration(cpu) * time.Microsecond, GPU: time.Duration(gpu) * time.Microsecond})
}

func us(n int) time.Duration { return time.Duration(n) * time.Microsecond }

// testScheduler returns a scheduler with the given workers (CPUs first).
func testScheduler(cfg Config, cpus, gpus int) *scheduler {
	cfg, err := cfg.validate()
	if err != nil {
		panic(err)
	}
	var devs []device.Device
	for _, s := range (Machine{CPUs: cpus, GPUs: gpus}).sims() {
		devs = append(devs, s)
	}
	return newScheduler(cfg, devs)
}

// gpuWorker returns the first GPU worker of c.
func gpuWorker(c *scheduler) *worker {
	for _, w := range c.workers {
		if w.gpu >= 0 {
			return w
		}
	}
	return nil
}

func cpuWorker(c *scheduler) *worker {
	for _, w := range c.workers {
		if w.gpu < 0 {
			return w
		}
	}
	return nil
}

func mustSim(t *testing.T, cfg Config, m Machine, flows ...*Flow) *Report {
	t.Helper()
	r, err := Simulate(cfg, m, flows)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
