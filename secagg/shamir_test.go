package secagg

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cloudflare/circl/group"
	"github.com/cloudflare/circl/secretsharing"
)

// TestShamirAgainstCircl cross-checks our sharing with circl's reference
// implementation both ways: circl recovers the secret from our shares, and
// we recover it from circl's, for random thresholds and holder IDs.
func TestShamirAgainstCircl(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	g := group.Ristretto255
	for trial := range 40 {
		th := 1 + rng.IntN(40)
		n := th + rng.IntN(10)
		seen := map[ClientID]bool{}
		holders := make([]ClientID, 0, n)
		for len(holders) < n {
			id := ClientID(1 + rng.Uint32N(uint32(1)<<(4+trial%28)+uint32(n)))
			if trial%5 == 0 {
				id = ClientID(math.MaxUint32 - rng.Uint32N(uint32(3*n))) // near the top of uint32
			}
			if !seen[id] {
				seen[id] = true
				holders = append(holders, id)
			}
		}
		secret := g.RandomScalar(nil)

		ours := splitSecret(secret, th, holders)
		ref := make([]secretsharing.Share, 0, th)
		for _, i := range rng.Perm(n)[:th] {
			v, err := parseScalar(ours[i])
			if err != nil {
				t.Fatal(err)
			}
			ref = append(ref, secretsharing.Share{ID: g.NewScalar().SetUint64(uint64(holders[i])), Value: v})
		}
		got, err := secretsharing.Recover(uint(th-1), ref)
		if err != nil || !got.IsEqual(secret) {
			t.Fatalf("trial %d (t=%d): circl does not recover our sharing: %v", trial, th, err)
		}

		ss := secretsharing.New(nil, uint(th-1), secret)
		theirs := map[ClientID][]byte{}
		for _, i := range rng.Perm(n)[:th+rng.IntN(n-th+1)] {
			theirs[holders[i]] = scalarBytes(ss.ShareWithID(g.NewScalar().SetUint64(uint64(holders[i]))).Value)
		}
		got, err = newInterpolator(th).recover(theirs)
		if err != nil || !got.IsEqual(secret) {
			t.Fatalf("trial %d (t=%d): we do not recover circl's sharing: %v", trial, th, err)
		}
		if th > 1 {
			short := map[ClientID][]byte{}
			for x, v := range theirs {
				if len(short) < th-1 {
					short[x] = v
				}
			}
			if _, err := newInterpolator(th).recover(short); err == nil {
				t.Fatalf("trial %d: recovered from t−1 shares", trial)
			}
		}
	}
}

// BenchmarkRecover is one secret's reconstruction from t shares at the
// thresholds ChooseParams gives for n = 100 (complete), 1000 at 10%
// dropout and 1000 at 30% (without the coefficient cache).
func BenchmarkRecover(b *testing.B) {
	for _, th := range []int{34, 82, 184} {
		holders := make([]ClientID, th)
		for i := range holders {
			holders[i] = ClientID(7*i + 1)
		}
		sh := splitSecret(group.Ristretto255.RandomScalar(nil), th, holders)
		m := map[ClientID][]byte{}
		for i, h := range holders {
			m[h] = sh[i]
		}
		b.Run(fmt.Sprintf("t=%d", th), func(b *testing.B) {
			for b.Loop() {
				if _, err := newInterpolator(th).recover(m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
