package secagg

// SSE2 (part of every amd64 CPU) adds four words per instruction; the Go
// loop adds one, which made the addition as costly as the AES-CTR
// keystream itself.

//go:noescape
func addWordsAsm(dst, w []uint32)

//go:noescape
func subWordsAsm(dst, w []uint32)

// addWords sets dst[i] += w[i] mod 2^32; len(w) ≥ len(dst) (panics
// otherwise).
func addWords(dst, w []uint32) {
	_ = w[:len(dst)]
	addWordsAsm(dst, w)
}

// subWords sets dst[i] -= w[i] mod 2^32; len(w) ≥ len(dst) (panics
// otherwise).
func subWords(dst, w []uint32) {
	_ = w[:len(dst)]
	subWordsAsm(dst, w)
}
