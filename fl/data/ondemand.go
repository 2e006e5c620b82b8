package data

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

const (
	// MaxOnDemandClients bounds OnDemandOptions.NumClients (10^9): an
	// OnDemand costs nothing per user, but client IDs beyond this are
	// almost certainly a mistyped population, and 10^9 users at the
	// smallest useful sampling rate (q ≈ 10^−6) still make a cohort of
	// hundreds.
	MaxOnDemandClients = 1_000_000_000
	// MaxOnDemandExamples bounds OnDemandOptions.MaxExamples (2^24 ≈ 16.8
	// million): one user's index list is allocated whole by Client.
	MaxOnDemandExamples = 1 << 24
	// MinOnDemandAlpha is the smallest non-zero OnDemandOptions.Alpha:
	// below about 10^−300 the log-Gamma variates of Dir(α·p) overflow to
	// −∞. At 10^−100 every user already holds a single class.
	MinOnDemandAlpha = 1e-100
)

// OnDemandOptions configure NewOnDemand. Every user's data is a function of
// (Seed, user id) and these options alone.
type OnDemandOptions struct {
	// NumClients is the population size N, in [1, MaxOnDemandClients].
	NumClients int
	// Alpha is the label skew: each user's class proportions are q ~
	// Dir(Alpha·p), with p the base dataset's class frequencies (the
	// parametrisation of Hsu, Qi, Brown 2019, §3, as in Dirichlet), so
	// E[q_c] = p_c and Var[q_c] = p_c(1−p_c)/(Alpha+1). Small Alpha (0.1)
	// concentrates each user on one or two classes. Alpha = 0 (the zero
	// value) and Alpha = +Inf both mean IID: q = p for every user; other
	// values must be at least MinOnDemandAlpha.
	Alpha float64
	// SizeMu and SizeSigma are the quantity skew: user u holds
	// m_u = clamp(round(exp(SizeMu + SizeSigma·Z_u)), 1, MaxExamples)
	// examples, Z_u ~ N(0, 1), a log-normal size rounded to the nearest
	// integer (FedProx's Synthetic draws device sizes likewise, Li et al.
	// 2020, §5.1). Before clamping the mean is exp(SizeMu + SizeSigma²/2)
	// and the median exp(SizeMu); ExpectedSize gives the exact mean after
	// rounding and clamping. SizeMu must be finite, SizeSigma finite and
	// ≥ 0 (0: every user has the same size).
	SizeMu, SizeSigma float64
	// MaxExamples caps each user's size, in [1, MaxOnDemandExamples]. The
	// user stays the privacy unit whatever their count: user-level DP
	// bounds a user's whole contribution (their clipped update), so a
	// large user is not several privacy units, and the cap only limits
	// work and memory.
	MaxExamples int
	// HeldOutFraction f in [0, 1) is each user's held-out share, as in
	// Federated: of a user's m examples, ⌊f·m⌋ chosen uniformly at random
	// are held out of training for per-client evaluation. 0 means none.
	HeldOutFraction float64
	// EvalUserFraction in [0, 1) is the share of users held out of
	// training altogether, for evaluation on users that never train
	// (Wang et al. 2021, "A Field Guide to Federated Optimization",
	// §4.2.1); see IsEvalUser. 0 means none.
	EvalUserFraction float64
	// Seed makes the population reproducible.
	Seed uint64
}

// OnDemand is a population of N users whose data is derived on demand from
// (Seed, id), never stored: building it costs O(base) time and memory (one
// index pool per class of the base dataset) and O(1) in N, so N may be
// anything up to MaxOnDemandClients (10^9). It is immutable once built and
// safe for concurrent use.
//
// User id's examples (Client) come from a math/rand/v2 PCG generator
// seeded with (Seed, id) alone, in this order:
//
//  1. its size m (OnDemandOptions.SizeMu, SizeSigma, MaxExamples);
//  2. its class proportions q ~ Dir(Alpha·p) (skipped if IID: q = p);
//  3. its class counts k ~ Multinomial(m, q), as m categorical draws;
//  4. for each class c, k_c examples of class c drawn uniformly without
//     replacement from the class's n_c examples (Floyd's algorithm), so
//     a user's examples are distinct; a user wanting more examples of a
//     class than exist (k_c > n_c) gets every example of the class
//     ⌊k_c/n_c⌋ times plus k_c mod n_c distinct others;
//  5. the list is shuffled, and the first ⌊HeldOutFraction·m⌋ are held out.
//
// Users draw independently, so examples are sampled with replacement
// across users: two users may share examples even in a small population,
// and a population bigger than the data necessarily repeats them (see
// RepeatsExamples). That is the price of simulating a cross-device
// population from a fixed dataset; a DP guarantee is still per user (the
// privacy unit is the user id, whatever examples it holds), but the
// model's utility then reflects fewer distinct examples than users × size,
// and a base example held by k users is only protected as a group of k
// users would be: the simulation's guarantee is about users, not about
// the base dataset's records.
type OnDemand struct {
	base    *Dataset
	opt     OnDemandOptions
	pools   [][]int32 // pools[c]: the indices of class c, ascending
	conc    []float64 // α·p_c (nil: IID)
	cum     []float64 // IID: cumulative p_c
	last    int       // the last class with examples
	logCap  float64   // log(MaxExamples − ½): sizes above round to the cap
	expSize float64   // ExpectedSize
}

// Salts of the per-user hashes (arbitrary odd constants), so that the data
// stream and the eval-user coin of a user are unrelated.
const (
	userSalt = 0x6f6e64656d616e64 // "ondemand"
	evalSalt = 0x6576616c75736572 // "evaluser"
)

// NewOnDemand builds the population of opt over base: per-class index
// pools of base, O(base.Len() + Classes) time and memory, and nothing per
// user. base is retained, not copied, and must not change afterwards.
//
// Errors: an invalid (see Dataset.Validate) or empty base, and each option
// out of range, naming the field: NumClients outside
// [1, MaxOnDemandClients], Alpha NaN or non-zero below MinOnDemandAlpha,
// SizeMu not finite, SizeSigma negative or not finite, MaxExamples outside
// [1, MaxOnDemandExamples], HeldOutFraction or EvalUserFraction outside
// [0, 1).
func NewOnDemand(base *Dataset, opt OnDemandOptions) (*OnDemand, error) {
	if err := base.Validate(); err != nil {
		return nil, err
	}
	switch {
	case base.Len() == 0:
		return nil, fmt.Errorf("data: empty base dataset")
	case opt.NumClients < 1 || opt.NumClients > MaxOnDemandClients:
		return nil, fmt.Errorf("data: NumClients must be in [1, %d], got %d", MaxOnDemandClients, opt.NumClients)
	case !(opt.Alpha == 0 || opt.Alpha >= MinOnDemandAlpha):
		return nil, fmt.Errorf("data: Alpha must be 0 or +Inf (IID) or in [%g, ∞), got %v", MinOnDemandAlpha, opt.Alpha)
	case math.IsNaN(opt.SizeMu) || math.IsInf(opt.SizeMu, 0):
		return nil, fmt.Errorf("data: SizeMu must be finite, got %v", opt.SizeMu)
	case !(opt.SizeSigma >= 0) || math.IsInf(opt.SizeSigma, 0):
		return nil, fmt.Errorf("data: SizeSigma must be finite and ≥ 0, got %v", opt.SizeSigma)
	case opt.MaxExamples < 1 || opt.MaxExamples > MaxOnDemandExamples:
		return nil, fmt.Errorf("data: MaxExamples must be in [1, %d], got %d", MaxOnDemandExamples, opt.MaxExamples)
	case !(opt.HeldOutFraction >= 0 && opt.HeldOutFraction < 1):
		return nil, fmt.Errorf("data: HeldOutFraction must be in [0, 1), got %v", opt.HeldOutFraction)
	case !(opt.EvalUserFraction >= 0 && opt.EvalUserFraction < 1):
		return nil, fmt.Errorf("data: EvalUserFraction must be in [0, 1), got %v", opt.EvalUserFraction)
	}
	classes := base.Classes
	start := make([]int, classes+1)
	for _, l := range base.Y {
		start[int(l)+1]++
	}
	for c := range classes {
		start[c+1] += start[c]
	}
	flat := make([]int32, base.Len())
	next := slices.Clone(start[:classes])
	for i, l := range base.Y {
		flat[next[l]] = int32(i)
		next[l]++
	}
	p := &OnDemand{base: base, opt: opt, pools: make([][]int32, classes)}
	n := float64(base.Len())
	if opt.Alpha > 0 && !math.IsInf(opt.Alpha, 1) {
		p.conc = make([]float64, classes)
	} else {
		p.cum = make([]float64, classes)
	}
	var acc float64
	for c := range classes {
		p.pools[c] = flat[start[c]:start[c+1]:start[c+1]]
		share := float64(len(p.pools[c])) / n
		if p.conc != nil {
			p.conc[c] = opt.Alpha * share
		} else {
			acc += share
			p.cum[c] = acc
		}
	}
	for c := range classes {
		if len(p.pools[c]) > 0 {
			p.last = c
		}
	}
	p.logCap = math.Log(float64(opt.MaxExamples) - 0.5)
	p.expSize = expectedSize(opt.SizeMu, opt.SizeSigma, opt.MaxExamples)
	return p, nil
}

// Base is the dataset the users' indices point into.
func (p *OnDemand) Base() *Dataset { return p.base }

// NumClients is the population size N.
func (p *OnDemand) NumClients() int { return p.opt.NumClients }

// Options returns the options p was built with.
func (p *OnDemand) Options() OnDemandOptions { return p.opt }

// ExpectedSize is E[m], a user's expected number of examples (held-out ones
// included) after rounding and clamping to [1, MaxExamples]:
// E[m] = 1 + Σ_{k=2..cap} P(X ≥ k−½), X = exp(SizeMu + SizeSigma·Z),
// summed exactly for k ≤ 4096 and beyond that by the midpoint rule, as
// the closed form ∫ P(X ≥ t) dt of the clamped log-normal (relative error
// far below 10^−6 there).
func (p *OnDemand) ExpectedSize() float64 { return p.expSize }

// RepeatsExamples reports whether the population's expected number of
// examples, N·ExpectedSize(), exceeds the base dataset's size, so that
// examples must repeat across users (each appears N·E[m]/n times on
// average). Users sample independently, so even when it is false two
// users may share examples; a job should report it either way.
func (p *OnDemand) RepeatsExamples() bool {
	return float64(p.opt.NumClients)*p.expSize > float64(p.base.Len())
}

// IsEvalUser reports whether user id is held out of training for
// evaluation on users that never train (Field Guide §4.2.1): a coin of bias
// EvalUserFraction from a hash of (Seed, id), independent of the user's
// data stream, so the split costs no memory and the expected number of
// evaluation users is N·EvalUserFraction. A trainer should sample cohorts
// from [0, N) and skip (reject and redraw) ids with IsEvalUser(id) true,
// which samples uniformly among the training users, and evaluate on ids
// with it true. It panics for id outside [0, N).
func (p *OnDemand) IsEvalUser(id int) bool {
	p.checkID(id)
	if p.opt.EvalUserFraction == 0 {
		return false
	}
	h := mix64(mix64(uint64(id)+evalSalt) ^ p.opt.Seed)
	return float64(h>>11) < p.opt.EvalUserFraction*(1<<53)
}

func (p *OnDemand) checkID(id int) {
	if id < 0 || id >= p.opt.NumClients {
		panic(fmt.Sprintf("data: client ID %d outside [0, %d)", id, p.opt.NumClients))
	}
}

// heldOut is ⌊HeldOutFraction·m⌋, exactly as Federated.heldOut.
func (p *OnDemand) heldOut(m int) int {
	return int(math.Floor(p.opt.HeldOutFraction*float64(m) + 1e-9))
}

// userRNG is user id's generator: PCG with state (Seed, mix64(id+salt)),
// injective in (Seed, id).
func (p *OnDemand) userRNG(id int) *rand.Rand {
	return rand.New(rand.NewPCG(p.opt.Seed, mix64(uint64(id)+userSalt)))
}

// plan draws steps 1–3 of user id (see OnDemand): its generator, advanced
// past them, and its class counts, which sum to its size.
func (p *OnDemand) plan(id int) (*rand.Rand, []int) {
	rng := p.userRNG(id)
	m := p.size(rng)
	classes := len(p.pools)
	counts := make([]int, classes)
	cum := p.cum
	if cum == nil {
		q := make([]float64, classes)
		sampleDirichlet(q, p.conc, rng)
		var acc float64
		for c, x := range q {
			acc += x
			q[c] = acc
		}
		cum = q
	}
	for range m {
		// Class c has mass cum_c − cum_{c−1}: take the first c with
		// cum_c > u, so zero-mass (and so empty-pool) classes are never
		// chosen; u ≥ cum_{C−1} happens only by rounding.
		u := rng.Float64() * cum[classes-1]
		c, _ := slices.BinarySearch(cum, u)
		for c < classes && cum[c] <= u {
			c++
		}
		if c == classes {
			c = p.last
		}
		counts[c]++
	}
	return rng, counts
}

// size draws a user's size m (step 1).
func (p *OnDemand) size(rng *rand.Rand) int {
	x := p.opt.SizeMu + p.opt.SizeSigma*rng.NormFloat64()
	if x >= p.logCap {
		return p.opt.MaxExamples
	}
	return max(1, int(math.Round(math.Exp(x))))
}

// Client returns user id's data, derived from (Seed, id) as described at
// OnDemand, in time O(m·log C + C) for a user of m examples and C classes
// (plus O(k²) per class for k ≤ 32 draws of it). The slices are freshly
// allocated; HeldOut holds the first ⌊HeldOutFraction·m⌋ examples of the
// user's shuffled list, Train the rest, as in Federated. It panics for id
// outside [0, N).
func (p *OnDemand) Client(id int) Client {
	p.checkID(id)
	rng, counts := p.plan(id)
	m := 0
	for _, k := range counts {
		m += k
	}
	all := make([]int32, 0, m)
	for c, k := range counts {
		pool := p.pools[c]
		for len(pool) > 0 && k >= len(pool) {
			all = append(all, pool...)
			k -= len(pool)
		}
		all = sampleDistinct(all, pool, k, rng)
	}
	shuffle32(all, rng)
	h := p.heldOut(m)
	return Client{ID: id, HeldOut: all[:h:h], Train: all[h:m:m]}
}

// sampleDistinct appends k distinct elements of pool, a uniformly random
// k-subset (k ≤ len(pool)), by Floyd's algorithm (Bentley & Floyd 1987,
// "Programming Pearls: A Sample of Brilliance", CACM 30(9)): for j =
// n−k, …, n−1 pick t uniform in [0, j] and take t unless already taken,
// else j. Membership is a scan of the k picks so far for k ≤ 32 and a map
// above, so the work is O(k) expected for large k, never O(len(pool)).
func sampleDistinct(dst, pool []int32, k int, rng *rand.Rand) []int32 {
	n := len(pool)
	off := len(dst)
	if k <= 32 {
		for j := n - k; j < n; j++ {
			t := int32(rng.IntN(j + 1))
			if slices.Contains(dst[off:], pool[t]) {
				t = int32(j)
			}
			dst = append(dst, pool[t])
		}
		return dst
	}
	taken := make(map[int32]struct{}, k)
	for j := n - k; j < n; j++ {
		t := int32(rng.IntN(j + 1))
		if _, ok := taken[t]; ok {
			t = int32(j)
		}
		taken[t] = struct{}{}
		dst = append(dst, pool[t])
	}
	return dst
}

// mix64 is SplitMix64's finaliser (Steele, Lea, Flood 2014), a bijection
// of uint64 that scrambles nearby inputs.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// OnDemandExpectedSize is OnDemand.ExpectedSize for a population with
// options opt, without building it (no base dataset needed): the expected
// number of examples per user.
func OnDemandExpectedSize(opt OnDemandOptions) float64 {
	return expectedSize(opt.SizeMu, opt.SizeSigma, opt.MaxExamples)
}

// expectedSize is E[clamp(round(exp(mu + sigma·Z)), 1, cap)]; see
// OnDemand.ExpectedSize.
func expectedSize(mu, sigma float64, cap int) float64 {
	if sigma == 0 {
		return float64(min(cap, max(1, int(math.Round(math.Exp(mu))))))
	}
	// tail(t) = P(X ≥ t) = Q((log t − mu)/sigma).
	tail := func(t float64) float64 { return 0.5 * math.Erfc((math.Log(t)-mu)/sigma/math.Sqrt2) }
	const exact = 4096
	e := 1.0
	for k := 2; k <= min(cap, exact); k++ {
		e += tail(float64(k) - 0.5)
	}
	if cap > exact {
		// Σ_{k=exact+1..cap} P(X ≥ k−½) ≈ ∫_exact^cap P(X ≥ t) dt
		// = E[clamp(X, a, b)] − a with a = exact, b = cap, and
		// E[clamp(X, a, b)] = a·Φ(z_a) + b·Q(z_b) +
		// exp(mu + sigma²/2)·(Φ(z_b − sigma) − Φ(z_a − sigma)).
		a, b := float64(exact), float64(cap)
		za, zb := (math.Log(a)-mu)/sigma, (math.Log(b)-mu)/sigma
		phi := func(z float64) float64 { return 0.5 * math.Erfc(-z/math.Sqrt2) }
		e += a*phi(za) + b*(1-phi(zb)) + math.Exp(mu+sigma*sigma/2)*(phi(zb-sigma)-phi(za-sigma)) - a
	}
	return e
}
