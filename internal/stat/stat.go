// Package stat holds the small order statistics the applications share.
package stat

import (
	"math"
	"slices"
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
