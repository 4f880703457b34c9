package matmul

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"
)

// TestNewDenseAdvisesHugePages checks that a large matrix's memory carries
// the MADV_HUGEPAGE flag ("hg" in the VmFlags of /proc/self/smaps) on the
// mapping holding the middle of its data.
func TestNewDenseAdvisesHugePages(t *testing.T) {
	if thp, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil || strings.Contains(string(thp), "[never]") {
		t.Skip("no transparent huge pages here")
	}
	big := NewDense(1024, 1024) // 8 MiB
	mid := uintptr(unsafe.Pointer(&big.Data[len(big.Data)/2]))
	flags, err := vmFlags(mid)
	if err != nil {
		t.Skip(err) // no /proc
	}
	if !strings.Contains(" "+flags+" ", " hg ") {
		t.Fatalf("mapping of a 1024x1024 matrix has VmFlags %q, want hg", flags)
	}
	adviseHuge(nil) // nothing to advise: no panic
}

// vmFlags returns the VmFlags line of the mapping of /proc/self/smaps that
// holds address p.
func vmFlags(p uintptr) (string, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) > 0 && !strings.HasSuffix(f[0], ":") {
			// A mapping's header: "lo-hi perms offset dev inode path".
			var lo, hi uintptr
			if _, err := fmt.Sscanf(f[0], "%x-%x", &lo, &hi); err != nil {
				return "", fmt.Errorf("smaps line %q: %w", line, err)
			}
			in = lo <= p && p < hi
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.TrimSpace(strings.TrimPrefix(line, "VmFlags:")), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("no mapping holds %#x", p)
}
