package simd

// Modular vector arithmetic for secure aggregation: pairwise masks and
// shares live in Z_{2^32} or Z_{2^64} (Bonawitz et al. 2017, "Practical
// Secure Aggregation for Privacy-Preserving Machine Learning", §3: inputs
// and masks are vectors over Z_R with R = 2^b), where adding and
// subtracting masks is plain wrapping unsigned arithmetic. All four are
// exact (every build and path gives the same result), do not allocate and
// panic if the lengths differ.

// AddUint32 computes dst_i = dst_i + x_i mod 2^32.
func AddUint32(dst, x []uint32) {
	if len(dst) != len(x) {
		panic(errLength)
	}
	addUint32(dst, x)
}

// SubUint32 computes dst_i = dst_i − x_i mod 2^32.
func SubUint32(dst, x []uint32) {
	if len(dst) != len(x) {
		panic(errLength)
	}
	subUint32(dst, x)
}

// AddUint64 computes dst_i = dst_i + x_i mod 2^64.
func AddUint64(dst, x []uint64) {
	if len(dst) != len(x) {
		panic(errLength)
	}
	addUint64(dst, x)
}

// SubUint64 computes dst_i = dst_i − x_i mod 2^64.
func SubUint64(dst, x []uint64) {
	if len(dst) != len(x) {
		panic(errLength)
	}
	subUint64(dst, x)
}
