package secagg

import (
	"math"
	"testing"

	"github.com/cloudflare/circl/group"
)

// shamirBenchCases are the sharings the Shamir benchmarks model: the secure
// demo (ChooseParams(120, 0): 28 neighbours, t = 27, so 29 holders with
// small IDs), 100 clients on the complete graph (t = 34), 1000 clients at
// 10% dropout (108 neighbours, t = 75), and the demo's shape with IDs near
// 2^32, where Horner's rule cannot batch steps.
var shamirBenchCases = []struct {
	name     string
	t, k     int    // threshold, holders
	base, by uint32 // holder i has ID base + by·i
}{
	{"demo/t=27/k=29", 27, 29, 1, 4},
	{"complete/t=34/k=100", 34, 100, 1, 1},
	{"sparse/t=75/k=109", 75, 109, 1, 9},
	{"bigIDs/t=27/k=29", 27, 29, math.MaxUint32 - 28*977, 977},
}

// benchHolders returns k holder IDs base + by·i.
func benchHolders(k int, base, by uint32) []ClientID {
	h := make([]ClientID, k)
	for i := range h {
		h[i] = ClientID(base + by*uint32(i))
	}
	return h
}

// BenchmarkSplitSecret is one client's sharing of one secret (it shares
// two per instance), random coefficients included.
func BenchmarkSplitSecret(b *testing.B) {
	secret := group.Ristretto255.RandomScalar(nil)
	for _, c := range shamirBenchCases {
		holders := benchHolders(c.k, c.base, c.by)
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				splitSecret(secret, c.t, holders)
			}
		})
	}
}

// BenchmarkEvalShares is the evaluation alone (no randomness): t
// coefficients at k holders.
func BenchmarkEvalShares(b *testing.B) {
	for _, c := range shamirBenchCases {
		holders := benchHolders(c.k, c.base, c.by)
		coef := make([]scalar, c.t)
		randomCoefficients(coef)
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				evalShares(coef, holders)
			}
		})
	}
}

// BenchmarkRecoverBatch is the server's reconstruction of n secrets in one
// batch. On the sparse graphs (demo, sparse) each secret has its own
// holder set (secret u's holders are u's ring neighbourhood, so every set
// differs) and every Lagrange basis is computed; on the complete graph all
// secrets share one set (one basis, cached).
func BenchmarkRecoverBatch(b *testing.B) {
	for _, c := range []struct {
		name    string
		n, t, k int
	}{
		{"demo/n=120/t=27/k=29", 120, 27, 29},
		{"complete/n=100/t=34", 100, 34, 100},
		{"sparse/n=1000/t=75/k=109", 1000, 75, 109},
	} {
		batch := make([]map[ClientID][]byte, c.n)
		coef := make([]scalar, c.t)
		for u := range batch {
			holders := make([]ClientID, c.k)
			for i := range holders {
				holders[i] = ClientID(1 + (u+i)%c.n) // u's ring neighbourhood
			}
			randomCoefficients(coef)
			sh := evalShares(coef, holders)
			batch[u] = map[ClientID][]byte{}
			for i, h := range holders {
				batch[u][h] = sh[i]
			}
		}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				_, errs := newInterpolator(c.t).recoverBatch(batch)
				for _, err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkRecoverPieces times the reconstruction's parts for one demo
// holder set (t = 27): the Lagrange basis (denominators, batched inversion
// and the products with the numerator) and, with it cached, the
// interpolation of one secret (share parsing and Σ λ_i·y_i).
func BenchmarkRecoverPieces(b *testing.B) {
	const t = 27
	holders := benchHolders(t, 1, 1)
	coef := make([]scalar, t)
	randomCoefficients(coef)
	sh := evalShares(coef, holders)
	m := map[ClientID][]byte{}
	for i, h := range holders {
		m[h] = sh[i]
	}
	b.Run("basis", func(b *testing.B) {
		for b.Loop() {
			newLagrangeBasis(holders)
		}
	})
	b.Run("interpolate", func(b *testing.B) {
		ip := newInterpolator(t)
		if _, err := ip.recover(m); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := ip.recover(m); err != nil {
				b.Fatal(err)
			}
		}
	})
}
