package pats_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/pats"
)

// hostGPU is host memory posing as a GPU, for the example.
type hostGPU struct{}

func (hostGPU) ID() int           { return 0 }
func (hostGPU) Kind() device.Kind { return device.GPU }
func (hostGPU) Name() string      { return "gpu0" }
func (hostGPU) Memory() int64     { return 1 << 20 }

// copyJob is a copy made on a goroutine, as a DMA engine would make it.
type copyJob struct{ done chan struct{} }

func (c copyJob) Done() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c copyJob) Wait(ctx context.Context) (time.Duration, error) {
	<-c.done // the copy must end before its memory is released
	return 0, nil
}

// A GPU unit whose copies are queued: with Prefetch the manager drives it
// from one goroutine, which queues the next operation's upload before it
// runs the current operation and hands each download on once it is done.
// The GPU implementation calls WhileComputing while it "waits for its
// kernels", where the worker does that work during the computation.
func ExampleDeviceUnit_queueTransfer() {
	var mu sync.Mutex
	host, dev := map[string]int{}, map[string]int{}
	move := func(d pats.Data, toDevice bool) {
		mu.Lock()
		defer mu.Unlock()
		if toDevice {
			dev[d.Key] = host[d.Key]
		} else {
			host[d.Key] = dev[d.Key]
		}
	}
	queued := 0
	gpu := pats.DeviceUnit{
		Device:   hostGPU{},
		Transfer: func(_ context.Context, d pats.Data, toDevice bool) error { move(d, toDevice); return nil },
		QueueTransfer: func(_ context.Context, d pats.Data, toDevice bool) (pats.Pending, error) {
			queued++ // only the worker's goroutine queues
			c := copyJob{make(chan struct{})}
			go func() { move(d, toDevice); close(c.done) }()
			return c, nil
		},
	}
	double := &pats.Op[string]{Name: "double", Impls: map[device.Kind]pats.Impl[string]{
		device.GPU: func(ctx context.Context, _ device.Device, tile string) error {
			pats.WhileComputing(ctx)() // a real one would call it while it polls its kernels
			mu.Lock()
			defer mu.Unlock()
			dev[tile+"/out"] = 2 * dev[tile+"/in"]
			return nil
		}}}
	m, err := pats.Start(context.Background(), pats.Config{Prefetch: true}, gpu)
	if err != nil {
		panic(err)
	}
	var jobs []*pats.Job
	for i := range 3 {
		tile := fmt.Sprint("t", i)
		mu.Lock()
		host[tile+"/in"] = 10 * i
		mu.Unlock()
		f := pats.NewFlow(tile)
		pats.Add(f, double, tile, pats.Reads(pats.Data{Key: tile + "/in", Bytes: 8}), pats.Writes(pats.Data{Key: tile + "/out", Bytes: 8}))
		j, err := m.Submit(context.Background(), f)
		if err != nil {
			panic(err)
		}
		jobs = append(jobs, j)
	}
	for _, j := range jobs {
		if err := j.Wait(context.Background()); err != nil {
			panic(err)
		}
	}
	if err := m.Close(); err != nil {
		panic(err)
	}
	fmt.Println(host["t0/out"], host["t1/out"], host["t2/out"], "copies queued:", queued)
	// Output:
	// 0 20 40 copies queued: 6
}
