package pathology

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strconv"
	"testing"
)

// TestKernelLaunchesMatchPTX checks, without a GPU, what only a GPU would
// otherwise find: every kernel accel_cuda.go launches is in the embedded
// module's PTX (kernels/pathology.ptx, made with the fat binary by
// scripts/gen-cuda-ptx.sh), and each launch passes as many arguments as
// the kernel has parameters (the driver reads them unchecked).
func TestKernelLaunchesMatchPTX(t *testing.T) {
	ptx, err := os.ReadFile("kernels/pathology.ptx")
	if err != nil {
		t.Fatal(err)
	}
	params := map[string]int{}
	for _, m := range regexp.MustCompile(`(?s)\.entry (\w+)\((.*?)\)`).FindAllSubmatch(ptx, -1) {
		params[string(m[1])] = len(regexp.MustCompile(`\.param`).FindAll(m[2], -1))
	}
	f, err := parser.ParseFile(token.NewFileSet(), "accel_cuda.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	skip := map[string]int{"launch": 1, "launchTiles": 2, "launchCols": 1} // the sizes before the kernel's arguments
	launches := 0
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || skip[sel.Sel.Name] == 0 || len(call.Args) == 0 {
			return true
		}
		lit, ok := call.Args[0].(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		name, _ := strconv.Unquote(lit.Value)
		launches++
		want, ok := params[name]
		switch got := len(call.Args) - 1 - skip[sel.Sel.Name]; {
		case !ok:
			t.Errorf("%s launches %s, which the PTX lacks", sel.Sel.Name, name)
		case got != want:
			t.Errorf("%s launches %s with %d arguments; it has %d parameters", sel.Sel.Name, name, got, want)
		}
		return true
	})
	if launches < 20 {
		t.Errorf("found %d launches in accel_cuda.go: the test no longer sees them", launches)
	}
}
