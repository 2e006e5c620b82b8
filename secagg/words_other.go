//go:build !amd64

package secagg

import "github.com/dpfl/dpfl/simd"

// addWords sets dst[i] += w[i] mod 2^32; len(w) ≥ len(dst) (panics
// otherwise).
func addWords(dst, w []uint32) { simd.AddUint32(dst, w[:len(dst)]) }

// subWords sets dst[i] -= w[i] mod 2^32; len(w) ≥ len(dst) (panics
// otherwise).
func subWords(dst, w []uint32) { simd.SubUint32(dst, w[:len(dst)]) }
