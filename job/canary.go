package job

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"runtime"
	"sync"

	"github.com/dpfl/dpfl/accounting/empirical"
	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/dp"
	"github.com/dpfl/dpfl/fl"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/fl/model"
	"github.com/dpfl/dpfl/internal/parallel"
	"github.com/dpfl/dpfl/simd"
	"github.com/dpfl/dpfl/storage"
)

// MaxCanaries bounds audit.canaries and audit.held_out. The estimate
// draws (k + k')·d Gaussian coordinates once, when the job's privacy
// report is first read after the job ends.
const MaxCanaries = 10_000

// heldOut is k', with its default k.
func auditHeldOut(a types.AuditSpec) int {
	if a.HeldOut == 0 {
		return a.Canaries
	}
	return a.HeldOut
}

// canaryKeySetting is the settings key of a job's canary secret: 32
// bytes from crypto/rand, stored when the job first starts and never
// released. Every canary direction derives from it.
func canaryKeySetting(jobID string) string { return "canary_key/" + jobID }

// canaryKey is a job's canary secret.
type canaryKey [32]byte

// canaryKey returns job id's canary secret, creating it (crypto/rand) if
// create is set and there is none yet. ok is false when there is none.
func (m *Manager) canaryKey(id string, create bool) (k canaryKey, ok bool, err error) {
	var v []byte
	if create {
		var fresh canaryKey
		if _, err := rand.Read(fresh[:]); err != nil {
			return k, false, fmt.Errorf("canary key: %w", err)
		}
		v, err = m.db.SetSettingIfAbsent(canaryKeySetting(id), fresh[:])
		ok = err == nil
	} else {
		v, ok, err = m.db.Setting(canaryKeySetting(id))
	}
	if err != nil || !ok {
		return k, false, err
	}
	if len(v) != len(k) {
		return k, false, fmt.Errorf("canary key of job %s has %d bytes, want %d: %w", id, len(v), len(k), storage.ErrCorrupt)
	}
	copy(k[:], v)
	return k, true, nil
}

// stream is a ChaCha8 generator keyed by SHA-256(purpose ‖ key ‖ j):
// independent streams for every canary direction and for the bootstrap,
// reproducible from the key alone.
func (k canaryKey) stream(purpose string, j uint64) *mrand.Rand {
	h := sha256.New()
	h.Write([]byte(purpose))
	h.Write(k[:])
	h.Write(binary.LittleEndian.AppendUint64(nil, j))
	var seed [32]byte
	copy(seed[:], h.Sum(nil))
	return mrand.New(mrand.NewChaCha8(seed))
}

// direction writes canary j's direction c_j, uniform on the unit sphere
// of R^len(dst) (a standard Gaussian vector divided by its norm; Muller
// 1959).
func (k canaryKey) direction(j int, dst []float32) {
	r := k.stream("dpfl canary direction", uint64(j))
	var ss float64
	for i := range dst {
		x := r.NormFloat64()
		dst[i] = float32(x)
		ss += x * x
	}
	simd.Scale(dst, float32(1/math.Sqrt(ss)))
}

// canaryRate is the probability that a canary takes part in a round,
// "sampled exactly like users" as far as one user's view goes: the
// analysed Poisson rate q·(1+o) under Poisson sampling, and the marginal
// inclusion probability K/N of a fixed cohort of K (over-selection
// included) from N users. A canary is not drawn into the fixed cohort
// itself, which would change the users' K/N that the ledger accounts:
// its participations over the rounds are Binomial(T, K/N), as are a
// user's. Canaries are never unavailable, dropped, late or stragglers:
// they are the worst-case user, who always reports.
func canaryRate(s types.Spec, n int) float64 {
	sampler, _ := specSampler(s, n)
	switch sm := sampler.(type) {
	case fl.Poisson:
		return sm.Q
	case fl.Fixed:
		return float64(sm.K) / float64(n)
	default:
		panic(fmt.Sprintf("job: no canary rate for sampler %T", sm))
	}
}

// canaries is job id's canary clients over n users, drawn with a
// participation stream of their own (dp.NewSecureRand, never the users'
// sampling stream), their directions from the job's canary secret.
func (m *Manager) canaries(id string, spec types.Spec, n int) (*fl.Canaries, error) {
	key, _, err := m.canaryKey(id, true)
	if err != nil {
		return nil, err
	}
	r, err := dp.NewSecureRand()
	if err != nil {
		return nil, err
	}
	return &fl.Canaries{K: spec.Audit.Canaries, Rate: canaryRate(spec, n), ClipNorm: spec.DP.ClipNorm, Direction: key.direction, Rand: r}, nil
}

// noiseFactor is the test-only noiseScale, 1 when unset.
func (m *Manager) noiseFactor() float64 {
	if m.noiseScale > 0 {
		return m.noiseScale
	}
	return 1
}

// initParams writes the job's initial model θ_0: mdl's initialisation
// from the simulation seed (the same for every start of the job, so the
// audit can recompute it).
func initParams(mdl model.Model, params []float32, seed uint64) {
	mdl.Init(params, mrand.New(mrand.NewPCG(seed, 0x1a17)))
}

// auditConfidence is the coverage of the audit's interval, and so of its
// alarm: where the canaries' test is as tight as the accountant (large z,
// many rounds), a correct job raises the alarm with probability at most
// (1 − auditConfidence)/4 = 0.25%, the lower tail of the shift's
// interval. auditResamples is the bootstrap's size, enough for that
// tail (its 10th smallest resample).
const (
	auditConfidence = 0.99
	auditResamples  = 4000
)

// canaryMethod describes the audit's statistic, fit and interval.
const canaryMethod = "one-shot canaries, final model (Andrew et al. 2024): cosines of θ_T − θ_0 with the inserted and held-out directions, " +
	"a Gaussian fitted to each, ε of the two Gaussians at δ; interval: range of ε over the Bonferroni box of percentile bootstrap intervals " +
	"(4000 resamples) for the mean shift and the standard deviation ratio"

// auditCache holds the computed audits of ended jobs: a job that has
// ended never changes, and computing one draws (k + k')·d Gaussians.
type auditCache struct {
	mu      sync.Mutex
	entries map[string]*auditEntry
}

type auditEntry struct {
	mu   sync.Mutex
	done bool
	res  types.EmpiricalEpsilon
}

// entry returns the cache entry of job id at round.
func (c *auditCache) entry(id string, round int) *auditEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]*auditEntry{}
	}
	k := fmt.Sprintf("%s@%d", id, round)
	e := c.entries[k]
	if e == nil {
		e = &auditEntry{}
		c.entries[k] = e
	}
	return e
}

// empiricalEpsilon is the canary audit of job s for its privacy report
// (nil without canaries), with the alarm against the analytical eps.
// The estimate is computed once the job has ended, at the first report,
// and cached; a failure to compute it is a note, not an error, unless
// the store is corrupt.
func (m *Manager) empiricalEpsilon(s types.Status, eps *float64) (*types.EmpiricalEpsilon, error) {
	a := s.Spec.Audit
	if a.Canaries == 0 {
		return nil, nil
	}
	base := types.EmpiricalEpsilon{Canaries: a.Canaries, HeldOut: auditHeldOut(a), Method: canaryMethod}
	switch {
	case !s.State.Terminal():
		base.Note = "computed when the job ends, from its final model"
		return &base, nil
	case s.Round == 0:
		base.Note = "the job ended before its first round: no model to audit"
		return &base, nil
	}
	e := m.audits.entry(s.ID, s.Round)
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.done {
		res, err := m.computeAudit(s, base)
		if errors.Is(err, storage.ErrCorrupt) {
			return nil, err
		}
		if err != nil {
			base.Note = "the estimate could not be computed: " + err.Error()
			return &base, nil
		}
		e.res, e.done = res, true
	}
	out := e.res
	if eps != nil && out.Lower != nil && *out.Lower > *eps {
		out.Alarm = true
		out.Note = fmt.Sprintf("ALARM: the lower end of the empirical ε's interval (%.4g) exceeds the analytical ε (%.4g): the canaries reveal more than the ledger accounts for, which points to an implementation bug (noise, clipping or sampling not as recorded)", *out.Lower, *eps)
	}
	return &out, nil
}

// computeAudit computes the canary audit of ended job s from its final
// checkpoint, its initial model and its canary secret.
func (m *Manager) computeAudit(s types.Status, out types.EmpiricalEpsilon) (types.EmpiricalEpsilon, error) {
	key, ok, err := m.canaryKey(s.ID, false)
	if err != nil {
		return out, err
	}
	if !ok {
		return out, errors.New("the job has no canary secret (it never started training)")
	}
	ck, ok, err := m.db.Checkpoint(s.ID)
	if err != nil {
		return out, err
	}
	if !ok {
		return out, fmt.Errorf("job %s has no checkpoint", s.ID)
	}
	mdl, err := m.jobModel(s.Spec)
	if err != nil {
		return out, err
	}
	d := mdl.NumParams()
	if len(ck.Params) != d {
		return out, fmt.Errorf("the checkpoint has %d parameters, model %s has %d", len(ck.Params), s.Spec.Model, d)
	}
	delta := make([]float32, d)
	initParams(mdl, delta, s.Spec.Seed)
	for i, p := range ck.Params {
		delta[i] = p - delta[i]
	}
	norm := simd.Norm2(delta)
	if !(norm > 0) || math.IsInf(norm, 0) {
		return out, fmt.Errorf("the model delta θ_T − θ_0 has norm %v", norm)
	}
	k, kh := s.Spec.Audit.Canaries, auditHeldOut(s.Spec.Audit)
	cos, err := canaryCosines(key, delta, norm, k+kh, m.workers)
	if err != nil {
		return out, err
	}
	d64 := AccountingDelta(s.Spec.DP)
	est, err := empirical.EstimateEpsilon(cos[:k], cos[k:], empirical.Options{
		Delta: d64, Confidence: auditConfidence, Resamples: auditResamples, Rand: key.stream("dpfl canary bootstrap", 0)})
	if err != nil {
		return out, err
	}
	// JSON has no +Inf: ε beyond what Epsilon resolves is shown as its
	// cap, with a note.
	capped := func(x float64) *float64 {
		if x > empirical.MaxEpsilon {
			x = empirical.MaxEpsilon
			out.Note = fmt.Sprintf("the canaries are separated beyond what the estimator resolves: values shown as %g mean ε ≥ %g", x, x)
		}
		return &x
	}
	out.Estimate, out.Lower, out.Upper = capped(est.Epsilon), capped(est.Lower), capped(est.Upper)
	out.Confidence, out.Delta, out.Round, out.Dimension = est.Confidence, d64, ck.Round, d
	out.Fit = &types.CanaryFit{
		CanaryMean: est.Canary.Mean, CanaryStd: est.Canary.Std, NullMean: est.Null.Mean, NullStd: est.Null.Std,
		NullStdSqrtD: est.Null.Std * math.Sqrt(float64(d)),
		Shift:        [3]float64{est.Shift, est.ShiftLower, est.ShiftUpper},
		Ratio:        [3]float64{est.Ratio, est.RatioLower, est.RatioUpper},
		Resamples:    est.Resamples,
	}
	return out, nil
}

// canaryCosines returns ⟨Δ, c_j⟩/‖Δ‖ for j = 0..n−1 on workers
// goroutines (≤ 0: GOMAXPROCS). Each direction is generated as in
// direction and consumed as it is drawn, in float64, without storing it.
func canaryCosines(key canaryKey, delta []float32, norm float64, n, workers int) ([]float64, error) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	out := make([]float64, n)
	err := parallel.For(context.Background(), workers, n, func(_, j int) error {
		r := key.stream("dpfl canary direction", uint64(j))
		var dot, ss float64
		for _, v := range delta {
			x := r.NormFloat64()
			dot += float64(v) * x
			ss += x * x
		}
		out[j] = dot / (math.Sqrt(ss) * norm)
		return nil
	})
	return out, err
}

// jobModel is the job's model architecture over its dataset's
// dimensions (a leaf dataset's are its files').
func (m *Manager) jobModel(spec types.Spec) (model.Model, error) {
	dim, classes := 0, 0
	switch spec.Dataset {
	case "synthetic":
		dim, classes = data.SyntheticDim, data.SyntheticClasses
	case "leaf":
		_, test, err := m.population(spec)
		if err != nil {
			return nil, err
		}
		dim, classes = test.Dim, test.Classes
	default:
		ds, err := m.dataset()
		if err != nil {
			return nil, err
		}
		dim, classes = ds.test.Dim, ds.test.Classes
	}
	return model.New(spec.Model, dim, classes)
}
