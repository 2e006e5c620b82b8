//go:build !amd64

package secagg

// addWords sets dst[i] += w[i] mod 2^32; len(w) ≥ len(dst) (panics
// otherwise).
func addWords(dst, w []uint32) { addWordsGeneric(dst, w) }

// subWords sets dst[i] -= w[i] mod 2^32; len(w) ≥ len(dst) (panics
// otherwise).
func subWords(dst, w []uint32) { subWordsGeneric(dst, w) }
