package matmul

import (
	"context"
	"errors"
	"os"
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
		c, _, err := MultiplyDense(context.Background(), a, b, Config{BlockSize: 256, Threads: threads, Kernel: k})
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
