//go:build !amd64

package secagg

// Plain loops rather than package simd's kernels: devices, most of them
// arm64, link secagg through api/client, which must not link simd and
// gonum (api/client's TestClientDependencies, run for arm64 too), and
// simd has no arm64 kernels for these anyway.

// addWords sets dst[i] += w[i] mod 2^32; len(w) ≥ len(dst) (panics
// otherwise).
func addWords(dst, w []uint32) {
	w = w[:len(dst)]
	for i := range dst {
		dst[i] += w[i]
	}
}

// subWords sets dst[i] -= w[i] mod 2^32; len(w) ≥ len(dst) (panics
// otherwise).
func subWords(dst, w []uint32) {
	w = w[:len(dst)]
	for i := range dst {
		dst[i] -= w[i]
	}
}
