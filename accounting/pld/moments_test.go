package pld

import (
	"math"
	"testing"
)

// TestWorseMomentsCache checks that worseMoments, computed and then read
// from momentsCache, is bit for bit the maximum over both directions of
// lossMoments, which startInterval used before the cache.
func TestWorseMomentsCache(t *testing.T) {
	for _, c := range [][2]float64{{0.02, 1}, {0.001, 0.7}, {1, 3}} {
		var mu, v float64
		for _, add := range []bool{false, true} {
			m, s := lossMoments(mixturePair{q: c[0], sigma: c[1], add: add})
			mu, v = math.Max(mu, m), math.Max(v, s)
		}
		for range 2 {
			gm, gv := worseMoments(c[0], c[1])
			if math.Float64bits(gm) != math.Float64bits(mu) || math.Float64bits(gv) != math.Float64bits(v) {
				t.Fatalf("q=%v z=%v: worseMoments (%v, %v), lossMoments (%v, %v)", c[0], c[1], gm, gv, mu, v)
			}
		}
	}
}
