package job

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/simd"
	"github.com/dpfl/dpfl/storage"
)

// canarySpec is a small DP job with 1000 canaries (and 1000 held out):
// 600 users, q = 0.1 (60 users and about 100 canaries a round), 50
// rounds of logistic regression, noise multiplier z. A canary's cosine
// with the final delta is then shifted by about q·√T/z = 0.71/z null
// standard deviations, less where the users' own drift dominates the
// delta (the cosine's denominator): client.lr 0.01 keeps that drift
// small. Measured shifts are 0.17, 0.70 and 1.6 for z = 4, 1 and 0.25,
// each estimated to ±0.055 (one standard error), so the steps are 7 and
// 11 standard errors. Each job takes about 2 s on two cores.
func canarySpec(t *testing.T, z float64) types.Spec {
	return small(t, func(s *types.Spec) {
		s.Population.Size = 600
		s.Rounds, s.EvalEvery = 50, 50
		s.Client.LR = 0.01
		s.DP.NoiseMultiplier = z
		s.Audit.Canaries = 1000
	})
}

// audited runs s to the end on m and returns its privacy report, which
// must hold a computed empirical ε.
func audited(t *testing.T, m *Manager, s types.Spec) (types.Status, types.PrivacyReport) {
	t.Helper()
	st := runToEnd(t, m, s)
	if st.State != types.StateCompleted {
		t.Fatalf("%s: %s", st.State, st.Message)
	}
	rep, err := m.Privacy(st.ID)
	if err != nil {
		t.Fatal(err)
	}
	e := rep.EmpiricalEpsilon
	if e == nil || e.Estimate == nil || e.Lower == nil || e.Upper == nil || e.Fit == nil || rep.Epsilon == nil {
		t.Fatalf("no empirical ε in the report: %+v", e)
	}
	return st, rep
}

func describeAudit(rep types.PrivacyReport) string {
	e := rep.EmpiricalEpsilon
	return strings.Join([]string{
		"ε " + ftoa(*rep.Epsilon),
		"empirical " + ftoa(*e.Estimate) + " [" + ftoa(*e.Lower) + ", " + ftoa(*e.Upper) + "]",
		"shift " + ftoa(e.Fit.Shift[0]), "ratio " + ftoa(e.Fit.Ratio[0]),
	}, ", ")
}

func ftoa(x float64) string { b, _ := json.Marshal(math.Round(x*1000) / 1000); return string(b) }

// The empirical ε rises as the noise falls, stays below the analytical ε
// of a correct job (no alarm), and its fit sees held-out directions as
// uniform on the sphere (null standard deviation 1/√d).
func TestCanaryEstimateRisesAsNoiseFalls(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: three 50-round audited jobs on Fashion-MNIST; runs in the full suite")
	}
	m := realManager(t)
	var last types.PrivacyReport
	for i, z := range []float64{4, 1, 0.25} {
		_, rep := audited(t, m, canarySpec(t, z))
		e := rep.EmpiricalEpsilon
		t.Logf("z = %v: %s", z, describeAudit(rep))
		if e.Alarm {
			t.Errorf("z = %v: alarm on a correct job: %s", z, e.Note)
		}
		if r := e.Fit.NullStdSqrtD; math.Abs(r-1) > 0.1 {
			t.Errorf("z = %v: held-out cosines have standard deviation %.3f/√d, want 1/√d", z, r)
		}
		if e.Canaries != 1000 || e.HeldOut != 1000 || e.Round != 50 || e.Dimension != 7850 || e.Confidence != 0.99 || e.Delta != 1e-5 {
			t.Errorf("z = %v: report %+v", z, *e)
		}
		if i > 0 {
			prev := last.EmpiricalEpsilon
			// The canaries' shift grows with 1/z (canarySpec): each step
			// is several of its standard errors.
			if !(e.Fit.Shift[0] > prev.Fit.Shift[0] && *e.Estimate > *prev.Estimate && *e.Lower > *prev.Lower) {
				t.Errorf("z = %v: %s; at the larger z: %s", z, describeAudit(rep), describeAudit(last))
			}
		}
		last = rep
	}
}

// With the noise scaled down by 4 behind the ledger's back (the ledger
// still records z = 2), the canaries reveal more than the ledger allows
// and the report raises the alarm; a correct job with that much noise
// (z = 0.5, large ε) does not, and gives about the same empirical ε: the
// estimate follows the noise actually added.
func TestCanaryAlarm(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: two 50-round audited jobs on Fashion-MNIST; runs in the full suite")
	}
	m := realManager(t)
	m.noiseScale = 0.25
	bugged := canarySpec(t, 2)
	_, bad := audited(t, m, bugged)
	m.noiseScale = 0
	_, good := audited(t, m, canarySpec(t, 0.5))
	t.Logf("z = 2, noise ×1/4: %s; z = 0.5: %s", describeAudit(bad), describeAudit(good))
	if e := bad.EmpiricalEpsilon; !e.Alarm || !(*e.Lower > *bad.Epsilon) || !strings.Contains(e.Note, "ALARM") {
		t.Fatalf("noise ×1/4: no alarm: %s (%s)", describeAudit(bad), e.Note)
	}
	if e := good.EmpiricalEpsilon; e.Alarm || !(*e.Upper < *good.Epsilon) {
		t.Fatalf("z = 0.5: %s, alarm %v", describeAudit(good), e.Alarm)
	}
	b, g := bad.EmpiricalEpsilon, good.EmpiricalEpsilon
	if !(*b.Lower < *g.Upper && *g.Lower < *b.Upper) {
		t.Fatalf("same effective noise, disjoint intervals: %s vs %s", describeAudit(bad), describeAudit(good))
	}
	// The ledger is the bugged job's claim: z = 2, as if nothing were wrong.
	if !strings.Contains(string(bad.Events[0].Event), `"noise_multiplier":2`) {
		t.Fatalf("ledger event %s", bad.Events[0].Event)
	}
}

// Canaries change nothing the job releases about its users: the ledger
// is the same as without canaries, the released round metrics have the
// same fields, and the canary secret appears in no response. The audit
// is recomputed from stored data alone: a new manager over the same
// database gives the same report, and reading it twice gives the same
// numbers. Before the job ends the report says when it comes.
func TestCanariesReleaseNothingNew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dpfl.db")
	db, err := storage.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	m := managerOn(t, db, Options{FashionMNIST: fakeFashionMNIST(smallTrain)})
	spec := small(t, func(s *types.Spec) { s.Audit = types.AuditSpec{Canaries: 200, HeldOut: 300} })
	plain := small(t, func(s *types.Spec) {})

	// A job that has not ended yet: no estimate, a note.
	// Round 1 has committed when round 2 is about to start.
	reached, gate := make(chan struct{}), make(chan struct{})
	m.beforeRound = func(_ context.Context, _ string, r int) {
		if r == 2 {
			close(reached)
			<-gate
		}
	}
	j, err := m.Submit(spec)
	if err != nil {
		t.Fatal(err)
	}
	<-reached
	rep, err := m.Privacy(j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if e := rep.EmpiricalEpsilon; e == nil || e.Estimate != nil || !strings.Contains(e.Note, "when the job ends") || e.Canaries != 200 || e.HeldOut != 300 {
		t.Fatalf("running job's audit %+v", e)
	}
	close(gate)
	m.Wait(j.ID)
	m.beforeRound = nil
	withRep, err := m.Privacy(j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if e := withRep.EmpiricalEpsilon; e == nil || e.Estimate == nil {
		t.Fatalf("ended job's audit %+v", e)
	}
	pj := runToEnd(t, m, plain)
	plainRep, err := m.Privacy(pj.ID)
	if err != nil {
		t.Fatal(err)
	}
	if plainRep.EmpiricalEpsilon != nil {
		t.Fatalf("job without canaries has an audit: %+v", plainRep.EmpiricalEpsilon)
	}
	if len(withRep.Events) != len(plainRep.Events) || *withRep.Epsilon != *plainRep.Epsilon {
		t.Fatalf("canaries changed the ledger: %d events ε %v, without %d events ε %v", len(withRep.Events), *withRep.Epsilon, len(plainRep.Events), *plainRep.Epsilon)
	}
	for i := range withRep.Events {
		if !bytes.Equal(withRep.Events[i].Event, plainRep.Events[i].Event) {
			t.Fatalf("event %d: %s with canaries, %s without", i, withRep.Events[i].Event, plainRep.Events[i].Event)
		}
	}
	withMet, _ := m.Metrics(j.ID)
	plainMet, _ := m.Metrics(pj.ID)
	for i := range withMet {
		a, _ := json.Marshal(withMet[i])
		b, _ := json.Marshal(plainMet[i])
		if keys(t, a) != keys(t, b) {
			t.Fatalf("round %d released %s with canaries, %s without", i+1, keys(t, a), keys(t, b))
		}
	}
	// The secret is stored, and no response shows it.
	key, ok, err := m.canaryKey(j.ID, false)
	if err != nil || !ok {
		t.Fatalf("canary key: %v %v", ok, err)
	}
	st, _ := m.Get(j.ID)
	list, _ := m.List()
	model, _ := m.Model(j.ID)
	for _, v := range []any{st, list, withRep, withMet, model} {
		b, _ := json.Marshal(v)
		for _, enc := range []string{hex.EncodeToString(key[:]), base64.StdEncoding.EncodeToString(key[:])} {
			if bytes.Contains(b, []byte(enc)) {
				t.Fatalf("a response holds the canary secret: %.200s", b)
			}
		}
	}
	if b, _ := json.Marshal(plain); bytes.Contains(b, []byte(`"audit"`)) {
		t.Fatalf("a spec without canaries serializes an audit section: %s", b)
	}
	// Recomputed from stored data: the same after a restart.
	again, _ := m.Privacy(j.ID)
	m.Shutdown(t.Context())
	db.Close()
	db, err = storage.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m2 := managerOn(t, db, Options{FashionMNIST: fakeFashionMNIST(smallTrain), Workers: 1})
	restarted, err := m2.Privacy(j.ID)
	if err != nil {
		t.Fatal(err)
	}
	a, b := *withRep.EmpiricalEpsilon, *restarted.EmpiricalEpsilon
	c := *again.EmpiricalEpsilon
	if *a.Estimate != *b.Estimate || *a.Lower != *b.Lower || *a.Upper != *b.Upper || *a.Fit != *b.Fit || *c.Estimate != *a.Estimate {
		t.Fatalf("audit differs after a restart: %+v then %+v", a, b)
	}
}

// keys is the sorted set of top-level keys of a JSON object.
func keys(t *testing.T, b []byte) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return strings.Join(ks, ",")
}

// The direction a canary is inserted with is the one the audit measures
// against: unit norm, the same every time, nearly orthogonal to the
// others, different under another job's secret, and canaryCosines
// (which draws it anew in float64) agrees with it.
func TestCanaryDirections(t *testing.T) {
	var k1, k2 canaryKey
	k1[0], k2[0] = 1, 2
	const d = 7850
	a, b, c := make([]float32, d), make([]float32, d), make([]float32, d)
	k1.direction(3, a)
	k1.direction(3, b)
	k1.direction(4, c)
	if n := simd.Norm2(a); math.Abs(n-1) > 1e-5 {
		t.Fatalf("norm %v", n)
	}
	if !slices.Equal(a, b) {
		t.Fatal("direction 3 differs between calls")
	}
	// Independent uniform directions: cosine ~ N(0, 1/d), |cos| < 6/√d.
	if cos := float64(simd.Dot(a, c)); math.Abs(cos) > 6/math.Sqrt(d) {
		t.Fatalf("directions 3 and 4 have cosine %v", cos)
	}
	k2.direction(3, b)
	if cos := float64(simd.Dot(a, b)); math.Abs(cos) > 6/math.Sqrt(d) {
		t.Fatalf("two secrets give directions with cosine %v", cos)
	}
	delta := make([]float32, d)
	r := rand.New(rand.NewPCG(1, 1))
	for i := range delta {
		delta[i] = float32(r.NormFloat64())
	}
	simd.Axpy(delta, 30, a) // a shift along canary 3
	norm := simd.Norm2(delta)
	cos, err := canaryCosines(k1, delta, norm, 5, 2)
	if err != nil {
		t.Fatal(err)
	}
	for j := range 5 {
		k1.direction(j, c)
		want := float64(simd.Dot(delta, c)) / norm
		if math.Abs(cos[j]-want) > 1e-5 {
			t.Fatalf("canary %d: cosine %v, direction gives %v", j, cos[j], want)
		}
	}
	// ⟨δ, c_3⟩ = 30 + N(0, 1).
	if got := cos[3] * norm; math.Abs(got-30) > 5 {
		t.Fatalf("cosine with the inserted direction %v, want about %v", cos[3], 30/norm)
	}
}

// Canaries take part at the rate at which one user is sampled: q·(1+o)
// under Poisson sampling, K/N (over-selection included) for a fixed
// cohort.
func TestCanaryRate(t *testing.T) {
	for _, c := range []struct {
		edit func(*types.Spec)
		want float64
	}{
		{func(s *types.Spec) {}, 0.02},
		{func(s *types.Spec) { s.Participation.OverSelection = 0.5 }, 0.03},
		{func(s *types.Spec) { s.Sampling = types.SamplingSpec{Scheme: "fixed", CohortSize: 120} }, 0.02},
		{func(s *types.Spec) {
			s.Sampling = types.SamplingSpec{Scheme: "fixed", CohortSize: 100}
			s.Participation.OverSelection = 0.2
		}, 0.02},
	} {
		s := DefaultSpec()
		c.edit(&s)
		if got := canaryRate(s, s.Population.Size); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%+v %+v: rate %v, want %v", s.Sampling, s.Participation, got, c.want)
		}
	}
}

// The audit section's rules, each naming its field.
func TestAuditSpecValidation(t *testing.T) {
	cases := map[string]string{
		`{"audit":{"canaries":-1}}`:                         "audit.canaries",
		`{"audit":{"canaries":10001}}`:                      "audit.canaries",
		`{"audit":{"canaries":1}}`:                          "audit.canaries",
		`{"audit":{"canaries":100,"held_out":1}}`:           "audit.held_out",
		`{"audit":{"canaries":100,"held_out":-1}}`:          "audit.held_out",
		`{"audit":{"canaries":100,"held_out":20000}}`:       "audit.held_out",
		`{"audit":{"held_out":100}}`:                        "audit.held_out",
		`{"audit":{"canaries":100},"dp":{"enabled":false}}`: "audit.canaries",
		`{"audit":{"canaries":100},"population":{"source":"devices"},"secure_aggregation":true,"sampling":{"scheme":"fixed"}}`: "audit.canaries",
	}
	for body, field := range cases {
		s, err := ParseSpec([]byte(body))
		if err == nil {
			err = Validate(s, 60000)
		}
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != field {
			t.Errorf("%s: got %v, want an error on %s", body, err, field)
		}
	}
	for _, body := range []string{
		`{"audit":{"canaries":1000}}`,
		`{"audit":{"canaries":10000,"held_out":2}}`,
		`{"audit":{"canaries":100},"secure_aggregation":true}`,
		`{"audit":{"canaries":100},"sampling":{"scheme":"fixed","cohort_size":50}}`,
		`{"audit":{"canaries":0}}`,
	} {
		s, err := ParseSpec([]byte(body))
		if err == nil {
			err = Validate(s, 60000)
		}
		if err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
}

// Canaries work under secure aggregation: the server adds them to the
// decoded aggregate, its own clients outside the protocol.
func TestCanariesWithSecureAggregation(t *testing.T) {
	m := manager(t)
	_, rep := audited(t, m, small(t, func(s *types.Spec) {
		s.Rounds, s.SecureAggregation, s.SecAgg.MinClients = 5, true, 5
		s.Audit.Canaries = 100
	}))
	if rep.EmpiricalEpsilon.Round != 5 || rep.EmpiricalEpsilon.Alarm {
		t.Fatalf("audit %+v", rep.EmpiricalEpsilon)
	}
}

// BenchmarkCanaryDemo measures the audit on the demo job
// (examples/demo-job.json: 6,000 users, q = 0.02, C = 0.5, 300 rounds)
// with 1000 canaries and 1000 held out, at z ∈ {0.5, 1, 2}: the
// analytical ε beside the empirical ε, and the final test accuracy with
// and without canaries (reps runs each; accuracy varies from run to run
// with the secure noise and cohorts). It prints to standard output (a
// benchmark's log is cut at 10 lines); docs/auditing.md quotes it:
//
//	go test -run '^$' -bench CanaryDemo -benchtime 1x -timeout 30m ./job
func BenchmarkCanaryDemo(b *testing.B) {
	raw, err := os.ReadFile(filepath.Join("..", "examples", "demo-job.json"))
	if err != nil {
		b.Fatal(err)
	}
	demo, err := ParseSpec(raw)
	if err != nil {
		b.Fatal(err)
	}
	const reps = 5
	m := realManager(b)
	for b.Loop() {
		for _, z := range []float64{0.5, 1, 2} {
			var accWith, accWithout []float64
			for r := range reps {
				for _, k := range []int{1000, 0} {
					s := demo
					s.DP.NoiseMultiplier, s.Audit.Canaries = z, k
					st := runToEnd(b, m, s)
					if st.State != types.StateCompleted {
						b.Fatalf("%s: %s", st.State, st.Message)
					}
					acc := st.LatestTest.Test.Accuracy
					if k == 0 {
						accWithout = append(accWithout, acc)
						continue
					}
					accWith = append(accWith, acc)
					rep, err := m.Privacy(st.ID)
					if err != nil {
						b.Fatal(err)
					}
					e := rep.EmpiricalEpsilon
					fmt.Printf("z = %v run %d: ε = %.3f (%s), empirical ε = %.3f [%.3f, %.3f] alarm %v, shift %.3f [%.3f, %.3f], ratio %.3f, null σ·√d %.3f, accuracy %.4f\n",
						z, r+1, *rep.Epsilon, rep.Accountant, *e.Estimate, *e.Lower, *e.Upper, e.Alarm,
						e.Fit.Shift[0], e.Fit.Shift[1], e.Fit.Shift[2], e.Fit.Ratio[0], e.Fit.NullStdSqrtD, acc)
				}
			}
			fmt.Printf("z = %v: test accuracy with canaries %.4f (runs %.4f), without %.4f (runs %.4f)\n",
				z, mean(accWith), accWith, mean(accWithout), accWithout)
		}
	}
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
