// Package secagg is dpfl's secure aggregation: the server learns the sum of
// the clients' encoded updates and nothing else about any one of them. It
// implements the semi-honest-server protocol of Bonawitz et al. 2017
// ("Practical Secure Aggregation for Privacy-Preserving Machine Learning",
// CCS, Fig. 4) over the sparse communication graph of SecAgg+ (Bell et al.
// 2020, "Secure Single-Server Aggregation with (Poly)Logarithmic Overhead",
// CCS, §3–4).
//
// # Protocol
//
// One instance aggregates one FL round, in four stages (Stage):
// advertise_keys, share_keys, masked_input and unmask, the same words in
// the Go message types (AdvertiseKeysMsg; ShareKeysRequest, ShareKeysMsg;
// MaskedInputRequest, MaskedInputMsg; UnmaskRequest, UnmaskMsg: in each
// stage the server's request to one client, then the client's answer), in
// JSON and in the participate routes. Server and Client are the two state
// machines. ServerDriver and ClientDriver run them over any transport:
// ServerDriver opens each stage, waits until every expected client
// answered, the stage's deadline passed or the transport reports that no
// more can come, then closes it and finally unmasks the sum; ClientDriver
// fetches each request and sends the answer. Memory is the in-process
// transport (simulation, tests); over HTTP, package job holds the
// server's end and api/client.Participation the device's.
//
//   - Round 0, AdvertiseKeys. Each client u draws two X25519 key pairs:
//     c_u, which encrypts its shares, and s_u, which seeds its pairwise
//     masks. s_u^SK is derived, s_u^SK = HKDF-SHA256(σ_u, salt = session,
//     info = "dpfl/secagg/v1 mask key"), from a uniform Ristretto255 scalar
//     σ_u, because it is σ_u that is Shamir-shared (a 32-byte key does not
//     fit the ≈2^252 scalar field, and truncating would bias it). The server
//     refuses low-order keys, closes the round with U1, chooses k and t
//     (ChooseParams) and draws the graph: complete when k = n−1, else a
//     random Harary graph H(n, k) (the clients on a ring in an order drawn
//     from crypto/rand, each joined to the k/2 nearest on either side).
//   - Round 1, ShareKeys. Each client draws its self-mask seed b_u (again a
//     uniform scalar; the PRG key is HKDF(b_u, session, "dpfl/secagg/v1
//     self mask")), Shamir-shares σ_u and b_u t-out-of-(k+1) among its
//     neighbours and itself (evaluation point = holder's ClientID; shares
//     as in circl's secretsharing, the polynomial evaluated by Horner's
//     rule in our own arithmetic mod ℓ, each step a multiplication by the
//     small public ID, and reconstructed by batched Lagrange
//     interpolation), and sends each neighbour v its two shares under
//     AES-256-GCM keyed by HKDF(X25519(c_u^SK, c_v^PK), session,
//     "dpfl/secagg/v1 share encryption"), with AAD session‖u‖v. The server
//     forwards them: U2.
//   - Round 2, MaskedInputCollection. Each client decrypts its shares and
//     sends y_u = x_u + PRG(b_u) + Σ_{v∈N(u)∩U2} ±PRG(s_{u,v}) mod 2^32,
//     where s_{u,v} = HKDF(X25519(s_u^SK, s_v^PK), session,
//     "dpfl/secagg/v1 pairwise mask"), + if u < v and − if u > v, so that
//     the pairwise masks cancel in the sum. PRG is the AES-256-CTR
//     keystream read as little-endian uint32 words (AES-NI, or VAES adding
//     the keystream straight into y, is several times faster than SHAKE or
//     ChaCha20). The server only keeps the running sum: U3.
//   - Round 3, ConsistencyCheck, belongs to the malicious-server variant
//     (it has the clients sign U3) and is not implemented.
//   - Round 4, Unmasking. Each client in U3 reveals, for each neighbour in
//     U2, its share of b_v if v ∈ U3 and of σ_v if v ∉ U3, never both
//     (and refuses a request that asks for both). The server reconstructs
//     each b_u (u ∈ U3) and removes PRG(b_u); it reconstructs each σ_u (u ∈
//     U2\U3), checks the derived s_u^PK against the advertised one, and
//     removes the pairwise masks that u's surviving neighbours added. Any
//     secret with fewer than t shares aborts with ErrTooFewSurvivors: no
//     sum is revealed.
//
// Clients may drop after any round. One that drops after round 2 stays in
// U3: its input counts and its b_u is rebuilt from its neighbours' shares.
//
// # Security model
//
// The server is semi-honest: it follows the protocol but tries to learn
// from what it sees, possibly together with up to a fraction γ = 1/3 of the
// clients (ColludingFraction). Under the parameter choice below, what such
// a coalition learns about the honest clients' inputs is their sum over U3
// (and nothing more, except with probability 2^−40 over the random graph). Not
// protected against: a malicious server (it could lie about dropouts to ask
// for both secrets of one client, or show different clients different
// views; that needs round 3 and authenticated key advertisement, not
// implemented); clients that deviate from the protocol (a wrong input or a
// wrong share of some b_u corrupts the sum undetected; a wrong share of a
// dropped client's mask key is detected and aborts; a bad ciphertext makes
// its recipient fail with an error naming the sender); traffic analysis; and the sum itself, which is what
// differential privacy noise, added elsewhere, protects. Every message a
// client sends is validated: a bad one is refused with a *PeerError naming
// the client and leaves the state unchanged; nothing a client sends can
// crash the server.
//
// All secrets come from crypto/rand (the graph's placement from ChaCha8
// keyed from crypto/rand). Every derived key is bound to the instance by
// the HKDF salt (the session) and to its purpose by the HKDF info, which is
// why the PRG may use an all-zero IV.
//
// # Parameters (SecAgg+)
//
// ChooseParams follows Bell et al. 2020, §3–4, with the concrete bounds of
// its authors' parameter finder: with A = ⌊n/3⌋ colluders and D = ⌊δn⌋
// dropouts placed by the random ring order, the smallest even k with
// connectivity, n(n−k−1)/2·(A+D)_k/(n)_k ≤ 2^−41 (the honest survivors
// of H(n, k) stay connected, so the server learns no partial sum; also
// with honest clients dropping independently at rate δ), and a t with
// privacy, n·P[Hyp(n−1, A, k) ≥ t] ≤ 2^−41 (no honest client has t
// colluding neighbours; the two events together 2^−40), and correctness,
// n·P[fewer than t of a client's k neighbours survive] ≤ 2^−20 (as a
// hypergeometric with D dropouts and as Bin(k, 1−δ)). Its t is the
// smallest with privacy. k grows as O(log n): without dropouts k = 28 for
// n = 120 (the demo's cohort; the complete graph would need n−1 = 119)
// and 38 for n = 1000; at δ = 0.1, 108 for n = 1000 and 150 for n = 10^6.
// When no k ≤ n−2 works (small n) it uses the complete graph of Bonawitz
// et al. with t = max(2, ⌊γn⌋+1), which is private with certainty; there,
// for tiny n and high δ, correctness may be weaker than 2^−20 (the
// instance aborts more often; privacy is never traded for it).
//
// # Cost
//
// A client's work is two X25519 key generations, 2k key agreements (one
// per neighbour for share encryption in round 1, one for its pairwise
// mask in round 2), two Shamir splits over k+1 holders and k+1 mask
// expansions of d words; the server's is one interpolation per secret and
// the expansions of the survivors' self masks and of the dropped
// clients' pairwise masks. The agreements dominate. A party batches its
// own (sharedBatch: eight ladders at once with AVX-512 IFMA, four in
// AVX2, one inversion for all), so that an agreement costs about 4 µs on
// a Zen 5 core (16 µs there with the AVX2 ladder, 26 µs with circl's) and
// 17 µs on an AVX2-only Zen 3 (39 µs with circl's).
// What a party computes once it never computes again (a client opens its
// neighbours' shares with the AES-GCM instances it sealed its own with).
// The simulated clients of one instance, all in one process, go one step
// further and share a PairCache: the two ends of a pair would derive the
// same key, so the first to need it runs the agreement and the other
// reads it, which halves a simulated round's agreements and changes no
// message; it also builds each share-encryption pair's AES-GCM once for
// both ends and hands the clients their key pairs from a pool whose
// public keys are computed eight at a time (keypool.go). A device never
// has one: it draws its own keys and derives its pair keys from its own
// secrets.
//
// # Encoding
//
// Encoding maps float updates clipped to ±C into Z_{2^32} as two's
// complement fixed point with f fractional bits, f the largest ≤ 30 with
// n·(C·2^f + 1) ≤ 2^31 − 1: log2 n bits of growth for the sum plus
// log2(C·2^f) bits for one value plus a sign bit plus headroom for the
// rounding fit in 32 bits, so the sum of n encodings never wraps and
// decodes exactly. Rounding is stochastic (unbiased), adding at most
// √d·2^−f to a vector's L2 norm (RoundingSlack).
package secagg
