package cluster

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// A watch does the chores of a worker or client that wait on time (a
// running input's started notice and progress reports, the busy sweep of
// direct requests, a client's check that a direct request's worker is
// not silent and that some worker serves the task) from one goroutine
// that ticks, instead of timers set for each item.
//
// A runtime timer added, reset or re-armed for each item is not free when
// the process is otherwise idle: adding one that is the earliest of its
// processor makes the runtime wake another OS thread (the one waiting in
// the network poller, or a spinning one) to take it into account, so each
// small item paid for a thread wake-up beside its own round trip (see
// docs/cluster.md for the measurements). Items now only write down when
// they start and end; the watch runs pass every tick while pass says there
// is something to watch, and parks after idleTicks ticks without, until
// poke.
type watch struct {
	tick time.Duration
	// pass does what is due and says whether there is anything to watch.
	pass   func() bool
	parked atomic.Bool
	wake   chan struct{} // poke unparks the watch (buffered)
}

// idleTicks is how many ticks with nothing to watch park a watch.
const idleTicks = 40

// watchTick is the tick of a watch whose chores come every shortest: a
// quarter of it, between 2.5 and 25 ms. A slot's chore runs at most one
// tick early (see early), never late.
func watchTick(shortest time.Duration) time.Duration {
	return min(max(shortest/4, 2500*time.Microsecond), 25*time.Millisecond)
}

func newWatch(tick time.Duration, pass func() bool) *watch {
	return &watch{tick: tick, pass: pass, wake: make(chan struct{}, 1)}
}

// poke makes sure that w ticks: call it when something to watch begins.
// It costs an atomic load while w ticks.
func (w *watch) poke() {
	if w.parked.Load() && w.parked.CompareAndSwap(true, false) {
		w.wake <- struct{}{}
	}
}

// run ticks until ctx is done.
func (w *watch) run(ctx context.Context) {
	t := time.NewTicker(w.tick)
	defer t.Stop()
	idle := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if w.pass() {
			idle = 0
			continue
		}
		if idle++; idle < idleTicks {
			continue
		}
		// Park. What begins after parked is set pokes the watch; what
		// began before is seen by the pass that follows.
		idle = 0
		t.Stop()
		w.parked.Store(true)
		if w.pass() {
			if !w.parked.CompareAndSwap(true, false) {
				<-w.wake // poked meanwhile
			}
		} else {
			select {
			case <-w.wake:
			case <-ctx.Done():
				return
			}
		}
		t.Reset(w.tick)
	}
}

// early returns d less w's tick: a chore due after d is set to d early,
// so that the tick that runs it comes at most a tick before d and never
// after (a started notice, say, reaches its client by startNoticeAfter,
// as a timer's did).
func (w *watch) early(d time.Duration) time.Duration { return max(d-w.tick, 0) }

// slot is one worker copy's place in its worker's watch: while an input
// runs, chore runs at due, then every every, until the input ends (each
// time up to a tick early: see early).
type slot struct {
	w     *watch
	mu    sync.Mutex
	chore func() // nil: no input running
	due   time.Time
	every time.Duration
}

// begin starts s's input: chore runs after first, then every every, until
// end.
func (s *slot) begin(first, every time.Duration, chore func()) {
	s.mu.Lock()
	s.chore, s.due, s.every = chore, time.Now().Add(s.w.early(first)), every
	s.mu.Unlock()
	s.w.poke()
}

// end ends s's input; a chore running at that moment is over when end
// returns.
func (s *slot) end() {
	s.mu.Lock()
	s.chore = nil
	s.mu.Unlock()
}

// tick runs s's chore if it is due and says whether an input runs.
func (s *slot) tick() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.chore == nil {
		return false
	}
	if now := time.Now(); !now.Before(s.due) {
		s.chore()
		s.due = now.Add(s.w.early(s.every))
	}
	return true
}
