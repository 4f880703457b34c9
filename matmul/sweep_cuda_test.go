//go:build cuda

package matmul_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gohtgs/htgs/matmul"
)

// sweepVariant is one setting of the offload knobs (environment variables
// read by each product, see matmul's offload_tuning.go); pin pins A, B and
// C with matmul.PinHost before the timed runs (not counted in their time).
type sweepVariant struct {
	name string
	env  map[string]string
	pin  bool
}

var sweepVariants = []sweepVariant{
	{name: "base"},
	{name: "staging", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging"}},
	{name: "pack8", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_PACK": "8"}},
	{name: "staging-s5", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_STAGING": "5", "HTGS_MATMUL_COPYOUT": "3"}},
	{name: "regchunks", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "register"}},
	{name: "regchunks-w8", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "register", "HTGS_MATMUL_PINWORKERS": "8"}},
	{name: "pipelined", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "pipelined"}},
	{name: "pipelined-w8", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "pipelined", "HTGS_MATMUL_PINWORKERS": "8"}},
	{name: "pipelined-w16", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "pipelined", "HTGS_MATMUL_PINWORKERS": "16"}},
	{name: "pipelined-c16", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "pipelined", "HTGS_MATMUL_PINCHUNK": "16384"}},
	{name: "pipelined-c256", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "pipelined", "HTGS_MATMUL_PINCHUNK": "262144"}},
	{name: "pinhost", pin: true},
	{name: "pinhost-sf", pin: true, env: map[string]string{"HTGS_MATMUL_SLABFIRST": "1"}},
	// The panel order from page-locked memory (its default until the
	// tenth session: now the slab lead, else slab first).
	{name: "pinhost-panel", pin: true, env: map[string]string{"HTGS_MATMUL_SLABFIRST": "0", "HTGS_MATMUL_SLABLEAD": "0"}},
	{name: "sf", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_SLABFIRST": "1"}},
	{name: "chunk4m-sf", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_CHUNK": "4096", "HTGS_MATMUL_SLABFIRST": "1"}},
	{name: "slabs2", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_SLABS": "2", "HTGS_MATMUL_STREAM": "0"}},
	{name: "slabs4", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_SLABS": "4", "HTGS_MATMUL_STREAM": "0"}},
	{name: "slabs8", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_SLABS": "8", "HTGS_MATMUL_STREAM": "0"}},
	{name: "slabs16", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_SLABS": "16", "HTGS_MATMUL_STREAM": "0"}},
	{name: "slabs1", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_SLABS": "1", "HTGS_MATMUL_STREAM": "0"}},
	{name: "nt", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_SLABS": "1", "HTGS_MATMUL_STREAM": "1"}},
	{name: "slabs4-nt", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_SLABS": "4", "HTGS_MATMUL_STREAM": "1"}},
	{name: "slabs8-nt", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_SLABS": "8", "HTGS_MATMUL_STREAM": "1"}},
	{name: "slabs16-nt", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_SLABS": "16", "HTGS_MATMUL_STREAM": "1"}},
	{name: "slabs4-nt-co1", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_SLABS": "4", "HTGS_MATMUL_STREAM": "1", "HTGS_MATMUL_COPYOUT": "1"}},
	{name: "slabs4-co1", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_SLABS": "4", "HTGS_MATMUL_STREAM": "0", "HTGS_MATMUL_COPYOUT": "1"}},
	{name: "slabs4-s5", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_SLABS": "4", "HTGS_MATMUL_STREAM": "0", "HTGS_MATMUL_STAGING": "5", "HTGS_MATMUL_COPYOUT": "3"}},
	// Chunk mode (HTGS_MATMUL_CHUNK KiB, HTGS_MATMUL_RING buffers): bands
	// staged through a ring of small buffers that stay in the host's
	// cache; cached stores unless -nt.
	{name: "chunk1m", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_CHUNK": "1024"}},
	{name: "chunk2m", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_CHUNK": "2048"}},
	{name: "chunk4m", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_CHUNK": "4096"}},
	{name: "chunk8m", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_CHUNK": "8192"}},
	{name: "chunk16m", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_CHUNK": "16384"}},
	{name: "chunk2m-r8", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_CHUNK": "2048", "HTGS_MATMUL_RING": "8"}},
	{name: "chunk4m-r8", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_CHUNK": "4096", "HTGS_MATMUL_RING": "8"}},
	{name: "chunk4m-nt", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_CHUNK": "4096", "HTGS_MATMUL_STREAM": "1"}},
	{name: "chunk4m-p8", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_CHUNK": "4096", "HTGS_MATMUL_PACK": "8"}},
	{name: "register", env: map[string]string{"HTGS_MATMUL_REGISTER": "1"}},
	{name: "spin", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_SPIN": "2000"}},
	{name: "sf-spin", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_SLABFIRST": "1", "HTGS_MATMUL_SPIN": "2000"}},
	{name: "pinhost-spin", pin: true, env: map[string]string{"HTGS_MATMUL_SPIN": "2000"}},
	{name: "pinhost-sf-spin", pin: true, env: map[string]string{"HTGS_MATMUL_SLABFIRST": "1", "HTGS_MATMUL_SPIN": "2000"}},
	// The first two block columns slab first, the last column's blocks
	// of C one by one (Plan.SlabLead): less fill than the panel order,
	// less drain than slab first.
	{name: "lead2", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_SLABLEAD": "2"}},
	{name: "pinhost-lead2", pin: true, env: map[string]string{"HTGS_MATMUL_SLABLEAD": "2"}},
	{name: "lead1", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_SLABLEAD": "1"}},
	{name: "lead3", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_SLABLEAD": "3"}},
	{name: "pinhost-lead1", pin: true, env: map[string]string{"HTGS_MATMUL_SLABLEAD": "1"}},
	{name: "pinhost-lead3", pin: true, env: map[string]string{"HTGS_MATMUL_SLABLEAD": "3"}},
	{name: "lead2-spin", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_SLABLEAD": "2", "HTGS_MATMUL_SPIN": "2000"}},
	{name: "blocksync", env: map[string]string{"HTGS_MATMUL_BLOCKSYNC": "1"}},
	{name: "pinhost-bs", pin: true, env: map[string]string{"HTGS_MATMUL_BLOCKSYNC": "1"}},
	{name: "pinhost-co3", pin: true, env: map[string]string{"HTGS_MATMUL_COPYOUT": "3"}},
	{name: "pack16", env: map[string]string{"HTGS_MATMUL_PACK": "16"}},
	// Fewer goroutines per staging copy (HTGS_MATMUL_PACK: the copy-in
	// task's packers, each copy-out task's unpackers), polling waits: the
	// copies then leave Ps free for the device tasks, which otherwise wait
	// for one behind busy goroutines (the Go scheduler's effect found on
	// pathology's GPU worker, docs/pats/hardware.md).
	{name: "pack12-spin", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_PACK": "12", "HTGS_MATMUL_SPIN": "2000"}},
	{name: "pack7-spin", env: map[string]string{"HTGS_MATMUL_HOSTCOPY": "staging", "HTGS_MATMUL_PACK": "7", "HTGS_MATMUL_SPIN": "2000"}},
	{name: "pack4", env: map[string]string{"HTGS_MATMUL_PACK": "4"}},
	{name: "stage6", env: map[string]string{"HTGS_MATMUL_STAGING": "6", "HTGS_MATMUL_COPYOUT": "3"}},
	{name: "nocache", env: map[string]string{"HTGS_MATMUL_DEVCACHE": "0"}},
}

// TestCUDASweep compares the offload knobs on one GPU in one process, for
// choosing their defaults: for each size (HTGS_SWEEP_N, default
// 8192,16384,16384b where b limits the device pools to one matrix), block
// size (HTGS_SWEEP_BS8192, HTGS_SWEEP_BS16384, HTGS_SWEEP_BS16384b:
// default 1024,2048 and 2048,4096) and variant (HTGS_SWEEP_VARIANTS, default
// all, in their order; name@n/bs adds one variant at one size and block
// size), one untimed product and HTGS_SWEEP_RUNS (default 2) timed ones;
// it prints the best rate, the busy fraction, the bus rate and the time
// spent pinning, and checks every result against the first. Skipped unless HTGS_SWEEP=1:
//
//	HTGS_SWEEP=1 go test -tags cuda -run CUDASweep -v ./matmul
func TestCUDASweep(t *testing.T) {
	if os.Getenv("HTGS_SWEEP") == "" {
		t.Skip("set HTGS_SWEEP=1 to run the sweep of offload knobs")
	}
	k, err := matmul.LookupKernel("cuda")
	if errors.Is(err, matmul.ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	runs := 2
	if v, err := strconv.Atoi(os.Getenv("HTGS_SWEEP_RUNS")); err == nil && v > 0 {
		runs = v
	}
	// HTGS_SWEEP_VARIANTS names the variants run at every size and block
	// size; an entry name@n/bs runs name only at size n with blocks of bs.
	want := map[string]bool{}
	var order []string                // the variants wanted, in the order named
	extra := map[string][][2]string{} // by size: {bs, name}
	for _, v := range strings.Split(os.Getenv("HTGS_SWEEP_VARIANTS"), ",") {
		v = strings.TrimSpace(v)
		if name, at, ok := strings.Cut(v, "@"); ok {
			n, bs, ok := strings.Cut(at, "/")
			if !ok {
				t.Fatalf("HTGS_SWEEP_VARIANTS: %q: want name@n/bs", v)
			}
			extra[n] = append(extra[n], [2]string{bs, name})
			continue
		}
		if v != "" && !want[v] {
			want[v] = true
			order = append(order, v)
		}
	}
	variants := sweepVariants
	if len(order) > 0 {
		variants = nil
		for _, name := range order {
			i := slices.IndexFunc(sweepVariants, func(v sweepVariant) bool { return v.name == name })
			if i < 0 {
				t.Fatalf("HTGS_SWEEP_VARIANTS: no variant %q", name)
			}
			variants = append(variants, sweepVariants[i])
		}
	}
	sizes := envList("HTGS_SWEEP_N", "8192,16384,16384b")
	var a, b, c, ref *matmul.Dense
	ctx := context.Background()
	pinCost := map[int]float64{} // seconds PinHost took for A, B and C, by n
	for _, size := range sizes {
		budget := strings.HasSuffix(size, "b")
		n, err := strconv.Atoi(strings.TrimSuffix(size, "b"))
		if err != nil {
			t.Fatalf("HTGS_SWEEP_N: %v", err)
		}
		if a == nil || a.R != n {
			t0 := time.Now()
			a, b, c, ref = nil, nil, nil, nil
			a, b, c = matmul.Random(n, n, 1), matmul.Random(n, n, 2), matmul.NewDense(n, n)
			t.Logf("n=%d: random A and B in %.1f s", n, time.Since(t0).Seconds())
		}
		def := "2048,4096"
		if n <= 8192 {
			def = "1024,2048"
		}
		bsList := envList(fmt.Sprintf("HTGS_SWEEP_BS%d", n), def)
		if budget {
			bsList = envList(fmt.Sprintf("HTGS_SWEEP_BS%db", n), strings.Join(bsList, ","))
		}
		type job struct {
			bs   string
			only string // the one variant to run ("": those wanted)
		}
		var jobs []job
		for _, bs := range bsList {
			jobs = append(jobs, job{bs: bs})
		}
		for _, e := range extra[size] {
			jobs = append(jobs, job{bs: e[0], only: e[1]})
		}
		for _, jb := range jobs {
			bs, err := strconv.Atoi(jb.bs)
			if err != nil {
				t.Fatal(err)
			}
			cfg := matmul.Config{BlockSize: bs, Kernel: k}
			if budget {
				cfg.DeviceMemory = 8 * int64(n) * int64(n)
			}
			run := variants
			if jb.only != "" {
				i := slices.IndexFunc(sweepVariants, func(v sweepVariant) bool { return v.name == jb.only })
				if i < 0 {
					t.Fatalf("HTGS_SWEEP_VARIANTS: no variant %q", jb.only)
				}
				run = sweepVariants[i : i+1]
			}
			for _, v := range run {
				if pinCost[n] > 1 && (v.env["HTGS_MATMUL_REGISTER"] != "" || v.env["HTGS_MATMUL_HOSTCOPY"] == "register") {
					// Registering inside each product would cost more
					// than the product: not worth the sweep's time.
					fmt.Printf("SWEEP n=%-6s bs=%-5d %-12s skipped: page-locking A, B and C took %.2f s\n", size, bs, v.name, pinCost[n])
					continue
				}
				line, pinned, err := sweepOne(ctx, v, a, b, c, cfg, runs)
				if v.pin && pinCost[n] == 0 {
					pinCost[n] = pinned
				}
				if err != nil {
					t.Errorf("n=%s bs=%d %s: %v", size, bs, v.name, err)
					continue
				}
				if ref == nil {
					if d := maxDiff(c, c); d != 0 { // NaN - NaN
						t.Errorf("n=%s bs=%d %s: elements of C not written", size, bs, v.name)
					}
					ref = matmul.NewDense(n, n)
					copy(ref.Data, c.Data)
				} else if d := maxDiff(c, ref); !(d <= 1e-8*float64(n)) { // NaN: an element not written
					t.Errorf("n=%s bs=%d %s: result differs from the first by %g", size, bs, v.name, d)
				}
				fmt.Printf("SWEEP n=%-6s bs=%-5d %-12s %s\n", size, bs, v.name, line)
			}
		}
	}
}

func sweepOne(ctx context.Context, v sweepVariant, a, b, c *matmul.Dense, cfg matmul.Config, runs int) (line string, pinTime float64, err error) {
	for name, val := range v.env {
		old, had := os.LookupEnv(name)
		os.Setenv(name, val)
		if had {
			defer os.Setenv(name, old)
		} else {
			defer os.Unsetenv(name)
		}
	}
	if v.pin {
		t0 := time.Now()
		unpin, err := matmul.PinHost(cfg.Kernel, a, b, c)
		if err != nil {
			return "", 0, err
		}
		pinTime = time.Since(t0).Seconds()
		defer unpin()
	}
	poison(c)                                                     // an element the runs leave unwritten shows as NaN
	if _, err := matmul.Multiply(ctx, a, b, c, cfg); err != nil { // warm-up
		return "", pinTime, err
	}
	best, sum := math.Inf(1), 0.0
	var rep *matmul.Report
	for range runs {
		time.Sleep(100 * time.Millisecond)
		t0 := time.Now()
		r, err := matmul.Multiply(ctx, a, b, c, cfg)
		if err != nil {
			return "", pinTime, err
		}
		s := time.Since(t0).Seconds()
		sum += s
		if s < best {
			best, rep = s, r
		}
	}
	if dir := os.Getenv("HTGS_SWEEP_TRACE"); dir != "" {
		// One more run, traced (not timed): its summary goes to stdout.
		sub := filepath.Join(dir, fmt.Sprintf("n%d-bs%d-%s", a.R, cfg.BlockSize, v.name))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return "", pinTime, err
		}
		os.Setenv("HTGS_MATMUL_TRACE", sub)
		_, err := matmul.Multiply(ctx, a, b, c, cfg)
		os.Unsetenv("HTGS_MATMUL_TRACE")
		if err != nil {
			return "", pinTime, err
		}
		txt, _ := filepath.Glob(filepath.Join(sub, "*.txt"))
		for _, f := range txt {
			raw, err := os.ReadFile(f)
			if err != nil {
				return "", pinTime, err
			}
			for line := range strings.Lines(string(raw)) {
				fmt.Printf("TRACE n=%d bs=%d %s: %s", a.R, cfg.BlockSize, v.name, line)
			}
		}
	}
	n := float64(a.R)
	busy := 0.0
	if len(rep.DeviceBusy) > 0 {
		busy = rep.DeviceBusy[0]
	}
	moved, least := rep.Plan.BusBytes()
	direct := float64(rep.DirectBytes) / float64(max(1, rep.UploadBytes+rep.DownloadBytes))
	return fmt.Sprintf("%6.2f TFLOP/s  best %.3f s  mean %.3f s  busy %.2f  bus %5.1f GB/s (%.2fx min)  run-pin %.3f s  PinHost %.3f s  %s direct %.2f (%d copies)  pools A%d B%d C%d  %s",
		2*n*n*n/best/1e12, best, sum/float64(runs), busy, float64(rep.UploadBytes+rep.DownloadBytes)/best/1e9,
		float64(moved)/float64(least), rep.HostPin.Seconds(), pinTime, rep.HostCopy, direct, rep.DirectCopies, rep.Plan.DevicePoolA, rep.Plan.DevicePoolB, rep.Plan.DevicePoolC,
		taskTimes(rep)), pinTime, nil
}

// taskTimes sums, for the copy-in, multiply and copy-out tasks of the
// best run, the seconds inside Execute (all copies), waiting for input and
// waiting for pool memory: where the host's time went.
func taskTimes(rep *matmul.Report) string {
	var out []string
	for _, name := range []string{"copy in", "multiply", "copy out"} {
		var exec, wait, mem time.Duration
		found := false
		for _, ts := range rep.Stats.Tasks {
			if strings.HasSuffix(ts.Name, name) {
				exec, wait, mem, found = exec+ts.Compute, wait+ts.Wait, mem+ts.MemoryWait, true
			}
		}
		if found {
			out = append(out, fmt.Sprintf("%s exec/wait/mem %.3f/%.3f/%.3f s", name, exec.Seconds(), wait.Seconds(), mem.Seconds()))
		}
	}
	return strings.Join(out, ", ")
}

func envList(name, def string) []string {
	v := os.Getenv(name)
	if v == "" {
		v = def
	}
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// poison fills c with NaN, on every CPU.
func poison(c *matmul.Dense) {
	const parts = 16
	var wg sync.WaitGroup
	per := (len(c.Data) + parts - 1) / parts
	for lo := 0; lo < len(c.Data); lo += per {
		wg.Add(1)
		go func(p []float64) {
			defer wg.Done()
			for i := range p {
				p[i] = math.NaN()
			}
		}(c.Data[lo:min(len(c.Data), lo+per)])
	}
	wg.Wait()
}

func maxDiff(x, y *matmul.Dense) float64 {
	d := 0.0
	for i := range x.Data {
		if e := math.Abs(x.Data[i] - y.Data[i]); e > d || e != e {
			d = e
		}
	}
	return d
}
