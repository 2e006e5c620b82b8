package secagg

// SSE2 (part of every amd64 CPU) adds four words per instruction; the Go
// loop adds one, which made the addition as costly as the AES-CTR
// keystream itself. An AVX-512 loop (once in package simd) was faster on
// its own (about 220 GB/s in cache) but, interleaved chunk by chunk with the AES-CTR
// keystream, mask expansion measured 3.8–4.2 GB/s with it against 5.4–5.7
// GB/s with this kernel (BenchmarkMaskExpansion, both builds, same
// machine, back to back), so the PRG keeps its own 128-bit kernel.

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
