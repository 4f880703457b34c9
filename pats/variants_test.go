package pats

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gohtgs/htgs/device"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/task"
)

// runVariants runs values 0..12 through a graph task with a CPU and a GPU
// implementation (one copy each, 5 ms a value) chosen by c, value v's
// speedup being (7v mod 13): 0 and 1 keep both busy until all are sent,
// the 11 others wait for the chooser together. It returns the values each
// kind of device ran, in the order it ran them.
func runVariants(t *testing.T, c device.Chooser) map[device.Kind][]int {
	t.Helper()
	open := make(chan struct{})
	impl := func() task.Task[int, string] {
		first := true
		return task.Func[int, string](func(ctx context.Context, v int, out task.Emitter[string]) error {
			if first {
				first = false
				<-open
			}
			time.Sleep(5 * time.Millisecond)
			info, _ := task.InfoFrom(ctx)
			return out.Emit(fmt.Sprint(int(info.Device.Kind()), v))
		})
	}
	g := graph.New[int, string]("tiles")
	work := graph.AddVariants(g, "segment", []graph.Variant[int, string]{
		{Device: device.Host{}, New: impl},
		{Device: Sim{Type: device.GPU}, New: impl},
	}, graph.Choose(c, speedup13))
	graph.Connect(g.Input(), work)
	graph.Connect(work, g.Output())
	rt, err := g.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for v := range 13 {
		if err := rt.Send(v); err != nil {
			t.Fatal(err)
		}
	}
	close(open)
	rt.Close()
	ran := map[device.Kind][]int{}
	for r := range rt.Results() {
		var k device.Kind
		var v int
		fmt.Sscan(r, &k, &v)
		ran[k] = append(ran[k], v)
	}
	if err := rt.Wait(); err != nil {
		t.Fatal(err)
	}
	if len(ran[device.CPU])+len(ran[device.GPU]) != 13 || ran[device.CPU][0] != 0 || ran[device.GPU][0] != 1 {
		t.Fatalf("values per kind %v: want 13, 0 first on the CPU and 1 on the GPU", ran)
	}
	return ran
}

func speedup13(v int) float64 { return float64(7 * v % 13) }

// PATS schedules a graph task with a CPU and a GPU implementation
// (graph.AddVariants with graph.Choose): of the values waiting, the GPU
// takes those of the highest estimated speedup, the CPU those of the
// lowest; FCFS gives them out in their order of arrival.
func TestPATSChoosesForVariants(t *testing.T) {
	ran := runVariants(t, PATS)
	cpu, gpu := ran[device.CPU][1:], ran[device.GPU][1:]
	for _, g := range gpu {
		for _, c := range cpu {
			if speedup13(g) <= speedup13(c) {
				t.Errorf("the GPU ran %d (speedup %v), the CPU %d (speedup %v)", g, speedup13(g), c, speedup13(c))
			}
		}
	}
	by := func(a, b int) int { return int(speedup13(a) - speedup13(b)) }
	if !slices.IsSortedFunc(cpu, by) || !slices.IsSortedFunc(gpu, func(a, b int) int { return by(b, a) }) {
		t.Errorf("values by speedup: CPU %v, GPU %v", cpu, gpu)
	}
	if !slices.Contains(gpu, 11) { // speedup 12, the highest
		t.Errorf("the GPU ran %v, not 11, the value of the highest speedup", gpu)
	}
	if testing.Verbose() {
		t.Logf("PATS: CPU %v, GPU %v", cpu, gpu)
	}

	ran = runVariants(t, FCFS)
	for k, vs := range ran {
		if !slices.IsSorted(vs) {
			t.Errorf("FCFS: %v ran %v, not in order of arrival", k, vs)
		}
	}
}
