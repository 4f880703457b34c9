package bookkeeper

import (
	"context"
	"iter"

	"github.com/gohtgs/htgs/task"
)

// Join is a keyed join rule (a "flow cache"): it gathers its inputs by key,
// and when a key is complete it emits one value made from the key's inputs
// and forgets the key, so its state is the keys still waiting and nothing
// else. Make one with [NewJoin], [NewJoinN] or [NewMultiJoin], in the
// factory given to [AddRule] (one Join per bookkeeper instance):
//
//	sums := bookkeeper.AddRule(bk, "both halves", func() bookkeeper.Rule[Half, Sum] {
//		return bookkeeper.NewJoinN(Half.Key, func(string) int { return 2 }, merge)
//	})
//
// A value may take part in several keys ([NewMultiJoin]): the tiles of an
// image grid, each in the pairs it forms with its neighbours, join by pair.
//
// The slice got handed to complete or merge holds the key's inputs in
// arrival order, the newest last; it is reused once the call returns, so
// keep its elements, not the slice.
type Join[In any, K comparable, Out any] struct {
	keys     func(in In, dst []K) []K
	complete func(k K, got []In) (Out, bool)
	pending  map[K][]In
	buf      []K
	free     [][]In
}

// NewJoin returns a join of the inputs that share the key key(in): after
// each input, complete receives the key's inputs so far and says whether
// the key is complete; if so, its value is emitted and the key forgotten
// (a later input with the same key starts it again).
func NewJoin[In any, K comparable, Out any](key func(In) K, complete func(k K, got []In) (Out, bool)) *Join[In, K, Out] {
	return NewMultiJoin(func(in In, dst []K) []K { return append(dst, key(in)) }, complete)
}

// NewJoinN returns a join that emits merge(k, got) once n(k) inputs with key
// k have arrived (n(k) < 1 counts as 1).
func NewJoinN[In any, K comparable, Out any](key func(In) K, n func(K) int, merge func(k K, got []In) Out) *Join[In, K, Out] {
	return NewJoin(key, func(k K, got []In) (Out, bool) {
		if len(got) < n(k) {
			var zero Out
			return zero, false
		}
		return merge(k, got), true
	})
}

// NewMultiJoin returns a join in which an input takes part in every key
// that keys appends to dst (each key once; none: the input is dropped).
// After each input, complete is called for each of its keys, in the order
// keys gave them, with the key's inputs so far, and a complete key's value
// is emitted at once. keys may reuse dst's storage.
func NewMultiJoin[In any, K comparable, Out any](keys func(in In, dst []K) []K, complete func(k K, got []In) (Out, bool)) *Join[In, K, Out] {
	return &Join[In, K, Out]{keys: keys, complete: complete, pending: map[K][]In{}}
}

// Apply adds in to its keys and emits the value of each key it completes.
func (j *Join[In, K, Out]) Apply(_ context.Context, in In, out task.Emitter[Out]) error {
	j.buf = j.keys(in, j.buf[:0])
	for _, k := range j.buf {
		got, ok := j.pending[k]
		if !ok && len(j.free) > 0 {
			got, j.free = j.free[len(j.free)-1], j.free[:len(j.free)-1]
		}
		got = append(got, in)
		v, done := j.complete(k, got)
		if !done {
			j.pending[k] = got
			continue
		}
		if ok {
			delete(j.pending, k)
		}
		clear(got) // drop the references the slice holds
		j.free = append(j.free, got[:0])
		if err := out.Emit(v); err != nil {
			return err
		}
	}
	clear(j.buf)
	return nil
}

// Len returns the number of keys waiting for more inputs.
func (j *Join[In, K, Out]) Len() int { return len(j.pending) }

// Pending yields the keys waiting for more inputs, each with its inputs so
// far (in no particular order of keys). The join must not be applied while
// the iteration runs.
func (j *Join[In, K, Out]) Pending() iter.Seq2[K, []In] {
	return func(yield func(K, []In) bool) {
		for k, got := range j.pending {
			if !yield(k, got) {
				return
			}
		}
	}
}
