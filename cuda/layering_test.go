package cuda

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestImportsOnlyDevice guards issue 30's layering: cuda is a driver
// binding below the framework, so go list -deps of it, with and without
// the cuda tag, shows no package of this module but device (package
// cudapool, above both, adapts its memory to memmgr's pools). Other
// modules' packages, such as gonum's blas constants, are not the
// framework's.
func TestImportsOnlyDevice(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not on PATH")
	}
	const module = "github.com/gohtgs/htgs/"
	allowed := map[string]bool{module + "cuda": true, module + "device": true}
	for _, build := range []struct{ cgo, tags string }{{"0", ""}, {"1", "cuda"}} {
		cmd := exec.Command("go", "list", "-deps", "-tags="+build.tags, "-f", "{{.ImportPath}}", ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+build.cgo)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("go list -deps -tags=%q: %v\n%s", build.tags, err, out)
			continue
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if strings.HasPrefix(line, module) && !allowed[line] {
				t.Errorf("cuda (tags %q) links %s; of this module it may link only device", build.tags, line)
			}
		}
	}
}
