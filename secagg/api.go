package secagg

// This file fixes the package's messages: for each stage (stage.go), the
// server's request to one client (XRequest) and the client's answer (XMsg).
// Their JSON is the wire format of the participate routes (package api).

// ClientID names a client within one protocol instance. IDs are 1..n as the
// server assigns them; they are also the Shamir evaluation points, so 0 is
// never a valid ID.
type ClientID uint32

// Params are the sharing graph and threshold of one instance, chosen by
// ChooseParams from the number of clients that advertised keys.
type Params struct {
	// Neighbors is k, the number of other clients each client shares keys
	// with and masks against. k = n−1 is the complete graph of Bonawitz et
	// al. 2017; smaller k is a random Harary graph H(n, k) of SecAgg+ (Bell
	// et al. 2020, §3). Always even or n−1.
	Neighbors int `json:"neighbors"`
	// Threshold is t: each client's secrets are split t-out-of-(k+1) among
	// itself and its neighbours, and any t shares reconstruct them.
	Threshold int `json:"threshold"`
}

// ServerConfig configures one protocol instance on the server.
type ServerConfig struct {
	// Session binds every key, share and ciphertext to this instance (job
	// ID and round); clients must be given the same bytes. Non-empty.
	Session []byte
	// Dim is the length d of every input vector, in ring elements.
	Dim int
	// MinClients is the fewest clients with which the server proceeds past
	// key advertisement (and the least |U3|); below it the round aborts.
	MinClients int
	// DropoutRate is the expected fraction of clients lost between
	// advertising keys and unmasking, in [0, 1); ChooseParams sizes k and t
	// so that a neighbourhood keeps t survivors with high probability.
	DropoutRate float64
	// Params, when non-zero, overrides ChooseParams (tests, benchmarks).
	Params Params
	// Workers bounds the goroutines of Finish's secret reconstruction,
	// key agreement and mask expansion (≤ 0: GOMAXPROCS).
	Workers int
}

// AdvertiseKeysMsg is a client's message of stage advertise_keys (round 0
// of Bonawitz et al. Fig. 4): its two X25519 public keys, c_u^PK for share
// encryption and s_u^PK for pairwise masks.
type AdvertiseKeysMsg struct {
	From    ClientID `json:"from"`
	EncKey  []byte   `json:"enc_key"`  // c_u^PK, 32 bytes
	MaskKey []byte   `json:"mask_key"` // s_u^PK, 32 bytes
}

// PeerKeys is one neighbour's advertised public keys.
type PeerKeys struct {
	ID      ClientID `json:"id"`
	EncKey  []byte   `json:"enc_key"`
	MaskKey []byte   `json:"mask_key"`
}

// ShareKeysRequest is the server's request of stage share_keys to one
// client (its broadcast after round 0, as that client sees it): the
// instance's parameters and the public keys of the client's neighbours
// that advertised (all of U1 in the complete graph).
type ShareKeysRequest struct {
	To        ClientID   `json:"to"`
	Params    Params     `json:"params"`
	Clients   int        `json:"clients"` // |U1|
	Dim       int        `json:"dim"`
	Neighbors []PeerKeys `json:"neighbors"` // sorted by ID
}

// EncryptedShare is one client's shares of its two secrets (the mask key
// s_u^SK and the self-mask seed b_u) for one neighbour, under
// authenticated encryption with a key agreed from c_u^SK and c_v^PK.
type EncryptedShare struct {
	From       ClientID `json:"from"`
	To         ClientID `json:"to"`
	Ciphertext []byte   `json:"ciphertext"`
}

// ShareKeysMsg is a client's message of stage share_keys (round 1): one
// ciphertext per neighbour.
type ShareKeysMsg struct {
	From   ClientID         `json:"from"`
	Shares []EncryptedShare `json:"shares"`
}

// MaskedInputRequest is the server's request of stage masked_input to one
// client (its forwarding after round 1): the ciphertexts addressed to it by
// neighbours in U2. Those senders are the neighbours it masks against.
type MaskedInputRequest struct {
	To     ClientID         `json:"to"`
	Shares []EncryptedShare `json:"shares"`
}

// MaskedInputMsg is a client's message of stage masked_input (round 2,
// MaskedInputCollection): y_u = x_u + PRG(b_u) + Σ_v ±PRG(s_{u,v}) in
// Z_{2^32}^d.
type MaskedInputMsg struct {
	From   ClientID `json:"from"`
	Masked []uint32 `json:"masked"`
}

// UnmaskRequest is the server's request of stage unmask to one client
// (after round 2): among the client's neighbours in U2, which sent a
// masked input (Survivors: reveal b_u shares) and which did not (Dropped:
// reveal s_u^SK shares). The two are disjoint; a client refuses a request
// that names a neighbour in both, or one it never received shares from.
type UnmaskRequest struct {
	To        ClientID   `json:"to"`
	Survivors []ClientID `json:"survivors"`
	Dropped   []ClientID `json:"dropped"`
}

// Share is one Shamir share of one client's secret: X is the holder's ID
// (the evaluation point), Value the 32-byte Ristretto255 scalar encoding.
type Share struct {
	Of    ClientID `json:"of"`
	X     ClientID `json:"x"`
	Value []byte   `json:"value"`
}

// UnmaskMsg is a client's message of stage unmask (round 4, Unmasking):
// the shares the request asked for.
type UnmaskMsg struct {
	From          ClientID `json:"from"`
	SelfShares    []Share  `json:"self_shares"`     // of b_u, u a survivor
	MaskKeyShares []Share  `json:"mask_key_shares"` // of s_u^SK, u dropped
}

// Result is the outcome of a completed instance.
type Result struct {
	// Sum is Σ_{u∈U3} x_u in Z_{2^32}^d.
	Sum []uint32
	// Survivors are U3, the clients whose inputs Sum holds, sorted.
	Survivors []ClientID
	// Dropped are the clients of U1 whose inputs Sum does not hold.
	Dropped []ClientID
	// Params are the instance's k and t.
	Params Params
}
