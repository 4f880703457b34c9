//go:build openblas && cgo

package matmul

import (
	"context"
	"os"
	"strings"
	"testing"
)

// TestOpenBLASCoreType checks that the library runs with kernels for this
// CPU: on a CPU with AVX2 the core must not be one of OpenBLAS's SSE-only
// fallbacks (Debian's OpenBLAS 0.3.21 picks Prescott for CPUs it does not
// know unless OPENBLAS_CORETYPE is set before it loads).
func TestOpenBLASCoreType(t *testing.T) {
	k, err := LookupKernel("openblas")
	if err != nil {
		t.Fatal(err)
	}
	desc := Describe(k)
	t.Log(desc)
	core := openblasCore()
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
	if openblasLib.setByUs && !strings.EqualFold(core, openblasLib.coretype) {
		t.Errorf("OPENBLAS_CORETYPE=%s was set before loading, the library reports core %s", openblasLib.coretype, core)
	}
}

func TestOpenBLASGraph(t *testing.T) {
	k, err := LookupKernel("openblas")
	if err != nil {
		t.Fatal(err)
	}
	a, b := Random(1000, 777, 1), Random(777, 1234, 2)
	ref := reference(t, a, b)
	for _, threads := range []int{1, 2, 3} {
		c, _, err := MultiplyDense(context.Background(), a, b, Config{BlockSize: 256, Threads: threads, Kernel: k})
		if err != nil {
			t.Fatal(err)
		}
		checkProduct(t, a, b, c, ref)
		if n := openblasLib.threads.Load(); n != 1 {
			t.Errorf("OpenBLAS runs with %d threads inside the graph, want 1", n)
		}
	}
}
