package region

import (
	"context"
	"slices"
	"sync"
)

// boxLock orders the reads and writes of one stored region by the boxes
// they touch: operations on disjoint boxes, and reads of overlapping ones,
// run at the same time; a write waits for every earlier operation whose
// box overlaps its own, and a read for every earlier overlapping write.
// "Earlier" is the order of arrival, so a waiting write is not overtaken
// by later overlapping reads, and overlapping writes land in the order
// they were called (the last one wins).
type boxLock struct {
	mu  sync.Mutex
	ops []*boxOp // the operations holding or waiting for a box, by arrival
}

// boxOp is one operation holding or waiting for its box in a boxLock.
type boxOp struct {
	box   Box
	write bool
	done  chan struct{} // closed when the operation leaves the lock
}

// conflicts reports whether o and p may not run at the same time.
func (o *boxOp) conflicts(p *boxOp) bool {
	return (o.write || p.write) && !o.box.Intersect(p.box).Empty()
}

// lock waits until no earlier operation conflicts with an operation on
// box (a write if write) and returns it, to be passed to unlock; it
// returns ctx's error, holding nothing, if ctx ends first.
func (l *boxLock) lock(ctx context.Context, box Box, write bool) (*boxOp, error) {
	op := &boxOp{box: box, write: write, done: make(chan struct{})}
	l.mu.Lock()
	l.ops = append(l.ops, op)
	for {
		var wait chan struct{}
		for _, o := range l.ops {
			if o == op {
				break
			}
			if o.conflicts(op) {
				wait = o.done
				break
			}
		}
		l.mu.Unlock()
		if wait == nil {
			return op, nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			l.unlock(op)
			return nil, ctx.Err()
		}
		l.mu.Lock()
	}
}

// unlock ends op, letting the operations waiting for it go on.
func (l *boxLock) unlock(op *boxOp) {
	l.mu.Lock()
	if i := slices.Index(l.ops, op); i >= 0 {
		l.ops = slices.Delete(l.ops, i, i+1)
	}
	l.mu.Unlock()
	close(op.done)
}
