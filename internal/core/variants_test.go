package core

import (
	"context"
	"slices"
	"testing"
	"time"
)

// The chooser's decisions, from given statistics: idle unmeasured
// implementations first, then the fastest free one unless a busy one
// would finish the held line sooner.
func TestChooserPick(t *testing.T) {
	r := NewRun(context.Background(), "t", nil)
	ms := int64(time.Millisecond)
	c := &chooser[int]{run: r, name: "t", stats: []*variantStats{
		{copies: 1, live: 1}, {copies: 1, live: 1}, {copies: 2, live: 2},
	}}
	if i := c.pick(); i != 0 {
		t.Errorf("nothing measured: picked %d, want 0", i)
	}
	c.stats[0].outstanding = 1
	if i := c.pick(); i != 1 {
		t.Errorf("0 being measured: picked %d, want 1", i)
	}
	// Measured: 0 fast (1 ms) and busy, 1 slow (20 ms) and free, 2 medium
	// (4 ms, 2 copies) and full.
	c.stats[0].samples, c.stats[0].mean = 1, ms
	c.stats[1].samples, c.stats[1].mean = 1, 20*ms
	c.stats[2].samples, c.stats[2].mean, c.stats[2].outstanding = 1, 4*ms, 2
	c.hold = make([]int, 3)
	if i := c.pick(); i != -1 {
		t.Errorf("3 held, fast one busy: picked %d, want to wait for it", i)
	}
	c.hold = make([]int, 40) // the fast one needs 41 ms for the line
	if i := c.pick(); i != 1 {
		t.Errorf("40 held: picked %d, want the slow free one", i)
	}
	c.stats[0].outstanding = 0
	c.hold = make([]int, 1)
	if i := c.pick(); i != 0 {
		t.Errorf("fast one free: picked %d, want it", i)
	}
	// The fast one busy but stopped (Terminator): it no longer counts.
	c.hold = make([]int, 10) // the fast one would need 11 ms, the medium one 24
	if i := c.pick(); i != 0 {
		t.Errorf("10 held: picked %d, want the fast one", i)
	}
	c.stats[0].outstanding, c.stats[0].live = 1, 0
	if i := c.pick(); i != 1 {
		t.Errorf("fast one stopped: picked %d, want the slow free one", i)
	}
}

// Taking a value from the middle of the held line keeps the others in
// order, and their estimates beside them.
func TestChooserTake(t *testing.T) {
	c := &chooser[string]{hold: []string{"x", "a", "b", "c", "d"}, est: []float64{9, 1, 2, 3, 4}, head: 1}
	if v := c.take(1); v != "b" {
		t.Fatalf("took %q, want b", v)
	}
	if got := c.hold[c.head:]; !slices.Equal(got, []string{"a", "c", "d"}) || !slices.Equal(c.est[c.head:], []float64{1, 3, 4}) {
		t.Errorf("left %v with estimates %v", got, c.est[c.head:])
	}
	if v := c.take(0); v != "a" || c.hold[c.head] != "c" || c.est[c.head] != 3 {
		t.Errorf("took %q, then %q (%v) first", v, c.hold[c.head], c.est[c.head])
	}
}
