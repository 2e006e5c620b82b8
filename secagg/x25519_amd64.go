package secagg

import (
	"golang.org/x/sys/cpu"
)

//go:generate go run gen_fe4.go

// fe4Mul sets z = x·y (reduced). z may alias x or y.
//
//go:noescape
func fe4Mul(z, x, y *fe4)

// fe4Sqr sets z = x² (reduced); scratch is overwritten.
//
//go:noescape
func fe4Sqr(z, x, scratch *fe4)

// fe4Add sets z = x + y (not reduced).
//
//go:noescape
func fe4Add(z, x, y *fe4)

// fe4Sub sets z = x + 2p − y (not reduced, non-negative limbs).
//
//go:noescape
func fe4Sub(z, x, y *fe4)

// fe4MulA24 sets z = 121665·x (reduced), the curve constant (A − 2)/4.
//
//go:noescape
func fe4MulA24(z, x *fe4)

// fe4CSwap swaps x and y if mask is all ones, leaves them if it is zero,
// in constant time.
//
//go:noescape
func fe4CSwap(x, y *fe4, mask uint64)

// ladderStep4 is one step of the four ladders: swap (x2 : z2) with (x3 :
// z3) if mask is all ones, then the differential addition and doubling of
// RFC 7748, §5.
//
//go:noescape
func ladderStep4(s *ladder4, mask uint64)

// hasLadder4 reports whether the CPU runs the AVX2 ladder.
var hasLadder4 = cpu.X86.HasAVX2
