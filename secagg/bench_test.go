package secagg

import (
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"testing"
)

// benchNeighborhoods are the two deployments the benchmarks model: 100
// clients on the complete graph, and 1000 clients on the SecAgg+ graph
// ChooseParams picks for a 10% dropout rate.
func benchNeighborhoods(b *testing.B) []struct {
	name string
	n    int
	p    Params
} {
	p, err := ChooseParams(1000, 0.1)
	if err != nil {
		b.Fatal(err)
	}
	return []struct {
		name string
		n    int
		p    Params
	}{
		{"n=100/complete", 100, Params{Neighbors: 99, Threshold: completeThreshold(100)}},
		{fmt.Sprintf("n=1000/k=%d", p.Neighbors), 1000, p},
	}
}

// clientFixture returns client 1 after round 1 of a complete instance among
// itself and k neighbours (the client's cost depends on k, not n), with the
// MaskedInputRequest it receives in round 2.
func clientFixture(b *testing.B, k, t, d int) (*Client, ShareKeysRequest, MaskedInputRequest) {
	b.Helper()
	in := map[ClientID][]uint32{}
	for id := 1; id <= k+1; id++ {
		in[ClientID(id)] = nil
	}
	h := newHarness(b, ServerConfig{Session: []byte("bench client"), Dim: d, Params: Params{Neighbors: k, Threshold: t}}, in, nil)
	if err := h.advertise(); err != nil {
		b.Fatal(err)
	}
	km, err := h.srv.ShareKeysRequest(1)
	if err != nil {
		b.Fatal(err)
	}
	if err := h.shareKeys(); err != nil {
		b.Fatal(err)
	}
	sm, err := h.srv.MaskedInputRequest(1)
	if err != nil {
		b.Fatal(err)
	}
	return h.clients[1], km, sm
}

// BenchmarkClientShareKeys is one client's rounds 0–1: key generation, k
// key agreements, sharing both secrets among k+1 holders, k encryptions.
func BenchmarkClientShareKeys(b *testing.B) {
	for _, c := range benchNeighborhoods(b) {
		b.Run(c.name, func(b *testing.B) {
			_, km, _ := clientFixture(b, c.p.Neighbors, c.p.Threshold, 0)
			for b.Loop() {
				cl, _, err := NewClient(1, []byte("bench client"), rand.Reader)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := cl.ShareKeys(km); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkClientMaskedInput is one client's round 2: k decryptions, k key
// agreements and k+1 mask expansions of length d.
func BenchmarkClientMaskedInput(b *testing.B) {
	for _, c := range benchNeighborhoods(b) {
		for _, d := range []int{100_000, 1_000_000} {
			b.Run(fmt.Sprintf("%s/d=%d", c.name, d), func(b *testing.B) {
				cl, _, sm := clientFixture(b, c.p.Neighbors, c.p.Threshold, d)
				x := make([]uint32, d)
				for b.Loop() {
					cl.stage = clientMaskedInput
					if _, err := cl.MaskedInput(sm, x); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// resetRound2 puts a server back at the start of round 2 with the same U2
// (benchmarks replay round 2 under different dropouts without redoing
// rounds 0–1).
func (s *Server) resetRound2() {
	s.stage = StageMaskedInput
	s.sum = make([]uint32, s.cfg.Dim)
	s.inU3 = make([]bool, len(s.g.ids))
	s.answered, s.selfShares, s.maskShares, s.result = nil, nil, nil, nil
	s.accepted[StageMaskedInput].Store(0)
	s.accepted[StageUnmask].Store(0)
}

// plainRound2 replays round 2 with the clients that do not drop sending
// their plain inputs (Finish's cost does not depend on what the vectors
// hold), each decrypting its shares once, then runs the unmask stage
// with the drivers.
func (h *harness) plainRound2(b *testing.B) {
	h.srv.resetRound2()
	h.mem.out = nil
	for _, id := range h.ids {
		c := h.clients[id]
		if len(c.held) <= 1 {
			sm, err := h.srv.MaskedInputRequest(id)
			if err != nil {
				b.Fatal(err)
			}
			if c.held, err = c.receiveShares(sm); err != nil {
				b.Fatal(err)
			}
		}
		c.stage = clientUnmask
		if h.drop[id] == stay {
			if err := h.srv.MaskedInput(MaskedInputMsg{From: id, Masked: h.inputs[id]}); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := h.srv.CloseMaskedInput(); err != nil {
		b.Fatal(err)
	}
	h.unmask()
}

// BenchmarkServerFinish is the server's unmasking for a fraction of
// clients dropped before round 2: reconstructing t-of-(k+1) secrets, the
// survivors' self masks and the dropped clients' pairwise masks (d =
// 100k), on GOMAXPROCS goroutines. Clients send unmasked inputs, since
// Finish's cost does not depend on the vectors. The SecAgg+ instance is
// provisioned for 30% dropout.
func BenchmarkServerFinish(b *testing.B) {
	const d = 100_000
	p3, err := ChooseParams(1000, 0.3)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		n    int
		p    Params
	}{
		{"n=100/complete", 100, Params{Neighbors: 99, Threshold: completeThreshold(100)}},
		{fmt.Sprintf("n=1000/k=%d", p3.Neighbors), 1000, p3},
	} {
		b.Run(c.name, func(b *testing.B) {
			rng := mrand.New(mrand.NewPCG(1, uint64(c.n)))
			in := testInputs(rng, c.n, d)
			h := newHarness(b, ServerConfig{Session: []byte("bench finish"), Dim: d, Params: c.p}, in, nil)
			if err := h.advertise(); err != nil {
				b.Fatal(err)
			}
			if err := h.shareKeys(); err != nil {
				b.Fatal(err)
			}
			for _, rate := range []float64{0, 0.1, 0.3} {
				b.Run(fmt.Sprintf("drop=%v/d=%d", rate, d), func(b *testing.B) {
					h.drop = map[ClientID]dropStage{}
					for _, i := range rng.Perm(c.n)[:int(rate*float64(c.n))] {
						h.drop[ClientID(i+1)] = dropBeforeMasked
					}
					h.plainRound2(b)
					h.srv.mu.Lock()
					defer h.srv.mu.Unlock()
					for b.Loop() {
						if _, err := h.srv.finish(); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}
