package main

import (
	"fmt"
	"io"
	"math"
	"math/bits"
	"strings"

	"github.com/gohtgs/htgs/examples/internal/cli"
	"github.com/gohtgs/htgs/internal/units"
)

// Hooks for the tests: the machine's available memory (0: unknown) and the
// free space of the file system holding a folder (with an identifier of
// that file system; ok false: unknown).
var (
	availableMemory = cli.AvailableMemory
	freeSpace       = diskFree
)

// elements returns rows·cols, saturating at math.MaxUint64.
func elements(rows, cols int) uint64 {
	hi, lo := bits.Mul64(uint64(rows), uint64(cols))
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}

// bytesOf returns the bytes of float64 matrices of the given element
// counts, 8·Σelems, and false when that exceeds math.MaxInt64.
func bytesOf(elems ...uint64) (int64, bool) {
	var total uint64
	for _, e := range elems {
		hi, b := bits.Mul64(e, 8)
		if hi != 0 {
			return 0, false
		}
		var carry uint64
		if total, carry = bits.Add64(total, b, 0); carry != 0 {
			return 0, false
		}
	}
	if total > math.MaxInt64 {
		return 0, false
	}
	return int64(total), true
}

// headerBytes bounds the preamble of a two-dimensional .npy file.
const headerBytes = 128

// fileBytes is the size of a .npy file of elems float64 values, saturating
// at math.MaxInt64.
func fileBytes(elems uint64) int64 {
	b, ok := bytesOf(elems)
	if !ok || b > math.MaxInt64-headerBytes {
		return math.MaxInt64
	}
	return b + headerBytes
}

// flagSize formats n bytes as a -mem value.
func flagSize(n int64) string { return strings.ReplaceAll(units.FormatBytes(n), " ", "") }

// placement decides, before any work, where a product whose A, B and C
// hold a, b and c elements runs: in memory when the three fit in the -mem
// budget (if any) and in the machine's available memory (if known); else
// out of core, which needs -mem. It returns the budget for the pools: -mem,
// lowered to the available memory (with a note) when above it. Sizes
// beyond any machine are a usage error; a product that needs more memory
// than there is, or a -verify that would, is refused with the size needed.
func (o *options) placement(stderr io.Writer, a, b, c uint64) (inMemory bool, budget int64, err error) {
	total, ok := bytesOf(a, b, c)
	if !ok {
		return false, 0, cli.Usagef("the product is too large: A, B and C would take more than %s", units.FormatBytes(math.MaxInt64))
	}
	avail := availableMemory()
	budget = o.mem
	if budget > 0 && avail > 0 && budget > avail {
		fmt.Fprintf(stderr, "%s: note: -mem %s is more than the %s of memory available: the blocks get at most %s\n",
			prog, units.FormatBytes(o.mem), units.FormatBytes(avail), units.FormatBytes(avail))
		budget = avail
	}
	if o.verify {
		ref := c // the reference product
		if o.hadamard {
			ref = 0
		}
		what := "A, B, C and the reference"
		if o.hadamard {
			what = "A, B and C"
		}
		need, ok := bytesOf(a, b, c, ref)
		if !ok {
			return false, 0, cli.Usagef("-verify: the product is too large: %s would take more than %s", what, units.FormatBytes(math.MaxInt64))
		}
		if avail > 0 && need > avail {
			return false, 0, fmt.Errorf("-verify needs %s in memory (%s), more than the %s available; leave out -verify",
				units.FormatBytes(need), what, units.FormatBytes(avail))
		}
	}
	// A slice holds at most math.MaxInt/8 float64 values (2³¹/8 on 32-bit
	// machines, whatever their memory).
	addressable := max(a, b, c) <= uint64(math.MaxInt/8)
	if addressable && (o.mem == 0 || total <= budget) && (avail == 0 || total <= avail) {
		return true, budget, nil
	}
	switch {
	case o.mem > 0:
	case !addressable:
		return false, 0, fmt.Errorf("A, B and C (%s) are too large for memory on this machine: give a budget such as -mem 1GiB to run out of core",
			units.FormatBytes(total))
	default:
		return false, 0, fmt.Errorf("A, B and C need %s of memory, more than the %s available: give a budget such as -mem %s to run out of core",
			units.FormatBytes(total), units.FormatBytes(avail), flagSize(avail/2))
	}
	return false, budget, nil
}

// diskWrite is a file of size bytes that a run writes in dir.
type diskWrite struct {
	dir  string
	size int64
}

// checkDisk refuses writes that do not fit in the free space of their file
// systems (those whose free space is known), before any is made.
func checkDisk(writes ...diskWrite) error {
	type fsys struct {
		dir        string
		free, need int64
	}
	var order []uint64
	byID := map[uint64]*fsys{}
	for _, w := range writes {
		free, id, ok := freeSpace(w.dir)
		if !ok {
			continue
		}
		f := byID[id]
		if f == nil {
			f = &fsys{dir: w.dir, free: free}
			byID[id] = f
			order = append(order, id)
		}
		if f.need > math.MaxInt64-w.size {
			f.need = math.MaxInt64
		} else {
			f.need += w.size
		}
	}
	for _, id := range order {
		if f := byID[id]; f.need > f.free {
			if why := unwritable(f.dir); why != "" {
				return fmt.Errorf("cannot write the product's files in %s: %s", f.dir, why)
			}
			return fmt.Errorf("the product's files need %s of disk space in %s, but only %s is free",
				units.FormatBytes(f.need), f.dir, units.FormatBytes(f.free))
		}
	}
	return nil
}
