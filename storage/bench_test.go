package storage

import (
	"testing"
)

// benchParams is the parameter count of the paper-scale CNN checkpoint
// (199,210 float32 = 796,840 bytes).
const benchParams = 199_210

// Each op is one fsynced bbolt transaction, so this measures commit latency.
func BenchmarkAppendLedger(b *testing.B) {
	db, _ := openTemp(b)
	mustCreate(b, db, "j")
	e := LedgerEntry{Round: 1, Event: event(1)}
	for b.Loop() {
		if _, err := db.AppendLedger("j", e); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCommitRound(b *testing.B) {
	db, _ := openTemp(b)
	mustCreate(b, db, "j")
	ck := checkpointFor(1, benchParams)
	m := metricsFor(1)
	b.SetBytes(4 * benchParams)
	for r := 1; b.Loop(); r++ {
		if err := db.CommitRound("j", r, m, ck); err != nil {
			b.Fatal(err)
		}
	}
}

// Read path of a restart: verify and decode the checkpoint.
func BenchmarkCheckpoint(b *testing.B) {
	db, _ := openTemp(b)
	mustCreate(b, db, "j")
	if err := db.CommitRound("j", 1, metricsFor(1), checkpointFor(1, benchParams)); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(4 * benchParams)
	for b.Loop() {
		if _, _, err := db.Checkpoint("j"); err != nil {
			b.Fatal(err)
		}
	}
}

// CPU part of CommitRound alone (encoding + CRC-32C), without bbolt.
func BenchmarkEncodeCheckpoint(b *testing.B) {
	ck := checkpointFor(1, benchParams)
	b.SetBytes(4 * benchParams)
	for b.Loop() {
		encodeCheckpoint(1, &ck)
	}
}
