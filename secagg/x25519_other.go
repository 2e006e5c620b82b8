//go:build !amd64

package secagg

// hasLadder4 is false: without the AVX2 ladder every agreement is one
// scalar ladder (circl's x25519.Shared).
const hasLadder4 = false

func ladderStep4(*ladder4, uint64) { panic("secagg: no AVX2 ladder") }

func fe4CSwap(x, y *fe4, mask uint64) { panic("secagg: no AVX2 ladder") }
