//go:build linux && (amd64 || arm64)

package matmul

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"
)

// residentPages counts the pages of the named file in the page cache
// (mincore on a mapping of it).
func residentPages(t *testing.T, name string) (resident, total int) {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(data)
	page := os.Getpagesize()
	vec := make([]byte, (len(data)+page-1)/page)
	if _, _, errno := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Skipf("mincore: %v", errno)
	}
	for _, v := range vec {
		resident += int(v & 1)
	}
	return resident, len(vec)
}

func TestEvictFromCache(t *testing.T) {
	name := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(name, make([]byte, 4<<20), 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(name); err != nil {
		t.Fatal(err)
	}
	before, total := residentPages(t, name)
	if err := EvictFromCache(name); err != nil {
		t.Fatal(err)
	}
	after, _ := residentPages(t, name)
	t.Logf("%d of %d pages cached before, %d after", before, total, after)
	if before == 0 {
		t.Skip("the file was not cached to begin with (tmpfs or memory pressure?)")
	}
	if after > total/10 {
		t.Errorf("%d of %d pages still cached after eviction", after, total)
	}
	if err := EvictFromCache(filepath.Join(t.TempDir(), "missing")); !os.IsNotExist(err) {
		t.Errorf("missing file: %v", err)
	}
}
