package secagg

import "testing"

// TestAddMaskWithoutVAES runs TestAddMaskMatchesStdlibCTR's check on the
// path of amd64 CPUs without VAES (crypto/aes's CTR and addWords), so that
// both paths are tested on a machine that has VAES.
func TestAddMaskWithoutVAES(t *testing.T) {
	defer func(v bool) { hasVAES = v }(hasVAES)
	hasVAES = false
	checkAddMask(t)
}
