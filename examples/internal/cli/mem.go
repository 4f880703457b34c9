package cli

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"strconv"
)

// AvailableMemory returns the memory the machine can still give a process,
// in bytes (Linux's MemAvailable), or 0 when it cannot tell.
func AvailableMemory() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	return parseMemAvailable(data)
}

// PeakMemory returns the most physical memory this process has held so
// far, in bytes (Linux's VmHWM), or 0 when it cannot tell.
func PeakMemory() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	return parseKB(data, "VmHWM:")
}

// parseMemAvailable reads the MemAvailable line (in kB) of /proc/meminfo.
func parseMemAvailable(data []byte) int64 { return parseKB(data, "MemAvailable:") }

// parseKB reads the value in kB of the line starting with key.
func parseKB(data []byte, key string) int64 {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 2 || string(f[0]) != key {
			continue
		}
		kb, err := strconv.ParseInt(string(f[1]), 10, 64)
		if err != nil || kb < 0 || kb > math.MaxInt64/1024 {
			return 0
		}
		return kb * 1024
	}
	return 0
}
