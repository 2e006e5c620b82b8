package job

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dpfl/dpfl/accounting"
	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/fl"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/fl/model"
	"github.com/dpfl/dpfl/secagg"
)

// The sensitivity conformance harness. For every DP configuration that
// Spec.Validate accepts over the axes sampling scheme × over-selection ×
// deadline × stragglers × dropouts × availability × simulated secure
// aggregation (and devices, below), it builds neighbouring populations
// under the adjacency of the job's ledger event, with adversarial users
// (updates in opposite directions, a tiny and a huge dataset), couples
// every other random draw (the same seed; the sampled cohort is the
// worst case, every user), runs one round with the noise switched off,
// and checks that the pre-noise aggregate moves by at most the
// sensitivity that the event the ledger records assumes: C·z/z_event.

// harnessPop is a population whose users are given explicitly.
type harnessPop struct {
	base  *data.Dataset
	users []data.Client
}

func (p *harnessPop) Base() *data.Dataset       { return p.base }
func (p *harnessPop) NumClients() int           { return len(p.users) }
func (p *harnessPop) Client(id int) data.Client { return p.users[id] }

// harnessBase holds two kinds of examples with the same features and
// opposite labels: logistic regression from zero parameters moves in
// exactly opposite directions on them.
func harnessBase(perKind int) *data.Dataset {
	const dim = 4
	d := &data.Dataset{Dim: dim, Classes: 2}
	for k := range 2 {
		for range perKind {
			d.X = append(d.X, 1, 0.5, 0, 0)
			d.Y = append(d.Y, uint8(k))
		}
	}
	return d
}

// user is a kind (0 or 1) and an example count.
type user struct{ kind, examples int }

// population builds users over base (perKind examples of each kind).
func population(base *data.Dataset, perKind int, users []user) *harnessPop {
	p := &harnessPop{base: base}
	for id, u := range users {
		idx := make([]int32, u.examples)
		for i := range idx {
			idx[i] = int32(u.kind*perKind + i%perKind)
		}
		p.users = append(p.users, data.Client{ID: id, Train: idx})
	}
	return p
}

// preNoiseSum runs one round of spec's algorithm on cohort with the noise
// switched off and the denominator 1, from zero parameters with server SGD
// at η_s = 1: the new parameters are the clipped (and, under secure
// aggregation, encoded) sum of the reports the round keeps.
func preNoiseSum(t *testing.T, spec types.Spec, pop *harnessPop, cohort []int, n int) []float32 {
	t.Helper()
	mdl, err := model.New(spec.Model, pop.base.Dim, pop.base.Classes)
	if err != nil {
		t.Fatal(err)
	}
	server, err := fl.NewServerOptimizer(fl.ServerOptConfig{Name: "sgd", LR: 1})
	if err != nil {
		t.Fatal(err)
	}
	alg := fedAvg(spec, mdl, server, 2, n)
	agg, err := aggregator(spec, 0, n, rand.New(rand.NewPCG(1, 2)), 2)
	if err != nil {
		t.Fatal(err)
	}
	alg.Aggregate = agg
	kept, _, _ := participationModel(spec.Participation, spec.Seed).Filter(cohort, 1)
	params := make([]float32, mdl.NumParams())
	if _, err := alg.Round(context.Background(), 1, params, pop, kept, 1); err != nil {
		t.Fatal(err)
	}
	return params
}

// recordedSensitivity is the L2 sensitivity, in clip norms, that the
// round's ledger event assumes: z / (the event's Gaussian multiplier).
func recordedSensitivity(t *testing.T, spec types.Spec) float64 {
	t.Helper()
	var inner accounting.Event = roundEvent(spec)
	for {
		switch e := inner.(type) {
		case accounting.PoissonSampled:
			inner = e.Event
			continue
		case accounting.SampledWithoutReplacement:
			inner = e.Event
			continue
		case accounting.Gaussian:
			return spec.DP.NoiseMultiplier / e.NoiseMultiplier
		default:
			t.Fatalf("unexpected round event %#v", e)
		}
	}
}

func distance(a, b []float32) float64 {
	var s float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		s += d * d
	}
	return math.Sqrt(s)
}

// harnessSpecs enumerates the DP configurations to try; those that
// Validate refuses are skipped (and counted by the caller).
func harnessSpecs() []types.Spec {
	var out []types.Spec
	for _, scheme := range []string{"poisson", "fixed"} {
		for _, over := range []float64{0, 0.5} {
			for _, deadline := range []float64{0, 40} {
				for _, strag := range []float64{0, 0.5} {
					for _, drop := range []bool{false, true} {
						for _, dropout := range []float64{0, 0.3} {
							for _, avail := range []float64{0, 0.6} {
								for _, secure := range []bool{false, true} {
									s := DefaultSpec()
									s.Population.Size = 20
									s.Sampling = types.SamplingSpec{Scheme: scheme, Rate: 0.5, CohortSize: 10}
									s.Client = types.ClientSpec{Epochs: 2, BatchSize: 5, LR: 20, LRSchedule: defaultSchedule, Stragglers: strag, DropStragglers: drop}
									s.DP.ClipNorm = 0.05
									s.Participation = types.ParticipationSpec{OverSelection: over, DeadlineSeconds: deadline, DropoutRate: dropout,
										DiurnalAmplitude: avail, PeriodRounds: 5}
									// Compute time dominates, so that device time
									// follows each user's example count.
									s.RoundTime.ComputeRatio = 1e6
									s.SecureAggregation = secure
									s.SecAgg.MinClients = 2
									s.Seed = 7
									if drop && strag == 0 {
										continue
									}
									out = append(out, s)
								}
							}
						}
					}
				}
			}
		}
	}
	return out
}

func harnessName(s types.Spec) string {
	p := s.Participation
	return fmt.Sprintf("%s/over=%g/deadline=%g/stragglers=%g,drop=%v/dropout=%g/avail=%g/secagg=%v",
		s.Sampling.Scheme, p.OverSelection, p.DeadlineSeconds, s.Client.Stragglers, s.Client.DropStragglers, p.DropoutRate, p.DiurnalAmplitude, s.SecureAggregation)
}

func TestSensitivityConformance(t *testing.T) {
	t.Run("plain", func(t *testing.T) {
		worst := checkSensitivity(t, false, 40)
		// The harness must be able to fail: over-selection under Poisson
		// sampling moves the sum by more than C, so the charge at C of the
		// old code would have been caught.
		if worst <= 1.5 {
			t.Fatalf("over-selection moved the sum by at most %.3g·C; the adversaries do not reach the 2C case", worst)
		}
		t.Logf("Poisson with over-selection: the sum moved by up to %.3g·C (a charge at C, as before, fails here)", worst)
	})
	t.Run("secure_aggregation", func(t *testing.T) {
		if testing.Short() {
			t.Skip("slow: runs the secure aggregation protocol (a key agreement per pair of users) for 192 rounds; runs in the full suite")
		}
		checkSensitivity(t, true, 12)
	})
}

// checkSensitivity runs the harness over the configurations with or
// without simulated secure aggregation (secure), fails t if fewer than
// least of them are valid, and returns the most that over-selection under
// Poisson sampling moved the sum, in clip norms.
func checkSensitivity(t *testing.T, secure bool, least int) (worstOverSelection float64) {
	const perKind = 400
	base := harnessBase(perKind)
	// The others: 19 users of kind 0 with 10 to 100 examples (device
	// times spread around the 40 s deadline).
	others := make([]user, 19)
	for i := range others {
		others[i] = user{kind: 0, examples: 10 + 5*i}
	}
	adversaries := map[string]user{
		"tiny opposite": {1, 1}, "huge opposite": {1, 400},
		"tiny same": {0, 1}, "huge same": {0, 400},
	}
	accepted, refused := 0, 0
	for _, spec := range harnessSpecs() {
		if spec.SecureAggregation != secure {
			continue
		}
		if err := Validate(spec, base.Len()); err != nil {
			refused++
			continue
		}
		accepted++
		bound := recordedSensitivity(t, spec) * spec.DP.ClipNorm
		tol := 1e-6
		if spec.SecureAggregation {
			sampler, _ := specSampler(spec, 20)
			enc, err := secagg.NewEncoding(cohortBound(sampler, 20), spec.DP.ClipNorm)
			if err != nil {
				t.Fatal(err)
			}
			tol = 2 * 20 * math.Sqrt(10) * math.Ldexp(1, -enc.FracBits) // others' stochastic rounding
		}
		worst := 0.0
		for name, adv := range adversaries {
			var a, b []float32
			if Adjacency(spec) == AdjacencyAddRemove {
				// D has the 19 others; D' adds the adversary (id 19), sampled.
				small := population(base, perKind, others)
				large := population(base, perKind, append(others[:19:19], adv))
				a = preNoiseSum(t, spec, small, seq(19), 20)
				b = preNoiseSum(t, spec, large, seq(20), 20)
			} else {
				// Replace-one: user 0's data becomes the adversary's; the
				// cohort (the same IDs) is the whole population.
				alt := append([]user{adv}, others[1:]...)
				full := append(others[:19:19], user{0, 50})
				alt = append(alt, user{0, 50})
				a = preNoiseSum(t, spec, population(base, perKind, full), seq(20), 20)
				b = preNoiseSum(t, spec, population(base, perKind, alt), seq(20), 20)
			}
			moved := distance(a, b)
			worst = max(worst, moved/spec.DP.ClipNorm)
			if moved > bound+tol {
				t.Errorf("%s, %s: the pre-noise sum moved by %.4g = %.3g·C, the ledger's event assumes %.3g·C",
					harnessName(spec), name, moved, moved/spec.DP.ClipNorm, bound/spec.DP.ClipNorm)
			}
		}
		if spec.Sampling.Scheme == "poisson" && spec.Participation.OverSelection > 0 {
			worstOverSelection = max(worstOverSelection, worst)
		}
	}
	t.Logf("%d configurations accepted and checked, %d refused by Validate", accepted, refused)
	if accepted < least {
		t.Fatalf("only %d configurations accepted: the harness covers too little", accepted)
	}
	return worstOverSelection
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// Devices jobs: the first cohort_size devices to join fill the round, each
// encodes its clipped update (fl.EncodeSecureInput), and the noise is
// added to the modular sum. The pre-noise aggregate is that sum, as a
// signed difference in the ring. Between neighbours under the event's
// replace-one adjacency (one device's update replaced, or one more device
// joining first and pushing the last out) it moves by at most
// sensitivity·C·2^f, even next to a malicious device that pushes every
// coordinate to the edge of the int32 range.
func TestDevicesSensitivity(t *testing.T) {
	spec := DefaultSpec()
	spec.Population.Source, spec.Population.Size = "devices", 100
	spec.Sampling = types.SamplingSpec{Scheme: "fixed", CohortSize: 5}
	spec.SecureAggregation = true
	if err := Validate(spec, 60000); err != nil {
		t.Fatal(err)
	}
	bound := recordedSensitivity(t, spec)
	const d = 64
	clip := spec.DP.ClipNorm
	enc, err := secagg.NewEncoding(spec.Sampling.CohortSize, clip)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 5))
	update := func(sign float32) []float32 {
		u := make([]float32, d)
		for i := range u {
			u[i] = sign * 3 // far above C: clipped to C
		}
		return u
	}
	// sum encodes the first cohort_size updates of the join order.
	sum := func(joined [][]float32, malicious bool) []uint32 {
		out := make([]uint32, d)
		if malicious {
			for i := range out {
				out[i] = math.MaxInt32 // a device's raw ring input
			}
		}
		buf := make([]uint32, d)
		slots := spec.Sampling.CohortSize
		if malicious {
			slots-- // the malicious device joined first
		}
		for _, u := range joined[:min(len(joined), slots)] {
			if _, err := fl.EncodeSecureInput(buf, append([]float32(nil), u...), clip, enc, rng); err != nil {
				t.Fatal(err)
			}
			for i := range out {
				out[i] += buf[i]
			}
		}
		return out
	}
	moved := func(a, b []uint32) float64 {
		var s float64
		for i := range a {
			x := float64(int32(b[i] - a[i]))
			s += x * x
		}
		return math.Sqrt(s) / math.Ldexp(clip, enc.FracBits)
	}
	base := [][]float32{update(1), update(1), update(1), update(1), update(1)}
	replaced := append([][]float32{update(-1)}, base[1:]...)
	pushed := append([][]float32{update(-1)}, base...)
	worst := 0.0
	for _, malicious := range []bool{false, true} {
		for name, other := range map[string][][]float32{"replace-one": replaced, "joins first": pushed} {
			m := moved(sum(base, malicious), sum(other, malicious))
			worst = max(worst, m)
			if m > bound+1e-3 {
				t.Errorf("%s (malicious %v): the ring sum moved by %.4g·C, the event assumes %.3g·C", name, malicious, m, bound)
			}
		}
	}
	if worst < 1.9 {
		t.Fatalf("the adversaries moved the sum by only %.3g·C: the 2C case is not reached", worst)
	}
}
