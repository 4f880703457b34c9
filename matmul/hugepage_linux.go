package matmul

import (
	"syscall"
	"unsafe"
)

// hugePage is the size of a transparent huge page on the platforms Go
// runs Linux on most (x86-64, arm64 with 4 KiB pages).
const hugePage = 2 << 20

// adviseHuge asks the kernel to back the 2 MiB-aligned interior of data
// with transparent huge pages (madvise MADV_HUGEPAGE), as numpy does for
// its large arrays: with /sys/kernel/mm/transparent_hugepage/enabled at
// "madvise" (a common default) memory gets huge pages only when asked,
// and BLAS packing and staging copies of large matrices run with a
// 512th of the TLB misses. Pages not yet touched are faulted in huge;
// the advice is only advice, and its failure (an old kernel, THP off) is
// ignored.
func adviseHuge(data []float64) {
	if len(data)*8 < 2*hugePage {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(data))), len(data)*8)
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := int((hugePage - p%hugePage) % hugePage)
	hi := int((p+uintptr(len(b)))&^(hugePage-1) - p)
	if hi <= lo {
		return
	}
	b = b[lo:hi]
	_ = syscall.Madvise(b, 14 /* MADV_HUGEPAGE */)
}
