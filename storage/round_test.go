package storage

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
)

func metricsFor(round int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"round":%d,"loss":%g}`, round, 1/float64(round)))
}

func checkpointFor(round, n int) Checkpoint {
	p := make([]float32, n)
	for i := range p {
		p[i] = float32(round)*0.5 + float32(i)
	}
	return Checkpoint{Params: p, OptState: []byte(fmt.Sprintf("opt-%d", round))}
}

func equalCheckpoint(a, b Checkpoint) bool {
	return a.Round == b.Round && slices.Equal(a.Params, b.Params) && string(a.OptState) == string(b.OptState)
}

func TestCommitRound(t *testing.T) {
	db, _ := openTemp(t)
	mustCreate(t, db, "j")
	if _, ok, err := db.Checkpoint("j"); ok || err != nil {
		t.Fatalf("fresh job checkpoint ok=%v err=%v", ok, err)
	}
	if m, err := db.Metrics("j"); err != nil || len(m) != 0 {
		t.Fatalf("fresh job metrics %v, %v", m, err)
	}
	for r := 1; r <= 3; r++ {
		ck := checkpointFor(r, 100)
		if r == 2 {
			ck.Round = 2 // explicit and equal is accepted too
		}
		if err := db.CommitRound("j", r, metricsFor(r), ck); err != nil {
			t.Fatalf("commit %d: %v", r, err)
		}
		ck.Params[0] = -1 // the store must have copied the input
	}
	j, _ := db.Job("j")
	if j.Round != 3 {
		t.Fatalf("job round %d, want 3", j.Round)
	}
	m, err := db.Metrics("j")
	if err != nil || len(m) != 3 {
		t.Fatalf("metrics %v, %v", m, err)
	}
	for i, x := range m {
		if string(x) != string(metricsFor(i+1)) {
			t.Errorf("metrics[%d] = %s, want %s", i, x, metricsFor(i+1))
		}
	}
	ck, ok, err := db.Checkpoint("j")
	want := checkpointFor(3, 100)
	want.Round = 3
	if err != nil || !ok || !equalCheckpoint(ck, want) {
		t.Fatalf("checkpoint %v %v, round %d", ok, err, ck.Round)
	}
	ck.Params[0] = 12345 // the caller owns the returned memory
	if ck2, _, _ := db.Checkpoint("j"); !equalCheckpoint(ck2, want) {
		t.Fatal("mutating a returned checkpoint changed the store")
	}

	// Empty model and optimizer state are legal.
	mustCreate(t, db, "empty")
	if err := db.CommitRound("empty", 1, json.RawMessage(`{}`), Checkpoint{}); err != nil {
		t.Fatal(err)
	}
	if ck, ok, err := db.Checkpoint("empty"); err != nil || !ok || ck.Round != 1 || len(ck.Params) != 0 || len(ck.OptState) != 0 {
		t.Fatalf("empty checkpoint %+v %v %v", ck, ok, err)
	}
}

// snapshot captures everything CommitRound may touch.
type snapshot struct {
	job     Job
	metrics []json.RawMessage
	ck      Checkpoint
	ok      bool
}

func take(t *testing.T, db *DB, id string) snapshot {
	t.Helper()
	var s snapshot
	var err error
	if s.job, err = db.Job(id); err != nil {
		t.Fatal(err)
	}
	if s.metrics, err = db.Metrics(id); err != nil {
		t.Fatal(err)
	}
	if s.ck, s.ok, err = db.Checkpoint(id); err != nil {
		t.Fatal(err)
	}
	return s
}

func sameSnapshot(a, b snapshot) bool {
	return a.job.Round == b.job.Round && a.job.UpdatedAt.Equal(b.job.UpdatedAt) && a.ok == b.ok &&
		equalCheckpoint(a.ck, b.ck) && slices.EqualFunc(a.metrics, b.metrics, func(x, y json.RawMessage) bool { return string(x) == string(y) })
}

func TestCommitRoundRefusalsWriteNothing(t *testing.T) {
	db, _ := openTemp(t)
	mustCreate(t, db, "j")
	fresh := take(t, db, "j")
	wantErr(t, db.CommitRound("j", 2, metricsFor(2), checkpointFor(2, 10)), ErrConflict, `"j"`, "round 2")
	if s := take(t, db, "j"); !sameSnapshot(s, fresh) || s.ok || len(s.metrics) != 0 {
		t.Fatalf("gap commit wrote: %+v", s)
	}

	if err := db.CommitRound("j", 1, metricsFor(1), checkpointFor(1, 10)); err != nil {
		t.Fatal(err)
	}
	one := take(t, db, "j")
	bad := []struct {
		name  string
		round int
		m     json.RawMessage
		ck    Checkpoint
	}{
		{"repeat round", 1, metricsFor(1), checkpointFor(1, 10)},
		{"gap", 3, metricsFor(3), checkpointFor(3, 10)},
		{"round 0", 0, metricsFor(0), Checkpoint{}},
		{"negative", -1, metricsFor(1), Checkpoint{}},
		{"checkpoint round mismatch", 2, metricsFor(2), Checkpoint{Round: 5}},
		{"bad metrics", 2, json.RawMessage(`{"loss":`), checkpointFor(2, 10)},
		{"empty metrics", 2, nil, checkpointFor(2, 10)},
	}
	for _, b := range bad {
		if err := db.CommitRound("j", b.round, b.m, b.ck); err == nil {
			t.Errorf("%s: accepted", b.name)
		}
		if s := take(t, db, "j"); !sameSnapshot(s, one) {
			t.Fatalf("%s: refused commit wrote something", b.name)
		}
	}

	wantErr(t, db.CommitRound("ghost", 1, metricsFor(1), Checkpoint{}), ErrNotFound, `"ghost"`)
	_, _, err := db.Checkpoint("ghost")
	wantErr(t, err, ErrNotFound)
	_, err = db.Metrics("ghost")
	wantErr(t, err, ErrNotFound)

	if err := db.SetJobState("j", StateCancelled, "user"); err != nil {
		t.Fatal(err)
	}
	cancelled := take(t, db, "j")
	wantErr(t, db.CommitRound("j", 2, metricsFor(2), checkpointFor(2, 10)), ErrConflict, "cancelled")
	if s := take(t, db, "j"); !sameSnapshot(s, cancelled) {
		t.Fatal("commit to a cancelled job wrote something")
	}
}
