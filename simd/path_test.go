package simd

import "testing"

// forEachPath runs f with the CPU's fastest kernels and, if those are the
// AVX-512 ones, again with them switched off, so that the simd build
// tests its fallbacks too on an AVX-512 machine.
func forEachPath(t *testing.T, f func(t *testing.T)) {
	t.Run("fast", f)
	if !hasAVX512 {
		return
	}
	hasAVX512 = false
	defer func() { hasAVX512 = true }()
	t.Run("noAVX512", f)
}
