//go:build !amd64

package secagg

const hasVAES = false

func aes256Expand(*[15][32]byte, *[32]byte) { panic("secagg: no VAES") }

// ctrMask is never called where hasVAES is false.
func ctrMask(*uint32, int, *[15][32]byte, uint64, int) { panic("secagg: no VAES") }
