package simd

import "testing"

// cpuPaths lists the kernel paths this CPU and build can run, fastest
// first: avx512 and avx2 where available, generic always.
func cpuPaths() []string {
	var ps []string
	if cpuAVX512 {
		ps = append(ps, pathAVX512)
	}
	if cpuAVX2 {
		ps = append(ps, pathAVX2)
	}
	return append(ps, pathGeneric)
}

// setPath switches the kernels to path p (one of cpuPaths) and returns a
// function that restores the previous selection.
func setPath(p string) (restore func()) {
	a512, a2 := hasAVX512, hasAVX2
	switch p {
	case pathAVX512:
		hasAVX512, hasAVX2 = true, cpuAVX2
	case pathAVX2:
		hasAVX512, hasAVX2 = false, true
	default:
		hasAVX512, hasAVX2 = false, false
	}
	return func() { hasAVX512, hasAVX2 = a512, a2 }
}

// forEachPath runs f once per kernel path the CPU and build have (avx512,
// avx2, generic), whatever DPFL_SIMD selected for the process, so that one
// `go test` covers every path: on an AVX-512 machine all three, on an
// AVX2-only one avx2 and generic, in the plain build generic.
func forEachPath(t *testing.T, f func(t *testing.T)) {
	for _, p := range cpuPaths() {
		restore := setPath(p)
		t.Run(p, f)
		restore()
	}
}

func TestPathSelection(t *testing.T) {
	for _, tc := range []struct {
		env          string
		cpu512, cpu2 bool
		use512, use2 bool
		warns        bool
	}{
		{"", true, true, true, true, false},
		{"auto", false, true, false, true, false},
		{"", false, false, false, false, false},
		{"avx512", true, true, true, true, false},
		{"avx512", false, true, false, true, true},
		{"avx512", false, false, false, false, true},
		{"avx2", true, true, false, true, false},
		{"avx2", false, true, false, true, false},
		{"avx2", false, false, false, false, true},
		{"generic", true, true, false, false, false},
		{"AVX2", false, true, false, true, true}, // values are case-sensitive
		{"sse", true, true, true, true, true},
	} {
		u512, u2, warn := parsePath(tc.env, tc.cpu512, tc.cpu2)
		if u512 != tc.use512 || u2 != tc.use2 || (warn != "") != tc.warns {
			t.Errorf("DPFL_SIMD=%q, cpu avx512=%v avx2=%v: got %v %v %q, want %v %v warning=%v", tc.env, tc.cpu512, tc.cpu2, u512, u2, warn, tc.use512, tc.use2, tc.warns)
		}
	}
	for _, p := range cpuPaths() {
		restore := setPath(p)
		if got := Path(); got != p {
			t.Errorf("after setPath(%q), Path() = %q", p, got)
		}
		restore()
	}
}
