package secagg

import (
	cryptoRand "crypto/rand"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// wantPeerErr fails unless err is a *PeerError naming id whose text names
// the client too.
func wantPeerErr(t *testing.T, what string, err error, id ClientID) {
	t.Helper()
	var pe *PeerError
	if !errors.As(err, &pe) || pe.Client != id {
		t.Fatalf("%s: got %v, want a *PeerError naming client %d", what, err, id)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("client %d", id)) {
		t.Fatalf("%s: error text %q does not name client %d", what, err, id)
	}
}

// TestRejection injects malformed, replayed, misaddressed and out-of-round
// messages at every round of a sparse instance, checks each is refused
// with an error naming the culprit, and that the instance still finishes
// with the exact sum of the honest clients' inputs.
func TestRejection(t *testing.T) {
	const n, d = 12, 17
	rng := rand.New(rand.NewPCG(9, 10))
	cfg := ServerConfig{Dim: d, Params: Params{Neighbors: 4, Threshold: 3}}
	// Client 12 drops before masked input, so round 4 asks for its mask key.
	h := newHarness(t, cfg, testInputs(rng, n, d), map[ClientID]dropStage{12: dropBeforeMasked})
	srv := h.srv
	var adv1 AdvertiseKeysMsg
	nonNeighbor := func(id ClientID) ClientID {
		i := srv.g.index[id]
		for j, v := range srv.g.ids {
			if j != i && !srv.g.adjacent(i, j) {
				return v
			}
		}
		t.Fatal("complete graph")
		return 0
	}
	h.hook = func(round int, open bool) {
		switch {
		case round == 0 && !open:
			// Replayed advertisement, another ID reusing its keys, a short
			// key, a low-order key, ID 0.
			good := srv.adv[1]
			adv1 = good
			wantPeerErr(t, "replayed advertisement", srv.AdvertiseKeys(good), 1)
			wantPeerErr(t, "reused keys", srv.AdvertiseKeys(AdvertiseKeysMsg{From: 99, EncKey: good.EncKey, MaskKey: good.MaskKey}), 99)
			wantPeerErr(t, "short key", srv.AdvertiseKeys(AdvertiseKeysMsg{From: 98, EncKey: good.EncKey[:31], MaskKey: good.MaskKey}), 98)
			wantPeerErr(t, "low-order key", srv.AdvertiseKeys(AdvertiseKeysMsg{From: 97, EncKey: make([]byte, 32), MaskKey: make([]byte, 32)}), 97)
			wantPeerErr(t, "ShareKeys in round 0", srv.ShareKeys(ShareKeysMsg{From: 1}), 1)
			wantPeerErr(t, "MaskedInput in round 0", srv.MaskedInput(MaskedInputMsg{From: 1, Masked: make([]uint32, d)}), 1)
			wantPeerErr(t, "Unmask in round 0", srv.Unmask(UnmaskMsg{From: 1}), 1)
			for _, f := range []func() error{srv.CloseShareKeys, srv.CloseMaskedInput, func() error { _, err := srv.Finish(); return err }} {
				if err := f(); !errors.Is(err, ErrWrongStage) {
					t.Fatalf("server call out of order: got %v, want a stage error", err)
				}
			}
		case round == 1 && open:
			wantPeerErr(t, "advertisement after CloseAdvertiseKeys", srv.AdvertiseKeys(adv1), 1)
			wantPeerErr(t, "MaskedInput before CloseShareKeys", srv.MaskedInput(MaskedInputMsg{From: 1, Masked: make([]uint32, d)}), 1)
			// A ShareKeys message with a non-neighbour recipient, a
			// missing neighbour, a duplicate recipient, a forged sender.
			km, _ := srv.ShareKeysRequest(1)
			c, _, _ := NewClient(1, h.cfg.Session, cryptoReader{})
			c.maskScalar = h.clients[1].maskScalar
			c.encSK = h.clients[1].encSK
			sm, err := c.ShareKeys(km)
			if err != nil {
				t.Fatal(err)
			}
			bad := slices.Clone(sm.Shares)
			bad[0].To = nonNeighbor(1)
			wantPeerErr(t, "share for a non-neighbour", srv.ShareKeys(ShareKeysMsg{From: 1, Shares: bad}), 1)
			wantPeerErr(t, "missing neighbour", srv.ShareKeys(ShareKeysMsg{From: 1, Shares: sm.Shares[1:]}), 1)
			bad = slices.Clone(sm.Shares)
			bad[1].To = bad[0].To
			wantPeerErr(t, "duplicate recipient", srv.ShareKeys(ShareKeysMsg{From: 1, Shares: bad}), 1)
			bad = slices.Clone(sm.Shares)
			bad[0].From = 2
			wantPeerErr(t, "forged sender", srv.ShareKeys(ShareKeysMsg{From: 1, Shares: bad}), 1)
			bad = slices.Clone(sm.Shares)
			bad[0].Ciphertext = bad[0].Ciphertext[1:]
			wantPeerErr(t, "short ciphertext", srv.ShareKeys(ShareKeysMsg{From: 1, Shares: bad}), 1)
			wantPeerErr(t, "keys for a stranger", func() error { _, err := srv.ShareKeysRequest(99); return err }(), 99)
		case round == 1 && !open:
			wantPeerErr(t, "replayed ShareKeys", srv.ShareKeys(h.shareMsgs[1]), 1)
		case round == 2 && open:
			wantPeerErr(t, "short masked input", srv.MaskedInput(MaskedInputMsg{From: 1, Masked: make([]uint32, d-1)}), 1)
			wantPeerErr(t, "long masked input", srv.MaskedInput(MaskedInputMsg{From: 1, Masked: make([]uint32, d+1)}), 1)
			wantPeerErr(t, "masked input from outside U2", srv.MaskedInput(MaskedInputMsg{From: 99, Masked: make([]uint32, d)}), 99)
			// A tampered ciphertext: the client's error names the sender,
			// and the client can go on with the honest message.
			sm, _ := srv.MaskedInputRequest(1)
			from := sm.Shares[0].From
			bad := MaskedInputRequest{To: 1, Shares: slices.Clone(sm.Shares)}
			ct := slices.Clone(bad.Shares[0].Ciphertext)
			ct[20] ^= 1
			bad.Shares[0].Ciphertext = ct
			_, err := h.clients[1].MaskedInput(bad, h.inputs[1])
			wantPeerErr(t, "tampered ciphertext", err, from)
			// A ciphertext replayed under another sender's name.
			bad.Shares[0] = sm.Shares[1]
			bad.Shares[0].From = from
			_, err = h.clients[1].MaskedInput(bad, h.inputs[1])
			wantPeerErr(t, "ciphertext under another sender", err, from)
		case round == 2 && !open:
			wantPeerErr(t, "replayed masked input", srv.MaskedInput(MaskedInputMsg{From: 1, Masked: make([]uint32, d)}), 1)
		case round == 4 && open:
			req, err := srv.UnmaskRequest(1)
			if err != nil {
				t.Fatal(err)
			}
			if len(req.Dropped) == 0 && srv.g.adjacent(0, srv.g.index[12]) {
				t.Fatal("dropped neighbour 12 not in the unmask request")
			}
			// Client side: a request naming a client in both lists, or one
			// whose shares it does not hold.
			var other ClientID
			for _, v := range req.Survivors {
				if v != 1 {
					other = v
				}
			}
			both := UnmaskRequest{To: 1, Survivors: req.Survivors, Dropped: append(slices.Clone(req.Dropped), other)}
			_, err = h.clients[1].Unmask(both)
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("client %d", other)) {
				t.Fatalf("request naming client %d in both lists: got %v", other, err)
			}
			stranger := nonNeighbor(1)
			_, err = h.clients[1].Unmask(UnmaskRequest{To: 1, Survivors: []ClientID{stranger}})
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("client %d", stranger)) {
				t.Fatalf("request naming non-neighbour %d: got %v", stranger, err)
			}
			// Server side: shares of a client not asked about, with a bad
			// scalar, with the wrong X, twice, from outside U3.
			um, err := h.clients[1].Unmask(req)
			if err != nil {
				t.Fatal(err)
			}
			h.clients[1].stage = clientUnmask // let the harness send the honest one
			mod := func(f func(m *UnmaskMsg)) UnmaskMsg {
				m := UnmaskMsg{From: 1, SelfShares: slices.Clone(um.SelfShares), MaskKeyShares: slices.Clone(um.MaskKeyShares)}
				f(&m)
				return m
			}
			wantPeerErr(t, "share of a non-neighbour", srv.Unmask(mod(func(m *UnmaskMsg) { m.SelfShares[0].Of = stranger })), 1)
			wantPeerErr(t, "bad scalar", srv.Unmask(mod(func(m *UnmaskMsg) {
				v := make([]byte, 32)
				for i := range v {
					v[i] = 0xff
				}
				m.SelfShares[0].Value = v
			})), 1)
			wantPeerErr(t, "wrong X", srv.Unmask(mod(func(m *UnmaskMsg) { m.SelfShares[0].X = 2 })), 1)
			wantPeerErr(t, "share twice", srv.Unmask(mod(func(m *UnmaskMsg) { m.SelfShares = append(m.SelfShares, m.SelfShares[0]) })), 1)
			if len(um.MaskKeyShares) > 0 {
				wantPeerErr(t, "mask-key share of a survivor", srv.Unmask(mod(func(m *UnmaskMsg) { m.MaskKeyShares[0].Of = other })), 1)
				wantPeerErr(t, "self share of a dropped client", srv.Unmask(mod(func(m *UnmaskMsg) { m.SelfShares[0].Of = m.MaskKeyShares[0].Of })), 1)
			}
			wantPeerErr(t, "unmask from outside U3", srv.Unmask(UnmaskMsg{From: 12}), 12)
			wantPeerErr(t, "request for outside U3", func() error { _, err := srv.UnmaskRequest(12); return err }(), 12)
		case round == 4 && !open:
			wantPeerErr(t, "replayed unmask", srv.Unmask(h.unmaskMsgs[1]), 1)
		}
	}
	res, err := h.run()
	if err != nil {
		t.Fatal(err)
	}
	want := h.plainSum(res.Survivors)
	if !slices.Equal(res.Sum, want) || len(res.Survivors) != n-1 || !slices.Equal(res.Dropped, []ClientID{12}) {
		t.Fatalf("after rejections: survivors %v dropped %v, sum exact = %v", res.Survivors, res.Dropped, slices.Equal(res.Sum, want))
	}
	// Finish is idempotent; further messages are refused.
	res2, err := srv.Finish()
	if err != nil || !slices.Equal(res2.Sum, res.Sum) {
		t.Fatalf("second Finish: %v", err)
	}
	wantPeerErr(t, "unmask after Finish", srv.Unmask(h.unmaskMsgs[2]), 2)
}

// cryptoReader reads from crypto/rand (for an extra client in a test).
type cryptoReader struct{}

func (cryptoReader) Read(p []byte) (int, error) { return cryptoRand.Read(p) }
