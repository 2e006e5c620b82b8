package secagg

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// The fuzz targets below replay one recorded honest instance and slip a
// fuzzed message, decoded from JSON as the HTTP API decodes it, into a
// chosen round. Five clients on the complete graph (so a fresh server
// draws the same graph every time), threshold 3, dimension 4; client 5
// drops after sharing keys, so round 4 asks for its mask key too. Client
// fuzzHold's message of the round under test is held back: the fuzzed
// message may take its place.
const (
	fuzzN    = 5
	fuzzDim  = 4
	fuzzHold = ClientID(2)
	fuzzDrop = ClientID(5)
)

// Rounds (and message kinds) as the fuzz targets number them.
const (
	fzAdvertise = iota
	fzShareKeys
	fzMaskedInput
	fzUnmask
	fzRounds
)

// wantCipherLen is the length of an encrypted share pair, restated from
// the layout: nonce (12) ‖ from, to (4 + 4) ‖ two 32-byte scalars ‖ GCM tag
// (16).
const wantCipherLen = 12 + 4 + 4 + 2*32 + 16

// fuzzRun is the record of one honest instance.
type fuzzRun struct {
	cfg    ServerConfig
	inputs map[ClientID][]uint32
	adv    map[ClientID]AdvertiseKeysMsg
	share  map[ClientID]ShareKeysMsg
	masked map[ClientID]MaskedInputMsg
	unmask map[ClientID]UnmaskMsg
	// What the server sent fuzzHold, and fuzzHold's state before each of
	// its three calls (Clients are values: their methods replace, never
	// mutate, their maps, so a copy is an independent client).
	keys   ShareKeysRequest
	shares MaskedInputRequest
	req    UnmaskRequest
	before [3]Client
	// sum is the plain sum of U3's inputs: the truth Finish must give.
	sum []uint32
}

var (
	fuzzOnce    sync.Once
	fuzzFixture *fuzzRun
	fuzzErr     error
)

// recordRun runs the honest instance once per process.
func recordRun(tb testing.TB) *fuzzRun {
	fuzzOnce.Do(func() { fuzzFixture, fuzzErr = newFuzzRun() })
	if fuzzErr != nil {
		tb.Fatal(fuzzErr)
	}
	return fuzzFixture
}

func newFuzzRun() (*fuzzRun, error) {
	r := &fuzzRun{
		cfg:    ServerConfig{Session: []byte("fuzz session"), Dim: fuzzDim, Params: Params{Neighbors: fuzzN - 1, Threshold: 3}},
		inputs: testInputs(mrand.New(mrand.NewPCG(1, 2)), fuzzN, fuzzDim),
		adv:    map[ClientID]AdvertiseKeysMsg{}, share: map[ClientID]ShareKeysMsg{},
		masked: map[ClientID]MaskedInputMsg{}, unmask: map[ClientID]UnmaskMsg{},
	}
	srv, err := NewServer(r.cfg)
	if err != nil {
		return nil, err
	}
	clients := map[ClientID]*Client{}
	for id := ClientID(1); id <= fuzzN; id++ {
		c, m, err := NewClient(id, r.cfg.Session, rand.Reader)
		if err != nil {
			return nil, err
		}
		clients[id], r.adv[id] = c, m
		if err := srv.AdvertiseKeys(m); err != nil {
			return nil, err
		}
	}
	if err := srv.CloseAdvertiseKeys(); err != nil {
		return nil, err
	}
	for id, c := range clients {
		km, err := srv.ShareKeysRequest(id)
		if err != nil {
			return nil, err
		}
		if id == fuzzHold {
			r.keys, r.before[0] = km, *c
		}
		if r.share[id], err = c.ShareKeys(km); err != nil {
			return nil, err
		}
		if err := srv.ShareKeys(r.share[id]); err != nil {
			return nil, err
		}
	}
	if err := srv.CloseShareKeys(); err != nil {
		return nil, err
	}
	for id, c := range clients {
		if id == fuzzDrop {
			continue
		}
		sm, err := srv.MaskedInputRequest(id)
		if err != nil {
			return nil, err
		}
		if id == fuzzHold {
			r.shares, r.before[1] = sm, *c
		}
		if r.masked[id], err = c.MaskedInput(sm, r.inputs[id]); err != nil {
			return nil, err
		}
		if err := srv.MaskedInput(r.masked[id]); err != nil {
			return nil, err
		}
	}
	if err := srv.CloseMaskedInput(); err != nil {
		return nil, err
	}
	r.sum = make([]uint32, fuzzDim)
	for id, c := range clients {
		if id == fuzzDrop {
			continue
		}
		req, err := srv.UnmaskRequest(id)
		if err != nil {
			return nil, err
		}
		if id == fuzzHold {
			r.req, r.before[2] = req, *c
		}
		if r.unmask[id], err = c.Unmask(req); err != nil {
			return nil, err
		}
		if err := srv.Unmask(r.unmask[id]); err != nil {
			return nil, err
		}
		addWords(r.sum, r.inputs[id])
	}
	res, err := srv.Finish()
	if err != nil {
		return nil, err
	}
	if !slices.Equal(res.Sum, r.sum) {
		return nil, errors.New("the recorded honest instance gives a wrong sum")
	}
	return r, nil
}

// send delivers the recorded message of client id for round at, if it
// has one.
func (r *fuzzRun) send(srv *Server, at int, id ClientID) error {
	switch at {
	case fzAdvertise:
		return srv.AdvertiseKeys(r.adv[id])
	case fzShareKeys:
		return srv.ShareKeys(r.share[id])
	case fzMaskedInput:
		if m, ok := r.masked[id]; ok {
			return srv.MaskedInput(m)
		}
	case fzUnmask:
		if m, ok := r.unmask[id]; ok {
			return srv.Unmask(m)
		}
	}
	return nil
}

// close ends round at.
func closeRound(srv *Server, at int) error {
	switch at {
	case fzAdvertise:
		return srv.CloseAdvertiseKeys()
	case fzShareKeys:
		return srv.CloseShareKeys()
	case fzMaskedInput:
		return srv.CloseMaskedInput()
	}
	return nil
}

// upTo returns a fresh server with rounds before at replayed and, in
// round at, every recorded message but fuzzHold's delivered.
func (r *fuzzRun) upTo(t *testing.T, at int) *Server {
	srv, err := NewServer(r.cfg)
	if err != nil {
		t.Fatal(err)
	}
	for round := range at + 1 {
		for id := ClientID(1); id <= fuzzN; id++ {
			if round == at && id == fuzzHold {
				continue
			}
			if err := r.send(srv, round, id); err != nil {
				t.Fatalf("replaying round %d, client %d: %v", round, id, err)
			}
		}
		if round < at {
			if err := closeRound(srv, round); err != nil {
				t.Fatalf("closing round %d: %v", round, err)
			}
		}
	}
	return srv
}

// finish delivers fuzzHold's recorded message of round at (if hold), the
// later rounds, and returns Finish's result.
func (r *fuzzRun) finish(t *testing.T, srv *Server, at int, hold bool) (Result, error) {
	for round := at; round < fzRounds; round++ {
		for id := ClientID(1); id <= fuzzN; id++ {
			if round == at && (id != fuzzHold || !hold) {
				continue
			}
			if err := r.send(srv, round, id); err != nil {
				t.Fatalf("replaying round %d, client %d: %v", round, id, err)
			}
		}
		if err := closeRound(srv, round); err != nil {
			t.Fatalf("closing round %d: %v", round, err)
		}
	}
	return srv.Finish()
}

// decodeAs decodes body as the message of kind, as the HTTP API would
// (it is stricter about the JSON, not about the values), and returns its
// sender and a function delivering it to a server.
func decodeAs(kind int, body []byte) (from ClientID, deliver func(*Server) error, ok bool) {
	switch kind {
	case fzAdvertise:
		var m AdvertiseKeysMsg
		if json.Unmarshal(body, &m) != nil {
			return 0, nil, false
		}
		return m.From, func(s *Server) error { return s.AdvertiseKeys(m) }, true
	case fzShareKeys:
		var m ShareKeysMsg
		if json.Unmarshal(body, &m) != nil {
			return 0, nil, false
		}
		return m.From, func(s *Server) error { return s.ShareKeys(m) }, true
	case fzMaskedInput:
		var m MaskedInputMsg
		if json.Unmarshal(body, &m) != nil {
			return 0, nil, false
		}
		return m.From, func(s *Server) error { return s.MaskedInput(m) }, true
	default:
		var m UnmaskMsg
		if json.Unmarshal(body, &m) != nil {
			return 0, nil, false
		}
		return m.From, func(s *Server) error { return s.Unmask(m) }, true
	}
}

// checkAccepted fails t unless the message of kind in body, accepted in
// round at by a server that had every recorded message of the round but
// fuzzHold's, is one the protocol allows: the rules restated from the
// paper and the message layouts, not from the server's code.
func (r *fuzzRun) checkAccepted(t *testing.T, at, kind int, body []byte) {
	t.Helper()
	if at != kind {
		t.Fatalf("a message of round %d accepted in round %d: %s", kind, at, body)
	}
	switch kind {
	case fzAdvertise:
		var m AdvertiseKeysMsg
		json.Unmarshal(body, &m)
		if m.From == 0 || (m.From != fuzzHold && m.From <= fuzzN) || len(m.EncKey) != 32 || len(m.MaskKey) != 32 || bytes.Equal(m.EncKey, m.MaskKey) {
			t.Fatalf("advertisement accepted: %s", body)
		}
		for id, a := range r.adv {
			if id == fuzzHold {
				continue
			}
			for _, k := range [][]byte{a.EncKey, a.MaskKey} {
				if bytes.Equal(k, m.EncKey) || bytes.Equal(k, m.MaskKey) {
					t.Fatalf("advertisement reusing client %d's key accepted: %s", id, body)
				}
			}
		}
	case fzShareKeys:
		var m ShareKeysMsg
		json.Unmarshal(body, &m)
		if m.From != fuzzHold || len(m.Shares) != fuzzN-1 {
			t.Fatalf("ShareKeys accepted: %s", body)
		}
		to := map[ClientID]bool{}
		for _, s := range m.Shares {
			if s.From != m.From || s.To == m.From || s.To == 0 || s.To > fuzzN || to[s.To] || len(s.Ciphertext) != wantCipherLen {
				t.Fatalf("ShareKeys accepted with share %+v: %s", s, body)
			}
			to[s.To] = true
		}
	case fzMaskedInput:
		var m MaskedInputMsg
		json.Unmarshal(body, &m)
		if (m.From != fuzzHold && m.From != fuzzDrop) || len(m.Masked) != fuzzDim {
			t.Fatalf("masked input accepted: %s", body)
		}
	case fzUnmask:
		var m UnmaskMsg
		json.Unmarshal(body, &m)
		if m.From != fuzzHold {
			t.Fatalf("unmask message accepted: %s", body)
		}
		// What round 4 asks fuzzHold: b-shares of the survivors 1…4,
		// mask-key shares of fuzzDrop.
		seen := map[ClientID]bool{}
		for kind, list := range [][]Share{m.SelfShares, m.MaskKeyShares} {
			for _, s := range list {
				asked := (kind == 0 && s.Of >= 1 && s.Of <= fuzzN && s.Of != fuzzDrop) || (kind == 1 && s.Of == fuzzDrop)
				if !asked || s.X != m.From || seen[s.Of] || len(s.Value) != 32 {
					t.Fatalf("unmask message accepted with share %+v: %s", s, body)
				}
				seen[s.Of] = true
			}
		}
	}
}

// FuzzServerMessage: a fuzzed message of any kind, in any round, never
// panics the server. A refused one is a *PeerError naming its sender and
// leaves the instance as it was: the honest messages still complete it
// with the exact sum. An accepted one obeys the protocol's rules on
// sender, lengths and indices; an accepted masked input from the held-back
// client shifts the sum by exactly its difference from the honest one.
func FuzzServerMessage(f *testing.F) {
	r := recordRun(f)
	for at, m := range []any{r.adv[fuzzHold], r.share[fuzzHold], r.masked[fuzzHold], r.unmask[fuzzHold]} {
		b, err := json.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(at), uint8(at), b)
		f.Add(uint8((at+1)%fzRounds), uint8(at), b) // out of round
	}
	// Client ID 0 out of round was once refused with a plain error, not a
	// *PeerError (the server took it for its own call).
	f.Add(uint8(fzAdvertise), uint8(fzMaskedInput), []byte(`{"from":0,"masked":[]}`))
	f.Add(uint8(fzMaskedInput), uint8(fzMaskedInput), []byte(`{"from":5,"masked":[1,2,3,4]}`))
	f.Add(uint8(fzShareKeys), uint8(fzShareKeys), []byte(`{"from":2,"shares":[{"from":2,"to":7,"ciphertext":""}]}`))
	f.Add(uint8(fzUnmask), uint8(fzUnmask), []byte(`{"from":2,"self_shares":[{"of":5,"x":2,"value":"AAAA"}],"mask_key_shares":null}`))
	f.Fuzz(func(t *testing.T, atB, kindB uint8, body []byte) {
		at, kind := int(atB%fzRounds), int(kindB%fzRounds)
		from, deliver, ok := decodeAs(kind, body)
		if !ok {
			return // not JSON of this message: the API refuses it before secagg
		}
		srv := r.upTo(t, at)
		if err := deliver(srv); err != nil {
			var pe *PeerError
			if !errors.As(err, &pe) || pe.Client != from {
				t.Fatalf("refused with %v, want a *PeerError naming client %d", err, from)
			}
			res, err := r.finish(t, srv, at, true)
			if err != nil || !slices.Equal(res.Sum, r.sum) {
				t.Fatalf("after a refused message the honest instance gives %v, %v; want sum %v", res.Sum, err, r.sum)
			}
			return
		}
		r.checkAccepted(t, at, kind, body)
		switch kind {
		case fzShareKeys:
			// The server forwards ciphertexts unread: the sum is unchanged.
			if res, err := r.finish(t, srv, at, false); err != nil || !slices.Equal(res.Sum, r.sum) {
				t.Fatalf("after an accepted ShareKeys the instance gives %v, %v; want sum %v", res.Sum, err, r.sum)
			}
		case fzMaskedInput:
			if from != fuzzHold {
				return // fuzzDrop joined U3: its unmask shares differ from the recording
			}
			var m MaskedInputMsg
			json.Unmarshal(body, &m)
			want := slices.Clone(r.sum)
			addWords(want, m.Masked)
			subWords(want, r.masked[fuzzHold].Masked)
			if res, err := r.finish(t, srv, at, false); err != nil || !slices.Equal(res.Sum, want) {
				t.Fatalf("after an accepted masked input the instance gives %v, %v; want sum %v", res.Sum, err, want)
			}
		}
	})
}

// FuzzClientMessage: a fuzzed server message (keys, forwarded shares,
// unmask request) never panics the client. A refused one leaves the
// client as it was: the honest message then gives the honest reply. An
// accepted one obeys the rules a client must enforce against a curious
// server: sorted distinct neighbours within the params, shares only from
// neighbours, an unmask request that never asks for both secrets of one
// client or for shares the client does not hold.
func FuzzClientMessage(f *testing.F) {
	r := recordRun(f)
	for kind, m := range []any{r.keys, r.shares, r.req} {
		b, err := json.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(kind), b)
	}
	// Valid partial requests, a digit away from the ones a client must
	// refuse (itself dropped, a client it holds nothing of).
	f.Add(uint8(2), []byte(`{"to":2,"survivors":[1,3],"dropped":[5]}`))
	f.Add(uint8(2), []byte(`{"to":2,"survivors":[4],"dropped":[]}`))
	f.Add(uint8(2), []byte(`{"to":2,"survivors":[2,1],"dropped":[1]}`))
	f.Add(uint8(5), []byte{1, 2, 3, 4, 0xFF, 5}) // the honest request, as raw IDs
	f.Add(uint8(0), []byte(`{"to":2,"params":{"neighbors":1,"threshold":2},"clients":5,"dim":4,"neighbors":[{"id":3,"enc_key":"","mask_key":""}]}`))
	f.Fuzz(func(t *testing.T, kindB uint8, body []byte) {
		switch kindB % 3 {
		case 0:
			var m ShareKeysRequest
			if json.Unmarshal(body, &m) != nil {
				return
			}
			c := r.before[0]
			out, err := c.ShareKeys(m)
			if err != nil {
				if c.stage != clientShareKeys {
					t.Fatalf("refused keys (%v) moved the client on", err)
				}
				out, err := c.ShareKeys(r.keys)
				if err != nil || len(out.Shares) != fuzzN-1 {
					t.Fatalf("after refused keys the honest keys give %d shares, %v", len(out.Shares), err)
				}
				return
			}
			p := m.Params
			if m.To != fuzzHold || p.Threshold < 2 || p.Threshold > p.Neighbors+1 || len(m.Neighbors) > p.Neighbors ||
				len(m.Neighbors)+1 < p.Threshold || m.Dim < 0 || len(out.Shares) != len(m.Neighbors) {
				t.Fatalf("keys accepted: %s", body)
			}
			for i, pk := range m.Neighbors {
				if pk.ID == 0 || pk.ID == fuzzHold || (i > 0 && pk.ID <= m.Neighbors[i-1].ID) || len(pk.EncKey) != 32 || len(pk.MaskKey) != 32 {
					t.Fatalf("keys accepted with neighbour %+v: %s", pk, body)
				}
				if s := out.Shares[i]; s.From != fuzzHold || s.To != pk.ID || len(s.Ciphertext) != wantCipherLen {
					t.Fatalf("share %+v for neighbour %d", s, pk.ID)
				}
			}
		case 1:
			var m MaskedInputRequest
			if json.Unmarshal(body, &m) != nil {
				return
			}
			c := r.before[1]
			out, err := c.MaskedInput(m, r.inputs[fuzzHold])
			if err != nil {
				if c.stage != clientMaskedInput {
					t.Fatalf("refused shares (%v) moved the client on", err)
				}
				// MaskedInput is deterministic given the client's keys:
				// the honest shares give exactly the recorded input.
				out, err := c.MaskedInput(r.shares, r.inputs[fuzzHold])
				if err != nil || !slices.Equal(out.Masked, r.masked[fuzzHold].Masked) {
					t.Fatalf("after refused shares the honest shares give %v, %v", out.Masked, err)
				}
				return
			}
			from := map[ClientID]bool{}
			for _, s := range m.Shares {
				if _, nb := r.before[1].neighbors[s.From]; !nb || s.To != fuzzHold || from[s.From] || len(s.Ciphertext) != wantCipherLen {
					t.Fatalf("shares accepted with %+v: %s", s, body)
				}
				from[s.From] = true
			}
			if m.To != fuzzHold || len(from)+1 < r.cfg.Params.Threshold || len(out.Masked) != fuzzDim {
				t.Fatalf("shares accepted: %s", body)
			}
		case 2:
			var m UnmaskRequest
			if kindB%6 == 5 {
				// The same message built from raw bytes, one client ID
				// (mod 8) per byte, survivors before a 0xFF and dropped
				// after: the mutator reaches the requests a client must
				// refuse (itself dropped, a client named twice, one it
				// holds nothing of) far sooner than by editing JSON.
				m = UnmaskRequest{To: fuzzHold, Survivors: []ClientID{}, Dropped: []ClientID{}}
				list := &m.Survivors
				for _, b := range body {
					if b == 0xFF {
						list = &m.Dropped
						continue
					}
					*list = append(*list, ClientID(b%8))
				}
			} else if json.Unmarshal(body, &m) != nil {
				return
			}
			r.checkUnmaskRequest(t, m)
		}
	})
}

// checkUnmaskRequest hands m to fuzzHold's client in round 4 and checks
// the client's answer (see FuzzClientMessage).
func (r *fuzzRun) checkUnmaskRequest(t *testing.T, m UnmaskRequest) {
	t.Helper()
	c := r.before[2]
	out, err := c.Unmask(m)
	if err != nil {
		if c.stage != clientUnmask {
			t.Fatalf("refused request (%v) moved the client on", err)
		}
		out, err := c.Unmask(r.req)
		want := r.unmask[fuzzHold]
		if err != nil || !slices.EqualFunc(out.SelfShares, want.SelfShares, equalShare) || !slices.EqualFunc(out.MaskKeyShares, want.MaskKeyShares, equalShare) {
			t.Fatalf("after a refused request the honest one gives %+v, %v", out, err)
		}
		return
	}
	// The client holds shares of itself and of the neighbours whose
	// ciphertexts it received.
	held := map[ClientID]bool{fuzzHold: true}
	for _, s := range r.shares.Shares {
		held[s.From] = true
	}
	named := map[ClientID]bool{}
	for i, list := range [][]ClientID{m.Survivors, m.Dropped} {
		for _, v := range list {
			if named[v] || !held[v] || (i == 1 && v == fuzzHold) {
				t.Fatalf("unmask request accepted: %+v", m)
			}
			named[v] = true
		}
	}
	if m.To != fuzzHold || len(out.SelfShares) != len(m.Survivors) || len(out.MaskKeyShares) != len(m.Dropped) {
		t.Fatalf("unmask request %+v answered with %+v", m, out)
	}
}

func equalShare(a, b Share) bool { return a.Of == b.Of && a.X == b.X && bytes.Equal(a.Value, b.Value) }
