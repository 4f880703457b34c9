package matmul

import (
	"fmt"

	"github.com/gohtgs/htgs/internal/units"
)

// defaultDeviceThreads is the number of multiply-task copies per device
// when Config.Threads is 0 and the kernel runs on devices: two streams per
// device, so that one product is launched while the other runs.
const defaultDeviceThreads = 2

// planOffload plans C = A·B for a kernel that runs on devices devices with
// devBudget bytes of pool memory each (0: no limit); p holds the shapes.
//
// The traversal is the CPU graph's (see newPlan), with the device memory
// as a second budget: the resident operand's panel is split among the
// devices (row panels give device d the panel's block rows i with
// i mod devices = d, column panels its block columns j), so each device
// holds ceil(P/devices)·KB resident blocks, plus as many again for the
// next panel, a few streamed blocks and 2·Threads blocks of C. Among the
// traversals that fit both budgets the plan takes the one that moves the
// fewest bytes: those read from the sources plus those copied to the
// devices (each streamed block goes to every device with rows, or columns,
// in the panel).
func planOffload(p Plan, cfg Config, devices int, devBudget int64) (Plan, error) {
	if devices < 1 {
		return p, fmt.Errorf("%w: kernel %q has no device", ErrConfig, cfg.kernel().Name())
	}
	bs, threads := p.BlockSize, p.Threads
	p.Devices = devices
	sA := 8 * int64(min(bs, p.M)) * int64(min(bs, p.K))
	sB := 8 * int64(min(bs, p.K)) * int64(min(bs, p.N))
	sC := 8 * int64(min(bs, p.M)) * int64(min(bs, p.N))
	mk, kn := 8*int64(p.M)*int64(p.K), 8*int64(p.K)*int64(p.N)
	hostLook := min(lookahead(devices*threads), p.Multiplies)
	devLook := min(lookahead(threads), p.Multiplies)
	devC := max(1, min(2*threads, p.Multiplies))

	type option struct {
		order               Order
		panel               int
		capA, capB, capC    int // host, per pool (capC per device)
		devA, devB          int
		hostBytes, devBytes int64
		reads, uploads      int64
	}
	var best *option
	fits := func(o *option) bool {
		return (cfg.MemoryBudget == 0 || o.hostBytes <= cfg.MemoryBudget) && (devBudget == 0 || o.devBytes <= devBudget)
	}
	consider := func(o option) {
		if best == nil || o.reads+o.uploads < best.reads+best.uploads {
			best = &o
		}
	}
	// panelOption tries the largest panel of each orientation that fits,
	// evened out to the smallest panel with the same number of passes.
	panelOption := func(order Order, blocks int, sRes, sStr, resBytes, strBytes int64) {
		option1 := func(P int) option {
			share := ceilDiv(P, devices)
			o := option{order: order, panel: P, capC: capPartials(partialCap(share, threads+devC), p.Multiplies)}
			devRes := share * p.KB
			if P < blocks {
				devRes += share
			}
			o.devBytes = int64(devRes)*sRes + int64(devLook)*sStr + int64(devC)*sC
			o.hostBytes = int64(devices) * int64(o.capC) * sC
			passes := ceilDiv(blocks, P)
			if !p.InMemory {
				capRes := P * p.KB
				if P < blocks {
					capRes += P
				}
				o.hostBytes += int64(capRes)*sRes + int64(hostLook)*sStr
				o.reads = resBytes + int64(passes)*strBytes
				if order == RowPanels {
					o.capA, o.capB = capRes, hostLook
				} else {
					o.capA, o.capB = hostLook, capRes
				}
			}
			if order == RowPanels {
				o.devA, o.devB = devRes, devLook
			} else {
				o.devA, o.devB = devLook, devRes
			}
			// The resident blocks go to one device each; the streamed ones
			// to every device with a row (column) in the panel.
			o.uploads = resBytes
			for q := range passes {
				lo, hi := q*P, min((q+1)*P, blocks)
				o.uploads += int64(min(devices, hi-lo)) * strBytes
			}
			return o
		}
		for P := blocks; P >= 1; P-- {
			if o := option1(P); !fits(&o) {
				continue
			}
			consider(option1(ceilDiv(blocks, ceilDiv(blocks, P))))
			return
		}
	}
	panelOption(RowPanels, p.MB, sA, sB, mk, kn)
	panelOption(ColumnPanels, p.NB, sB, sA, kn, mk)
	if best == nil {
		o := option{order: Streamed, panel: 1, devA: devLook, devB: devLook,
			capC:    capPartials(partialCap(1, threads+devC), p.Multiplies),
			uploads: mk*int64(p.NB) + kn*int64(p.MB)}
		o.devBytes = int64(devLook)*(sA+sB) + int64(devC)*sC
		o.hostBytes = int64(devices) * int64(o.capC) * sC
		if !p.InMemory {
			o.capA, o.capB = hostLook, hostLook
			o.hostBytes += int64(hostLook) * (sA + sB)
			o.reads = o.uploads
		}
		if fits(&o) {
			consider(o)
		} else {
			return p, fmt.Errorf("%w: the blocks of one pass with %dx%d blocks and %d threads per device need %s of host memory (budget %s) and %s per device (budget %s); use smaller blocks or fewer threads",
				ErrBudget, bs, bs, threads, units.FormatBytes(o.hostBytes), budgetString(cfg.MemoryBudget),
				units.FormatBytes(o.devBytes), budgetString(devBudget))
		}
	}
	p.setOrder(best.order, best.panel)
	p.PoolA, p.PoolB, p.PoolC = best.capA, best.capB, best.capC
	p.PoolBytes, p.ReadBytes = best.hostBytes, best.reads
	p.DevicePoolA, p.DevicePoolB, p.DevicePoolC = best.devA, best.devB, devC
	p.DevicePoolBytes, p.UploadBytes = best.devBytes, best.uploads
	return p, nil
}

func budgetString(b int64) string {
	if b == 0 {
		return "none"
	}
	return units.FormatBytes(b)
}
