//go:build !amd64

package secagg

import (
	"github.com/cloudflare/circl/dh/x25519"
	fp "github.com/cloudflare/circl/math/fp25519"
)

// hasLadder8 is false: the eight-lane ladder is AVX-512 IFMA assembly,
// amd64 only. It is a variable, as on amd64, so that tests can set it.
var hasLadder8 = false

// cpuLadder8 is false: no CPU here runs the IFMA ladder.
const cpuLadder8 = false

// ladder8Batch is never called where hasLadder8 is false.
func ladder8Batch(xs, zs []fp.Elt, k *x25519.Key, pks []*x25519.Key) {
	panic("secagg: no IFMA ladder")
}

// keyGen8Batch is never called where hasLadder8 is false.
func keyGen8Batch(xs, zs []fp.Elt, sks []x25519.Key) {
	panic("secagg: no IFMA ladder")
}
