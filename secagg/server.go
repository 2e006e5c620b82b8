package secagg

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// Server is the server's state machine of one instance (Bonawitz et al.
// 2017, Fig. 4, semi-honest server, with the SecAgg+ graph of Bell et al.
// 2020). Stages advance only through the Close methods; messages for
// another stage are refused. Every method is safe for concurrent use. A
// message refused with an error leaves the state unchanged; errors caused
// by a client's message are *PeerError naming it. The server never keeps
// an individual masked input, only their running sum.
type Server struct {
	cfg ServerConfig

	mu    sync.Mutex
	stage Stage

	// accepted counts the client messages accepted in each stage; wake
	// gets a token after each (ServerDriver waits on it). Neither needs
	// mu, so a transport can read the counts while Finish runs.
	accepted [len(Stages)]atomic.Int32
	wake     chan struct{}

	adv     map[ClientID]AdvertiseKeysMsg // round 0
	pubKeys map[[keySize]byte]ClientID    // every advertised key, to refuse reuse (arrays: no string to allocate per key)

	g      *graph // fixed by CloseAdvertise
	params Params

	sent  map[int][]EncryptedShare // round 1, by sender index
	inU2  []bool                   // by index, fixed by CloseShareKeys
	inbox [][]EncryptedShare       // by recipient index, sorted by sender

	sum  []uint32 // Σ y_u over the masked inputs so far
	inU3 []bool   // by index

	answered   []bool                           // by index: sent its Unmask
	selfShares map[ClientID]map[ClientID][]byte // of → holder → b-share
	maskShares map[ClientID]map[ClientID][]byte // of → holder → s-share

	result *Result // set by the first successful Finish
}

// NewServer starts an instance in stage advertise_keys. It errors on an
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
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	return &Server{
		cfg:     cfg,
		adv:     map[ClientID]AdvertiseKeysMsg{},
		pubKeys: map[[keySize]byte]ClientID{},
		wake:    make(chan struct{}, 1),
	}, nil
}

// Accepted is the number of client messages of stage the server has
// accepted so far. After a stage closes it is the size of the client set
// that stage defines: |U1| for advertise_keys, |U2| for share_keys, |U3|
// for masked_input. It does not wait for a running Finish.
func (s *Server) Accepted(stage Stage) int {
	if stage < 0 || int(stage) >= len(s.accepted) {
		return 0
	}
	return int(s.accepted[stage].Load())
}

// accept counts one accepted message of the current stage and wakes the
// driver; s.mu held.
func (s *Server) accept() {
	s.accepted[s.stage].Add(1)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// roundErr is the cause of a call in the wrong stage.
func (s *Server) roundErr(what string, want Stage) error {
	if s.stage == stageAborted {
		return fmt.Errorf("%s: instance aborted: %w", what, ErrTooFewSurvivors)
	}
	return fmt.Errorf("%s during %v, expected during %v: %w", what, s.stage, want, ErrWrongStage)
}

// stageErr is the error for the server's own call (Close…, Finish) in the
// wrong stage.
func (s *Server) stageErr(what string, want Stage) error {
	return fmt.Errorf("secagg: %w", s.roundErr(what, want))
}

// peerStageErr is the error for a client's message or request in the
// wrong stage: a *PeerError naming from, even a from of 0 (which no
// client has), since the message, not the server, is at fault.
func (s *Server) peerStageErr(from ClientID, what string, want Stage) error {
	return &PeerError{Client: from, Err: s.roundErr(what, want)}
}

// member returns the index in U1 of id, if any.
func (s *Server) member(id ClientID) (int, bool) {
	i, ok := s.g.index[id]
	return i, ok
}

// AdvertiseKeys records a client's message of stage advertise_keys.
// Errors (*PeerError): out of stage, zero ID, a repeated ID, a key that is
// not a valid X25519 public key (32 bytes, not of low order) or that some
// client already advertised.
func (s *Server) AdvertiseKeys(m AdvertiseKeysMsg) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stage != StageAdvertiseKeys {
		return s.peerStageErr(m.From, "AdvertiseKeys message", StageAdvertiseKeys)
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
	enc, mask := [keySize]byte(m.EncKey), [keySize]byte(m.MaskKey)
	for _, k := range [...][keySize]byte{enc, mask} {
		if other, ok := s.pubKeys[k]; ok {
			return peerErr(m.From, "public key already advertised by client %d", other)
		}
	}
	// The stored copies share one allocation, each capped at its length.
	keys := make([]byte, 0, 2*keySize)
	keys = append(append(keys, enc[:]...), mask[:]...)
	s.adv[m.From] = AdvertiseKeysMsg{From: m.From, EncKey: keys[:keySize:keySize], MaskKey: keys[keySize:]}
	s.pubKeys[enc] = m.From
	s.pubKeys[mask] = m.From
	s.accept()
	return nil
}

// minSurvivors is the least size of U2 and U3 with which the instance goes
// on: MinClients and the threshold (Fig. 4).
func (s *Server) minSurvivors() int {
	return max(s.cfg.MinClients, s.params.Threshold, 2)
}

// CloseAdvertiseKeys ends stage advertise_keys: U1 is every client that
// advertised. It
// chooses the params (ChooseParams(|U1|, DropoutRate), unless
// ServerConfig.Params is set) and draws the graph. Errors: out of round;
// ErrTooFewSurvivors (the instance aborts) if |U1| < max(MinClients, 2);
// invalid forced Params for |U1| clients (the instance aborts too).
func (s *Server) CloseAdvertiseKeys() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stage != StageAdvertiseKeys {
		return s.stageErr("CloseAdvertiseKeys", StageAdvertiseKeys)
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
	s.stage = StageShareKeys
	return nil
}

// Params are the instance's parameters, fixed by CloseAdvertiseKeys (zero
// before).
func (s *Server) Params() Params {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.params
}

// ShareKeysRequest is client id's request of stage share_keys: the
// params, |U1|, d and its neighbours' public keys. Errors: out of stage
// (only during share_keys); id not in U1 (*PeerError).
func (s *Server) ShareKeysRequest(id ClientID) (ShareKeysRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stage != StageShareKeys {
		return ShareKeysRequest{}, s.peerStageErr(id, "keys request", StageShareKeys)
	}
	i, ok := s.member(id)
	if !ok {
		return ShareKeysRequest{}, peerErr(id, "did not advertise keys")
	}
	nb := s.g.neighbors(i)
	m := ShareKeysRequest{To: id, Params: s.params, Clients: len(s.g.ids), Dim: s.cfg.Dim, Neighbors: make([]PeerKeys, len(nb))}
	// The copies of the keys share one allocation, each capped at its
	// length so that none can grow into the next.
	keys := make([]byte, 2*keySize*len(nb))
	for j, v := range nb {
		a := s.adv[v]
		enc, mask := keys[2*keySize*j:], keys[2*keySize*j+keySize:]
		copy(enc, a.EncKey)
		copy(mask, a.MaskKey)
		m.Neighbors[j] = PeerKeys{ID: v, EncKey: enc[:keySize:keySize], MaskKey: mask[:keySize:keySize]}
	}
	return m, nil
}

// ShareKeys records a client's message of stage share_keys. Errors
// (*PeerError): out of stage; sender not in U1 or already sent; a share with another sender,
// a recipient that is not the sender's neighbour or is repeated, a
// neighbour left out, or a ciphertext of the wrong length.
func (s *Server) ShareKeys(m ShareKeysMsg) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stage != StageShareKeys {
		return s.peerStageErr(m.From, "ShareKeys message", StageShareKeys)
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
	// The copies of the ciphertexts share one allocation (their length is
	// checked below before any is copied in), each capped at its length.
	cts := make([]byte, len(m.Shares)*shareCipherLen)
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
		ct := cts[k*shareCipherLen : (k+1)*shareCipherLen : (k+1)*shareCipherLen]
		copy(ct, es.Ciphertext)
		out[k] = EncryptedShare{From: es.From, To: es.To, Ciphertext: ct}
	}
	s.sent[i] = out
	s.accept()
	return nil
}

// CloseShareKeys ends stage share_keys: U2 is every client whose ShareKeys
// was accepted. Errors: out of stage; ErrTooFewSurvivors (the instance
// aborts) if |U2| < max(MinClients, t).
func (s *Server) CloseShareKeys() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stage != StageShareKeys {
		return s.stageErr("CloseShareKeys", StageShareKeys)
	}
	if len(s.sent) < s.minSurvivors() {
		s.stage = stageAborted
		return fmt.Errorf("secagg: %d clients shared keys, need %d: %w", len(s.sent), s.minSurvivors(), ErrTooFewSurvivors)
	}
	n := len(s.g.ids)
	s.inU2 = make([]bool, n)
	for i := range s.sent {
		s.inU2[i] = true
	}
	// Each inbox gets its exact length, all of them in one allocation,
	// instead of growing by appends: one pass counts, one fills.
	size, total := make([]int, n), 0
	for _, sent := range s.sent {
		for _, es := range sent {
			if j := s.g.index[es.To]; s.inU2[j] {
				size[j]++
				total++
			}
		}
	}
	all := make([]EncryptedShare, 0, total)
	s.inbox = make([][]EncryptedShare, n)
	for j, k := range size {
		s.inbox[j], all = all[:0:k], all[k:k]
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
	s.stage = StageMaskedInput
	return nil
}

// MaskedInputRequest is client id's request of stage masked_input: the
// ciphertexts addressed to it by its neighbours in U2, sorted by sender.
// Errors: out of stage (only during masked_input); id not in U2
// (*PeerError).
func (s *Server) MaskedInputRequest(id ClientID) (MaskedInputRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stage != StageMaskedInput {
		return MaskedInputRequest{}, s.peerStageErr(id, "shares request", StageMaskedInput)
	}
	i, ok := s.member(id)
	if !ok || !s.inU2[i] {
		return MaskedInputRequest{}, peerErr(id, "did not share keys")
	}
	in := s.inbox[i]
	m := MaskedInputRequest{To: id, Shares: make([]EncryptedShare, len(in))}
	// The copies share one allocation, each capped at its length
	// (ShareKeys accepted only ciphertexts of shareCipherLen bytes).
	cts := make([]byte, len(in)*shareCipherLen)
	for k, es := range in {
		ct := cts[k*shareCipherLen : (k+1)*shareCipherLen : (k+1)*shareCipherLen]
		copy(ct, es.Ciphertext)
		m.Shares[k] = EncryptedShare{From: es.From, To: es.To, Ciphertext: ct}
	}
	return m, nil
}

// MaskedInput adds a client's masked vector (stage masked_input) to the
// running sum mod 2^32 and discards it. Errors (*PeerError): out of stage;
// sender not in U2; a second masked input; length ≠ Dim.
func (s *Server) MaskedInput(m MaskedInputMsg) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stage != StageMaskedInput {
		return s.peerStageErr(m.From, "masked input", StageMaskedInput)
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
	s.accept()
	return nil
}

// CloseMaskedInput ends stage masked_input: U3 is every client whose masked
// input was added. Errors: out of stage; ErrTooFewSurvivors (the instance
// aborts) if |U3| < max(MinClients, t).
func (s *Server) CloseMaskedInput() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stage != StageMaskedInput {
		return s.stageErr("CloseMaskedInput", StageMaskedInput)
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
	s.stage = StageUnmask
	return nil
}

// closeStage ends stage (not unmask, which Finish ends).
func (s *Server) closeStage(stage Stage) error {
	switch stage {
	case StageAdvertiseKeys:
		return s.CloseAdvertiseKeys()
	case StageShareKeys:
		return s.CloseShareKeys()
	case StageMaskedInput:
		return s.CloseMaskedInput()
	}
	return fmt.Errorf("secagg: no Close for stage %v", stage)
}
