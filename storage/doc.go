// Package storage is the crash-safe store for dpfl jobs: job records, the
// per-job privacy ledger, per-round metrics and the latest global-model
// checkpoint, plus a small settings table. It is a thin, typed layer over a
// single bbolt (B+tree, copy-on-write, single-writer) file (Open), or over
// an etcd cluster shared by several servers (OpenEtcd, etcd.go).
//
// The logic is written against a small transaction interface over nested
// buckets (kv.go) that mirrors the part of bbolt's API it uses; bbolt and
// etcd implement it. What follows describes the bbolt file; the etcd store
// keeps the same buckets, keys and framed values under a key prefix, and
// its transactions are serializable too (etcd.go). With a blob directory
// (Options.BlobDir, required with etcd) the checkpoints are files named by
// their SHA-256, the store holding only a checked pointer (blob.go). Writes
// for a job can be fenced on its leader's election (DB.Fenced, fence.go).
//
// # Transaction model
//
// Every exported write is exactly one bbolt read-write transaction
// (db.Update) and every exported read is exactly one read-only transaction
// (db.View). bbolt commits a transaction by writing new pages and then
// atomically switching one of its two meta pages, fsyncing both steps, so a
// transaction is either wholly in the file or wholly absent after a crash
// (process kill or power loss). Because no exported method spans two
// transactions, a caller can never leave a half-written record: in
// particular CommitRound writes the round's metrics, the replacement
// checkpoint and the job's Round counter together or not at all. When a
// write method returns nil the transaction has been fsynced.
//
// A *DB is safe for concurrent use by multiple goroutines: bbolt serialises
// writers and lets readers see a consistent snapshot. Only one process may
// hold the file open; Open fails after one second with ErrLocked otherwise.
//
// # File format (version 1)
//
// Top-level buckets:
//
//	meta/                 "format" → "dpfl-storage/1" (framed); refused if different
//	settings/             <key> → framed opaque bytes
//	jobs/<job id>/        one nested bucket per job
//	    "meta"            framed JSON of Job
//	    "checkpoint"      framed binary checkpoint (below); absent until round 1
//	    "checkpoint_blob" instead of "checkpoint" with a blob directory: framed
//	                      JSON pointer (SHA-256, length) to the blob (blob.go)
//	    ledger/           u64(seq)   → framed JSON of LedgerEntry, seq = 1, 2, … (with
//	                      an "attempt" field when AppendChargeOnce wrote it)
//	    metrics/          u64(round) → framed metrics JSON, round = 1 … Job.Round
//	units/                privacy units (shared budgets), unit.go
//	unit_revisions/       each unit's charge counter, bumped by every charge to it (unitcharge.go)
//	log/                  the transparency log (tlog.go): leaves, tlog's stored
//	                      hashes, each job's leaf index and the signed head; every
//	                      ledger append, round commit and unit creation appends
//	                      its leaf in its own transaction
//	devices/<job id>/     enrolled devices of a devices job (device.go): ids/
//	                      device ID → framed record; credentials/ SHA-256 of
//	                      a credential → device ID (credentials never stored)
//
// Keys u64(n) are 8-byte big-endian unsigned integers, so bbolt's bytewise
// cursor order is numeric order. Integers inside values are little-endian.
//
// Every value in the file is framed as
//
//	[0:4]  CRC-32C (Castagnoli polynomial, RFC 3720 §B.4) of payload, little-endian uint32
//	[4:]   payload
//
// and every read verifies the checksum: bbolt checksums only its meta pages,
// so the frame is what detects a flipped bit in data pages. A mismatch, a
// value shorter than 4 bytes or a payload that does not decode is reported
// as an error wrapping ErrCorrupt that names the job and the seq or round;
// nothing is ever silently skipped.
//
// The checkpoint payload is
//
//	[0:4]    magic "DPCK"
//	[4:8]    layout version, uint32 = 1
//	[8:16]   round, uint64
//	[16:24]  n = len(Params), uint64
//	[24:32]  m = len(OptState), uint64
//	[32:32+4n]        Params as IEEE-754 binary32, little-endian (bit-exact, NaN payloads kept)
//	[32+4n:32+4n+m]   OptState, opaque bytes
//
// # Invariants
//
// For every job, after any crash: the metrics keys are exactly 1 … Job.Round;
// the checkpoint exists iff Job.Round > 0 and then has Round == Job.Round;
// ledger seqs are exactly 1 … n. The ledger is a write-ahead log: callers
// append the accounting event of a differentially private release before
// making the release, so after a crash the ledger may hold events for a round
// that was never committed (spent budget is over-counted, never lost).
// AppendLedger accepts only an event for round Job.Round+1, so entries'
// rounds never decrease and never pass Job.Round+1, and each interruption
// leaves at most one extra event. Verify checks these invariants and every
// checksum, enrolled devices and their credential index included
// (VerifyWith bounds the checkpoint bytes read at server start).
package storage
