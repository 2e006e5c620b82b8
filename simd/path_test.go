package simd

import "testing"

// forEachPath runs f with the CPU's fastest kernels and then again with
// each faster instruction set switched off in turn (AVX-512, then AVX2), so
// that the simd build tests its AVX2 kernels and its generic fallbacks too
// on an AVX-512 machine.
func forEachPath(t *testing.T, f func(t *testing.T)) {
	t.Run("fast", f)
	a512, a2 := hasAVX512, hasAVX2
	defer func() { hasAVX512, hasAVX2 = a512, a2 }()
	if hasAVX512 && hasAVX2 {
		hasAVX512 = false
		t.Run("AVX2", f)
	}
	if hasAVX512 || hasAVX2 {
		hasAVX512, hasAVX2 = false, false
		t.Run("generic", f)
	}
}
