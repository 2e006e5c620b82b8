package secagg

import (
	"crypto/cipher"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/cloudflare/circl/dh/x25519"
	"github.com/cloudflare/circl/group"
)

// clientStage is the next stage a Client expects.
type clientStage int

const (
	clientShareKeys clientStage = iota
	clientMaskedInput
	clientUnmask
	clientDone
)

// heldShares are the two shares one holder keeps of one client's secrets.
type heldShares struct {
	mask, self []byte // canonical scalar encodings
}

// peer is what a client keeps of one neighbour: its public keys and the
// AES-256-GCM of the share-encryption key agreed with it (from c_u^SK and
// c_v^PK), which sealed this client's shares in ShareKeys and opens the
// neighbour's in MaskedInput, instead of agreeing the key again (one
// X25519 ladder per neighbour and round, the bulk of a round's CPU) or
// expanding it again.
type peer struct {
	enc, mask x25519.Key // c_v^PK, s_v^PK
	aead      cipher.AEAD
}

// Client is one client's state machine of one instance (Bonawitz et al.
// 2017, Fig. 4, the user's side of rounds 0, 1, 2 and 4). Its methods must
// be called in stage order, each at most once; a call out of order, or
// with a message not addressed to this client, returns an error and leaves
// the state unchanged. A Client is not safe for concurrent use.
// ClientDriver runs one over a transport.
type Client struct {
	id      ClientID
	session []byte
	rnd     io.Reader
	stage   clientStage
	workers int        // MaskedInput's key agreements and expansions (default 1)
	pairs   *PairCache // in a simulation, the instance's shared agreements (nil: none)

	encSK      x25519.Key   // c_u^SK
	encPK      x25519.Key   // c_u^PK
	maskScalar group.Scalar // shared; s_u^SK is derived from it
	maskSK     x25519.Key   // s_u^SK, kept so that MaskedInput does not derive it again
	maskPK     x25519.Key   // s_u^PK

	// Set by ShareKeys: the neighbours, each pointing into one slice
	// (one allocation for all their keys, not two per neighbour).
	params    Params
	dim       int
	neighbors map[ClientID]*peer
	selfKey   [32]byte // PRG key of b_u

	// Set by MaskedInput: the shares this client holds, by owner
	// (including its own), the owners being the neighbours in U2.
	held map[ClientID]heldShares
}

// NewClient generates the client's keys for one instance and returns its
// message of stage advertise_keys. id is the ClientID the server assigned
// (non-zero), session the instance's session bytes (non-empty, the same the
// server has), rand the source of every secret the client draws (use
// crypto/rand.Reader; the Shamir polynomials always come from crypto/rand).
// It errors on a zero id, an empty session, or a nil or failing rand.
//
// c_u is a fresh X25519 key pair. s_u^SK is not drawn directly: a uniform
// Ristretto255 scalar is, and s_u^SK = HKDF-SHA256(scalar, salt = session,
// info = "dpfl/secagg/v1 mask key"), so that the scalar can be Shamir-shared
// and s_u^SK recovered from it after a dropout.
func NewClient(id ClientID, session []byte, rand io.Reader) (*Client, AdvertiseKeysMsg, error) {
	return newClient(id, session, rand, nil)
}

// newClient is NewClient, with the client's keys (c_u, the mask scalar and
// s_u) taken from pool where pool is not nil and serves session: a
// simulated client's, drawn from crypto/rand with the public keys of many
// clients computed in one batch (keyPool). rand is then left unread by
// the key generation (it still supplies every later secret); with a nil
// pool, or one of another session, the keys are drawn from rand as
// NewClient documents. It errors as NewClient, or if the pool's draw from
// crypto/rand fails.
func newClient(id ClientID, session []byte, rand io.Reader, pool *keyPool) (*Client, AdvertiseKeysMsg, error) {
	if id == 0 {
		return nil, AdvertiseKeysMsg{}, errors.New("secagg: client ID 0 is not valid")
	}
	if len(session) == 0 {
		return nil, AdvertiseKeysMsg{}, errors.New("secagg: empty session")
	}
	if rand == nil {
		return nil, AdvertiseKeysMsg{}, errors.New("secagg: nil randomness source")
	}
	c := &Client{id: id, session: slices.Clone(session), rnd: rand, workers: 1}
	pooled := false
	if pool != nil {
		var k clientKeys
		var err error
		if pooled, err = pool.take(&k, c.session); err != nil {
			return nil, AdvertiseKeysMsg{}, err
		}
		c.encSK, c.encPK, c.maskScalar, c.maskSK, c.maskPK = k.encSK, k.encPK, k.maskScalar, k.maskSK, k.maskPK
	}
	if !pooled {
		if _, err := io.ReadFull(rand, c.encSK[:]); err != nil {
			return nil, AdvertiseKeysMsg{}, fmt.Errorf("secagg: reading randomness: %w", err)
		}
		x25519.KeyGen(&c.encPK, &c.encSK)
		var err error
		if c.maskScalar, err = randomScalar(rand); err != nil {
			return nil, AdvertiseKeysMsg{}, err
		}
		c.maskSK, c.maskPK = maskKeyFromScalar(c.maskScalar, c.session)
	}
	// The message's two keys share one allocation, each capped so that
	// neither can grow into the other.
	keys := make([]byte, 0, 2*keySize)
	keys = append(append(keys, c.encPK[:]...), c.maskPK[:]...)
	return c, AdvertiseKeysMsg{From: id, EncKey: keys[:keySize:keySize], MaskKey: keys[keySize:]}, nil
}

// ID is the client's ID.
func (c *Client) ID() ClientID { return c.id }

func (c *Client) checkStage(want clientStage, to ClientID) error {
	if c.stage != want {
		return fmt.Errorf("secagg: client %d: stage called %w", c.id, ErrWrongStage)
	}
	if to != c.id {
		return fmt.Errorf("secagg: client %d: message addressed to client %d", c.id, to)
	}
	return nil
}

// ShareKeys is the client's part of stage share_keys (round 1). From the
// neighbours' public keys in m
// it draws the self-mask seed b_u (a uniform scalar; the PRG key is
// HKDF(b_u, salt = session, info = "dpfl/secagg/v1 self mask")), Shamir-
// shares b_u and the mask-key scalar t-out-of-(k+1) among its neighbours
// and itself (evaluation point = holder's ClientID), and encrypts each
// neighbour's pair of shares with AES-256-GCM under HKDF(X25519(c_u^SK,
// c_v^PK), salt = session, info = "dpfl/secagg/v1 share encryption"), with
// AAD session‖from‖to. The result has one ciphertext per neighbour, in
// m.Neighbors order.
//
// Errors: a message for another client or out of order; malformed params,
// dimension or neighbour list (unsorted, duplicate, self, zero ID, bad
// key; a bad key is a *PeerError naming that neighbour); ErrTooFewSurvivors
// if the neighbours and the client number fewer than t.
func (c *Client) ShareKeys(m ShareKeysRequest) (ShareKeysMsg, error) {
	if err := c.checkStage(clientShareKeys, m.To); err != nil {
		return ShareKeysMsg{}, err
	}
	p := m.Params
	if p.Threshold < 2 || p.Neighbors < 1 || p.Threshold > p.Neighbors+1 || m.Dim < 0 {
		return ShareKeysMsg{}, fmt.Errorf("secagg: client %d: bad params %+v, dim %d", c.id, p, m.Dim)
	}
	if len(m.Neighbors) > p.Neighbors {
		return ShareKeysMsg{}, fmt.Errorf("secagg: client %d: %d neighbours, params allow %d", c.id, len(m.Neighbors), p.Neighbors)
	}
	if len(m.Neighbors)+1 < p.Threshold {
		return ShareKeysMsg{}, ErrTooFewSurvivors
	}
	k := len(m.Neighbors)
	nb := make(map[ClientID]*peer, k)
	peers := make([]peer, k)
	holders := make([]ClientID, 0, k+1)
	for i, pk := range m.Neighbors {
		if pk.ID == 0 || pk.ID == c.id || (i > 0 && pk.ID <= m.Neighbors[i-1].ID) {
			return ShareKeysMsg{}, fmt.Errorf("secagg: client %d: neighbour list not sorted, distinct and free of 0 and self at %d", c.id, pk.ID)
		}
		// Low-order points are caught by the key agreements (here for
		// c_v, in round 2 for s_v); the server refused them already.
		if len(pk.EncKey) != keySize || len(pk.MaskKey) != keySize {
			return ShareKeysMsg{}, peerErr(pk.ID, "public key is not %d bytes", keySize)
		}
		peers[i].enc, peers[i].mask = x25519.Key(pk.EncKey), x25519.Key(pk.MaskKey)
		nb[pk.ID] = &peers[i]
		holders = append(holders, pk.ID)
	}
	holders = append(holders, c.id)

	b, err := randomScalar(c.rnd)
	if err != nil {
		return ShareKeysMsg{}, err
	}
	maskShares := splitSecret(c.maskScalar, p.Threshold, holders)
	selfShares := splitSecret(b, p.Threshold, holders)
	out := ShareKeysMsg{From: c.id, Shares: make([]EncryptedShare, k)}
	pks := make([]*x25519.Key, k)
	for i := range peers {
		pks[i] = &peers[i].enc
	}
	aeads, bad := c.agreeAEADs(holders[:k], pks)
	if bad >= 0 {
		return ShareKeysMsg{}, peerErr(holders[bad], "invalid public key")
	}
	// The GCM nonces, one read for all of them.
	nonces := make([]byte, 12*k)
	if _, err := io.ReadFull(c.rnd, nonces); err != nil {
		return ShareKeysMsg{}, fmt.Errorf("secagg: reading randomness: %w", err)
	}
	// The ciphertexts share one allocation, each capped at its own
	// length so that none can grow into the next.
	cts := make([]byte, k*shareCipherLen)
	sc := newShareScratch(c.session)
	for i, v := range holders[:k] {
		peers[i].aead = aeads[i]
		ct := sealShares(aeads[i], sc, cts[i*shareCipherLen:i*shareCipherLen:(i+1)*shareCipherLen], nonces[12*i:12*(i+1)], c.session, c.id, v, maskShares[i], selfShares[i])
		out.Shares[i] = EncryptedShare{From: c.id, To: v, Ciphertext: ct}
	}
	sc.wipe()
	last := len(holders) - 1
	c.held = map[ClientID]heldShares{c.id: {mask: maskShares[last], self: selfShares[last]}}
	c.params, c.dim, c.neighbors = p, m.Dim, nb
	c.selfKey = selfMaskKey(b, c.session)
	c.stage = clientMaskedInput
	return out, nil
}

// MaskedInput is the client's part of stage masked_input (round 2,
// MaskedInputCollection). It decrypts the shares
// the neighbours in U2 sent (m), keeps them, and returns
//
//	y_u = x + PRG(b_u) + Σ_{v ∈ senders} ±PRG(s_{u,v})  in Z_{2^32}^d,
//
// s_{u,v} = HKDF(X25519(s_u^SK, s_v^PK), salt = session, info =
// "dpfl/secagg/v1 pairwise mask"), + when u < v and − when u > v, so the
// pairwise masks cancel in the sum. x is the client's encoded input
// (Encoding.Encode) of length d = ShareKeysRequest.Dim; it is not
// modified.
//
// Errors: out of order or misaddressed; len(x) ≠ d; a ciphertext from a
// non-neighbour, a duplicate, or one that fails to decrypt or parse (a
// *PeerError naming its sender); ErrTooFewSurvivors if fewer than t−1
// neighbours sent shares (Fig. 4: the client aborts rather than send an
// input protected by too few masks).
func (c *Client) MaskedInput(m MaskedInputRequest, x []uint32) (MaskedInputMsg, error) {
	return c.maskInPlace(m, slices.Clone(x))
}

// maskInPlace is MaskedInput masking y itself (ClientDriver owns its
// input, so it saves the copy of d words); on error y is unchanged.
func (c *Client) maskInPlace(m MaskedInputRequest, y []uint32) (MaskedInputMsg, error) {
	if err := c.checkStage(clientMaskedInput, m.To); err != nil {
		return MaskedInputMsg{}, err
	}
	if len(y) != c.dim {
		return MaskedInputMsg{}, fmt.Errorf("secagg: client %d: input has %d elements, want %d", c.id, len(y), c.dim)
	}
	held, err := c.receiveShares(m)
	if err != nil {
		return MaskedInputMsg{}, err
	}
	tasks, err := c.pairMasks(held)
	if err != nil {
		return MaskedInputMsg{}, err
	}
	tasks = append(tasks, maskTask{key: c.selfKey})
	if y == nil {
		y = []uint32{} // d = 0: an empty vector, not JSON null
	}
	expandInto(y, tasks, c.workers)
	c.held = held
	c.stage = clientUnmask
	return MaskedInputMsg{From: c.id, Masked: y}, nil
}

// agree is agreeBatch with the client's secret key sk (whose public key
// is pk) and the keys pks of its peers ids, through the instance's
// PairCache when the client is simulated with one.
func (c *Client) agree(sk, pk *x25519.Key, ids []ClientID, pks []*x25519.Key, info string) ([][32]byte, int) {
	if c.pairs != nil {
		keys, _, bad := c.pairs.agreeBatch(pairBatch{sk: sk, own: pk, id: c.id, pks: pks, peers: ids, session: c.session, info: info, workers: c.workers})
		return keys, bad
	}
	return agreeBatch(sk, pks, c.session, info, c.workers)
}

// agreeAEADs is the AES-256-GCM (newGCM) of the share-encryption key
// agreed from c_u^SK with each of the peers ids, of public keys pks, or
// the index of the first invalid key (as agree). Through a PairCache the
// two ends of a pair use the one instance its claimer built. The raw keys
// are wiped once expanded: only the instances are kept.
func (c *Client) agreeAEADs(ids []ClientID, pks []*x25519.Key) ([]cipher.AEAD, int) {
	if c.pairs != nil {
		keys, aeads, bad := c.pairs.agreeBatch(pairBatch{sk: &c.encSK, own: &c.encPK, id: c.id, pks: pks, peers: ids, session: c.session, info: infoShareEnc, aead: true, workers: c.workers})
		clear(keys)
		return aeads, bad
	}
	keys, bad := agreeBatch(&c.encSK, pks, c.session, infoShareEnc, c.workers)
	if bad >= 0 {
		return nil, bad
	}
	aeads := make([]cipher.AEAD, len(keys))
	for i := range keys {
		aeads[i] = newGCM(&keys[i])
	}
	clear(keys)
	return aeads, -1
}

// pairMasks agrees the pairwise mask key with every other owner in held
// (the ladders batched and spread over c.workers goroutines, agreeBatch)
// before anything touches the input, so that a bad key (a *PeerError
// naming its neighbour) leaves nothing half-done. The task adds
// PRG(s_{u,v}) when u < v and subtracts it when u > v.
func (c *Client) pairMasks(held map[ClientID]heldShares) ([]maskTask, error) {
	peers := make([]ClientID, 0, len(held)-1)
	for v := range held {
		if v != c.id {
			peers = append(peers, v)
		}
	}
	slices.Sort(peers)
	pks := make([]*x25519.Key, len(peers))
	for k, v := range peers {
		pks[k] = &c.neighbors[v].mask
	}
	keys, bad := c.agree(&c.maskSK, &c.maskPK, peers, pks, infoPairMask)
	if bad >= 0 {
		return nil, peerErr(peers[bad], "invalid public key")
	}
	tasks := make([]maskTask, len(peers), len(peers)+1)
	for k, v := range peers {
		tasks[k] = maskTask{key: keys[k], sub: c.id > v}
	}
	return tasks, nil
}

// receiveShares decrypts and checks the ciphertexts of m and returns the
// shares this client will hold, by owner, its own included. It does not
// change c.
func (c *Client) receiveShares(m MaskedInputRequest) (map[ClientID]heldShares, error) {
	held := make(map[ClientID]heldShares, len(m.Shares)+1)
	held[c.id] = c.held[c.id]
	// The plaintexts share one allocation (the held shares alias it),
	// and the decryptions one scratch: not two allocations per share.
	pts := make([]byte, len(m.Shares)*sharePlainLen)
	sc := newShareScratch(c.session)
	for k, es := range m.Shares {
		nb, ok := c.neighbors[es.From]
		switch {
		case !ok:
			return nil, peerErr(es.From, "sent shares but is not a neighbour of client %d", c.id)
		case es.To != c.id:
			return nil, peerErr(es.From, "share addressed to client %d forwarded to client %d", es.To, c.id)
		}
		if _, dup := held[es.From]; dup {
			return nil, peerErr(es.From, "duplicate shares")
		}
		if nb.aead == nil { // not reached: ShareKeys agreed a key with every neighbour
			return nil, peerErr(es.From, "no share-encryption key")
		}
		ms, ss, err := openShares(nb.aead, sc, pts[k*sharePlainLen:k*sharePlainLen:(k+1)*sharePlainLen], c.session, es.From, c.id, es.Ciphertext)
		if err != nil {
			return nil, &PeerError{Client: es.From, Err: err}
		}
		held[es.From] = heldShares{mask: ms, self: ss}
	}
	if len(held) < c.params.Threshold {
		return nil, ErrTooFewSurvivors
	}
	return held, nil
}

// Unmask is the client's part of stage unmask (round 4, Unmasking). It
// returns this client's share of b_v for
// every v in m.Survivors (which may include the client itself) and of v's
// mask-key scalar for every v in m.Dropped, in request order.
//
// Errors: out of order or misaddressed; a request naming a client in both
// lists, twice, or one whose shares this client does not hold (the client
// itself may only be a survivor). Refusing such requests is what keeps a
// curious server from ever holding both of one client's secrets.
func (c *Client) Unmask(m UnmaskRequest) (UnmaskMsg, error) {
	if err := c.checkStage(clientUnmask, m.To); err != nil {
		return UnmaskMsg{}, err
	}
	seen := make(map[ClientID]bool, len(m.Survivors)+len(m.Dropped))
	out := UnmaskMsg{From: c.id, SelfShares: make([]Share, 0, len(m.Survivors)), MaskKeyShares: make([]Share, 0, len(m.Dropped))}
	// The revealed shares are copied into one allocation, each capped at
	// its own length.
	vals := make([]byte, 0, keySize*(len(m.Survivors)+len(m.Dropped)))
	for i, list := range [][]ClientID{m.Survivors, m.Dropped} {
		for _, v := range list {
			h, ok := c.held[v]
			switch {
			case seen[v]:
				return UnmaskMsg{}, fmt.Errorf("secagg: client %d: unmask request names client %d twice (or as both survivor and dropped)", c.id, v)
			case !ok:
				return UnmaskMsg{}, fmt.Errorf("secagg: client %d: unmask request names client %d, whose shares it does not hold", c.id, v)
			case i == 1 && v == c.id:
				return UnmaskMsg{}, fmt.Errorf("secagg: client %d: unmask request names the client itself as dropped", c.id)
			}
			seen[v] = true
			off := len(vals)
			if i == 0 {
				vals = append(vals, h.self...)
				out.SelfShares = append(out.SelfShares, Share{Of: v, X: c.id, Value: vals[off:len(vals):len(vals)]})
			} else {
				vals = append(vals, h.mask...)
				out.MaskKeyShares = append(out.MaskKeyShares, Share{Of: v, X: c.id, Value: vals[off:len(vals):len(vals)]})
			}
		}
	}
	c.stage = clientDone
	return out, nil
}
