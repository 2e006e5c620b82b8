package accounting

import (
	"fmt"
	"math"
)

// DefaultOrders is the RDP order grid used when none is given, the same
// shape as dp_accounting's RdpAccountant default: 1 + x/10 for x = 1..100
// (1.1 … 11), then the integers 12 … 63, then 128, 256, 512, 1024. Dense
// small orders matter for large ε, large orders for small ε.
func DefaultOrders() []float64 {
	var o []float64
	for x := 1; x <= 100; x++ {
		o = append(o, 1+float64(x)/10)
	}
	for a := 12; a <= 63; a++ {
		o = append(o, float64(a))
	}
	return append(o, 128, 256, 512, 1024)
}

// RDPAccountant accumulates the Rényi DP of composed events at a fixed set
// of orders α > 1 (Mironov 2017, Prop. 1: RDP adds under composition).
// Not safe for concurrent use.
type RDPAccountant struct {
	orders []float64
	rdp    []float64
	// cached says orders are DefaultOrders, so leaf curves may come from
	// (and go to) leafCache.
	cached bool
}

// NewRDPAccountant returns an empty accountant over orders (nil:
// DefaultOrders). Every order must be > 1 (panics otherwise: orders are
// chosen by code, not users).
func NewRDPAccountant(orders []float64) *RDPAccountant {
	cached := orders == nil
	if cached {
		orders = defaultOrders
	}
	for _, a := range orders {
		if !(a > 1) || math.IsInf(a, 0) {
			panic(fmt.Sprintf("accounting: RDP order %v not in (1, ∞)", a))
		}
	}
	return &RDPAccountant{orders: append([]float64(nil), orders...), rdp: make([]float64, len(orders)), cached: cached}
}

// defaultOrders is DefaultOrders, computed once; never modified.
var defaultOrders = DefaultOrders()

// RDP returns copies of the orders and the accumulated RDP ε(α) at each.
func (a *RDPAccountant) RDP() (orders, rdp []float64) {
	return append([]float64(nil), a.orders...), append([]float64(nil), a.rdp...)
}

// Compose adds count repetitions of e. An invalid event, or one this
// accountant cannot bound, is an error and leaves the accountant unchanged.
func (a *RDPAccountant) Compose(e Event, count int) error {
	if count < 0 {
		return fmt.Errorf("accounting: count must be ≥ 0, got %d", count)
	}
	if err := Validate(e); err != nil {
		return err
	}
	add := make([]float64, len(a.orders))
	if err := a.eventRDP(add, e, float64(count)); err != nil {
		return err
	}
	for i := range a.rdp {
		a.rdp[i] += add[i]
	}
	return nil
}

// eventRDP adds scale × RDP(e) at every order into dst. The RDP of each
// leaf mechanism (Gaussian, Poisson- or WOR-sampled Gaussian) comes from
// leafRDP as a curve over the orders, then is scaled and added, so a
// cached curve and a fresh one give the same bits.
func (a *RDPAccountant) eventRDP(dst []float64, e Event, scale float64) error {
	if scale == 0 {
		return nil
	}
	switch e := e.(type) {
	case NoOp:
	case NonPrivate:
		for i := range dst {
			dst[i] = math.Inf(1)
		}
	case ZCDP:
		// (ξ, ρ)-zCDP is RDP ξ + ρ·α at every order α > 1 (Bun &
		// Steinke 2016, Def. 1.1), the reading of dp_accounting's RDP
		// accountant; scaled as the leaf curves are.
		for i, alpha := range a.orders {
			dst[i] += scale * (e.Xi + e.Rho*alpha)
		}
	case Gaussian, PoissonSampled, SampledWithoutReplacement:
		curve, err := a.leafRDP(e)
		if err != nil {
			return err
		}
		for i := range dst {
			dst[i] += scale * curve[i]
		}
	case SelfComposed:
		return a.eventRDP(dst, e.Event, scale*float64(e.Count))
	case Composed:
		for _, sub := range e.Events {
			if err := a.eventRDP(dst, sub, scale); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("accounting: unknown event %T", e)
	}
	return nil
}

// leafKind names a leaf mechanism in a leafKey.
type leafKind uint8

const (
	leafGaussian leafKind = iota + 1
	leafPoisson
	leafWOR
)

// leafKey identifies the RDP curve of a leaf mechanism: its kind, the
// sampling rate (q, or sample/source for WOR; 1 for the plain Gaussian)
// and the noise multiplier z. The curve is a function of exactly these
// floats and the orders.
type leafKey struct {
	kind leafKind
	p, z float64
}

// leafRDP returns the RDP curve, at a's orders, of the leaf mechanism e
// (Gaussian, or a Poisson- or WOR-sampled Gaussian), an error for a
// sampled event over anything but a Gaussian. Over DefaultOrders the
// curve is shared through leafCache and must not be modified.
func (a *RDPAccountant) leafRDP(e Event) ([]float64, error) {
	var k leafKey
	switch e := e.(type) {
	case Gaussian:
		k = leafKey{leafGaussian, 1, e.NoiseMultiplier}
	case PoissonSampled:
		g, ok := e.Event.(Gaussian)
		if !ok && containsZCDP(e.Event) {
			return nil, errSampledZCDP("PoissonSampledDpEvent")
		}
		if !ok {
			return nil, fmt.Errorf("accounting: RDP of PoissonSampledDpEvent over %s is not supported", e.Event.dpEventType())
		}
		k = leafKey{leafPoisson, e.SamplingProbability, g.NoiseMultiplier}
	case SampledWithoutReplacement:
		g, ok := e.Event.(Gaussian)
		if !ok && containsZCDP(e.Event) {
			return nil, errSampledZCDP("SampledWithoutReplacementDpEvent")
		}
		if !ok {
			return nil, fmt.Errorf("accounting: RDP of SampledWithoutReplacementDpEvent over %s is not supported", e.Event.dpEventType())
		}
		k = leafKey{leafWOR, float64(e.SampleSize) / float64(e.SourceDatasetSize), g.NoiseMultiplier}
	default:
		return nil, fmt.Errorf("accounting: %T is not a leaf mechanism", e)
	}
	if a.cached {
		if c, ok := leafCache.get(k); ok {
			return c, nil
		}
	}
	curve := make([]float64, len(a.orders))
	for i, alpha := range a.orders {
		switch k.kind {
		case leafGaussian:
			curve[i] = gaussianRDP(alpha, k.z)
		case leafPoisson:
			curve[i] = poissonGaussianRDP(k.p, k.z, alpha)
		case leafWOR:
			curve[i] = worGaussianRDP(k.p, k.z, alpha)
		}
	}
	if a.cached {
		leafCache.put(k, curve)
	}
	return curve, nil
}

// containsZCDP reports whether e is or holds a ZCDP event.
func containsZCDP(e Event) bool {
	switch e := e.(type) {
	case ZCDP:
		return true
	case PoissonSampled:
		return containsZCDP(e.Event)
	case SampledWithoutReplacement:
		return containsZCDP(e.Event)
	case SelfComposed:
		return containsZCDP(e.Event)
	case Composed:
		for _, s := range e.Events {
			if containsZCDP(s) {
				return true
			}
		}
	}
	return false
}

// errSampledZCDP is the refusal of a sampled zCDP event (see ZCDP): no
// amplification-by-sampling bound for zCDP is implemented, and none may
// be assumed.
func errSampledZCDP(sampling string) error {
	return fmt.Errorf("accounting: %s over a ZCDpEvent is refused: zCDP alone does not bound a subsampled mechanism and no amplification bound for it is implemented; account the zCDP event unsampled (a fixed cohort, no amplification claimed)", sampling)
}

// leafCache holds the RDP curves over DefaultOrders of the leaf mechanisms
// seen so far, at most leafCacheSize of them (it starts over when full):
// a poissonGaussianRDP curve costs about 2 ms, and a server accounts the
// same few mechanisms every round. Safe for concurrent use.
var leafCache = memo[leafKey, []float64]{max: leafCacheSize}

// leafCacheSize bounds leafCache: a server runs a handful of distinct
// round events; the bound only stops hostile input (an audited bundle
// of a million distinct events) from growing it without limit.
const leafCacheSize = 1024

// Epsilon is the smallest ε over the orders such that the composition is
// (ε, δ)-DP, by the conversion of Canonne, Kamath, Steinke 2020 (Prop. 12)
// / Balle et al. 2020 (Thm. 21):
//
//	ε = RDP(α) + log((α−1)/α) − (log δ + log α)/(α − 1),
//
// and ε = 0 where δ alone covers the KL bound δ ≥ √(1 − e^{−RDP(α)}). It
// returns the minimising order. δ must be in (0, 1).
func (a *RDPAccountant) Epsilon(delta float64) (eps, order float64, err error) {
	if !(delta > 0 && delta < 1) {
		return 0, 0, fmt.Errorf("accounting: δ must be in (0, 1), got %v", delta)
	}
	eps, order = math.Inf(1), 0 // order 0, not NaN: reports are JSON
	for i, alpha := range a.orders {
		r := a.rdp[i]
		var e float64
		switch {
		case math.IsInf(r, 1) || math.IsNaN(r):
			continue
		case delta*delta+math.Expm1(-r) > 0:
			e = 0
		default:
			e = r + math.Log1p(-1/alpha) - (math.Log(delta)+math.Log(alpha))/(alpha-1)
		}
		if e < eps {
			eps, order = e, alpha
		}
	}
	return math.Max(0, eps), order, nil
}

// Delta is the smallest δ over the orders such that the composition is
// (ε, δ)-DP, inverting the same conversion: log δ = (α−1)(RDP(α) − ε +
// log(1 − 1/α)) − log α, capped by the KL bound δ ≤ √(1 − e^{−RDP(α)}).
// ε must be ≥ 0.
func (a *RDPAccountant) Delta(eps float64) (delta, order float64, err error) {
	if !(eps >= 0) || math.IsInf(eps, 0) {
		return 0, 0, fmt.Errorf("accounting: ε must be a finite number ≥ 0, got %v", eps)
	}
	logDelta, order := math.Inf(1), 0.0
	for i, alpha := range a.orders {
		r := a.rdp[i]
		if math.IsInf(r, 1) || math.IsNaN(r) {
			continue
		}
		ld := math.Inf(-1)
		if r > 0 {
			ld = 0.5 * math.Log(-math.Expm1(-r))
		}
		ld = math.Min(ld, (alpha-1)*(r-eps+math.Log1p(-1/alpha))-math.Log(alpha))
		if ld < logDelta {
			logDelta, order = ld, alpha
		}
	}
	return math.Min(1, math.Exp(logDelta)), order, nil
}

// EpsilonPoissonGaussian is ε(δ) after steps rounds of the Poisson-sampled
// Gaussian mechanism with sampling rate q and noise multiplier z, over
// DefaultOrders.
func EpsilonPoissonGaussian(q, z float64, steps int, delta float64) (float64, error) {
	a := NewRDPAccountant(nil)
	if err := a.Compose(PoissonSampled{SamplingProbability: q, Event: Gaussian{NoiseMultiplier: z}}, steps); err != nil {
		return 0, err
	}
	eps, _, err := a.Epsilon(delta)
	return eps, err
}
