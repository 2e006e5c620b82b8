package storage

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

func event(round int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"mechanism":"gaussian","round":%d,"z":1.1,"q":0.01,"steps":1}`, round))
}

func TestLedgerAppendAndRead(t *testing.T) {
	db, path := openTemp(t)
	mustCreate(t, db, "a")
	mustCreate(t, db, "b")
	given := time.Date(2024, 2, 3, 4, 5, 6, 7, time.UTC)
	var stored []LedgerEntry
	for r := 1; r <= 4; r++ {
		e := LedgerEntry{Seq: 999, Round: r, Event: event(r)}
		if r == 2 {
			e.Time = given
		}
		before := time.Now()
		got, err := db.AppendLedger("a", e)
		if err != nil {
			t.Fatal(err)
		}
		if got.Seq != uint64(r) || got.Round != r {
			t.Fatalf("append %d returned %+v", r, got)
		}
		if r == 2 && !got.Time.Equal(given) || r != 2 && got.Time.Before(before) {
			t.Fatalf("append %d time %v", r, got.Time)
		}
		stored = append(stored, got)
	}
	// Seqs are per job.
	if got, err := db.AppendLedger("b", LedgerEntry{Round: 1, Event: event(1)}); err != nil || got.Seq != 1 {
		t.Fatalf("job b first append %+v, %v", got, err)
	}
	db.Close()
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	l, err := db.Ledger("a")
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != len(stored) {
		t.Fatalf("%d entries, want %d", len(l), len(stored))
	}
	for i, e := range l {
		w := stored[i]
		if e.Seq != w.Seq || e.Round != w.Round || string(e.Event) != string(w.Event) || !e.Time.Equal(w.Time) {
			t.Errorf("entry %d = %+v, want %+v", i, e, w)
		}
	}
	if l, _ := db.Ledger("b"); len(l) != 1 {
		t.Fatalf("job b has %d entries", len(l))
	}
}

func TestLedgerErrors(t *testing.T) {
	db, _ := openTemp(t)
	_, err := db.AppendLedger("ghost", LedgerEntry{Round: 1, Event: event(1)})
	wantErr(t, err, ErrNotFound, `"ghost"`)
	_, err = db.Ledger("ghost")
	wantErr(t, err, ErrNotFound, `"ghost"`)

	mustCreate(t, db, "j")
	if l, err := db.Ledger("j"); err != nil || len(l) != 0 {
		t.Fatalf("empty ledger: %v, %v", l, err)
	}
	for _, e := range []LedgerEntry{
		{Round: 1},
		{Round: 1, Event: json.RawMessage(`{"z":`)},
		{Round: -1, Event: event(1)},
	} {
		if _, err := db.AppendLedger("j", e); err == nil {
			t.Errorf("AppendLedger(%+v) accepted", e)
		}
	}
	if err := db.SetJobState("j", StateBudgetExhausted, "ε spent"); err != nil {
		t.Fatal(err)
	}
	_, err = db.AppendLedger("j", LedgerEntry{Round: 1, Event: event(1)})
	wantErr(t, err, ErrConflict, `"j"`)
	if l, _ := db.Ledger("j"); len(l) != 0 {
		t.Fatalf("refused appends wrote %d entries", len(l))
	}
}
