package secagg

import (
	"math/rand/v2"
	"testing"
)

// Payload sizes of the real messages, counted field by field as
// ClientTraffic documents (4 bytes per ID, count and element).
func sizeKeys(m ShareKeysRequest) int {
	s := 4 + 8 + 8
	for _, p := range m.Neighbors {
		s += 4 + len(p.EncKey) + len(p.MaskKey)
	}
	return s
}

func sizeEnc(l []EncryptedShare) int {
	s := 4
	for _, e := range l {
		s += 8 + len(e.Ciphertext)
	}
	return s
}

func sizeShares(l []Share) (s int) {
	for _, e := range l {
		s += 8 + len(e.Value)
	}
	return s
}

// TestClientTraffic counts the bytes of the messages client 1 actually
// sends and receives in an instance and compares them with ClientTraffic,
// then logs the expansion factor at Bonawitz et al.'s scale (n = 2^10,
// d = 2^20) for the complete graph and SecAgg+.
func TestClientTraffic(t *testing.T) {
	const n, d = 9, 33
	rng := rand.New(rand.NewPCG(15, 16))
	for _, p := range []Params{{Neighbors: n - 1, Threshold: 4}, {Neighbors: 4, Threshold: 3}} {
		h := newHarness(t, ServerConfig{Dim: d, Params: p}, testInputs(rng, n, d), map[ClientID]dropStage{5: dropBeforeMasked})
		var got Traffic
		h.hook = func(round int, open bool) {
			if !open {
				return
			}
			switch round {
			case 1:
				km, _ := h.srv.ShareKeysRequest(1)
				got.Received += sizeKeys(km)
				got.Sent += 4 + len(h.srv.adv[1].EncKey) + len(h.srv.adv[1].MaskKey)
			case 2:
				sm, _ := h.srv.MaskedInputRequest(1)
				got.Received += sizeEnc(sm.Shares)
				got.Sent += sizeEnc(h.shareMsgs[1].Shares) + 4 + 4*d
			case 4:
				rq, _ := h.srv.UnmaskRequest(1)
				got.Received += 4 + 4*(len(rq.Survivors)+len(rq.Dropped))
			}
		}
		if _, err := h.run(); err != nil {
			t.Fatal(err)
		}
		um := h.unmaskMsgs[1]
		got.Sent += 4 + sizeShares(um.SelfShares) + sizeShares(um.MaskKeyShares)
		// Client 5 sent shares but no input: client 1 still holds and
		// reveals a share of it if it is a neighbour, so the worst case
		// of ClientTraffic is reached whenever all neighbours are in U2.
		if want := ClientTraffic(p.Neighbors, d); got != want {
			t.Fatalf("k=%d: measured %+v, ClientTraffic says %+v", p.Neighbors, got, want)
		}
	}

	const bn, bd = 1 << 10, 1 << 20
	sp, err := ChooseParams(bn, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []int{bn - 1, sp.Neighbors} {
		tr := ClientTraffic(k, bd)
		clear := float64(4 * bd)
		t.Logf("n=2^10 d=2^20 k=%d: sends %d B, receives %d B; expansion vs %d B of float32 in the clear: %.4f× sent, %.4f× sent+received",
			k, tr.Sent, tr.Received, 4*bd, float64(tr.Sent)/clear, float64(tr.Sent+tr.Received)/clear)
	}
}
