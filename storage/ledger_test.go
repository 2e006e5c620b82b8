package storage

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
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
		if err := db.CommitRound("a", r, metricsFor(r), checkpointFor(r, 4)); err != nil {
			t.Fatal(err)
		}
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
		{Round: 0, Event: event(0)},
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

// The ledger is write-ahead for the next round only: an event for any round
// but Job.Round+1 is refused and writes nothing, while a retry of the
// uncommitted round (after a crash) is accepted.
func TestLedgerAppendOnlyForTheNextRound(t *testing.T) {
	db, _ := openTemp(t)
	mustCreate(t, db, "j")
	_, err := db.AppendLedger("j", LedgerEntry{Round: 2, Event: event(2)})
	wantErr(t, err, ErrConflict, `"j"`, "round 2", "only round 1")
	for _, r := range []int{1, 1} { // round 1, then its retry after a crash
		if _, err := db.AppendLedger("j", LedgerEntry{Round: r, Event: event(r)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.CommitRound("j", 1, metricsFor(1), checkpointFor(1, 4)); err != nil {
		t.Fatal(err)
	}
	for _, r := range []int{1, 3} { // a committed round, a round ahead
		_, err := db.AppendLedger("j", LedgerEntry{Round: r, Event: event(r)})
		wantErr(t, err, ErrConflict, fmt.Sprintf("round %d", r), "1 rounds are committed", "only round 2")
	}
	l, err := db.Ledger("j")
	if err != nil || len(l) != 2 || l[0].Round != 1 || l[1].Round != 1 {
		t.Fatalf("ledger %+v, %v; want two events of round 1", l, err)
	}
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
}

// An entry whose round breaks the append invariants (after Job.Round+1,
// or before the previous entry's round) is reported as corrupt, by seq,
// by Ledger and by Verify: it means the job record or the ledger was
// rolled back or damaged.
func TestLedgerRoundInvariants(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(j *bolt.Bucket) error
		frag   string
	}{
		{"round past the next", func(j *bolt.Bucket) error {
			p, _ := json.Marshal(LedgerEntry{Seq: 4, Round: 5, Event: event(5)})
			return j.Bucket(bucketLedger).Put(u64(4), frame(p))
		}, "seq 4: event of round 5, but the job has committed 2 rounds"},
		{"round going back", func(j *bolt.Bucket) error {
			p, _ := json.Marshal(LedgerEntry{Seq: 3, Round: 1, Event: event(1)})
			return j.Bucket(bucketLedger).Put(u64(3), frame(p))
		}, "seq 3: event of round 1 after an event of round 2"},
		{"job record rolled back", func(j *bolt.Bucket) error {
			m, err := readMeta(j, "j")
			if err != nil {
				return err
			}
			m.Round = 0 // its metrics and checkpoint then break too
			return putMeta(j, &m)
		}, "seq 2: event of round 2, but the job has committed 0 rounds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := ledgerDB(t) // rounds 1, 2 committed; events 1, 2, 3
			rawUpdate(t, path, func(jobs *bolt.Bucket) error { return tc.damage(jobs.Bucket([]byte("j"))) })
			db := reopen(t, path)
			l, err := db.Ledger("j")
			wantErr(t, err, ErrCorrupt, `job "j"`, tc.frag)
			if l != nil {
				t.Fatalf("corrupt ledger returned %d entries", len(l))
			}
			wantErr(t, db.Verify(), ErrCorrupt, tc.frag)
		})
	}
}
