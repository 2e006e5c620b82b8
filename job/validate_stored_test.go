package job

import (
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpfl/dpfl/storage"
)

// A database written by the previous release keeps its jobs and metrics
// under the keys of the time (population.clients, dp.privacy_unit,
// cohort, clients): the server still reads them as population.size,
// dp.budget, selected and held_out, in every read path.
func TestStoredDataOfThePreviousReleaseReads(t *testing.T) {
	db, err := storage.Open(filepath.Join(t.TempDir(), "dpfl.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	oldSpec := `{"dataset": "fashion-mnist", "model": "logreg", "rounds": 2, "eval_every": 1, "seed": 1,
		"population": {"source": "simulated", "clients": 300, "partition": "iid", "held_out_fraction": 0.2},
		"sampling": {"scheme": "fixed", "rate": 0.1, "cohort_size": 30},
		"dp": {"enabled": false, "clip_norm": 0.5, "noise_multiplier": 1, "delta": 1e-5, "privacy_unit": "pop"}}`
	if err := db.CreateJob(storage.Job{ID: "job-old", Config: json.RawMessage(oldSpec)}); err != nil {
		t.Fatal(err)
	}
	oldMetrics := []string{
		`{"round": 1, "cohort": 30, "reported": 28, "dropped_out": 2, "time": "2025-01-01T00:00:00Z"}`,
		`{"round": 2, "cohort": 30, "reported": 30, "test": {"loss": 0.7, "accuracy": 0.75, "examples": 10000},
		  "clients": {"weighted": {"loss": 0.8, "accuracy": 0.7, "examples": 1200}, "mean_accuracy": 0.69, "p10_accuracy": 0.5, "min_accuracy": 0.3, "clients": 300},
		  "time": "2025-01-01T00:01:00Z"}`,
	}
	for i, met := range oldMetrics {
		if err := db.CommitRound("job-old", i+1, json.RawMessage(met), storage.Checkpoint{Round: i + 1, Params: []float32{0}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.SetJobState("job-old", storage.StateCompleted, ""); err != nil {
		t.Fatal(err)
	}
	m := NewManager(db, Options{Logger: slog.New(slog.DiscardHandler)})
	st, err := m.Get("job-old")
	if err != nil {
		t.Fatal(err)
	}
	if st.Spec.Population.Size != 300 || st.Spec.DP.Budget != "pop" || st.Spec.Sampling.CohortSize != 30 || len(st.Notes) != 0 {
		t.Fatalf("stored spec read as %+v (notes %q)", st.Spec, st.Notes)
	}
	if l := st.Latest; l == nil || l.Selected != 30 || l.HeldOut == nil || l.HeldOut.Clients != 300 || l.HeldOut.Weighted.Accuracy != 0.7 {
		t.Fatalf("latest round read as %+v", st.Latest)
	}
	met, err := m.Metrics("job-old")
	if err != nil || len(met) != 2 || met[0].Selected != 30 || met[0].DroppedOut != 2 || met[0].HeldOut != nil {
		t.Fatalf("metrics %+v, %v", met, err)
	}
	rs, err := m.Rounds("job-old")
	if err != nil || len(rs) != 2 || rs[0].Selected != 30 || rs[0].Reported != 28 || rs[0].DroppedOut != 2 || rs[1].TestAccuracy == nil {
		t.Fatalf("rounds %+v, %v", rs, err)
	}
	// Written again, they carry the new keys only.
	b, err := json.Marshal(met[1])
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); !strings.Contains(s, `"selected":30`) || !strings.Contains(s, `"held_out":{`) || strings.Contains(s, `"cohort"`) {
		t.Fatalf("re-encoded metrics %s", s)
	}
	b, _ = json.Marshal(st.Spec)
	if s := string(b); !strings.Contains(s, `"size":300`) || !strings.Contains(s, `"budget":"pop"`) || strings.Contains(s, `"clients"`) || strings.Contains(s, "privacy_unit") {
		t.Fatalf("re-encoded spec %s", s)
	}
}
