package stat

import (
	"math"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		v    []float64
		want float64
	}{{[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}, {[]float64{7}, 7}} {
		if got := Median(c.v); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.v, got, c.want)
		}
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median(nil) is not NaN")
	}
}

func TestCovered(t *testing.T) {
	ms := func(a, b int) [2]time.Duration {
		return [2]time.Duration{time.Duration(a) * time.Millisecond, time.Duration(b) * time.Millisecond}
	}
	bounds := func(s [2]time.Duration) (time.Duration, time.Duration) { return s[0], s[1] }
	for _, c := range []struct {
		ss   [][2]time.Duration
		want int
	}{
		{nil, 0},
		{[][2]time.Duration{ms(0, 10)}, 10},
		{[][2]time.Duration{ms(0, 10), ms(20, 25)}, 15},                        // apart
		{[][2]time.Duration{ms(20, 25), ms(0, 10), ms(5, 12)}, 17},             // overlapping, unsorted
		{[][2]time.Duration{ms(0, 30), ms(5, 10), ms(12, 20)}, 30},             // nested
		{[][2]time.Duration{ms(0, 10), ms(10, 20)}, 20},                        // touching
		{[][2]time.Duration{ms(0, 10), ms(5, 15), ms(20, 30), ms(22, 25)}, 25}, // two groups
	} {
		in := append([][2]time.Duration(nil), c.ss...)
		if got := Covered(c.ss, bounds); got != time.Duration(c.want)*time.Millisecond {
			t.Errorf("Covered(%v) = %v, want %d ms", c.ss, got, c.want)
		}
		for i := range in {
			if in[i] != c.ss[i] {
				t.Errorf("Covered changed its argument: %v, was %v", c.ss, in)
			}
		}
	}
}
