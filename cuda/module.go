package cuda

import (
	"errors"
	"fmt"
	"math"
	"sync"
)

// Module is a PTX module of the caller's loaded into one device's context
// with [Device.LoadModule]; its kernels are looked up with
// [Module.Function] and launched with [Function.Launch]. Close it before
// closing its device. Methods may be called from any goroutine.
type Module struct {
	dev *Device
	ctx uintptr // the device's context the module was loaded into

	mu     sync.Mutex
	mod    uintptr // the CUmodule; 0 after Close
	byName map[string]*Function
}

// LoadModule loads a module image into d's context: PTX (the text nvcc
// -ptx writes), which the driver JIT-compiles for d, or a cubin or fat
// binary (nvcc -cubin, -fatbin), whose machine code for d's architecture
// loads without compiling (a fat binary's PTX is compiled when it has no
// such code). Without the cuda build tag it fails with an error wrapping
// [ErrNoCUDA].
func (d *Device) LoadModule(image string) (*Module, error) {
	if d == nil {
		return nil, fmt.Errorf("%w: LoadModule on a nil *cuda.Device", ErrWrongDevice)
	}
	if image == "" {
		return nil, errors.New("cuda: LoadModule: empty module image")
	}
	c, err := d.context()
	if err != nil {
		return nil, err
	}
	mod, err := drvModuleLoad(c, image)
	if err != nil {
		return nil, fmt.Errorf("cuda: device %d: load module: %w", d.ordinal, err)
	}
	return &Module{dev: d, ctx: c, mod: mod, byName: map[string]*Function{}}, nil
}

// Device returns the module's device.
func (m *Module) Device() *Device { return m.dev }

// Function returns the kernel of the module named name (its extern "C"
// name), looking it up once.
func (m *Module) Function(name string) (*Function, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mod == 0 {
		return nil, fmt.Errorf("cuda: module function %q: %w", name, ErrClosed)
	}
	if f := m.byName[name]; f != nil {
		return f, nil
	}
	fn, err := drvModuleFunction(m.ctx, m.mod, name)
	if err != nil {
		return nil, fmt.Errorf("cuda: device %d: kernel %q: %w", m.dev.ordinal, name, err)
	}
	f := &Function{mod: m, name: name, fn: fn}
	m.byName[name] = f
	return f, nil
}

// Close unloads the module; its Functions can no longer be launched.
// Close is idempotent.
func (m *Module) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mod == 0 {
		return nil
	}
	mod := m.mod
	m.mod, m.byName = 0, nil
	if err := drvModuleUnload(m.ctx, mod); err != nil {
		return fmt.Errorf("cuda: device %d: unload module: %w", m.dev.ordinal, err)
	}
	return nil
}

// Function is a kernel of a [Module].
type Function struct {
	mod  *Module
	name string
	fn   uintptr
}

// Name returns the kernel's name.
func (f *Function) Name() string { return f.name }

// Launch queues the kernel on s with a one-dimensional grid of grid blocks
// of block threads; with a nil s it runs on the legacy default stream and
// waits for completion. s must belong to the module's device.
//
// Each argument fills one kernel parameter, in order, and may be a
// [DeviceMem] or [DevicePtr] (a pointer parameter), an int, int32, int64,
// uint32 or uint64 (any integer parameter of up to 8 bytes), a float64 or a
// float32 (a double or a float parameter). At most 32 arguments.
func (f *Function) Launch(s *Stream, grid, block uint32, args ...any) error {
	if grid == 0 || block == 0 {
		return fmt.Errorf("cuda: launch %s: empty grid %d x %d", f.name, grid, block)
	}
	if len(args) > 32 {
		return fmt.Errorf("cuda: launch %s: %d arguments (at most 32)", f.name, len(args))
	}
	d := f.mod.dev
	slots := make([]uint64, len(args))
	for i, a := range args {
		v, err := kernelArg(a, d)
		if err != nil {
			return fmt.Errorf("cuda: launch %s: argument %d: %w", f.name, i, err)
		}
		slots[i] = v
	}
	sh, wait, err := streamHandle(s, d)
	if err != nil {
		return err
	}
	f.mod.mu.Lock()
	closed := f.mod.mod == 0
	f.mod.mu.Unlock()
	if closed {
		return fmt.Errorf("cuda: launch %s: module: %w", f.name, ErrClosed)
	}
	if err := drvLaunch(f.mod.ctx, f.fn, grid, block, sh, slots, wait); err != nil {
		return fmt.Errorf("cuda: device %d: launch %s: %w", d.ordinal, f.name, err)
	}
	return nil
}

// kernelArg converts one Launch argument to its 8-byte parameter slot.
func kernelArg(a any, d *Device) (uint64, error) {
	switch v := a.(type) {
	case DeviceMem:
		if v.dev != nil && v.dev.ordinal != d.ordinal {
			return 0, fmt.Errorf("%w: memory of device %d for a kernel of device %d", ErrWrongDevice, v.dev.ordinal, d.ordinal)
		}
		return uint64(v.ptr), nil
	case DevicePtr:
		return uint64(v), nil
	case int:
		return uint64(v), nil
	case int32:
		return uint64(v), nil
	case int64:
		return uint64(v), nil
	case uint32:
		return uint64(v), nil
	case uint64:
		return v, nil
	case float64:
		return math.Float64bits(v), nil
	case float32:
		return uint64(math.Float32bits(v)), nil
	}
	return 0, fmt.Errorf("unsupported kernel argument type %T", a)
}

// GridFor returns the number of blocks of block threads that cover n
// elements, at least 1 and at most limit (0: 65535), for kernels that
// loop over the elements with a grid stride.
func GridFor(n int64, block uint32, limit uint32) uint32 {
	if limit == 0 {
		limit = maxGrid
	}
	if block == 0 {
		block = 1
	}
	g := (n + int64(block) - 1) / int64(block)
	return uint32(max(1, min(g, int64(limit))))
}

// maxGrid is the largest grid [GridFor] gives by default.
const maxGrid = 65535

// streamHandle returns the driver handle of s on device d (0 for nil: the
// legacy default stream) and whether the call must wait.
func streamHandle(s *Stream, d *Device) (uintptr, bool, error) {
	if s == nil {
		return 0, true, nil
	}
	h, err := s.on(d, "kernel")
	return h, false, err
}
