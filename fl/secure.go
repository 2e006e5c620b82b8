package fl

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"

	"github.com/dpfl/dpfl/dp"
	"github.com/dpfl/dpfl/secagg"
	"github.com/dpfl/dpfl/simd"
)

// SecAggStats describes one round's secure aggregation instance.
type SecAggStats struct {
	// Clients is |U1|, the clients that advertised keys.
	Clients int `json:"clients"`
	// Survivors is |U3|, the clients whose inputs the sum holds.
	Survivors int `json:"survivors"`
	// Dropped is Clients − Survivors.
	Dropped int `json:"dropped"`
	// Neighbors and Threshold are the instance's k and t.
	Neighbors int `json:"neighbors"`
	Threshold int `json:"threshold"`
	// FracBits is the fixed-point precision f of the encoding.
	FracBits int `json:"frac_bits"`
	// Attempt numbers the instance within its round (1 unless earlier
	// attempts aborted below threshold).
	Attempt int `json:"attempt"`
}

// EncodeSecureInput is a client's side of secure aggregation: it clips
// delta in place to L2 norm C − s and writes its stochastic fixed-point
// encoding into dst (len(dst) = len(delta)), where s = enc.RoundingSlack(d)
// bounds the norm that rounding can add, so the encoded update's norm
// stays ≤ C: the sensitivity the DP analysis assumes (McMahan et al. 2018,
// Algorithm 1, π(Δ, C)). It returns the norm before clipping. A
// delta with NaN/Inf is refused (dp.ErrNonFinite); so is a clip norm that
// the rounding slack would swallow.
func EncodeSecureInput(dst []uint32, delta []float32, clip float64, enc secagg.Encoding, rng *rand.Rand) (norm float64, err error) {
	if len(dst) != len(delta) {
		return 0, fmt.Errorf("fl: encoded input has %d values, update has %d", len(dst), len(delta))
	}
	if !simd.AllFinite(delta) {
		return 0, dp.ErrNonFinite
	}
	c := clip - enc.RoundingSlack(len(delta))
	if !(c > 0) {
		return 0, fmt.Errorf("fl: clip norm %g leaves no room for the rounding slack %g of %d-bit fixed point", clip, enc.RoundingSlack(len(delta)), enc.FracBits)
	}
	norm = simd.ClipToNorm(delta, c)
	enc.Encode(dst, delta, rng)
	return norm, nil
}

// ReleaseSecureSum is the server's side: it adds noise to the unmasked
// modular sum Σ x̃_i of the survivors' encoded updates in the ring Z_2^32,
// then decodes, and writes dst = decode(Σ x̃_i + ⌊Y⌉ mod 2^32) /
// denominator with Y ~ N(0, (z·C·2^f)² I) in fixed-point units (f =
// enc.FracBits). z = 0 adds no noise. The noise is added to sum in place
// (the caller's unmasked sum is consumed). scratch and dst must have
// len(sum).
//
// Why in the ring: decoding maps the modular sum to signed values, which
// is not linear. With noise added after decoding, a malicious client that
// pushes a coordinate near ±2^31 lets an honest client's contribution flip
// the decoded value by ~2^32·2^−f, an unbounded sensitivity. Here the sum
// of the encoded updates is an integer vector S in which one honest
// client moves by at most C·2^f in L2 (EncodeSecureInput), ⌊S + Y⌉ = S +
// ⌊Y⌉ is a post-processing of the Gaussian mechanism S + Y with noise
// multiplier z, and so are the reduction mod 2^32 and the decoding,
// whatever the other clients sent. The ledger's GaussianDpEvent(z) is
// therefore exact for this release (up to the floating-point caveat of
// the package dp doc, which the integer rounding does not remove).
func ReleaseSecureSum(dst []float32, scratch []float64, sum []uint32, enc secagg.Encoding, p dp.Params, denominator float64, rng *rand.Rand) {
	if !(denominator > 0) {
		panic(fmt.Sprintf("fl: denominator must be > 0, got %v", denominator))
	}
	addRingNoise(sum, p.Sigma()*math.Ldexp(1, enc.FracBits), rng)
	enc.Decode(scratch, sum)
	inv := 1 / denominator
	for i, v := range scratch {
		dst[i] = float32(v * inv)
	}
}

// addRingNoise adds round(N(0, σ²)) to every element of sum modulo 2^32
// (σ in fixed-point units, ≥ 0 and finite). Huge draws are reduced mod
// 2^32 before the integer conversion, which is the same ring element.
func addRingNoise(sum []uint32, sigma float64, rng *rand.Rand) {
	if sigma == 0 {
		return
	}
	if !(sigma > 0) || math.IsInf(sigma, 0) {
		panic(fmt.Sprintf("fl: ring noise σ must be finite and ≥ 0, got %v", sigma))
	}
	const ring = 1 << 32
	for i := range sum {
		y := math.Round(rng.NormFloat64() * sigma)
		if math.Abs(y) >= 1<<62 {
			y = math.Mod(y, ring)
		}
		sum[i] += uint32(int64(y))
	}
}

// SecureAggregator aggregates a simulated cohort through the full secure
// aggregation protocol (package secagg): every sampled client gets real
// keys, Shamir shares and masks, so a simulated job runs the code a
// deployment runs, dropouts included. The server side sees only the
// unmasked sum. Under DP the server adds rounded Gaussian noise of
// standard deviation z·C to the modular sum in the ring, before decoding
// (ReleaseSecureSum), and divides by the expected cohort size; without DP
// it divides by the number of survivors (uniform weighting: the protocol
// reveals no per-client example counts). The noise stays central, added
// by a server trusted with it (distributed noise is issue 16's).
type SecureAggregator struct {
	// Params holds C and z (z = 0 without DP).
	Params dp.Params
	// DP selects the denominator: the expected cohort (true) or the
	// survivors (false).
	DP bool
	// MinClients is the smallest cohort the protocol runs with.
	MinClients int
	// DropoutRate is the probability that a simulated client drops out,
	// at a uniformly chosen stage after advertising keys; also the rate
	// secagg.ChooseParams plans for.
	DropoutRate float64
	// Rand is the secure source of noise and stochastic rounding.
	Rand *rand.Rand
	// Dropouts draws the simulated dropouts (simulation randomness).
	Dropouts *rand.Rand
	// Workers bounds the simulated clients running their protocol steps
	// at once and the server's unmasking goroutines (≤ 0: GOMAXPROCS).
	Workers int
	// Attempt is copied into the stats (the runner numbers retries).
	Attempt int
	// Adaptive, when set (under DP), is adaptive clipping's state
	// (AdaptiveClip): each client clips to Adaptive.Clip and appends its
	// bit to its input (EncodeClipBit), the server adds noise z_Δ·C·2^f
	// to the update's coordinates and 2σ_b to the bit's, and Release
	// moves Adaptive.Clip on. The bit travels inside the secure sum: the
	// server never sees a client's bit or an un-noised count.
	Adaptive *AdaptiveClip
	// MaxClients, when > 0, is a public bound on the cohort that fixes the
	// fixed-point encoding (secagg.NewEncoding). Under DP it must be set:
	// an encoding chosen from the realised cohort size would reveal that
	// size through the released values' resolution. A larger cohort than
	// the bound may wrap the sum, which costs accuracy, never privacy
	// (the noise is added in the ring, ReleaseSecureSum).
	MaxClients int
	// Distributed, when set (under DP), runs the distributed discrete
	// Gaussian instead (KLS21; ddg.go): each simulated client clips,
	// rotates, rounds and adds its own noise share (EncodeDDGInput) with
	// a fresh rotation seed per instance, the protocol sums vectors of
	// Distributed.PaddedDim values, and the server only decodes
	// (ReleaseDDGSum): it adds no noise and never holds an un-noised
	// sum. Params.NoiseMultiplier is then unused; MinClients is the
	// survivor floor the ledger's ρ assumes (the protocol aborts below
	// it, before unmasking).
	Distributed *DDGParams

	// wrap and sawSum are for tests only: they watch every message the
	// simulated clients send the server (secagg.Memory.Wrap) and the
	// unmasked sum the distributed mechanism's server holds, with its
	// round, so that a test can inspect all the server ever sees.
	wrap   func(i int, t secagg.ClientTransport) secagg.ClientTransport
	sawSum func(sum []uint32, r DDGRound)
}

// NewAccumulator keeps each client's delta until the round's protocol
// runs: the simulated clients hold their own inputs.
func (s *SecureAggregator) NewAccumulator(dim int) Accumulator {
	return &heldInputs{dim: dim}
}

type heldInputs struct {
	dim    int
	deltas [][]float32
	spare  [][]float32
}

func (h *heldInputs) Add(delta []float32, _ int) error {
	if len(delta) != h.dim {
		return fmt.Errorf("fl: update has %d values, model has %d", len(delta), h.dim)
	}
	if !simd.AllFinite(delta) {
		return dp.ErrNonFinite
	}
	var d []float32
	if n := len(h.spare); n > 0 {
		d, h.spare = h.spare[n-1], h.spare[:n-1]
	} else {
		d = make([]float32, h.dim)
	}
	copy(d, delta)
	h.deltas = append(h.deltas, d)
	return nil
}

func (h *heldInputs) Reset() {
	h.spare = append(h.spare, h.deltas...)
	h.deltas = h.deltas[:0]
}

// Release runs one protocol instance among the held inputs: each input's
// simulated client is run by a secagg.ClientDriver and the server by a
// secagg.ServerDriver, in memory (secagg.Memory). It returns an error
// wrapping secagg.ErrTooFewSurvivors when the instance aborts (too few
// clients or survivors): nothing is released, and the caller may retry the
// round with a fresh cohort.
func (s *SecureAggregator) Release(dst []float32, accs []Accumulator, expected float64) (AggregateStats, error) {
	var inputs [][]float32
	for _, a := range accs {
		inputs = append(inputs, a.(*heldInputs).deltas...)
	}
	d, n := len(dst), len(inputs)
	st := AggregateStats{Clients: n}
	if n < max(s.MinClients, 2) {
		return st, fmt.Errorf("fl: %d clients reported, secure aggregation needs %d: %w", n, max(s.MinClients, 2), secagg.ErrTooFewSurvivors)
	}
	bound := n
	if s.MaxClients > 0 {
		bound = s.MaxClients
	}
	if s.Distributed != nil {
		return s.releaseDistributed(dst, inputs, expected)
	}
	noise, dim := s.Params, d
	if a := s.Adaptive; a != nil {
		// The bit adds one coordinate; z_Δ first, so that an undefined
		// one releases nothing.
		z, err := DeltaNoiseMultiplier(s.Params.NoiseMultiplier, a.CountStd)
		if err != nil {
			return st, err
		}
		noise, dim = dp.Params{ClipNorm: a.Clip, NoiseMultiplier: z}, d+1
	}
	enc, err := secagg.NewEncoding(bound, noise.ClipNorm)
	if err != nil {
		return st, err
	}
	session, err := newSession()
	if err != nil {
		return st, err
	}
	pool := new(inputPool)
	res, err := s.runInstance(session, dim, s.clients(inputs, session, enc, noise.ClipNorm, pool), pool)
	if err != nil {
		return st, err
	}
	denom := float64(len(res.Survivors))
	if s.DP {
		denom = expected
	}
	if a := s.Adaptive; a != nil {
		b := ReleaseClipBits(res.Sum[d:], a.CountStd, denom, s.Rand)
		st.Adaptive = &AdaptiveStats{ClipNorm: a.Clip, NoisyUnclippedFraction: b}
		a.Clip = a.Next(a.Clip, b)
	}
	ReleaseSecureSum(dst, make([]float64, d), res.Sum[:d], enc, noise, denom, s.Rand)
	st.Clients = len(res.Survivors)
	st.SecAgg = NewSecAggStats(res, enc, s.Attempt)
	return st, nil
}

// newSession draws a protocol instance's session identifier from
// crypto/rand.
func newSession() ([]byte, error) {
	session := make([]byte, 16)
	_, err := crand.Read(session)
	return session, err
}

// runInstance runs one protocol instance over vectors of dim values
// among clients in memory, the server's end by a secagg.ServerDriver, the
// simulated dropouts drawn by s.dropouts. When pool is set (the clients
// take their input buffers from it), each masked vector goes back to it
// once the server has added it to its sum, unless a test watches the
// messages (s.wrap), which may keep them. Errors wrap
// secagg.ErrTooFewSurvivors when it aborts.
func (s *SecureAggregator) runInstance(session []byte, dim int, clients []*secagg.ClientDriver, pool *inputPool) (secagg.Result, error) {
	srv, err := secagg.NewServer(secagg.ServerConfig{Session: session, Dim: dim, MinClients: s.MinClients, DropoutRate: s.DropoutRate, Workers: s.Workers})
	if err != nil {
		return secagg.Result{}, err
	}
	n := len(clients)
	wrap := s.wrap
	if wrap == nil && pool != nil {
		wrap = func(_ int, t secagg.ClientTransport) secagg.ClientTransport { return recycling{t, pool} }
	}
	mem := &secagg.Memory{Server: srv, Clients: clients, Workers: s.Workers, Drop: s.dropouts(n), Wrap: wrap}
	driver := &secagg.ServerDriver{Server: srv, Transport: mem, Clients: n}
	return driver.Run(context.Background())
}

// releaseDistributed is Release under the distributed discrete Gaussian
// (Distributed): a fresh public rotation seed, the simulated clients'
// EncodeDDGInput in the protocol's masked_input step, and the server's
// ReleaseDDGSum of the unmasked noisy sum over the expected cohort.
func (s *SecureAggregator) releaseDistributed(dst []float32, inputs [][]float32, expected float64) (AggregateStats, error) {
	st := AggregateStats{Clients: len(inputs)}
	r, err := NewDDGRound(*s.Distributed)
	if err != nil {
		return st, err
	}
	rot := r.Rotation()
	session, err := newSession()
	if err != nil {
		return st, err
	}
	clients := make([]*secagg.ClientDriver, len(inputs))
	pairs := new(secagg.PairCache) // as in clients
	for i := range clients {
		clients[i] = &secagg.ClientDriver{ID: secagg.ClientID(i + 1), Session: session, Workers: 1, Pairs: pairs,
			Input: func(context.Context) ([]uint32, error) {
				x := make([]uint32, r.Params.PaddedDim)
				return x, EncodeDDGInput(x, inputs[i], r, rot)
			}}
	}
	res, err := s.runInstance(session, r.Params.PaddedDim, clients, nil)
	if err != nil {
		return st, err
	}
	if s.sawSum != nil {
		s.sawSum(res.Sum, r)
	}
	if err := ReleaseDDGSum(dst, res.Sum, r, rot, expected); err != nil {
		return st, err
	}
	st.Clients = len(res.Survivors)
	st.SecAgg = NewSecAggStats(res, secagg.Encoding{}, s.Attempt)
	return st, nil
}

// EncodeClipBit is a client's adaptive-clipping bit in the ring (Andrew et
// al. 2021, Algorithm 1): +1 when its update's norm before clipping is at
// most clip, −1 (2^32 − 1) otherwise, i.e. 2(b_i − 1/2). One client moves
// the sum of these by 1 (add/remove) or 2 (replace-one), against C·2^f
// and 2C·2^f for its encoded update.
func EncodeClipBit(norm, clip float64) uint32 {
	if norm <= clip {
		return 1
	}
	return math.MaxUint32 // −1 mod 2^32
}

// ReleaseClipBits is the server's side of the bit: bits holds the
// unmasked ring sum Σ 2(b_i − 1/2) (one element; consumed). It adds
// round(N(0, (2σ_b)²)), the count's noise in the bit's units, reads the
// result as a signed integer and returns b̃ = (that/2)/m + 1/2 for the
// expected cohort m: AdaptiveClip.NoisyFraction's value, released through
// the secure sum. Like ReleaseSecureSum's, the rounding and the reduction
// are post-processing of the Gaussian mechanism on the integer sum.
func ReleaseClipBits(bits []uint32, countStd, m float64, rng *rand.Rand) float64 {
	if len(bits) != 1 {
		panic(fmt.Sprintf("fl: ReleaseClipBits wants the one bit coordinate, got %d", len(bits)))
	}
	addRingNoise(bits, 2*countStd, rng)
	centred := float64(int32(bits[0])) / 2
	return centred/m + 0.5
}

// NewSecAggStats describes a finished instance: its result, encoding and
// attempt number. |U1| is the survivors and the dropped together.
func NewSecAggStats(res secagg.Result, enc secagg.Encoding, attempt int) *SecAggStats {
	return &SecAggStats{
		Clients: len(res.Survivors) + len(res.Dropped), Survivors: len(res.Survivors), Dropped: len(res.Dropped),
		Neighbors: res.Params.Neighbors, Threshold: res.Params.Threshold, FracBits: enc.FracBits, Attempt: attempt,
	}
}

// clients are the simulated clients of one instance, IDs 1..n: client i
// encodes inputs[i] (EncodeSecureInput, with its own secure generator for
// the stochastic rounding) when its masked_input step asks, so that only
// the inputs being masked at the moment are held encoded, in a buffer
// from pool (EncodeSecureInput overwrites all of it). The server learns
// only the sum: no per-client norm or clipping statistic is collected
// here, even in simulation. Each client runs on one goroutine;
// secagg.Memory runs Workers of them at once.
func (s *SecureAggregator) clients(inputs [][]float32, session []byte, enc secagg.Encoding, clip float64, pool *inputPool) []*secagg.ClientDriver {
	out := make([]*secagg.ClientDriver, len(inputs))
	// The simulated clients share one secagg.PairCache: each pair's X25519
	// agreement, which both ends would compute alike, runs once (no
	// message changes). Workers: 1, since Memory already runs clients in
	// parallel.
	pairs := new(secagg.PairCache)
	for i := range out {
		out[i] = &secagg.ClientDriver{ID: secagg.ClientID(i + 1), Session: session, Workers: 1, Pairs: pairs,
			Input: func(context.Context) ([]uint32, error) {
				rng, err := dp.NewSecureRand()
				if err != nil {
					return nil, err
				}
				d := len(inputs[i])
				x := pool.get(d, d+1)
				norm, err := EncodeSecureInput(x, inputs[i], clip, enc, rng)
				if s.Adaptive != nil {
					x = append(x, EncodeClipBit(norm, clip))
				}
				return x, err
			}}
	}
	return out
}

// dropouts draws the simulated dropouts, in client order: with probability
// DropoutRate a client drops before share_keys, masked_input or unmask,
// uniformly (from Dropouts). The result tells secagg.Memory who is gone.
func (s *SecureAggregator) dropouts(n int) func(i int, st secagg.Stage) bool {
	at := make([]secagg.Stage, n)
	for i := range at {
		at[i] = secagg.Stage(len(secagg.Stages)) // never
		if s.DropoutRate > 0 && s.Dropouts.Float64() < s.DropoutRate {
			at[i] = secagg.StageShareKeys + secagg.Stage(s.Dropouts.IntN(3))
		}
	}
	return func(i int, st secagg.Stage) bool { return st >= at[i] }
}

// inputPool recycles the input buffers of one instance's simulated
// clients: a client's encoded input becomes its masked vector, which is
// free again once the server has added it to its running sum (the server
// keeps no individual input), so the round allocates one buffer per client
// masking at the same moment (secagg.Memory's Workers) instead of one per
// client, and does not clear each. A recycled buffer holds another
// client's masked vector, which the server saw anyway, until the next
// client's encoding overwrites every value of it. Safe for concurrent
// use.
type inputPool struct {
	mu   sync.Mutex
	free [][]uint32
}

// get returns a buffer of n values with capacity at least c (≥ n), its
// contents unspecified.
func (p *inputPool) get(n, c int) []uint32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := len(p.free) - 1; k >= 0; k-- {
		if x := p.free[k]; cap(x) >= c {
			p.free = append(p.free[:k], p.free[k+1:]...)
			return x[:n]
		}
	}
	return make([]uint32, n, c)
}

// put returns a buffer that nothing refers to any more.
func (p *inputPool) put(x []uint32) {
	if cap(x) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.free = append(p.free, x)
}

// recycling is a simulated client's transport that returns its masked
// vector to the pool once sent: over secagg.Memory, MaskedInput returns
// after the server has added the vector to its sum (or refused it) and
// kept nothing of it.
type recycling struct {
	secagg.ClientTransport
	pool *inputPool
}

// MaskedInput sends m, then hands m.Masked back to the pool.
func (r recycling) MaskedInput(ctx context.Context, m secagg.MaskedInputMsg) error {
	err := r.ClientTransport.MaskedInput(ctx, m)
	r.pool.put(m.Masked)
	return err
}
