package secagg

import (
	"context"
	"fmt"
	"slices"

	"github.com/cloudflare/circl/dh/x25519"

	"github.com/dpfl/dpfl/internal/parallel"
)

// UnmaskRequest is client id's request of stage unmask (id ∈ U3): among
// id and its neighbours in U2, the survivors (∈ U3, id itself included:
// reveal b shares) and the dropped (∉ U3: reveal mask-key shares), each
// sorted. The partition of U2 into U3 and U2\U3 is what ensures the server
// never asks for both secrets of one client. Errors: out of stage (only
// during unmask); id not in U3 (*PeerError).
func (s *Server) UnmaskRequest(id ClientID) (UnmaskRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stage != StageUnmask {
		return UnmaskRequest{}, s.peerStageErr(id, "unmask request", StageUnmask)
	}
	i, ok := s.member(id)
	if !ok || !s.inU3[i] {
		return UnmaskRequest{}, peerErr(id, "sent no masked input")
	}
	nb := s.g.neighbors(i)
	m := UnmaskRequest{To: id, Survivors: make([]ClientID, 1, len(nb)+1), Dropped: []ClientID{}}
	m.Survivors[0] = id
	for _, v := range nb {
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

// Unmask records a client's shares of stage unmask; it may hold a subset
// of what UnmaskRequest asked. Errors (*PeerError): out of stage; sender
// not in U3 or already answered; a share of a client it was not asked
// about (or of the wrong kind), with X ≠ sender, repeated, or not a
// canonical Ristretto255 scalar. Nothing is stored from a refused message.
func (s *Server) Unmask(m UnmaskMsg) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stage != StageUnmask {
		return s.peerStageErr(m.From, "unmask message", StageUnmask)
	}
	i, ok := s.member(m.From)
	switch {
	case !ok || !s.inU3[i]:
		return peerErr(m.From, "unmask message from a client that sent no masked input")
	case s.answered[i]:
		return peerErr(m.From, "duplicate unmask message")
	}
	if err := s.checkUnmask(i, m); err != nil {
		return err
	}
	// The stored copies share one allocation (checkUnmask checked that
	// every value is keySize bytes), each capped at its length.
	vals := make([]byte, 0, keySize*(len(m.SelfShares)+len(m.MaskKeyShares)))
	for kind, list := range [][]Share{m.SelfShares, m.MaskKeyShares} {
		store := s.selfShares
		if kind == 1 {
			store = s.maskShares
		}
		for _, sh := range list {
			if store[sh.Of] == nil {
				// Sized for its k+1 holders, instead of growing.
				store[sh.Of] = make(map[ClientID][]byte, s.params.Neighbors+1)
			}
			off := len(vals)
			vals = append(vals, sh.Value...)
			store[sh.Of][m.From] = vals[off:len(vals):len(vals)]
		}
	}
	s.answered[i] = true
	s.accept()
	return nil
}

// checkUnmask validates every share of m, from holder index i; s.mu held.
func (s *Server) checkUnmask(i int, m UnmaskMsg) error {
	seen := make(map[ClientID]bool, len(m.SelfShares)+len(m.MaskKeyShares)) // sized: no growing
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
			if !canonicalScalar(sh.Value) {
				return peerErr(m.From, "share of client %d: malformed scalar", sh.Of)
			}
			seen[sh.Of] = true
		}
	}
	return nil
}

// Finish reconstructs, from the unmask shares, the self-mask seed b_u of
// every u ∈ U3 and the mask key s_u^SK of every u ∈ U2\U3, and returns the
// sum of U3's inputs: the running sum minus PRG(b_u) for u ∈ U3 and minus
// the pairwise masks the survivors added towards the dropped clients
// (Bonawitz et al. 2017, Fig. 4, round 4). A reconstructed s_u^SK is
// checked against the advertised s_u^PK. Reconstruction, key agreement and
// mask expansion run on ServerConfig.Workers goroutines.
//
// Errors: out of stage; ErrTooFewSurvivors if some secret has fewer than t
// shares; a mask key that does not match its public key (a holder sent a
// bad share). On error no sum is returned and the instance stays in stage
// unmask, so Finish may be retried after more Unmask messages. After
// success, Finish returns the same Result again. Finish holds the server
// for its duration (seconds at n = 1000 with many dropouts): other calls
// wait (Accepted does not).
func (s *Server) Finish() (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stage == stageFinished {
		return cloneResult(*s.result), nil
	}
	if s.stage != StageUnmask {
		return Result{}, s.stageErr("Finish", StageUnmask)
	}
	r, err := s.finish()
	if err != nil {
		return Result{}, err
	}
	s.result = &r
	s.sum, s.selfShares, s.maskShares = nil, nil, nil
	s.stage = stageFinished
	return cloneResult(r), nil
}

func cloneResult(r Result) Result {
	return Result{Sum: slices.Clone(r.Sum), Survivors: slices.Clone(r.Survivors), Dropped: slices.Clone(r.Dropped), Params: r.Params}
}

// finish computes Finish's result without changing the state; s.mu held.
func (s *Server) finish() (Result, error) {
	res := Result{Survivors: []ClientID{}, Dropped: []ClientID{}, Params: s.params}
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
	keys, err := s.reconstruct(secrets)
	if err != nil {
		return Result{}, err
	}
	// The expansions to remove: each survivor's self mask, and each
	// dropped client's pairwise masks towards its surviving neighbours,
	// whose keys the server agrees from the rebuilt s_u^SK, one batch per
	// dropped client (agreeBatch), the batches in parallel.
	var tasks []maskTask
	var dropped []int
	for _, i := range secrets {
		if s.inU3[i] {
			tasks = append(tasks, maskTask{key: keys[i], sub: true})
		} else {
			dropped = append(dropped, i)
		}
	}
	pairTasks := make([][]maskTask, len(dropped))
	err = parallel.For(context.Background(), s.cfg.Workers, len(dropped), func(_, k int) error {
		i := dropped[k]
		u := s.g.ids[i]
		var survivors []ClientID
		var pks []*x25519.Key
		for _, v := range s.g.neighbors(i) {
			if s.inU3[s.g.index[v]] {
				survivors = append(survivors, v)
				pks = append(pks, (*x25519.Key)(s.adv[v].MaskKey))
			}
		}
		pk, bad := agreeBatch((*x25519.Key)(&keys[i]), pks, s.cfg.Session, infoPairMask, 1)
		if bad >= 0 { // not reached: the server refused low-order keys
			return fmt.Errorf("secagg: key agreement between clients %d and %d failed", u, survivors[bad])
		}
		for j, v := range survivors {
			// v added +PRG(s_{v,u}) if v < u, −PRG if v > u.
			pairTasks[k] = append(pairTasks[k], maskTask{key: pk[j], sub: v < u})
		}
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	for _, pt := range pairTasks {
		tasks = append(tasks, pt...)
	}
	res.Sum = slices.Clone(s.sum)
	expandInto(res.Sum, tasks, s.cfg.Workers)
	return res, nil
}

// reconstruct rebuilds b_u (u ∈ U3, giving its PRG key) or σ_u (u ∈
// U2\U3, giving s_u^SK, checked against the advertised s_u^PK) for each
// index in secrets; the keys are by index. The secrets are split into one
// contiguous batch per worker, each interpolated with one batched
// inversion (interpolator.recoverBatch). s.mu held.
func (s *Server) reconstruct(secrets []int) ([][32]byte, error) {
	t := s.params.Threshold
	keys := make([][32]byte, len(s.g.ids))
	errs := make([]error, len(s.g.ids))
	nw := parallel.Workers(s.cfg.Workers, len(secrets))
	per := (len(secrets) + nw - 1) / nw
	err := parallel.For(context.Background(), s.cfg.Workers, nw, func(_, w int) error {
		part := secrets[min(len(secrets), w*per):min(len(secrets), (w+1)*per)]
		batch := make([]map[ClientID][]byte, len(part))
		for k, i := range part {
			if u := s.g.ids[i]; s.inU3[i] {
				batch[k] = s.selfShares[u]
			} else {
				batch[k] = s.maskShares[u]
			}
		}
		vals, verrs := newInterpolator(t).recoverBatch(batch)
		for k, i := range part {
			u := s.g.ids[i]
			if s.inU3[i] {
				if verrs[k] != nil {
					errs[i] = fmt.Errorf("secagg: self mask of client %d: %d shares of %d needed: %w", u, len(batch[k]), t, verrs[k])
					continue
				}
				keys[i] = selfMaskKey(vals[k], s.cfg.Session)
				continue
			}
			if verrs[k] != nil {
				errs[i] = fmt.Errorf("secagg: mask key of dropped client %d: %d shares of %d needed: %w", u, len(batch[k]), t, verrs[k])
				continue
			}
			sk, pk := maskKeyFromScalar(vals[k], s.cfg.Session)
			if string(pk[:]) != string(s.adv[u].MaskKey) {
				errs[i] = fmt.Errorf("secagg: reconstructed mask key of dropped client %d does not match its advertised key: some holder sent a bad share", u)
				continue
			}
			keys[i] = sk
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, err := range errs {
		if err != nil {
			return nil, err // the lowest-ID failure, deterministically
		}
	}
	return keys, nil
}

// maskTask is one PRG expansion to add or remove.
type maskTask struct {
	key [32]byte
	sub bool
}

// expandInto adds (or, for tasks with sub, subtracts) every task's mask
// into dst, on up to workers goroutines: worker 0 expands straight into
// dst, the others into vectors of len(dst) added at the end (addition mod
// 2^32 commutes, so the result does not depend on the split, and one
// worker needs no extra memory).
func expandInto(dst []uint32, tasks []maskTask, workers int) {
	nw := parallel.Workers(workers, len(tasks))
	parts := make([][]uint32, nw)
	bufs := make([]*prgBuf, nw)
	parts[0] = dst
	_ = parallel.For(context.Background(), workers, len(tasks), func(w, k int) error {
		if parts[w] == nil {
			parts[w] = make([]uint32, len(dst))
		}
		if bufs[w] == nil && addMaskNeedsBuf() {
			bufs[w] = new(prgBuf)
		}
		addMask(parts[w], &tasks[k].key, tasks[k].sub, bufs[w])
		return nil
	})
	for _, p := range parts[1:] {
		if p != nil { // a goroutine that got no task
			addWords(dst, p)
		}
	}
}
