package matmul

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
)

func lookupOpenBLAS(t *testing.T) Kernel {
	t.Helper()
	k, err := LookupKernel("openblas")
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("OpenBLAS is not installed, the kernel is not tested (apt-get install libopenblas0-pthread): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestOpenBLASCoreType checks that the library runs with kernels for this
// CPU: on a CPU with AVX2 the core must not be one of OpenBLAS's SSE-only
// fallbacks (Debian's OpenBLAS 0.3.21 picks Prescott for CPUs it does not
// know unless OPENBLAS_CORETYPE is set before it loads).
func TestOpenBLASCoreType(t *testing.T) {
	k := lookupOpenBLAS(t).(openblasKernel)
	desc := Describe(k)
	t.Log(desc)
	core := k.lib.CoreName()
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Skip(err)
	}
	if strings.Contains(string(info), " avx2 ") {
		for _, slow := range []string{"Prescott", "Core2", "Nehalem", "Penryn", "Dunnington", "Atom"} {
			if strings.EqualFold(core, slow) {
				t.Errorf("OpenBLAS uses the %s kernels on a CPU with AVX2 (%s)", core, desc)
			}
		}
	}
	if ct, chosen := k.lib.CoreType(); chosen && !strings.EqualFold(core, ct) {
		t.Errorf("OPENBLAS_CORETYPE=%s was set before loading, the library reports core %s", ct, core)
	}
}

func TestOpenBLASGraph(t *testing.T) {
	k := lookupOpenBLAS(t)
	a, b := Random(1000, 777, 1), Random(777, 1234, 2)
	ref := reference(t, a, b)
	for _, threads := range []int{1, 2, 3} {
		c, _, err := MultiplyDense(context.Background(), a, b, Config{BlockSize: 256, Copies: threads, Kernel: k})
		if err != nil {
			t.Fatal(err)
		}
		checkProduct(t, a, b, c, ref)
		if n := k.(openblasKernel).lib.Threads(); n != 1 {
			t.Errorf("OpenBLAS runs with %d threads inside the graph, want 1", n)
		}
	}
}

func TestAutoKernel(t *testing.T) {
	k, err := LookupKernel("auto")
	if err != nil {
		t.Fatal(err)
	}
	_, oerr := LookupKernel("openblas")
	if want := map[bool]string{true: "openblas", false: "gonum"}[oerr == nil]; k.Name() != want {
		t.Errorf("auto is %s, want %s (openblas: %v)", k.Name(), want, oerr)
	}
	if d := (Config{}).kernel(); d.Name() != k.Name() {
		t.Errorf("default kernel %s, auto %s", d.Name(), k.Name())
	}
}

// TestCPUShape checks the default blocking per kernel: OpenBLAS in memory
// with nothing set is one block on one copy whose calls use every CPU;
// any setting, out of core, or another kernel keeps the usual blocking.
func TestCPUShape(t *testing.T) {
	cpus := runtime.GOMAXPROCS(0)
	gonumCfg := Config{Kernel: Gonum()}
	if bs, th, bt := gonumCfg.cpuShape(3000, 2000, 1000, true); bs != DefaultBlockSize || th != cpus || bt != 1 {
		t.Errorf("gonum: %d, %d, %d", bs, th, bt)
	}
	k := lookupOpenBLAS(t)
	for _, tc := range []struct {
		cfg          Config
		inMemory     bool
		bs, th, blas int
	}{
		{Config{Kernel: k}, true, 3000, 1, cpus},
		{Config{Kernel: k}, false, DefaultBlockSize, cpus, 1},
		{Config{Kernel: k, BlockSize: 256}, true, 256, cpus, 1},
		{Config{Kernel: k, Copies: 3}, true, DefaultBlockSize, 3, 1},
		{Config{Kernel: k, BLASThreads: 2}, true, DefaultBlockSize, cpus, 2},
	} {
		bs, th, bt := tc.cfg.cpuShape(3000, 2000, 1000, tc.inMemory)
		if bs != tc.bs || th != tc.th || bt != tc.blas {
			t.Errorf("%+v in memory %v: block %d, %d copies, %d BLAS threads; want %d, %d, %d", tc.cfg, tc.inMemory, bs, th, bt, tc.bs, tc.th, tc.blas)
		}
	}
	if bs := (Config{Kernel: k}).BlockSizeFor(100, 100, 100); bs != DefaultBlockSize {
		t.Errorf("small product: block %d", bs)
	}
}

// TestOpenBLASThreadedCalls: products whose calls run several OpenBLAS
// threads, from one copy (the default) and from two at once, give the
// one-call result.
func TestOpenBLASThreadedCalls(t *testing.T) {
	k := lookupOpenBLAS(t)
	a, b := Random(300, 257, 1), Random(257, 411, 2)
	want := reference(t, a, b)
	for _, cfg := range []Config{{Kernel: k}, {Kernel: k, BlockSize: 128, Copies: 2, BLASThreads: 2}} {
		got, rep, err := MultiplyDense(context.Background(), a, b, cfg)
		if err != nil {
			t.Fatal(err)
		}
		checkProduct(t, a, b, got, want)
		if cfg.BLASThreads == 0 && (rep.Plan.MB*rep.Plan.KB*rep.Plan.NB != 1 || rep.Plan.BLASThreads != runtime.GOMAXPROCS(0)) {
			t.Errorf("default plan %v: want one block on every CPU", rep.Plan)
		}
	}
}
