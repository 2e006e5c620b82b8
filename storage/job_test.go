package storage

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestJobStateTerminal(t *testing.T) {
	want := map[JobState]bool{
		StatePending: false, StateRunning: false,
		StateCompleted: true, StateFailed: true, StateCancelled: true, StateBudgetExhausted: true,
	}
	for s, term := range want {
		if s.Terminal() != term || !s.Valid() {
			t.Errorf("%s: Terminal=%v Valid=%v, want %v true", s, s.Terminal(), s.Valid(), term)
		}
	}
	for _, s := range []JobState{"", "done", "Running"} {
		if s.Valid() || s.Terminal() {
			t.Errorf("%q reported valid or terminal", s)
		}
	}
}

func TestCreateAndGetJob(t *testing.T) {
	db, path := openTemp(t)
	before := time.Now()
	if err := db.CreateJob(Job{ID: "mnist-1", Config: json.RawMessage(`{ "rounds" : 5 }`)}); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	j, err := db.Job("mnist-1")
	if err != nil {
		t.Fatal(err)
	}
	if j.ID != "mnist-1" || j.State != StatePending || j.Round != 0 || j.Message != "" {
		t.Fatalf("job %+v", j)
	}
	if string(j.Config) != `{"rounds":5}` {
		t.Fatalf("config %s, want compacted input", j.Config)
	}
	if j.CreatedAt.Before(before) || j.CreatedAt.After(after) || !j.UpdatedAt.Equal(j.CreatedAt) {
		t.Fatalf("timestamps %v %v outside [%v, %v]", j.CreatedAt, j.UpdatedAt, before, after)
	}

	// Explicit timestamps and state are kept.
	ts := time.Date(2023, 1, 2, 3, 4, 5, 6, time.UTC)
	if err := db.CreateJob(Job{ID: "given", State: StateRunning, CreatedAt: ts, UpdatedAt: ts.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	g, err := db.Job("given")
	if err != nil || g.State != StateRunning || !g.CreatedAt.Equal(ts) || !g.UpdatedAt.Equal(ts.Add(time.Second)) {
		t.Fatalf("given job %+v, %v", g, err)
	}

	// Survives reopen.
	db.Close()
	db2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	j2, err := db2.Job("mnist-1")
	if err != nil || !j2.CreatedAt.Equal(j.CreatedAt) || string(j2.Config) != string(j.Config) {
		t.Fatalf("after reopen %+v, %v", j2, err)
	}
}

func TestCreateJobErrors(t *testing.T) {
	db, _ := openTemp(t)
	mustCreate(t, db, "a")
	wantErr(t, db.CreateJob(Job{ID: "a", Config: json.RawMessage(`{"other":1}`)}), ErrExists, `"a"`)
	if j, _ := db.Job("a"); string(j.Config) != `{"rounds":10}` {
		t.Fatalf("duplicate create changed the job: %s", j.Config)
	}
	for _, j := range []Job{
		{ID: ""},
		{ID: strings.Repeat("x", MaxJobIDLen+1)},
		{ID: "r", Round: 1},
		{ID: "c", Config: json.RawMessage(`{"rounds":`)},
		{ID: "s", State: "paused"},
	} {
		if err := db.CreateJob(j); err == nil {
			t.Errorf("CreateJob(%+v) accepted", j)
		}
	}
	if js, _ := db.Jobs(); len(js) != 1 {
		t.Fatalf("%d jobs after rejected creates, want 1", len(js))
	}
	_, err := db.Job("nope")
	wantErr(t, err, ErrNotFound, `"nope"`)
	wantErr(t, db.SetJobState("nope", StateRunning, ""), ErrNotFound, `"nope"`)
}

func TestJobsOrder(t *testing.T) {
	db, _ := openTemp(t)
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	// Insertion order and key order both differ from the wanted order.
	for _, c := range []struct {
		id string
		at time.Time
	}{
		{"a", t0.Add(3 * time.Hour)},
		{"z", t0.Add(time.Hour)},
		{"m", t0.Add(2 * time.Hour)},
		{"c", t0.Add(time.Hour)},
		{"b", t0.Add(time.Nanosecond)},
	} {
		if err := db.CreateJob(Job{ID: c.id, CreatedAt: c.at}); err != nil {
			t.Fatal(err)
		}
	}
	js, err := db.Jobs()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range js {
		got = append(got, j.ID)
	}
	if fmt.Sprint(got) != "[b c z m a]" {
		t.Fatalf("order %v, want [b c z m a]", got)
	}
	empty, _ := openTemp(t)
	if js, err := empty.Jobs(); err != nil || len(js) != 0 {
		t.Fatalf("empty store: %v, %v", js, err)
	}
}

func TestSetJobStateTransitions(t *testing.T) {
	db, _ := openTemp(t)
	mustCreate(t, db, "j")
	j0, _ := db.Job("j")
	if err := db.SetJobState("j", StateRunning, "round 1"); err != nil {
		t.Fatal(err)
	}
	j1, _ := db.Job("j")
	if j1.State != StateRunning || j1.Message != "round 1" || j1.UpdatedAt.Before(j0.UpdatedAt) || !j1.CreatedAt.Equal(j0.CreatedAt) {
		t.Fatalf("after running: %+v", j1)
	}
	if err := db.SetJobState("j", StateRunning, "bogus"); err != nil {
		t.Fatal(err)
	}
	if err := db.SetJobState("j", "paused", ""); err == nil {
		t.Fatal("unknown state accepted")
	}

	// Every terminal state is final against every target state.
	all := []JobState{StatePending, StateRunning, StateCompleted, StateFailed, StateCancelled, StateBudgetExhausted}
	for _, term := range all[2:] {
		id := "t-" + string(term)
		mustCreate(t, db, id)
		if err := db.SetJobState(id, term, "why: "+string(term)); err != nil {
			t.Fatal(err)
		}
		before, _ := db.Job(id)
		for _, to := range all {
			wantErr(t, db.SetJobState(id, to, "again"), ErrConflict, id, string(term))
		}
		after, _ := db.Job(id)
		if after.State != term || after.Message != before.Message || !after.UpdatedAt.Equal(before.UpdatedAt) {
			t.Fatalf("refused change modified job: %+v → %+v", before, after)
		}
	}
}
