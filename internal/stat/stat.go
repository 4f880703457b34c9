// Package stat holds the small order statistics the applications share.
package stat

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Median returns the median of v (the mean of the middle two for an even
// length), or NaN for an empty v. It sorts v in place.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// Covered returns the length of the union of the intervals of ss, whose
// ends bounds gives (start, end): the time during which at least one of
// them was under way. ss is not changed.
func Covered[T any](ss []T, bounds func(T) (start, end time.Duration)) time.Duration {
	type iv struct{ t0, t1 time.Duration }
	v := make([]iv, len(ss))
	for i, s := range ss {
		v[i].t0, v[i].t1 = bounds(s)
	}
	slices.SortFunc(v, func(a, b iv) int { return cmp.Compare(a.t0, b.t0) })
	var total, end time.Duration
	for i, s := range v {
		switch {
		case i == 0 || s.t0 > end:
			total += s.t1 - s.t0
			end = s.t1
		case s.t1 > end:
			total += s.t1 - end
			end = s.t1
		}
	}
	return total
}
