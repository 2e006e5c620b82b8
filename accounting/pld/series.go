package pld

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
)

// The ε of n rounds of one Poisson-subsampled Gaussian, for every n, at a
// cost per new n that does not grow with the rounds already accounted
// (method "pld/2"). See EpsilonPoissonGaussian.
//
// Caches, all bounded, all holding values that are deterministic
// functions of their keys: grids (one-step PLD, memo of log M(t), spectrum
// tables) by (q, z, h); floors by (q, z, δ, epoch).

const (
	// windowTail bounds, as a fraction of δ, the mass that the circular
	// window of an n-fold composition leaves out on each side: the part
	// above is added to the +∞ mass (a Chernoff bound of it), the part
	// below wraps onto larger losses. Either moves δ(ε) by at most
	// windowTail·δ, which moves ε by a relative 1e-6 or less, and it
	// narrows the window by about a fifth against tailMass (1e-16).
	windowTail = 1e-6
	// maxSeriesSteps is the largest count EpsilonPoissonGaussian takes:
	// it keeps n·(bins) and 2^e within int.
	maxSeriesSteps = 1 << 40
	// gridCacheSize bounds the grids kept (each holds its one-step PLD,
	// a memo of its moment generating function and up to
	// tablesPerSeries spectrum tables per direction).
	gridCacheSize = 16
	// tablesPerSeries bounds the spectrum tables kept per direction of a
	// grid: the window of a growing ledger changes length a few times
	// per doubling of its count, and two tables let a job and an audit
	// at other counts share a grid without rebuilding in turn.
	tablesPerSeries = 2
	// floorCacheSize bounds floorCache (a float per epoch).
	floorCacheSize = 4096
	// tableBudget bounds the bytes of spectrum tables (levels and
	// prefix products) that the grids keep; past it every kept table is
	// dropped, to be rebuilt, with the same bits, when next needed. A
	// ledger near 10,000 rounds needs about 3 MB, near 10⁶ about 50 MB.
	tableBudget = 128 << 20
	// tGridMin and tGridMax bound the exponents j of the Chernoff
	// parameters t_j = 2^(j/4) per bin: t from about 1e-12 to 1024.
	tGridMin, tGridMax = -160, 40
)

// EpsilonPoissonGaussian returns an upper bound on the smallest ε such
// that steps compositions of the Poisson-subsampled Gaussian mechanism
// (sampling rate q, noise multiplier z, sensitivity 1, add/remove
// adjacency) are (ε, delta)-DP. It is method "pld/2" of dpfl's reports;
// EpsilonPoissonGaussianV1 is "pld/1". The two differ by about 1e-4 of ε
// (either way), and both are upper bounds.
//
// It is built for a ledger that grows by one round at a time: the next
// count costs one product of spectra and one inverse FFT of the window
// of the n-fold loss (two of each when the add direction is not ruled
// out, below), whatever the rounds before it; everything else is cached
// and shared. Its value is a function of (q, z, steps, delta) alone,
// computed the same way whether the caches are warm or cold, so a batch
// recomputation gives the incremental figure bit for bit.
//
// # Epochs and grids
//
// Counts are grouped into epochs (2^(e−1), 2^e] (e = 0 holds 1). Epoch e
// uses the discretization interval h_e = startInterval at its last count
// 2^e (the first guess of EpsilonPoissonGaussianV1: a predicted
// connect-the-dots error of 0.1% of ε there, less below it), rounded to
// the nearest power of 2^(1/4), so that neighbouring epochs usually share
// one grid (gridInterval). The one-step PLD is discretized once per grid
// by PoissonGaussian, with the pessimistic connect-the-dots construction
// (Doroshenko et al. 2022, §4). If a window would exceed 2²² bins the
// count is computed on a grid of twice the interval, up to 8 times.
//
// # Composition by spectral powers
//
// On a fixed grid the n-fold composition is the n-fold convolution of
// the one-step pmf (Koskela, Jälkö, Honkela 2020, §3), and on a circular
// window of length N its DFT is S^n, S the DFT of the one-step pmf wrapped
// onto N points. A grid keeps, per window length, the table S^(2^k)
// (repeated squaring), and S^n is the product of the entries of the set
// bits of n, highest first, whose prefix products the table keeps for the
// last count, so the next count costs one product per frequency
// (spectra.sequence); then one inverse FFT (realFFT). This is the cached
// self-composition of identical events, and it replaces a round-by-round
// convolution of the composed pmf with the one-step pmf: that costs an
// FFT of the same length per round as well (a direct product of ~10⁴ by
// ~10³ bins costs far more), adds round-off and truncation once per
// round, and makes a batch recomputation of round T cost T of them.
//
// # Window and truncation (all pessimistic)
//
// The window of count n, [wlo, wlo + N) in offsets of the n-fold sum S,
// is set by Chernoff bounds P(S ≥ u) ≤ e^{−tu}·M(t)^n and P(S ≤ v) ≤
// e^{tv}·M(−t)^n at windowTail·δ, M the one-step moment generating
// function, minimized over t = 2^(j/4) (any t > 0 gives a valid bound),
// or is the whole support when that is at most twice as long; N is the
// next 2^k or 3·2^k. Mass below the window wraps onto larger losses,
// which only increases δ(ε). Mass above it wraps onto smaller losses, so
// its Chernoff bound is added to the +∞ mass. Round-off negatives are
// clamped to 0; then trim folds tails of at most 1e-16 (up to +∞, or up
// onto the lowest kept bin) and ε is solved exactly on the discrete curve
// (PLD.Epsilon). One step (n = 1) is the one-step PLD itself,
// untransformed. As in dp_accounting and EpsilonPoissonGaussianV1, FFT
// round-off (about 1e-16 relative) is not bounded rigorously.
//
// # The add direction
//
// The remove direction is computed first. Another direction is skipped
// when a bound shows its ε is at most the remove direction's ε_r: for
// T > 0, (1 − e^{ε−L})_+ ≤ c_T·e^{T(L−ε)} with c_T = T^T/(1+T)^{1+T}, so
// its δ(ε_r) ≤ (its +∞ mass) + c_T·e^{−Tε_r}·E[e^{TL}], and E[e^{TL}]
// of its exact n-fold discrete sum is the one-step value to the n-th
// power. If that is ≤ δ for some T = t/h of the grid, the direction's ε
// on the grid (hence its true ε) is ≤ ε_r, and the maximum over
// directions is ε_r. Otherwise its ε is computed too and the larger one
// returned. (For q = 0.02, z = 1, δ = 1e-5 it is skipped at every count
// checked: 2 to 1,200, and every 97th to 20,000.)
//
// # Monotone in steps
//
// On one grid the exact discrete ε is non-decreasing in n (the n-fold
// pair is a post-processing of the (n+1)-fold one), but a new epoch's
// finer grid can give a count a slightly smaller bound than the previous
// epoch gave its last count. The result is therefore the maximum of the
// epoch's value and every earlier epoch's value at its last count
// (epochFloor). Each of those is an upper bound on ε at a smaller count,
// hence at steps, so the maximum is one too, and it never decreases at
// an epoch boundary.
//
// # Cost
//
// On one core of an AMD EPYC (Zen 3), for q = 0.02, z = 1, δ = 1e-5: at
// n = 10,000 the window is 16,384 bins and the next count costs about
// 0.3–0.5 ms (BenchmarkEpsilonNextRound; BenchmarkAccountantRound in
// package accounting); a count whose window length is new builds a
// table, a few milliseconds a few dozen times per doubling of n. A cold
// call, which builds its grid and every earlier epoch's last count for
// the floor, costs 5 ms at n = 300 and 15–17 ms at n = 10,000
// (EpsilonPoissonGaussianV1: 11–13 ms and 23 ms). The kept tables are
// bounded by tableBudget.
//
// steps = 0 gives 0. It returns an error if q ∉ (0, 1], z is not finite
// and > 0, steps < 0 or above 2⁴⁰, or delta ∉ (0, 1), or if a window
// exceeds 2²² bins even on the coarsest grid tried; and ε = +Inf if delta
// is below the +∞ mass.
func EpsilonPoissonGaussian(q, z float64, steps int, delta float64) (float64, error) {
	if err := checkArgs(q, z, steps, delta); err != nil {
		return 0, err
	}
	if steps == 0 {
		return 0, nil
	}
	if steps > maxSeriesSteps {
		return 0, fmt.Errorf("pld: %d steps exceed the PLD accountant's limit of 2⁴⁰", steps)
	}
	e := epochOf(steps)
	raw, err := rawEpsilon(q, z, delta, e, steps)
	if err != nil || math.IsInf(raw, 1) {
		return raw, err
	}
	floor, err := epochFloor(epochKey{q: q, z: z, delta: delta, e: e})
	if err != nil {
		return 0, err
	}
	return math.Max(raw, floor), nil
}

// epochOf returns the epoch e of count n ≥ 1: the e with
// 2^(e−1) < n ≤ 2^e (0 for n = 1).
func epochOf(n int) int { return bits.Len(uint(n - 1)) }

// gridInterval returns the grid interval of epoch e: startInterval at
// the epoch's last count 2^e, rounded to the nearest power of 2^(1/4), so
// that neighbouring epochs, whose startInterval differ by a few percent,
// share one grid and everything built on it.
func gridInterval(q, z, delta float64, e int) float64 {
	h := startInterval(q, z, 1<<e, delta)
	return math.Exp2(math.Round(4*math.Log2(h)) / 4)
}

// rawEpsilon returns ε at count n of epoch e, without the floor: on the
// epoch's grid, or, while the window would exceed maxBins, on a grid of
// twice the interval (at most 8 times), so an extreme regime gets a
// coarser but finite bound as EpsilonPoissonGaussianV1 does.
func rawEpsilon(q, z, delta float64, e, n int) (float64, error) {
	h := gridInterval(q, z, delta, e)
	var err error
	for range 9 {
		var eps float64
		eps, err = getGrid(gridKey{q: q, z: z, h: h}).epsilon(n, delta)
		if !errors.Is(err, errWindow) {
			return eps, err
		}
		h *= 2
	}
	return 0, err
}

// errWindow is the error of a window longer than maxBins.
var errWindow = errors.New("pld: composition window exceeds the grid limit")

// epochKey names an epoch of one mechanism at one δ.
type epochKey struct {
	q, z, delta float64
	e           int
}

// gridKey names a one-step discretization: the mechanism and h.
type gridKey struct{ q, z, h float64 }

// grid is what every count computed on one discretization shares: per
// adjacency direction, the one-step PLD, a memo of its moment generating
// function and its spectrum tables. Only the memo and the tables change
// after newGrid, under each series' lock, and only by adding values
// that are deterministic functions of the grid.
type grid struct {
	h float64
	// dirs are the remove direction and, for q < 1, the add direction.
	dirs []*series
	// err is newGrid's failure, returned for every count.
	err error
}

// series is one adjacency direction of a grid.
type series struct {
	one dist
	// logp[i] = log one.pmf[i]; logMass is the log of the finite mass
	// (1 − one.inf); sd is the standard deviation of the bin offset
	// under the normalized finite part, for the first Chernoff guess.
	logp    []float64
	logMass float64
	sd      float64

	mu sync.Mutex
	// lm memoizes log M(±t_j), M(t) = Σ_i pmf[i]·e^{t·i}.
	lm map[lmKey]float64
	// tables are the latest spectrum tables, newest first.
	tables []*spectra
}

// lmKey names the Chernoff parameter ±t_j, t_j = 2^(j/4).
type lmKey struct {
	j   int
	neg bool
}

// newGrid discretizes one step of the mechanism at interval k.h.
func newGrid(k gridKey) *grid {
	g := &grid{h: k.h}
	p, err := PoissonGaussian(k.q, k.z, k.h)
	if err != nil {
		g.err = err
		return g
	}
	for i := range p.dirs {
		d := p.dirs[i]
		s := &series{one: d, logp: make([]float64, len(d.pmf)), lm: map[lmKey]float64{}}
		var m0, m1, m2 float64
		for j, v := range d.pmf {
			s.logp[j] = math.Log(v)
			x := float64(j)
			m0, m1, m2 = m0+v, m1+v*x, m2+v*x*x
		}
		s.logMass = math.Log(m0)
		if m0 > 0 {
			mean := m1 / m0
			s.sd = math.Sqrt(math.Max(m2/m0-mean*mean, 0))
		}
		g.dirs = append(g.dirs, s)
	}
	return g
}

// epsilon returns the grid's ε at count n and δ: the first (remove)
// direction's, or the maximum over the directions that dominated does
// not rule out.
func (g *grid) epsilon(n int, delta float64) (float64, error) {
	if g.err != nil {
		return 0, g.err
	}
	first, err := g.dirs[0].epsilon(g.h, n, delta)
	if err != nil || math.IsInf(first, 1) {
		return first, err
	}
	eps := first
	for _, s := range g.dirs[1:] {
		if s.dominated(g.h, n, delta, first) {
			continue
		}
		e, err := s.epsilon(g.h, n, delta)
		if err != nil {
			return 0, err
		}
		eps = math.Max(eps, e)
	}
	return eps, nil
}

// tAt returns t_j = 2^(j/4).
func tAt(j int) float64 { return math.Exp2(float64(j) / 4) }

// logM returns log M(±t_j) from the memo, computing it (logMGF over the
// full pmf) on a miss.
func (s *series) logM(j int, neg bool) float64 {
	k := lmKey{j, neg}
	s.mu.Lock()
	v, ok := s.lm[k]
	s.mu.Unlock()
	if ok {
		return v
	}
	t := tAt(j)
	if neg {
		t = -t
	}
	v = logMGF(s.logp, nil, t)
	s.mu.Lock()
	s.lm[k] = v
	s.mu.Unlock()
	return v
}

// descend returns the j in [tGridMin, tGridMax] at which a walk from j0
// in unit steps, always to the smaller neighbour, stops, with f there.
// f is unimodal (or convex) in j for every use here, so this is its
// minimum over the grid; where it is not, the result is still a valid
// parameter, since every t > 0 gives a valid bound. The walk depends on
// j0 and f only, never on what the memo holds.
func descend(j0 int, f func(int) float64) (int, float64) {
	j := min(max(j0, tGridMin), tGridMax)
	v := f(j)
	for _, step := range []int{-1, 1} {
		for j+step >= tGridMin && j+step <= tGridMax {
			w := f(j + step)
			if !(w < v) {
				break
			}
			j, v = j+step, w
		}
	}
	return j, v
}

// guess returns the grid exponent nearest the Chernoff optimum of a
// Gaussian sum of n steps of standard deviation sd for a tail of e^{lt}:
// t ≈ √(−2·lt)/(sd·√n).
func (s *series) guess(n int, lt float64) int {
	t := math.Sqrt(-2*lt) / (s.sd * math.Sqrt(float64(n)))
	if !(t > 0) || math.IsInf(t, 0) {
		return tGridMax
	}
	return int(math.Round(4 * math.Log2(t)))
}

// window returns the circular window of the n-fold sum S of one-step bin
// offsets: its first offset wlo, its length size (fftLen) and tb, a
// Chernoff bound on P(S > wlo + size − 1), the mass that wraps onto
// smaller losses (see EpsilonPoissonGaussian). lt is log τ, the tail
// aimed at on each side.
func (s *series) window(n int, lt float64) (wlo, size int, tb float64, err error) {
	top := n * (len(s.one.pmf) - 1) // the largest offset
	fn := float64(n)
	j0 := s.guess(n, lt)
	// P(S ≥ u) ≤ e^{n·log M(t) − t·u} = τ at u = (n·log M(t) − lt)/t.
	ju, u := descend(j0, func(j int) float64 { return (fn*s.logM(j, false) - lt) / tAt(j) })
	// P(S ≤ v) ≤ e^{n·log M(−t) + t·v} = τ at v = (lt − n·log M(−t))/t.
	_, negV := descend(j0, func(j int) float64 { return (fn*s.logM(j, true) - lt) / tAt(j) })
	wlo = int(math.Max(0, math.Min(math.Floor(-negV), float64(top)))) // NaN → 0
	whi := int(math.Max(math.Min(math.Ceil(u), float64(top)), float64(wlo)))
	if top+1 <= 2*(whi-wlo+1) {
		// The whole support costs at most twice the window: take it, so
		// that nothing wraps and no tail is bounded (small counts, where
		// the slack windowTail·δ could tip a δ(ε) that meets δ exactly).
		wlo, whi = 0, top
	}
	if whi-wlo+1 > maxBins {
		return 0, 0, 0, fmt.Errorf("%w: %d-fold composition needs %d bins (limit %d)", errWindow, n, whi-wlo+1, maxBins)
	}
	size = fftLen(whi - wlo + 1)
	if whi = wlo + size - 1; whi < top {
		cut := float64(whi + 1)
		_, lb := descend(ju, func(j int) float64 { return fn*s.logM(j, false) - tAt(j)*cut })
		tb = math.Min(1, math.Exp(lb))
	}
	return wlo, size, tb, nil
}

// epsilon returns the direction's ε at count n on the grid of interval h
// (see EpsilonPoissonGaussian: window, spectral power, inverse FFT, trim).
func (s *series) epsilon(h float64, n int, delta float64) (float64, error) {
	fn := float64(n)
	lt := math.Log(windowTail * delta)
	if !(fn*s.logMass > math.Max(lt, math.Log(tailMass))) {
		// The finite part is below the window tail (so the +∞ mass is
		// above 1 − δ): ε is infinite.
		return math.Inf(1), nil
	}
	if n == 1 {
		// One step is the discretized PLD itself, with no transform and
		// so no round-off (as SelfCompose(1)).
		return s.one.epsilon(h, delta), nil
	}
	wlo, size, tb, err := s.window(n, lt)
	if err != nil {
		return 0, err
	}
	t := s.spectra(size)
	w := t.work()
	defer t.done(w)
	buf := t.sequence(w, n)
	// Offset wlo + j sits at circular index (wlo + j) mod size.
	pmf := w.pmf
	inv := 1 / float64(size)
	r := wlo % size
	// Round-off negatives are clamped to 0 (a NaN stays NaN).
	for j, v := range buf[r:] {
		if v *= inv; v < 0 {
			v = 0
		}
		pmf[j] = v
	}
	for j, v := range buf[:r] {
		if v *= inv; v < 0 {
			v = 0
		}
		pmf[size-r+j] = v
	}
	inf := -math.Expm1(fn * math.Log1p(-s.one.inf)) // 1 − (1−inf)^n
	d := trim(dist{lo: n*s.one.lo + wlo, pmf: pmf, inf: math.Min(1, inf+tb)}, tailMass)
	return d.epsilon(h, delta), nil
}

// dominated reports whether a bound shows that this direction's ε at
// count n is at most eps (see EpsilonPoissonGaussian, "The add
// direction"): δ(eps) ≤ inf_n + c_T·e^{t·n·lo − T·eps}·M(t)^n ≤ δ for
// some t = T·h of the grid.
func (s *series) dominated(h float64, n int, delta, eps float64) bool {
	fn := float64(n)
	budget := delta + math.Expm1(fn*math.Log1p(-s.one.inf)) // δ − (1 − (1−inf)^n)
	if !(budget > 0) || !(fn*s.logMass > math.Log(tailMass)) {
		return false
	}
	lb := math.Log(budget)
	lo := float64(s.one.lo)
	_, v := descend(s.guess(n, lb), func(j int) float64 {
		t := tAt(j)
		T := t / h
		logc := T*math.Log(T) - (1+T)*math.Log1p(T)
		return logc + fn*(s.logM(j, false)+t*lo) - T*eps
	})
	return v <= lb
}

// spectra returns the direction's spectrum table for window length size,
// building it if it is not among the latest tables.
func (s *series) spectra(size int) *spectra {
	s.mu.Lock()
	for _, t := range s.tables {
		if t.f.n == size {
			s.mu.Unlock()
			return t
		}
	}
	t := &spectra{f: newRealFFT(size)}
	buf := make([]float64, size)
	for i, v := range s.one.pmf {
		buf[i%size] += v
	}
	t.levels = [][]complex128{t.f.forward(buf)}
	t.grow(1)
	for _, old := range s.tables[min(len(s.tables), tablesPerSeries-1):] {
		old.drop()
	}
	s.tables = append([]*spectra{t}, s.tables[:min(len(s.tables), tablesPerSeries-1)]...)
	s.mu.Unlock()
	purgeTables()
	return t
}

// spectra is the table S^(2^k), k = 0, 1, …, of the DFT S of a one-step
// pmf wrapped onto f.n points, extended by squaring as counts need.
type spectra struct {
	f  *realFFT
	mu sync.Mutex
	// levels[k] = S^(2^k); each is immutable once appended.
	levels [][]complex128
	// arrays counts the spectra of f.m+1 values held (levels and stack),
	// in tableBytes unless dropped, under mu.
	arrays  int64
	dropped bool
	// pool holds workspaces of this length.
	pool sync.Pool
	// stack[i] is the prefix product P_{i+1} of the set bits stackBits
	// of the last count computed (see sequence), under stackMu.
	stackMu   sync.Mutex
	stack     [][]complex128
	stackBits []int
}

// level returns S^(2^k), squaring up to it if needed: level k is always
// level k−1 times itself, whenever and by whom it is computed.
func (t *spectra) level(k int) []complex128 {
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(t.levels) <= k {
		prev := t.levels[len(t.levels)-1]
		l := make([]complex128, len(prev))
		mulSpectrum(l, prev, prev)
		t.levels = append(t.levels, l)
		t.grow(1)
	}
	return t.levels[k]
}

// tableBytes is the memory of the spectrum tables that the grids keep.
var tableBytes atomic.Int64

// grow records k more spectra held by t; t.mu must be held.
func (t *spectra) grow(k int64) {
	t.arrays += k
	if !t.dropped {
		tableBytes.Add(k * 16 * int64(t.f.m+1))
	}
}

// drop takes t out of tableBytes, when its series lets it go.
func (t *spectra) drop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.dropped {
		t.dropped = true
		tableBytes.Add(-t.arrays * 16 * int64(t.f.m+1))
	}
}

// purgeTables drops every kept table when tableBytes exceeds tableBudget.
// Callers hold no lock: it takes the grid cache's, then each series'.
func purgeTables() {
	if tableBytes.Load() > tableBudget {
		dropAllTables()
	}
}

// dropAllTables lets go of every spectrum table of every cached grid.
func dropAllTables() {
	grids.Lock()
	defer grids.Unlock()
	for _, en := range grids.m {
		en.g.dropTables()
	}
}

// dropTables lets go of every spectrum table of g.
func (g *grid) dropTables() {
	for _, s := range g.dirs {
		s.mu.Lock()
		tables := s.tables
		s.tables = nil
		s.mu.Unlock()
		for _, t := range tables {
			t.drop()
		}
	}
}

// workspace is the scratch of one count: the product of spectra, its
// inverse transform and the rotated pmf.
type workspace struct {
	prod     []complex128
	out, pmf []float64
}

// work returns a workspace for the table's length, from its pool.
func (t *spectra) work() *workspace {
	if w, ok := t.pool.Get().(*workspace); ok {
		return w
	}
	return &workspace{prod: make([]complex128, t.f.m+1), out: make([]float64, t.f.n), pmf: make([]float64, t.f.n)}
}

// done returns w to the pool; nothing may hold its slices after.
func (t *spectra) done(w *workspace) { t.pool.Put(w) }

// sequence returns f.n times the circular n-fold convolution of the
// table's pmf, in w.out: the inverse transform of S^n.
//
// S^n is the product of level(k) over the set bits k of n, taken highest
// first: P_1 = level(b_1), P_i = P_{i−1}·level(b_i) for b_1 > b_2 > ….
// The table keeps the prefixes P_i of the last count it computed, and a
// new count reuses those of its leading set bits in common: from n to
// n+1 only the lowest prefix changes, one product per frequency. Every
// prefix is the same product of the same factors whether reused or
// recomputed, so the result does not depend on the counts computed
// before it.
func (t *spectra) sequence(w *workspace, n int) []float64 {
	var set []int // set bits of n, highest first
	for k := bits.Len(uint(n)) - 1; k >= 0; k-- {
		if n>>k&1 == 1 {
			set = append(set, k)
		}
	}
	t.stackMu.Lock()
	common := 0
	for common < len(set) && common < len(t.stackBits) && set[common] == t.stackBits[common] {
		common++
	}
	for i := common; i < len(set); i++ {
		if i == len(t.stack) {
			t.stack = append(t.stack, make([]complex128, t.f.m+1))
			t.mu.Lock()
			t.grow(1)
			t.mu.Unlock()
		}
		l := t.level(set[i])
		if i == 0 {
			copy(t.stack[0], l)
		} else {
			mulSpectrum(t.stack[i], t.stack[i-1], l)
		}
	}
	t.stackBits = append(t.stackBits[:0], set...)
	copy(w.prod, t.stack[len(set)-1])
	t.stackMu.Unlock()
	purgeTables()
	t.f.inverse(w.out, w.prod)
	return w.out
}

// mulSpectrum sets dst[i] = a[i]·b[i]. Every product of spectra goes
// through it, so a value computed in one call and the same value
// computed in another hold the same bits.
func mulSpectrum(dst, a, b []complex128) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = a[i] * b[i]
	}
}

// grids caches built grids, at most gridCacheSize, evicting the least
// recently used. A grid is a deterministic function of its key, so an
// evicted one is rebuilt with the same bits. Safe for concurrent use.
var grids struct {
	sync.Mutex
	m     map[gridKey]*gridEntry
	clock uint64
}

type gridEntry struct {
	g    *grid
	used uint64
}

// getGrid returns grid k from the cache, building it if needed (outside
// the lock: two callers may both build it, and keep the same one).
func getGrid(k gridKey) *grid {
	grids.Lock()
	if en, ok := grids.m[k]; ok {
		grids.clock++
		en.used = grids.clock
		grids.Unlock()
		return en.g
	}
	grids.Unlock()
	g := newGrid(k)
	grids.Lock()
	defer grids.Unlock()
	grids.clock++
	if en, ok := grids.m[k]; ok {
		en.used = grids.clock
		return en.g
	}
	if grids.m == nil {
		grids.m = map[gridKey]*gridEntry{}
	}
	if len(grids.m) >= gridCacheSize {
		var old gridKey
		oldest := uint64(math.MaxUint64)
		for key, en := range grids.m {
			if en.used < oldest {
				old, oldest = key, en.used
			}
		}
		grids.m[old].g.dropTables()
		delete(grids.m, old)
	}
	grids.m[k] = &gridEntry{g: g, used: grids.clock}
	return g
}

// floorResult is epochFloor's result for one epoch.
type floorResult struct {
	v   float64
	err error
}

// floorCache maps epoch keys to epochFloor, for at most floorCacheSize
// keys (it starts over when full): a ledger's floor changes once per
// doubling of its count, and recomputing it visits every earlier epoch.
var floorCache struct {
	sync.Mutex
	m map[epochKey]floorResult
}

// epochFloor returns the largest raw ε of the epochs before k at their
// last counts, max over j < e of rawEpsilon at 2^j (0 for e = 0): the
// value below which EpsilonPoissonGaussian never reports in epoch e.
func epochFloor(k epochKey) (float64, error) {
	if k.e == 0 {
		return 0, nil
	}
	floorCache.Lock()
	r, ok := floorCache.m[k]
	floorCache.Unlock()
	if ok {
		return r.v, r.err
	}
	prev := k
	prev.e--
	r.v, r.err = epochFloor(prev)
	if r.err == nil {
		var top float64
		top, r.err = rawEpsilon(k.q, k.z, k.delta, prev.e, 1<<prev.e)
		r.v = math.Max(r.v, top)
	}
	floorCache.Lock()
	if floorCache.m == nil || len(floorCache.m) >= floorCacheSize {
		floorCache.m = map[epochKey]floorResult{}
	}
	floorCache.m[k] = r
	floorCache.Unlock()
	return r.v, r.err
}
