package secagg

// addWordsGeneric sets dst[i] += w[i] mod 2^32; len(w) ≥ len(dst).
func addWordsGeneric(dst, w []uint32) {
	w = w[:len(dst)]
	for len(dst) >= 8 {
		dst[0] += w[0]
		dst[1] += w[1]
		dst[2] += w[2]
		dst[3] += w[3]
		dst[4] += w[4]
		dst[5] += w[5]
		dst[6] += w[6]
		dst[7] += w[7]
		dst, w = dst[8:], w[8:]
	}
	for i := range dst {
		dst[i] += w[i]
	}
}

// subWordsGeneric sets dst[i] -= w[i] mod 2^32; len(w) ≥ len(dst).
func subWordsGeneric(dst, w []uint32) {
	w = w[:len(dst)]
	for len(dst) >= 8 {
		dst[0] -= w[0]
		dst[1] -= w[1]
		dst[2] -= w[2]
		dst[3] -= w[3]
		dst[4] -= w[4]
		dst[5] -= w[5]
		dst[6] -= w[6]
		dst[7] -= w[7]
		dst, w = dst[8:], w[8:]
	}
	for i := range dst {
		dst[i] -= w[i]
	}
}
