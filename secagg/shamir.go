package secagg

import (
	"crypto/rand"

	"github.com/cloudflare/circl/group"
	"github.com/cloudflare/circl/secretsharing"
)

// splitSecret Shamir-shares secret t-out-of-len(holders) over the
// Ristretto255 scalar field (Shamir 1979), evaluating the random
// degree-(t−1) polynomial at each holder's ClientID. It returns the shares'
// canonical encodings in the order of holders. t ≥ 1; holders are distinct
// and non-zero (programmer errors otherwise: panics).
//
// circl's New(rnd, deg, secret) takes the polynomial degree, t−1, and draws
// the coefficients from crypto/rand (for Ristretto255 it ignores rnd).
func splitSecret(secret group.Scalar, t int, holders []ClientID) [][]byte {
	if t < 1 {
		panic("secagg: threshold below 1")
	}
	ss := secretsharing.New(rand.Reader, uint(t-1), secret)
	out := make([][]byte, len(holders))
	x := group.Ristretto255.NewScalar()
	for i, h := range holders {
		sh := ss.ShareWithID(x.SetUint64(uint64(h)))
		out[i] = scalarBytes(sh.Value)
	}
	return out
}

// recoverSecret interpolates the secret from shares (holder ID → canonical
// scalar encoding, already validated). It fails with ErrTooFewSurvivors when
// fewer than t shares are given. Only t of them are used: in the
// semi-honest model all shares lie on one polynomial, and the server
// verifies what it can (the mask key's public key) after reconstruction.
func recoverSecret(t int, shares map[ClientID][]byte) (group.Scalar, error) {
	if len(shares) < t {
		return nil, ErrTooFewSurvivors
	}
	ss := make([]secretsharing.Share, 0, t)
	for x, v := range shares {
		val, err := parseScalar(v)
		if err != nil {
			return nil, err
		}
		ss = append(ss, secretsharing.Share{
			ID:    group.Ristretto255.NewScalar().SetUint64(uint64(x)),
			Value: val,
		})
		if len(ss) == t {
			break
		}
	}
	return secretsharing.Recover(uint(t-1), ss)
}
