package secagg

import (
	"crypto/rand"
	"math/bits"
	"slices"

	"github.com/cloudflare/circl/group"
)

// Shamir secret sharing (Shamir 1979) over the Ristretto255 scalar field,
// with the shares' encodings those of circl's secretsharing package (which
// the tests use as the reference). The arithmetic is our own because
// circl's polynomial evaluation and Lagrange interpolation cost 3–5× more
// than the bare scalar operations, which dominate the client's round 1 and
// the server's Finish once k is in the hundreds (Recover takes 18 ms per
// secret at t = 184, times n secrets per instance).

// splitSecret Shamir-shares secret t-out-of-len(holders): it draws a
// uniformly random polynomial of degree t−1 with constant term secret (the
// coefficients from crypto/rand) and returns its values at each holder's
// ClientID, as canonical scalar encodings in the order of holders. It uses
// only the constant-time scalar operations, as the coefficients are
// secret. t ≥ 1 and holders distinct and non-zero (programmer errors
// otherwise: panics).
func splitSecret(secret group.Scalar, t int, holders []ClientID) [][]byte {
	if t < 1 {
		panic("secagg: threshold below 1")
	}
	g := group.Ristretto255
	coef := make([]group.Scalar, t)
	coef[0] = secret.Copy()
	for i := 1; i < t; i++ {
		coef[i] = g.RandomScalar(rand.Reader) // ignores the reader: crypto/rand
	}
	out := make([][]byte, len(holders))
	x, acc := g.NewScalar(), g.NewScalar()
	for k, h := range holders {
		if h == 0 {
			panic("secagg: share at x = 0")
		}
		x.SetUint64(uint64(h))
		acc.Set(coef[t-1])
		for i := t - 2; i >= 0; i-- { // Horner
			acc.Mul(acc, x)
			acc.Add(acc, coef[i])
		}
		out[k] = scalarBytes(acc)
	}
	return out
}

// lagrangeAtZero returns the coefficients λ_i with f(0) = Σ λ_i·f(x_i) for
// any polynomial f of degree < len(xs): λ_i = Π_{j≠i} x_j / (x_j − x_i).
// xs are distinct and non-zero. The IDs are public, so the denominators
// are built as exact integer products packed into uint64 words (about six
// differences per scalar multiplication when IDs are below 1024) and
// inverted together (Montgomery's batch inversion: one inversion).
func lagrangeAtZero(xs []ClientID) []group.Scalar {
	g := group.Ristretto255
	t := len(xs)
	den := make([]group.Scalar, t)
	tmp := g.NewScalar()
	for i, xi := range xs {
		acc := g.NewScalar().SetUint64(1)
		word, wbits, neg := uint64(xi), bits.Len32(uint32(xi)), false
		for j, xj := range xs {
			if j == i {
				continue
			}
			d := int64(xj) - int64(xi)
			if d < 0 {
				d, neg = -d, !neg
			}
			db := bits.Len64(uint64(d))
			if wbits+db > 64 {
				acc.Mul(acc, tmp.SetUint64(word))
				word, wbits = 1, 1
			}
			word *= uint64(d)
			wbits += db
		}
		acc.Mul(acc, tmp.SetUint64(word))
		if neg {
			acc.Neg(acc)
		}
		den[i] = acc
	}
	// Batch inversion: prefix[i] = den[0]·…·den[i−1].
	prefix := make([]group.Scalar, t+1)
	prefix[0] = g.NewScalar().SetUint64(1)
	for i := range den {
		prefix[i+1] = g.NewScalar().Mul(prefix[i], den[i])
	}
	inv := g.NewScalar().Inv(prefix[t])
	num := g.NewScalar().SetUint64(1)
	for _, x := range xs {
		num.Mul(num, tmp.SetUint64(uint64(x)))
	}
	lambda := make([]group.Scalar, t)
	for i := t - 1; i >= 0; i-- {
		lambda[i] = g.NewScalar().Mul(inv, prefix[i]) // 1/den[i]
		inv.Mul(inv, den[i])
		lambda[i].Mul(lambda[i], num)
	}
	return lambda
}

// interpolator reconstructs secrets, caching the Lagrange coefficients of
// each holder set (in the complete graph every secret usually has the same
// one). Not safe for concurrent use.
type interpolator struct {
	t     int
	cache map[string][]group.Scalar
}

func newInterpolator(t int) *interpolator {
	return &interpolator{t: t, cache: map[string][]group.Scalar{}}
}

// recover interpolates the secret from shares (holder ID → canonical scalar
// encoding). It uses the t smallest holder IDs, so that secrets with the
// same available holders share coefficients; in the semi-honest model all
// shares lie on one polynomial, and the server checks what it can (the mask
// key's public key) after reconstruction. It fails with ErrTooFewSurvivors
// when fewer than t shares are given, and on a malformed share.
func (ip *interpolator) recover(shares map[ClientID][]byte) (group.Scalar, error) {
	if len(shares) < ip.t {
		return nil, ErrTooFewSurvivors
	}
	xs := make([]ClientID, 0, len(shares))
	for x := range shares {
		xs = append(xs, x)
	}
	slices.Sort(xs)
	xs = xs[:ip.t]
	key := make([]byte, 0, 4*len(xs))
	for _, x := range xs {
		key = append(key, byte(x>>24), byte(x>>16), byte(x>>8), byte(x))
	}
	lambda, ok := ip.cache[string(key)]
	if !ok {
		lambda = lagrangeAtZero(xs)
		ip.cache[string(key)] = lambda
	}
	g := group.Ristretto255
	sum, term := g.NewScalar(), g.NewScalar()
	for i, x := range xs {
		y, err := parseScalar(shares[x])
		if err != nil {
			return nil, err
		}
		sum.Add(sum, term.Mul(lambda[i], y))
	}
	return sum, nil
}
