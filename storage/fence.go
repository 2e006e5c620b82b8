package storage

import "errors"

// Fence is the proof that this server leads a job: the etcd key of its
// leader election and that key's creation revision, as an etcd
// concurrency.Election exposes them (Election.Key and Election.Rev)
// once Campaign has returned. While the server leads, the key exists
// with that creation revision; when its lease lapses or it resigns, the
// key is deleted, and a new leader's key has a later revision.
type Fence struct {
	// Key is the leader's election key in etcd.
	Key string
	// Rev is Key's CreateRevision when this server won the election.
	Rev int64
}

// errBoltFence is the error of a write through a fenced view of a bbolt
// store.
var errBoltFence = errors.New("storage: fenced writes need the etcd store (OpenEtcd): a bbolt file has a single writer, the holder of its lock, and no leader election")

// Fenced returns a view of db whose every write transaction is fenced on
// f: with the etcd store (OpenEtcd) each transaction is committed as one
// etcd Txn whose comparisons include CreateRevision(f.Key) == f.Rev, so
// etcd itself refuses the write once another server has become the
// job's leader (or this server's election key has lapsed). A refused
// write changes nothing and returns an error wrapping ErrFenced that
// names jobID; FencedWrites counts them. Use the view for every write
// made for the job as its leader (ledger appends, round commits, state
// changes); reads through it are ordinary reads.
//
// The view shares db's store, signer and blob directory: call
// SetLogSigner on db before taking views. Closing a view is a no-op;
// close db itself. A zero Fence returns db unchanged (no fence). With a
// bbolt store (Open), which has one writing process and no election, a
// non-zero fence makes every write through the view fail with an error
// saying fences need etcd.
func (db *DB) Fenced(jobID string, f Fence) *DB {
	if f == (Fence{}) {
		return db
	}
	v := *db
	v.fence, v.fenceJob, v.isView = &f, jobID, true
	return &v
}

// FencedWrites is the number of writes that etcd refused because their
// fence no longer held (ErrFenced), over db and all its fenced views,
// since db was opened.
func (db *DB) FencedWrites() uint64 {
	return db.shared.fenced.Load()
}
