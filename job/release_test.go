package job

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/dpfl/dpfl/api/types"
)

// publicKeys are the only JSON keys a DP job's round metrics, round
// records and latest metrics may hold (release.go), and testKeys those of
// the test split's score under "test": public data, ε (a function of the
// ledger), or noisy_ values covered by the ledger. "examples" is public
// only as the size of the test split, never as the cohort's.
var (
	publicKeys = []string{"round", "epsilon", "accountant", "time", "test", "test_accuracy", "cohort", "selected"}
	testKeys   = []string{"loss", "accuracy", "examples"}
)

// walkKeys reports every object key under v (decoded JSON) that is not
// public where it stands, with its path.
func walkKeys(path string, v any, allowed []string, bad *[]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, sub := range v {
			if !slices.Contains(allowed, k) && !strings.HasPrefix(k, "noisy_") {
				*bad = append(*bad, path+"."+k)
			}
			next := publicKeys
			if k == "test" {
				next = testKeys
			}
			walkKeys(path+"."+k, sub, next, bad)
		}
	case []any:
		for _, sub := range v {
			walkKeys(path+"[]", sub, allowed, bad)
		}
	}
}

func releasedKeys(t *testing.T, name string, v any) []string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var dec any
	if err := json.Unmarshal(b, &dec); err != nil {
		t.Fatal(err)
	}
	var bad []string
	walkKeys(name, dec, publicKeys, &bad)
	return bad
}

// A DP job's /v1/jobs/{id} (latest metrics), /metrics and /rounds hold
// only public, ε or noisy_ values, whatever participation the job
// simulates; "cohort"/"selected" appear only for a fixed cohort, and
// "test" only for Fashion-MNIST's public test split. A non-DP job keeps
// its full metrics.
func TestDPReleases(t *testing.T) {
	m := manager(t)
	jobs := map[string]func(*types.Spec){
		"poisson with participation": func(s *types.Spec) {
			s.Participation = types.ParticipationSpec{DiurnalAmplitude: 0.3, PeriodRounds: 4, DropoutRate: 0.1, OverSelection: 0.5, DeadlineSeconds: 30}
			s.Client.Stragglers = 0.2
		},
		"fixed over secure aggregation": func(s *types.Spec) {
			s.Sampling = types.SamplingSpec{Scheme: "fixed", CohortSize: 20}
			s.SecureAggregation = true
		},
		"synthetic": func(s *types.Spec) { s.Dataset = "synthetic"; s.Population.Size = 100 },
		"adaptive clipping": func(s *types.Spec) {
			s.DP.AdaptiveClipping = &types.AdaptiveClippingSpec{}
		},
		"adaptive clipping over secure aggregation": func(s *types.Spec) {
			s.DP.AdaptiveClipping = &types.AdaptiveClippingSpec{}
			s.SecureAggregation = true
		},
	}
	for name, edit := range jobs {
		st := runToEnd(t, m, small(t, func(s *types.Spec) { s.Rounds = 5; edit(s) }))
		if st.State != types.StateCompleted {
			t.Fatalf("%s: %s: %s", name, st.State, st.Message)
		}
		met, err := m.Metrics(st.ID)
		if err != nil {
			t.Fatal(err)
		}
		rounds, err := m.Rounds(st.ID)
		if err != nil {
			t.Fatal(err)
		}
		var bad []string
		bad = append(bad, releasedKeys(t, "latest", st.Latest)...)
		bad = append(bad, releasedKeys(t, "latest_test", st.LatestTest)...)
		bad = append(bad, releasedKeys(t, "metrics", met)...)
		bad = append(bad, releasedKeys(t, "rounds", rounds)...)
		if len(bad) > 0 {
			t.Errorf("%s: private values released: %v", name, bad)
		}
		fixed := st.Spec.Sampling.Scheme == "fixed"
		if (met[0].Selected != 0) != fixed || met[0].Epsilon == nil {
			t.Errorf("%s: round 1 %+v: want ε, and the cohort size only for a fixed cohort", name, met[0])
		}
		if (st.LatestTest != nil) != (st.Spec.Dataset == "fashion-mnist") {
			t.Errorf("%s: latest test %+v: the test split is public only for fashion-mnist", name, st.LatestTest)
		}
	}
	st := runToEnd(t, m, small(t, func(s *types.Spec) { s.Rounds, s.DP.Enabled = 2, false }))
	if st.Latest == nil || st.Latest.Reported == 0 || st.Latest.TrainLoss == 0 || st.Latest.Seconds == 0 {
		t.Fatalf("non-DP job lost its metrics: %+v", st.Latest)
	}
	// The walk can fail: it flags a non-DP job's private values.
	if bad := releasedKeys(t, "latest", st.Latest); !slices.Contains(bad, "latest.examples") || !slices.Contains(bad, "latest.train_loss") {
		t.Fatalf("the walk missed private values of a non-DP job: %v", bad)
	}
}

// Under DP, configurations whose releases no event covers are refused
// at submit and store nothing.
func TestDPRefusesUncoveredReleases(t *testing.T) {
	m := manager(t)
	for field, edit := range map[string]func(*types.Spec){
		"population.eval_user_fraction": func(s *types.Spec) {
			s.Population.OnDemand, s.Population.EvalUserFraction, s.Population.MaxExamples = true, 0.1, 100
		},
		"population.held_out_fraction":  func(s *types.Spec) { s.Population.HeldOutFraction = 0.2 },
		"participation.among_available": func(s *types.Spec) { s.Sampling.Scheme = "fixed"; s.Participation.AmongAvailable = true },
		"secagg.dropout_rate":           func(s *types.Spec) { s.SecureAggregation, s.SecAgg.DropoutRate = true, 0.1 },
	} {
		_, err := m.Submit(small(t, edit))
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != field {
			t.Errorf("%s under DP: %v, want a validation error on it", field, err)
		}
	}
	if jobs, _ := m.List(); len(jobs) != 0 {
		t.Fatalf("refused submissions stored %d jobs", len(jobs))
	}
}
