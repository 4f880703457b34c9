// Package task defines the typed tasks that make up an HTGS task graph.
//
// A task consumes values of one input type and emits zero or more values of
// one output type. Only Execute is required; the other phases of the HTGS
// model are optional interfaces a task may implement:
//
//   - [Initializer]: once per task copy, on the goroutine that runs the copy,
//     before its first Execute (bind a device, allocate scratch space).
//   - [Terminator]: lets a copy stop early, before its input is exhausted.
//   - [Shutdowner]: once per successfully initialized copy, after its last
//     Execute (free memory, unbind).
//
// A copy that runs its inputs on another machine (a remote task) may also
// implement [Placer], so that the graph's statistics, pictures, traces and
// stall reports name the worker and host of its inputs.
//
// A task added with N copies runs as N independent copies made by a factory
// function, so copies never share mutable state unless the factory
// deliberately gives them a shared pointer.
package task

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gohtgs/htgs/device"
)

// Task is the one required phase: Execute is called once per input value,
// and may call out.Emit any number of times before it returns. A non-nil
// error stops the whole graph, and the graph's Wait reports it wrapped in an
// [*Error] naming the task.
type Task[In, Out any] interface {
	Execute(ctx context.Context, in In, out Emitter[Out]) error
}

// Emitter sends a task's outputs to every consumer connected to it.
//
// Emit may be called from any goroutine, but only while the copy that owns
// the emitter is executing: emitting after Execute returned (or after the
// task terminated) fails with [ErrEmitClosed] and the value is dropped. Emit
// returns the graph's error if the graph is stopping. With a bounded
// consumer queue Emit blocks until there is room.
//
// When several consumers are connected, each receives the same value:
// pointer values are shared, not copied.
type Emitter[T any] interface {
	Emit(v T) error
}

// Initializer is implemented by tasks that need a set-up phase. Initialize
// runs once per copy, on the goroutine that then runs every Execute of that
// copy; an error stops the graph.
type Initializer interface {
	Initialize(ctx context.Context, info Info) error
}

// Terminator is implemented by tasks that may stop before their input is
// exhausted. CanTerminate is asked before the copy first waits for input and
// after every Execute; once it returns true the copy stops and its Shutdown
// runs. Values still queued for a task whose copies have all stopped are
// dropped.
//
// CanTerminate only adds an early way out: a task also stops, as every task
// does, when its input is closed and drained or when the graph is quiescent.
type Terminator interface {
	CanTerminate() bool
}

// Shutdowner is implemented by tasks that hold resources. Shutdown runs once
// per copy whose Initialize succeeded (or that has no Initialize), after the
// copy's last Execute, also when the graph stops on an error. ctx is not
// cancelled by the graph's own failure, so clean-up can still use it.
type Shutdowner interface {
	Shutdown(ctx context.Context) error
}

// Placer is implemented by task copies whose inputs run elsewhere: a copy
// that hands each input to a worker process and waits for its outputs (see
// package cluster). The graph finds out once per copy, when it builds it,
// whether the copy is a Placer; tasks that are not cost nothing.
//
// Placement says where the copy's input runs while its Execute runs: the
// worker that has taken the input, or a zero Worker while no worker has
// taken it yet. Between Executes it says where the last input ran (a zero
// Placement before the first). The graph calls it after every Execute, to
// count the inputs each worker ran and to mark the Execute's trace slice,
// and whenever it takes a snapshot of the run (Stats, pictures, stall
// reports), from another goroutine: it must be safe to call concurrently
// with Execute, and cheap.
type Placer interface {
	Placement() Placement
}

// Placement is where a task copy's input runs (see [Placer]).
type Placement struct {
	Worker string    // the worker's name ("" while no worker has the input)
	Host   string    // the worker's host
	Since  time.Time // when the worker took the input, as this process learnt it; zero if unknown
}

// String returns "worker@host", "worker" when the host is unknown, or ""
// when Worker is empty.
func (p Placement) String() string {
	if p.Worker == "" || p.Host == "" {
		return p.Worker
	}
	return p.Worker + "@" + p.Host
}

// Info describes one running copy of a task.
type Info struct {
	Task   string        // the task's name, with enclosing graph and pipeline names
	Copy   int           // this copy's index, 0..Copies-1
	Copies int           // the number of copies of the task
	Clone  int           // index of the execution-pipeline clone, 0..Clones-1
	Clones int           // the number of clones of the enclosing pipeline (1 outside pipelines)
	Device device.Device // the device of the enclosing pipeline clone (a CPU outside pipelines)
}

type infoKey struct{}

// WithInfo returns a context carrying info; the graph runtime gives every
// copy's Execute a context made this way.
func WithInfo(ctx context.Context, info Info) context.Context {
	return context.WithValue(ctx, infoKey{}, info)
}

// InfoFrom returns the Info of the copy whose Execute (or Initialize, or
// Shutdown) received ctx. ok is false for a context from elsewhere.
func InfoFrom(ctx context.Context) (info Info, ok bool) {
	info, ok = ctx.Value(infoKey{}).(Info)
	return info, ok
}

// Func adapts a function to a Task, for tasks that keep no state.
type Func[In, Out any] func(ctx context.Context, in In, out Emitter[Out]) error

// Execute calls f.
func (f Func[In, Out]) Execute(ctx context.Context, in In, out Emitter[Out]) error {
	return f(ctx, in, out)
}

// Map adapts a one-in, one-out function to a Task.
func Map[In, Out any](f func(ctx context.Context, in In) (Out, error)) Task[In, Out] {
	return Func[In, Out](func(ctx context.Context, in In, out Emitter[Out]) error {
		v, err := f(ctx, in)
		if err != nil {
			return err
		}
		return out.Emit(v)
	})
}

// ErrTerminated is returned by Emit when every consumer of the task has
// terminated (their copies stopped early, see [Terminator]), and by a
// graph's Send when the tasks fed by its input have: the value is dropped.
var ErrTerminated = errors.New("htgs: graph has terminated")

// ErrEmitClosed is returned by Emit when the emitting copy is not executing:
// its Execute has returned, or the task has terminated.
var ErrEmitClosed = errors.New("emit outside Execute or after the task terminated")

// Phase names the part of a task's life in which an [Error] happened.
type Phase string

// The phases of a task copy.
const (
	PhaseBuild      Phase = "build"      // the factory making the copy
	PhaseInitialize Phase = "initialize" // Initializer.Initialize
	PhaseExecute    Phase = "execute"    // Execute (for a bookkeeper, a rule's Apply)
	PhaseShutdown   Phase = "shutdown"   // Shutdowner.Shutdown
)

// Error reports the failure of one task copy: an error returned by one of
// its phases, or a panic.
type Error struct {
	Task  string // the task's full name
	Copy  int    // the copy that failed
	Phase Phase
	Err   error // the task's error, or a *PanicError
}

// Error formats the failure with the task's name and phase.
func (e *Error) Error() string {
	return fmt.Sprintf("htgs: task %q (copy %d) %s: %v", e.Task, e.Copy, e.Phase, e.Err)
}

// Unwrap returns the task's error.
func (e *Error) Unwrap() error { return e.Err }

// PanicError is the error a panicking task phase (or allocator, or
// decomposition rule) turns into. Its message is one line, so that it reads
// well in logs and wrapped in other errors; the stack is kept apart, in
// Stack, to print where it helps:
//
//	var pe *task.PanicError
//	if errors.As(err, &pe) {
//		log.Printf("%v\n%s", err, pe.Stack)
//	}
type PanicError struct {
	Value any    // the value passed to panic
	Stack []byte // the goroutine's stack at the panic, as runtime/debug.Stack gives it
}

// Error returns "panic: " and the panic value, on one line (line breaks in
// the value's text are replaced by spaces). The stack is not included: see
// Stack.
func (p *PanicError) Error() string {
	return "panic: " + strings.ReplaceAll(fmt.Sprint(p.Value), "\n", " ")
}

// Unwrap returns the panic value if it is an error.
func (p *PanicError) Unwrap() error {
	err, _ := p.Value.(error)
	return err
}
