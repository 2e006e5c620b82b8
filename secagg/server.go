package secagg

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cloudflare/circl/dh/x25519"
)

// serverStage is the round a Server is in.
type serverStage int

const (
	stageAdvertise serverStage = iota
	stageShareKeys
	stageMaskedInput
	stageUnmask
	stageDone
	stageAborted
)

var stageNames = [...]string{"AdvertiseKeys", "ShareKeys", "MaskedInputCollection", "Unmasking", "finished", "aborted"}

func (s serverStage) String() string { return stageNames[s] }

// Server is the server's state machine of one instance (Bonawitz et al.
// 2017, Fig. 4, semi-honest server, with the SecAgg+ graph of Bell et al.
// 2020). Rounds advance only through the Close methods; messages for
// another round are refused. Every method is safe for concurrent use. A
// message refused with an error leaves the state unchanged; errors caused
// by a client's message are *PeerError naming it. The server never keeps
// an individual masked input, only their running sum.
type Server struct {
	cfg ServerConfig

	mu    sync.Mutex
	stage serverStage

	adv     map[ClientID]AdvertiseMsg // round 0
	pubKeys map[string]ClientID       // every advertised key, to refuse reuse

	g      *graph // fixed by CloseAdvertise
	params Params

	sent  map[int][]EncryptedShare // round 1, by sender index
	inU2  []bool                   // by index, fixed by CloseShareKeys
	inbox map[int][]EncryptedShare // by recipient index, sorted by sender

	sum  []uint32 // Σ y_u over the masked inputs so far
	inU3 []bool   // by index

	answered   []bool                           // by index: sent its Unmask
	selfShares map[ClientID]map[ClientID][]byte // of → holder → b-share
	maskShares map[ClientID]map[ClientID][]byte // of → holder → s-share

	result *Result // set by the first successful Finish
}

// NewServer starts an instance in round 0 (AdvertiseKeys). It errors on an
// empty session, a negative Dim or MinClients, or a DropoutRate outside
// [0, 1).
func NewServer(cfg ServerConfig) (*Server, error) {
	switch {
	case len(cfg.Session) == 0:
		return nil, errors.New("secagg: empty session")
	case cfg.Dim < 0:
		return nil, fmt.Errorf("secagg: negative dimension %d", cfg.Dim)
	case cfg.MinClients < 0:
		return nil, fmt.Errorf("secagg: negative MinClients %d", cfg.MinClients)
	case !(cfg.DropoutRate >= 0 && cfg.DropoutRate < 1):
		return nil, fmt.Errorf("secagg: dropout rate %v outside [0, 1)", cfg.DropoutRate)
	}
	cfg.Session = slices.Clone(cfg.Session)
	return &Server{
		cfg:     cfg,
		adv:     map[ClientID]AdvertiseMsg{},
		pubKeys: map[string]ClientID{},
	}, nil
}

// roundErr is the cause of a call in the wrong round.
func (s *Server) roundErr(what string, want serverStage) error {
	if s.stage == stageAborted {
		return fmt.Errorf("%s: instance aborted: %w", what, ErrTooFewSurvivors)
	}
	return fmt.Errorf("%s during %v, expected during %v: %w", what, s.stage, want, errStage)
}

// stageErr is the error for the server's own call (Close…, Finish) in the
// wrong round.
func (s *Server) stageErr(what string, want serverStage) error {
	return fmt.Errorf("secagg: %w", s.roundErr(what, want))
}

// peerStageErr is the error for a client's message or request in the
// wrong round: a *PeerError naming from, even a from of 0 (which no
// client has), since the message, not the server, is at fault.
func (s *Server) peerStageErr(from ClientID, what string, want serverStage) error {
	return &PeerError{Client: from, Err: s.roundErr(what, want)}
}

// member returns the index in U1 of id, if any.
func (s *Server) member(id ClientID) (int, bool) {
	i, ok := s.g.index[id]
	return i, ok
}

// Advertise records a client's round-0 message. Errors (*PeerError): out
// of round, zero ID, a repeated ID, a key that is not a valid X25519 public
// key (32 bytes, not of low order) or that some client already advertised.
func (s *Server) Advertise(m AdvertiseMsg) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stage != stageAdvertise {
		return s.peerStageErr(m.From, "AdvertiseKeys message", stageAdvertise)
	}
	switch {
	case m.From == 0:
		return peerErr(0, "client ID 0 is not valid")
	case s.adv[m.From].From != 0:
		return peerErr(m.From, "duplicate AdvertiseKeys message")
	case !validPublicKey(m.EncKey) || !validPublicKey(m.MaskKey):
		return peerErr(m.From, "invalid X25519 public key")
	case string(m.EncKey) == string(m.MaskKey):
		return peerErr(m.From, "the same key advertised twice")
	}
	for _, k := range [][]byte{m.EncKey, m.MaskKey} {
		if other, ok := s.pubKeys[string(k)]; ok {
			return peerErr(m.From, "public key already advertised by client %d", other)
		}
	}
	s.adv[m.From] = AdvertiseMsg{From: m.From, EncKey: slices.Clone(m.EncKey), MaskKey: slices.Clone(m.MaskKey)}
	s.pubKeys[string(m.EncKey)] = m.From
	s.pubKeys[string(m.MaskKey)] = m.From
	return nil
}

// minSurvivors is the least size of U2 and U3 with which the instance goes
// on: MinClients and the threshold (Fig. 4).
func (s *Server) minSurvivors() int {
	return max(s.cfg.MinClients, s.params.Threshold, 2)
}

// CloseAdvertise ends round 0: U1 is every client that advertised. It
// chooses the params (ChooseParams(|U1|, DropoutRate), unless
// ServerConfig.Params is set) and draws the graph. Errors: out of round;
// ErrTooFewSurvivors (the instance aborts) if |U1| < max(MinClients, 2);
// invalid forced Params for |U1| clients (the instance aborts too).
func (s *Server) CloseAdvertise() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stage != stageAdvertise {
		return s.stageErr("CloseAdvertise", stageAdvertise)
	}
	n := len(s.adv)
	if n < max(s.cfg.MinClients, 2) {
		s.stage = stageAborted
		return fmt.Errorf("secagg: %d clients advertised keys, need %d: %w", n, max(s.cfg.MinClients, 2), ErrTooFewSurvivors)
	}
	p := s.cfg.Params
	if p == (Params{}) {
		var err error
		if p, err = ChooseParams(n, s.cfg.DropoutRate); err != nil {
			s.stage = stageAborted
			return err
		}
	} else if err := checkParams(p, n); err != nil {
		s.stage = stageAborted
		return err
	}
	ids := make([]ClientID, 0, n)
	for id := range s.adv {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	s.params = p
	s.g = newGraph(ids, p.Neighbors)
	s.sent = map[int][]EncryptedShare{}
	s.stage = stageShareKeys
	return nil
}

// Params are the instance's parameters, fixed by CloseAdvertise (zero
// before).
func (s *Server) Params() Params {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.params
}

// Keys is the round-1 input of client id: the params, |U1|, d and its
// neighbours' public keys. Errors: out of round (only during ShareKeys);
// id not in U1 (*PeerError).
func (s *Server) Keys(id ClientID) (KeysMsg, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stage != stageShareKeys {
		return KeysMsg{}, s.peerStageErr(id, "keys request", stageShareKeys)
	}
	i, ok := s.member(id)
	if !ok {
		return KeysMsg{}, peerErr(id, "did not advertise keys")
	}
	nb := s.g.neighbors(i)
	m := KeysMsg{To: id, Params: s.params, Clients: len(s.g.ids), Dim: s.cfg.Dim, Neighbors: make([]PeerKeys, len(nb))}
	for j, v := range nb {
		a := s.adv[v]
		m.Neighbors[j] = PeerKeys{ID: v, EncKey: slices.Clone(a.EncKey), MaskKey: slices.Clone(a.MaskKey)}
	}
	return m, nil
}

// ShareKeys records a client's round-1 message. Errors (*PeerError): out
// of round; sender not in U1 or already sent; a share with another sender,
// a recipient that is not the sender's neighbour or is repeated, a
// neighbour left out, or a ciphertext of the wrong length.
func (s *Server) ShareKeys(m ShareKeysMsg) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stage != stageShareKeys {
		return s.peerStageErr(m.From, "ShareKeys message", stageShareKeys)
	}
	i, ok := s.member(m.From)
	if !ok {
		return peerErr(m.From, "ShareKeys message from a client that did not advertise keys")
	}
	if _, dup := s.sent[i]; dup {
		return peerErr(m.From, "duplicate ShareKeys message")
	}
	if len(m.Shares) != s.params.Neighbors {
		return peerErr(m.From, "%d encrypted shares, want one for each of %d neighbours", len(m.Shares), s.params.Neighbors)
	}
	seen := make(map[ClientID]bool, len(m.Shares))
	out := make([]EncryptedShare, len(m.Shares))
	for k, es := range m.Shares {
		j, ok := s.member(es.To)
		switch {
		case es.From != m.From:
			return peerErr(m.From, "share claims to be from client %d", es.From)
		case !ok || !s.g.adjacent(i, j):
			return peerErr(m.From, "share for client %d, not a neighbour", es.To)
		case seen[es.To]:
			return peerErr(m.From, "two shares for client %d", es.To)
		case len(es.Ciphertext) != shareCipherLen:
			return peerErr(m.From, "ciphertext for client %d is %d bytes, want %d", es.To, len(es.Ciphertext), shareCipherLen)
		}
		seen[es.To] = true
		out[k] = EncryptedShare{From: es.From, To: es.To, Ciphertext: slices.Clone(es.Ciphertext)}
	}
	s.sent[i] = out
	return nil
}

// CloseShareKeys ends round 1: U2 is every client whose ShareKeys was
// accepted. Errors: out of round; ErrTooFewSurvivors (the instance aborts)
// if |U2| < max(MinClients, t).
func (s *Server) CloseShareKeys() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stage != stageShareKeys {
		return s.stageErr("CloseShareKeys", stageShareKeys)
	}
	if len(s.sent) < s.minSurvivors() {
		s.stage = stageAborted
		return fmt.Errorf("secagg: %d clients shared keys, need %d: %w", len(s.sent), s.minSurvivors(), ErrTooFewSurvivors)
	}
	n := len(s.g.ids)
	s.inU2 = make([]bool, n)
	s.inbox = make(map[int][]EncryptedShare, len(s.sent))
	for i := range s.sent {
		s.inU2[i] = true
	}
	for i := range n {
		for _, es := range s.sent[i] { // ascending sender index = ascending ID
			j := s.g.index[es.To]
			if s.inU2[j] {
				s.inbox[j] = append(s.inbox[j], es)
			}
		}
	}
	s.sent = nil
	s.sum = make([]uint32, s.cfg.Dim)
	s.inU3 = make([]bool, n)
	s.stage = stageMaskedInput
	return nil
}

// Shares is the round-2 input of client id: the ciphertexts addressed to it
// by its neighbours in U2, sorted by sender. Errors: out of round (only
// during MaskedInputCollection); id not in U2 (*PeerError).
func (s *Server) Shares(id ClientID) (SharesMsg, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stage != stageMaskedInput {
		return SharesMsg{}, s.peerStageErr(id, "shares request", stageMaskedInput)
	}
	i, ok := s.member(id)
	if !ok || !s.inU2[i] {
		return SharesMsg{}, peerErr(id, "did not share keys")
	}
	in := s.inbox[i]
	m := SharesMsg{To: id, Shares: make([]EncryptedShare, len(in))}
	for k, es := range in {
		m.Shares[k] = EncryptedShare{From: es.From, To: es.To, Ciphertext: slices.Clone(es.Ciphertext)}
	}
	return m, nil
}

// MaskedInput adds a client's round-2 masked vector to the running sum mod
// 2^32 and discards it. Errors (*PeerError): out of round; sender not in
// U2; a second masked input; length ≠ Dim.
func (s *Server) MaskedInput(m MaskedInputMsg) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stage != stageMaskedInput {
		return s.peerStageErr(m.From, "masked input", stageMaskedInput)
	}
	i, ok := s.member(m.From)
	switch {
	case !ok || !s.inU2[i]:
		return peerErr(m.From, "masked input from a client that did not share keys")
	case s.inU3[i]:
		return peerErr(m.From, "duplicate masked input")
	case len(m.Masked) != s.cfg.Dim:
		return peerErr(m.From, "masked input has %d elements, want %d", len(m.Masked), s.cfg.Dim)
	}
	addWords(s.sum, m.Masked)
	s.inU3[i] = true
	return nil
}

// CloseMaskedInput ends round 2: U3 is every client whose masked input was
// added. Errors: out of round; ErrTooFewSurvivors (the instance aborts) if
// |U3| < max(MinClients, t).
func (s *Server) CloseMaskedInput() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stage != stageMaskedInput {
		return s.stageErr("CloseMaskedInput", stageMaskedInput)
	}
	n3 := 0
	for _, in := range s.inU3 {
		if in {
			n3++
		}
	}
	if n3 < s.minSurvivors() {
		s.stage = stageAborted
		s.sum = nil
		return fmt.Errorf("secagg: %d masked inputs, need %d: %w", n3, s.minSurvivors(), ErrTooFewSurvivors)
	}
	s.answered = make([]bool, len(s.g.ids))
	s.selfShares = map[ClientID]map[ClientID][]byte{}
	s.maskShares = map[ClientID]map[ClientID][]byte{}
	s.stage = stageUnmask
	return nil
}

// UnmaskRequest is the round-4 input of client id ∈ U3: among id and its
// neighbours in U2, the survivors (∈ U3, id itself included: reveal b
// shares) and the dropped (∉ U3: reveal mask-key shares), each sorted. The
// partition of U2 into U3 and U2\U3 is what ensures the server never
// asks for both secrets of one client. Errors: out of round (only during
// Unmasking); id not in U3 (*PeerError).
func (s *Server) UnmaskRequest(id ClientID) (UnmaskRequestMsg, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stage != stageUnmask {
		return UnmaskRequestMsg{}, s.peerStageErr(id, "unmask request", stageUnmask)
	}
	i, ok := s.member(id)
	if !ok || !s.inU3[i] {
		return UnmaskRequestMsg{}, peerErr(id, "sent no masked input")
	}
	m := UnmaskRequestMsg{To: id, Survivors: []ClientID{id}, Dropped: []ClientID{}}
	for _, v := range s.g.neighbors(i) {
		j := s.g.index[v]
		switch {
		case s.inU3[j]:
			m.Survivors = append(m.Survivors, v)
		case s.inU2[j]:
			m.Dropped = append(m.Dropped, v)
		}
	}
	slices.Sort(m.Survivors)
	return m, nil
}

// wasAsked reports whether holder index i was asked for a share of owner
// (b-share when self, else mask-key share).
func (s *Server) wasAsked(i int, owner ClientID, self bool) bool {
	j, ok := s.member(owner)
	if !ok || (j != i && !s.g.adjacent(i, j)) || !s.inU2[j] {
		return false
	}
	if self {
		return s.inU3[j]
	}
	return !s.inU3[j]
}

// Unmask records a client's round-4 shares; it may hold a subset of what
// UnmaskRequest asked. Errors (*PeerError): out of round; sender not in U3
// or already answered; a share of a client it was not asked about (or of
// the wrong kind), with X ≠ sender, repeated, or not a canonical
// Ristretto255 scalar. Nothing is stored from a refused message.
func (s *Server) Unmask(m UnmaskMsg) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stage != stageUnmask {
		return s.peerStageErr(m.From, "unmask message", stageUnmask)
	}
	i, ok := s.member(m.From)
	switch {
	case !ok || !s.inU3[i]:
		return peerErr(m.From, "unmask message from a client that sent no masked input")
	case s.answered[i]:
		return peerErr(m.From, "duplicate unmask message")
	}
	seen := map[ClientID]bool{}
	for kind, list := range [][]Share{m.SelfShares, m.MaskKeyShares} {
		for _, sh := range list {
			switch {
			case sh.X != m.From:
				return peerErr(m.From, "share of client %d has evaluation point %d", sh.Of, sh.X)
			case seen[sh.Of]:
				return peerErr(m.From, "two shares of client %d", sh.Of)
			case !s.wasAsked(i, sh.Of, kind == 0):
				return peerErr(m.From, "share of client %d that was not asked for", sh.Of)
			}
			if _, err := parseScalar(sh.Value); err != nil {
				return peerErr(m.From, "share of client %d: %v", sh.Of, err)
			}
			seen[sh.Of] = true
		}
	}
	for kind, list := range [][]Share{m.SelfShares, m.MaskKeyShares} {
		store := s.selfShares
		if kind == 1 {
			store = s.maskShares
		}
		for _, sh := range list {
			if store[sh.Of] == nil {
				store[sh.Of] = map[ClientID][]byte{}
			}
			store[sh.Of][m.From] = slices.Clone(sh.Value)
		}
	}
	s.answered[i] = true
	return nil
}

// maskTask is one PRG expansion to remove from the sum: a self mask (key
// set) or a pairwise mask of a dropped client (sk, pk set, key agreed by
// the worker).
type maskTask struct {
	key               [32]byte
	sk                *x25519.Key
	pk                []byte
	sub               bool
	dropped, survivor ClientID
}

// Finish reconstructs, from the round-4 shares, the self-mask seed b_u of
// every u ∈ U3 and the mask key s_u^SK of every u ∈ U2\U3, and returns the
// sum of U3's inputs: the running sum minus PRG(b_u) for u ∈ U3 and minus
// the pairwise masks the survivors added towards the dropped clients
// (Bonawitz et al. 2017, Fig. 4, round 4). A reconstructed s_u^SK is
// checked against the advertised s_u^PK. The mask expansions run on
// GOMAXPROCS goroutines.
//
// Errors: out of round; ErrTooFewSurvivors if some secret has fewer than t
// shares; a mask key that does not match its public key (a holder sent a
// bad share). On error no sum is returned and the instance stays in round
// 4, so Finish may be retried after more Unmask messages. After success,
// Finish returns the same Result again. Finish holds the server for its
// duration (seconds at n = 1000 with many dropouts): other calls wait.
func (s *Server) Finish() (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stage == stageDone {
		return cloneResult(*s.result), nil
	}
	if s.stage != stageUnmask {
		return Result{}, s.stageErr("Finish", stageUnmask)
	}
	r, err := s.finish()
	if err != nil {
		return Result{}, err
	}
	s.result = &r
	s.sum, s.selfShares, s.maskShares = nil, nil, nil
	s.stage = stageDone
	return cloneResult(r), nil
}

func cloneResult(r Result) Result {
	return Result{Sum: slices.Clone(r.Sum), Survivors: slices.Clone(r.Survivors), Dropped: slices.Clone(r.Dropped)}
}

// finish computes Finish's result without changing the state; s.mu held.
func (s *Server) finish() (Result, error) {
	t := s.params.Threshold
	res := Result{Survivors: []ClientID{}, Dropped: []ClientID{}}
	var secrets []int // indices in U2 whose secret must be rebuilt
	for i, u := range s.g.ids {
		if s.inU3[i] {
			res.Survivors = append(res.Survivors, u)
		} else {
			res.Dropped = append(res.Dropped, u)
		}
		if s.inU2[i] {
			secrets = append(secrets, i)
		}
	}
	// Phase 1, in parallel: rebuild b_u (u ∈ U3) or σ_u (u ∈ U2\U3) and
	// derive the PRG key or the mask key pair.
	keys := make([][32]byte, len(s.g.ids))
	errs := make([]error, len(s.g.ids))
	ips := make([]*interpolator, runtime.GOMAXPROCS(0))
	parallelFor(len(secrets), func(w, k int) {
		if ips[w] == nil {
			ips[w] = newInterpolator(t)
		}
		i := secrets[k]
		u := s.g.ids[i]
		if s.inU3[i] {
			b, err := ips[w].recover(s.selfShares[u])
			if err != nil {
				errs[i] = fmt.Errorf("secagg: self mask of client %d: %d shares of %d needed: %w", u, len(s.selfShares[u]), t, err)
				return
			}
			keys[i] = selfMaskKey(b, s.cfg.Session)
			return
		}
		sc, err := ips[w].recover(s.maskShares[u])
		if err != nil {
			errs[i] = fmt.Errorf("secagg: mask key of dropped client %d: %d shares of %d needed: %w", u, len(s.maskShares[u]), t, err)
			return
		}
		sk, pk := maskKeyFromScalar(sc, s.cfg.Session)
		if string(pk[:]) != string(s.adv[u].MaskKey) {
			errs[i] = fmt.Errorf("secagg: reconstructed mask key of dropped client %d does not match its advertised key: some holder sent a bad share", u)
			return
		}
		keys[i] = sk
	})
	for _, err := range errs {
		if err != nil {
			return Result{}, err // the lowest-ID failure, deterministically
		}
	}
	// Phase 2: the expansions to remove.
	var tasks []maskTask
	for _, i := range secrets {
		u := s.g.ids[i]
		if s.inU3[i] {
			tasks = append(tasks, maskTask{key: keys[i], sub: true})
			continue
		}
		sk := (*x25519.Key)(&keys[i])
		for _, v := range s.g.neighbors(i) {
			if s.inU3[s.g.index[v]] {
				// v added +PRG(s_{v,u}) if v < u, −PRG if v > u.
				tasks = append(tasks, maskTask{sk: sk, pk: s.adv[v].MaskKey, sub: v < u, dropped: u, survivor: v})
			}
		}
	}
	masks, err := expandTasks(tasks, s.cfg.Dim, s.cfg.Session)
	if err != nil {
		return Result{}, err
	}
	res.Sum = slices.Clone(s.sum)
	for _, m := range masks {
		if m != nil { // a goroutine that got no task
			addWords(res.Sum, m)
		}
	}
	return res, nil
}

// parallelFor calls f(w, k) for k = 0..n−1 on up to GOMAXPROCS goroutines,
// w < GOMAXPROCS naming the goroutine (for per-goroutine scratch space).
func parallelFor(n int, f func(w, k int)) {
	nw := min(runtime.GOMAXPROCS(0), n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range nw {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1)) - 1
				if k >= n {
					return
				}
				f(w, k)
			}
		}()
	}
	wg.Wait()
}

// expandTasks runs the tasks on up to GOMAXPROCS goroutines, each into its
// own partial vector of length d, and returns the partials (whose sum is
// what must be added to the running sum).
func expandTasks(tasks []maskTask, d int, session []byte) ([][]uint32, error) {
	nw := min(runtime.GOMAXPROCS(0), len(tasks))
	parts := make([][]uint32, nw)
	bufs := make([]*prgBuf, nw)
	errs := make([]error, len(tasks))
	parallelFor(len(tasks), func(w, k int) {
		if parts[w] == nil {
			parts[w], bufs[w] = make([]uint32, d), new(prgBuf)
		}
		tk := &tasks[k]
		key := tk.key
		if tk.sk != nil {
			var ok bool
			if key, ok = agree(tk.sk, (*x25519.Key)(tk.pk), session, infoPairMask); !ok {
				errs[k] = fmt.Errorf("secagg: key agreement between clients %d and %d failed", tk.dropped, tk.survivor)
				return
			}
		}
		addMask(parts[w], &key, tk.sub, bufs[w])
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return parts, nil
}
