package secagg

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// badBytes returns a slice whose length is not 32: nil, shorter or longer
// than a valid key or scalar, random or copied from valid.
func badBytes(rng *rand.Rand, valid []byte) []byte {
	n := rng.IntN(64)
	if n == 32 {
		n = 0
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	copy(b, valid)
	return b
}

// TestGarbageMessages throws random and mutated messages of every kind at
// the server in every round: none may panic, and none may stop the honest
// clients from completing with the exact sum.
func TestGarbageMessages(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	const n, d = 10, 9
	rounds := 30
	if testing.Short() {
		rounds = 8
	}
	for trial := range rounds {
		p := Params{Neighbors: 4, Threshold: 3}
		if trial%2 == 1 {
			p = Params{Neighbors: n - 1, Threshold: 5}
		}
		h := newHarness(t, ServerConfig{Dim: d, Params: p}, testInputs(rng, n, d), map[ClientID]dropStage{3: dropBeforeMasked})
		srv := h.srv
		// Each message below is invalid in every round: a wrong length, an
		// ID outside U1 (0, n+1, n+2), or a replay.
		stranger := func() ClientID { return []ClientID{0, n + 1, n + 2}[rng.IntN(3)] }
		member := func() ClientID { return ClientID(1 + rng.IntN(n)) }
		spray := func() {
			for range 40 {
				from := member()
				var err error
				switch rng.IntN(9) {
				case 0:
					err = srv.AdvertiseKeys(AdvertiseKeysMsg{From: stranger(), EncKey: badBytes(rng, nil), MaskKey: badBytes(rng, nil)})
				case 1:
					srv.mu.Lock()
					a, ok := srv.adv[from]
					srv.mu.Unlock()
					if !ok {
						continue
					}
					err = srv.AdvertiseKeys(a) // replay
				case 2:
					m, ok := h.shareMsgs[from]
					if !ok {
						continue
					}
					m.Shares = slices.Clone(m.Shares)
					k := rng.IntN(len(m.Shares))
					if rng.IntN(2) == 0 {
						m.Shares[k].To = stranger()
					} else {
						m.Shares[k].Ciphertext = badBytes(rng, m.Shares[k].Ciphertext)
					}
					err = srv.ShareKeys(m)
				case 3:
					err = srv.ShareKeys(ShareKeysMsg{From: stranger()})
				case 4:
					err = srv.MaskedInput(MaskedInputMsg{From: from, Masked: make([]uint32, d+1-2*rng.IntN(2))})
				case 5:
					err = srv.MaskedInput(MaskedInputMsg{From: stranger(), Masked: make([]uint32, d)})
				case 6:
					m, ok := h.unmaskMsgs[from]
					if !ok || len(m.SelfShares) == 0 {
						continue
					}
					m.SelfShares = slices.Clone(m.SelfShares)
					k := rng.IntN(len(m.SelfShares))
					switch rng.IntN(3) {
					case 0:
						m.SelfShares[k].Of = stranger()
					case 1:
						m.SelfShares[k].X = stranger()
					default:
						m.SelfShares[k].Value = badBytes(rng, m.SelfShares[k].Value)
					}
					err = srv.Unmask(m)
				case 7:
					err = srv.Unmask(UnmaskMsg{From: stranger(), SelfShares: []Share{{Of: from, X: from, Value: badBytes(rng, nil)}}})
				default:
					_, e1 := srv.ShareKeysRequest(stranger())
					_, e2 := srv.MaskedInputRequest(stranger())
					_, e3 := srv.UnmaskRequest(stranger())
					if e1 == nil || e2 == nil || e3 == nil {
						err = nil
					} else {
						err = e1
					}
				}
				if err == nil {
					t.Fatalf("trial %d: an invalid message was accepted", trial)
				}
			}
		}
		h.hook = func(round int, open bool) { spray() }
		res, err := h.run()
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if !slices.Equal(res.Sum, h.plainSum(res.Survivors)) {
			t.Fatalf("trial %d: wrong sum after garbage", trial)
		}
		spray()
	}
}
