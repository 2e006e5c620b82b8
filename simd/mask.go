package simd

// Modular vector arithmetic for secure aggregation: pairwise masks and
// inputs live in Z_{2^32} (Bonawitz et al. 2017, "Practical Secure
// Aggregation for Privacy-Preserving Machine Learning", §3: vectors over
// Z_R with R = 2^b), where adding and subtracting masks is plain wrapping
// unsigned arithmetic. Both are exact, do not allocate and panic if the
// lengths differ. They are plain loops in every build: on amd64 secagg
// adds its masks with its own SSE2 kernel, interleaved with the AES-CTR
// keystream (secagg/words_amd64.go), and these serve the other
// architectures and as that kernel's cross-check.

// AddUint32 computes dst_i = dst_i + x_i mod 2^32.
func AddUint32(dst, x []uint32) {
	if len(dst) != len(x) {
		panic(errLength)
	}
	addUint32Generic(dst, x)
}

// SubUint32 computes dst_i = dst_i − x_i mod 2^32.
func SubUint32(dst, x []uint32) {
	if len(dst) != len(x) {
		panic(errLength)
	}
	subUint32Generic(dst, x)
}
