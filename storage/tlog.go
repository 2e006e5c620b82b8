package storage

import (
	"crypto/ed25519"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/dpfl/dpfl/audit"
)

// The transparency log (package audit) lives in the top-level bucket
// "log":
//
//	log/leaves/   u64(index)      → framed leaf bytes (audit.Leaf JSON), index = 0, 1, …
//	log/hashes/   u64(stored idx) → framed 32-byte hash, tlog's stored hashes (tlog.StoredHashes)
//	log/jobs/<job id>/ u64(k)     → framed u64(index) of the job's k-th leaf, k = 1, 2, …
//	log/"head"                    → framed JSON of logHead: size, root and the checkpoint note
//
// Each leaf is appended in the transaction that writes the record it
// logs (AppendLedger: a charge; CommitRound: a release; CreateUnit: a
// unit), together with its stored hashes, the job index entry and a new
// head signed with the DB's signer (SetLogSigner), so the log, the head
// and the records can never disagree after a crash.
var (
	bucketLog       = []byte("log")
	bucketLogLeaves = []byte("leaves")
	bucketLogHashes = []byte("hashes")
	bucketLogJobs   = []byte("jobs")
	keyLogHead      = []byte("head")
)

// unsignedOrigin is the origin line of a checkpoint written while the DB
// has no signer (tests, and a database opened without the server's key).
const unsignedOrigin = "unsigned"

// logHead is the stored tree head.
type logHead struct {
	Size int64     `json:"size"`
	Root tlog.Hash `json:"root"`
	// Checkpoint is the head's note: audit.Checkpoint.Text, followed by
	// the signature lines when the DB had a signer.
	Checkpoint string `json:"checkpoint"`
}

// LogHead is the transparency log's latest tree head.
type LogHead struct {
	// Size is the number of leaves; Root the Merkle tree hash of them
	// (RFC 6962, as tlog.TreeHash computes it; zero for an empty log).
	Size int64
	Root tlog.Hash
	// Checkpoint is the signed note of the head (audit.OpenCheckpoint
	// checks it). Without a signer it is the bare text, origin
	// "unsigned".
	Checkpoint string
}

// LogEntry is one leaf of the log with its inclusion proof.
type LogEntry struct {
	// Index is the leaf's position in the log, 0-based.
	Index int64
	// Leaf is the leaf's exact bytes (audit.Leaf JSON).
	Leaf []byte
	// Proof proves that Leaf is at Index in the tree of the head it was
	// read with (tlog.ProveRecord).
	Proof tlog.RecordProof
}

// logBuckets are the log's buckets in one transaction.
type logBuckets struct {
	root, leaves, hashes, jobs kvBucket
}

// openLog returns the log's buckets; in a read transaction of a file
// that predates the log they may be absent (ok false).
func openLog(tx kvTx) (logBuckets, bool) {
	r := tx.Bucket(bucketLog)
	if r == nil {
		return logBuckets{}, false
	}
	lb := logBuckets{root: r, leaves: r.Bucket(bucketLogLeaves), hashes: r.Bucket(bucketLogHashes), jobs: r.Bucket(bucketLogJobs)}
	return lb, lb.leaves != nil && lb.hashes != nil && lb.jobs != nil
}

// hashReader reads tlog's stored hashes from the hashes bucket, in the
// transaction it was made in (a write transaction sees its own writes).
type hashReader struct{ b kvBucket }

// ReadHashes implements tlog.HashReader. A missing or damaged hash is an
// error wrapping ErrCorrupt.
func (r hashReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		v := r.b.Get(u64(uint64(idx)))
		if v == nil {
			return nil, fmt.Errorf("storage: log stored hash %d: missing: %w", idx, ErrCorrupt)
		}
		p, err := unframe(v)
		if err != nil || len(p) != tlog.HashSize {
			return nil, fmt.Errorf("storage: log stored hash %d: damaged (%v, %d bytes): %w", idx, err, len(p), ErrCorrupt)
		}
		copy(out[i][:], p)
	}
	return out, nil
}

// readHead decodes the stored head (initLog writes the first).
func readHead(lb logBuckets) (logHead, error) {
	v := lb.root.Get(keyLogHead)
	if v == nil {
		return logHead{}, fmt.Errorf("storage: log head: missing: %w", ErrCorrupt)
	}
	p, err := unframe(v)
	if err != nil {
		return logHead{}, fmt.Errorf("storage: log head: %v: %w", err, ErrCorrupt)
	}
	var h logHead
	if err := json.Unmarshal(p, &h); err != nil || h.Size < 0 {
		return logHead{}, fmt.Errorf("storage: log head: undecodable (%v): %w", err, ErrCorrupt)
	}
	return h, nil
}

// SetLogSigner makes the DB sign every new log head with the note signer
// key skey (note.GenerateKey's private key; LoadOrCreateLogKey reads
// one) and returns the matching verifier key. Call it once, right after
// Open and before the DB is shared: it is not synchronised with writers.
// It writes nothing; SignLogHead signs the current head.
func (db *DB) SetLogSigner(skey string) (vkey string, err error) {
	s, err := note.NewSigner(skey)
	if err != nil {
		return "", fmt.Errorf("storage: log signing key: %w", err)
	}
	if vkey, err = verifierKey(skey); err != nil {
		return "", err
	}
	db.signer, db.logKey = s, vkey
	return vkey, nil
}

// LogPublicKey is the verifier key of the DB's signer ("" without one).
func (db *DB) LogPublicKey() string { return db.logKey }

// checkpointNote returns the head's note: the checkpoint text, signed
// when the DB has a signer.
func (db *DB) checkpointNote(size int64, root tlog.Hash) (string, error) {
	origin := unsignedOrigin
	if db.signer != nil {
		origin = db.signer.Name()
	}
	text := audit.Checkpoint{Origin: origin, Size: size, Root: root}.Text()
	if db.signer == nil {
		return text, nil
	}
	msg, err := note.Sign(&note.Note{Text: text}, db.signer)
	if err != nil {
		return "", fmt.Errorf("storage: signing the log checkpoint: %w", err)
	}
	return string(msg), nil
}

// putHead stores the head of a log of size leaves with root hash root.
func (db *DB) putHead(lb logBuckets, size int64, root tlog.Hash) error {
	cp, err := db.checkpointNote(size, root)
	if err != nil {
		return err
	}
	p, err := json.Marshal(logHead{Size: size, Root: root, Checkpoint: cp})
	if err != nil {
		return err
	}
	return lb.root.Put(keyLogHead, frame(p))
}

// SignLogHead signs the current head with the DB's signer unless it
// already carries this signer's signature; it reports whether it wrote a
// new head. dpfl-server calls it at start, after the start-up check: a
// head is unsigned when the log began in a database that had none
// (migrated by Open) or was written without the key. Without a signer
// it is an error.
func (db *DB) SignLogHead() (bool, error) {
	if db.signer == nil {
		return false, errors.New("storage: no log signer (SetLogSigner)")
	}
	signed := false
	err := db.update(func(tx kvTx) error {
		signed = false // the etcd store may run this again
		lb, err := ensureLog(tx)
		if err != nil {
			return err
		}
		h, err := readHead(lb)
		if err != nil {
			return err
		}
		if h.Checkpoint != "" {
			if _, err := audit.OpenCheckpoint(h.Checkpoint, db.logKey); err == nil {
				return nil
			}
		}
		signed = true
		return db.putHead(lb, h.Size, h.Root)
	})
	return signed, err
}

// ensureLog returns the log's buckets, creating any that are missing.
func ensureLog(tx kvTx) (logBuckets, error) {
	r, err := tx.CreateBucketIfNotExists(bucketLog)
	if err != nil {
		return logBuckets{}, err
	}
	lb := logBuckets{root: r}
	for _, b := range []struct {
		dst  *kvBucket
		name []byte
	}{{&lb.leaves, bucketLogLeaves}, {&lb.hashes, bucketLogHashes}, {&lb.jobs, bucketLogJobs}} {
		if *b.dst, err = r.CreateBucketIfNotExists(b.name); err != nil {
			return logBuckets{}, err
		}
	}
	return lb, nil
}

// appendLeaf appends l to the log inside tx and returns its index. For a
// job's leaf it sets JobLeaf and Prev from the job's chain. It writes the
// leaf, its stored hashes, the job index entry and a new head (signed
// when the DB has a signer). The caller's transaction makes it atomic
// with the record the leaf logs.
func (db *DB) appendLeaf(tx kvTx, l audit.Leaf) (int64, error) {
	lb, err := ensureLog(tx)
	if err != nil {
		return 0, err
	}
	h, err := readHead(lb)
	if err != nil {
		return 0, err
	}
	n := h.Size
	if k, _ := lb.leaves.Cursor().Last(); (k == nil) != (n == 0) || k != nil && binary.BigEndian.Uint64(k) != uint64(n-1) {
		return 0, fmt.Errorf("storage: log head says %d leaves, the last stored leaf key is %x: %w", n, k, ErrCorrupt)
	}
	if l.Job != "" {
		jb, err := lb.jobs.CreateBucketIfNotExists([]byte(l.Job))
		if err != nil {
			return 0, err
		}
		l.JobLeaf, l.Prev = 1, nil
		if k, v := jb.Cursor().Last(); k != nil {
			count, ok := keyU64(k)
			prev, err := decodeIndex(v)
			if !ok || err != nil {
				return 0, fmt.Errorf("storage: log index of job %q: damaged entry %x: %w", l.Job, k, ErrCorrupt)
			}
			l.JobLeaf, l.Prev = int64(count)+1, &prev
		}
		if err := jb.Put(u64(uint64(l.JobLeaf)), frame(u64(uint64(n)))); err != nil {
			return 0, err
		}
	}
	data, err := l.Marshal()
	if err != nil {
		return 0, fmt.Errorf("storage: log leaf: %w", err)
	}
	r := hashReader{lb.hashes}
	hashes, err := tlog.StoredHashes(n, data, r)
	if err != nil {
		return 0, fmt.Errorf("storage: log leaf %d: %w", n, err)
	}
	base := tlog.StoredHashIndex(0, n)
	for i, hh := range hashes {
		if err := lb.hashes.Put(u64(uint64(base+int64(i))), frame(hh[:])); err != nil {
			return 0, err
		}
	}
	if err := lb.leaves.Put(u64(uint64(n)), frame(data)); err != nil {
		return 0, err
	}
	root, err := tlog.TreeHash(n+1, r)
	if err != nil {
		return 0, fmt.Errorf("storage: log tree hash: %w", err)
	}
	return n, db.putHead(lb, n+1, root)
}

// decodeIndex decodes a framed u64 log index.
func decodeIndex(v []byte) (int64, error) {
	p, err := unframe(v)
	if err != nil {
		return 0, err
	}
	n, ok := keyU64(p)
	if !ok || n > 1<<62 {
		return 0, errors.New("not a log index")
	}
	return int64(n), nil
}

// readLeaf returns a copy of leaf i's bytes.
func readLeaf(lb logBuckets, i int64) ([]byte, error) {
	v := lb.leaves.Get(u64(uint64(i)))
	if v == nil {
		return nil, fmt.Errorf("storage: log leaf %d: missing: %w", i, ErrCorrupt)
	}
	p, err := unframe(v)
	if err != nil {
		return nil, fmt.Errorf("storage: log leaf %d: %v: %w", i, err, ErrCorrupt)
	}
	return append([]byte(nil), p...), nil
}

// jobLeafIndexes returns the log indexes of job id's leaves, in order.
func jobLeafIndexes(lb logBuckets, id string) ([]int64, error) {
	jb := lb.jobs.Bucket([]byte(id))
	if jb == nil {
		return nil, nil
	}
	var out []int64
	err := jb.ForEach(func(k, v []byte) error {
		n, ok := keyU64(k)
		i, err := decodeIndex(v)
		if !ok || n != uint64(len(out))+1 || err != nil {
			return fmt.Errorf("storage: log index of job %q: entry %d damaged or out of order: %w", id, len(out)+1, ErrCorrupt)
		}
		out = append(out, i)
		return nil
	})
	return out, err
}

// LogHead returns the log's latest head.
func (db *DB) LogHead() (LogHead, error) {
	var out LogHead
	err := db.view(func(tx kvTx) error {
		lb, ok := openLog(tx)
		if !ok {
			return nil
		}
		h, err := readHead(lb)
		out = LogHead(h)
		return err
	})
	return out, err
}

// JobLog returns, read in one transaction: the log's head, job id's
// record, every one of the job's leaves with its inclusion proof against
// that head and, when 0 < since ≤ head size, the proof that the log of
// since leaves is a prefix of it (tlog.ProveTree). Unknown jobs give
// ErrNotFound; since past the head's size is an error wrapping
// ErrConflict.
func (db *DB) JobLog(id string, since int64) (LogHead, Job, []LogEntry, tlog.TreeProof, error) {
	var (
		head    LogHead
		j       Job
		entries []LogEntry
		proof   tlog.TreeProof
	)
	err := db.view(func(tx kvTx) error {
		b, err := jobBucket(tx, id)
		if err != nil {
			return err
		}
		if j, err = readMeta(b, id); err != nil {
			return err
		}
		lb, ok := openLog(tx)
		if !ok {
			return nil
		}
		h, err := readHead(lb)
		if err != nil {
			return err
		}
		head = LogHead(h)
		if since < 0 || since > h.Size {
			return fmt.Errorf("storage: log consistency proof from %d leaves: the log has %d: %w", since, h.Size, ErrConflict)
		}
		r := hashReader{lb.hashes}
		if since > 0 {
			if proof, err = tlog.ProveTree(h.Size, since, r); err != nil {
				return fmt.Errorf("storage: log consistency proof from %d to %d leaves: %v: %w", since, h.Size, err, ErrCorrupt)
			}
		}
		idx, err := jobLeafIndexes(lb, id)
		if err != nil {
			return err
		}
		for _, i := range idx {
			if i >= h.Size {
				return fmt.Errorf("storage: log index of job %q names leaf %d beyond the head's %d: %w", id, i, h.Size, ErrCorrupt)
			}
			data, err := readLeaf(lb, i)
			if err != nil {
				return err
			}
			p, err := tlog.ProveRecord(h.Size, i, r)
			if err != nil {
				return fmt.Errorf("storage: log inclusion proof of leaf %d: %v: %w", i, err, ErrCorrupt)
			}
			entries = append(entries, LogEntry{Index: i, Leaf: data, Proof: p})
		}
		return nil
	})
	if err != nil {
		return LogHead{}, Job{}, nil, nil, err
	}
	return head, j, entries, proof, nil
}

// ConsistencyProof returns the log's head and the proof that the log of
// old leaves is a prefix of it (empty for old = 0 or old = size). old
// past the head's size is an error wrapping ErrConflict.
func (db *DB) ConsistencyProof(old int64) (LogHead, tlog.TreeProof, error) {
	var head LogHead
	var proof tlog.TreeProof
	err := db.view(func(tx kvTx) error {
		lb, ok := openLog(tx)
		if !ok {
			if old != 0 {
				return fmt.Errorf("storage: log consistency proof from %d leaves: the log is empty: %w", old, ErrConflict)
			}
			return nil
		}
		h, err := readHead(lb)
		if err != nil {
			return err
		}
		head = LogHead(h)
		if old < 0 || old > h.Size {
			return fmt.Errorf("storage: log consistency proof from %d leaves: the log has %d: %w", old, h.Size, ErrConflict)
		}
		if old > 0 {
			if proof, err = tlog.ProveTree(h.Size, old, hashReader{lb.hashes}); err != nil {
				return fmt.Errorf("storage: log consistency proof from %d to %d leaves: %v: %w", old, h.Size, err, ErrCorrupt)
			}
		}
		return nil
	})
	return head, proof, err
}

// ReleaseEntry returns the log's head and the release leaf of job id's
// round with its inclusion proof against that head, read in one
// transaction. A job without such a leaf (a round not committed, or
// committed before the log existed) gives an error wrapping ErrNotFound.
func (db *DB) ReleaseEntry(id string, round int) (LogHead, LogEntry, error) {
	var head LogHead
	var out LogEntry
	err := db.view(func(tx kvTx) error {
		if _, err := jobBucket(tx, id); err != nil {
			return err
		}
		lb, ok := openLog(tx)
		if !ok {
			return fmt.Errorf("storage: job %q: no log: %w", id, ErrNotFound)
		}
		h, err := readHead(lb)
		if err != nil {
			return err
		}
		head = LogHead(h)
		idx, err := jobLeafIndexes(lb, id)
		if err != nil {
			return err
		}
		for k := len(idx) - 1; k >= 0; k-- {
			data, err := readLeaf(lb, idx[k])
			if err != nil {
				return err
			}
			l, err := audit.ParseLeaf(data)
			if err != nil {
				return fmt.Errorf("storage: log leaf %d: %v: %w", idx[k], err, ErrCorrupt)
			}
			if l.Kind != audit.KindRelease || l.Round != round {
				continue
			}
			p, err := tlog.ProveRecord(h.Size, idx[k], hashReader{lb.hashes})
			if err != nil {
				return fmt.Errorf("storage: log inclusion proof of leaf %d: %v: %w", idx[k], err, ErrCorrupt)
			}
			out = LogEntry{Index: idx[k], Leaf: data, Proof: p}
			return nil
		}
		return fmt.Errorf("storage: job %q: the log holds no release of round %d: %w", id, round, ErrNotFound)
	})
	return head, out, err
}

// LogLeaves returns copies of leaves start … end−1 (0 ≤ start ≤ end ≤
// size).
func (db *DB) LogLeaves(start, end int64) ([][]byte, error) {
	var out [][]byte
	err := db.view(func(tx kvTx) error {
		lb, ok := openLog(tx)
		size := int64(0)
		if ok {
			h, err := readHead(lb)
			if err != nil {
				return err
			}
			size = h.Size
		}
		if start < 0 || start > end || end > size {
			return fmt.Errorf("storage: log leaves %d … %d: the log has %d: %w", start, end, size, ErrConflict)
		}
		for i := start; i < end; i++ {
			data, err := readLeaf(lb, i)
			if err != nil {
				return err
			}
			out = append(out, data)
		}
		return nil
	})
	return out, err
}

// chargeLeaf is the log leaf of ledger entry e of job j.
func chargeLeaf(j Job, e LedgerEntry, unit string) audit.Leaf {
	return audit.Leaf{Kind: audit.KindCharge, Job: j.ID, Seq: e.Seq, Round: e.Round, Time: e.Time, Event: e.Event, Unit: unit, SpecSHA256: audit.SHA256Hex(j.Config)}
}

// releaseLeaf is the log leaf of job j committing round with the model
// whose audit.ModelHash is model. It names the seq of the ledger's last
// entry when that entry is of this round (the charge covering it).
func releaseLeaf(b kvBucket, j Job, round int, model string, now time.Time) (audit.Leaf, error) {
	l := audit.Leaf{Kind: audit.KindRelease, Job: j.ID, Round: round, Time: now, SpecSHA256: audit.SHA256Hex(j.Config), ModelSHA256: model}
	led, err := subBucket(b, j.ID, bucketLedger)
	if err != nil {
		return l, err
	}
	if k, v := led.Cursor().Last(); k != nil {
		seq, _ := keyU64(k)
		e, err := decodeLedger(k, v, seq)
		if err != nil {
			return l, fmt.Errorf("storage: job %q ledger %w", j.ID, err)
		}
		if e.Round == round {
			l.ChargeSeq = e.Seq
		}
	}
	return l, nil
}

// initLog creates the log's buckets in a database that has none and, if
// the database already holds jobs or units (written before the log
// existed), starts the log with their history so that every ledger
// entry, committed round and unit has its leaf (leaves marked
// backfilled: their times are the migration's and only each job's
// latest release has a model hash, since earlier models are gone). The
// head is unsigned until the server signs it (SignLogHead).
func (db *DB) initLog(tx kvTx) error {
	if tx.Bucket(bucketLog) != nil {
		_, err := ensureLog(tx)
		return err
	}
	lb, err := ensureLog(tx)
	if err != nil {
		return err
	}
	empty, err := tlog.TreeHash(0, hashReader{lb.hashes})
	if err != nil {
		return err
	}
	if err := db.putHead(lb, 0, empty); err != nil {
		return err
	}
	now := time.Now().UTC()
	var jobs []Job
	err = tx.Bucket(bucketJobs).ForEachBucket(func(k []byte) error {
		j, err := readMeta(tx.Bucket(bucketJobs).Bucket(k), string(k))
		if err != nil {
			return fmt.Errorf("storage: starting the transparency log: %w", err)
		}
		jobs = append(jobs, j)
		return nil
	})
	if err != nil {
		return err
	}
	sortJobs(jobs)
	for _, j := range jobs {
		if err := db.backfillJob(tx, j, now); err != nil {
			return fmt.Errorf("storage: starting the transparency log: %w", err)
		}
	}
	return tx.Bucket(bucketUnits).ForEach(func(k, v []byte) error {
		p, err := unframe(v)
		if err != nil {
			return fmt.Errorf("storage: starting the transparency log: privacy unit %q: %v: %w", k, err, ErrCorrupt)
		}
		var u Unit
		if err := json.Unmarshal(p, &u); err != nil {
			return fmt.Errorf("storage: starting the transparency log: privacy unit %q: %v: %w", k, err, ErrCorrupt)
		}
		_, err = db.appendLeaf(tx, unitLeaf(u))
		return err
	})
}

// backfillJob appends the leaves of job j's history: its ledger's charges
// and its committed rounds' releases, in the order they happened.
func (db *DB) backfillJob(tx kvTx, j Job, now time.Time) error {
	b, err := jobBucket(tx, j.ID)
	if err != nil {
		return err
	}
	var entries []LedgerEntry
	led, err := subBucket(b, j.ID, bucketLedger)
	if err != nil {
		return err
	}
	err = led.ForEach(func(k, v []byte) error {
		e, err := decodeLedger(k, v, uint64(len(entries))+1)
		if err != nil {
			return fmt.Errorf("job %q ledger %w", j.ID, err)
		}
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		return err
	}
	var last string
	if j.Round > 0 {
		ck, _, err := db.readCheckpoint(b, j.ID)
		if err != nil {
			return err
		}
		last = audit.ModelHash(ck.Params)
	}
	next := 0
	for r := 1; r <= j.Round; r++ {
		var seq uint64
		for next < len(entries) && entries[next].Round <= r {
			l := chargeLeaf(j, entries[next], "")
			l.Backfilled = true
			if _, err := db.appendLeaf(tx, l); err != nil {
				return err
			}
			if entries[next].Round == r {
				seq = entries[next].Seq
			}
			next++
		}
		model := last
		if r < j.Round {
			model = ""
		}
		l := audit.Leaf{Kind: audit.KindRelease, Job: j.ID, Round: r, Time: now, ChargeSeq: seq,
			SpecSHA256: audit.SHA256Hex(j.Config), ModelSHA256: model, Backfilled: true}
		if _, err := db.appendLeaf(tx, l); err != nil {
			return err
		}
	}
	for ; next < len(entries); next++ {
		l := chargeLeaf(j, entries[next], "")
		l.Backfilled = true
		if _, err := db.appendLeaf(tx, l); err != nil {
			return err
		}
	}
	return nil
}

// sortJobs orders jobs as DB.Jobs does: by CreatedAt, ties by ID.
func sortJobs(jobs []Job) {
	slices.SortFunc(jobs, func(a, b Job) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// unitLeaf is the log leaf of creating privacy unit u.
func unitLeaf(u Unit) audit.Leaf {
	return audit.Leaf{Kind: audit.KindUnit, Unit: u.Name, EpsilonBudget: u.EpsilonBudget, Delta: u.Delta, Time: u.CreatedAt}
}

// LogKeyFile is the default path of the server's log signing key: next
// to the database, as <db>.signing-key.
func LogKeyFile(dbPath string) string { return dbPath + ".signing-key" }

// LoadOrCreateLogKey returns the note signing key (note.GenerateKey's
// private key string) stored at path, creating it on first use: a fresh
// Ed25519 key from crypto/rand named name (which becomes the log's
// origin), written to a new file of mode 0600. created says whether it
// was made now. A key file that group or others may read or write, or
// that is not a regular file, is refused: whoever reads it can sign
// checkpoints in the server's name.
func LoadOrCreateLogKey(path, name string) (skey string, created bool, err error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		skey, _, err := note.GenerateKey(crand.Reader, name)
		if err != nil {
			return "", false, fmt.Errorf("storage: generating the log signing key: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return "", false, fmt.Errorf("storage: creating the log signing key: %w", err)
		}
		_, werr := f.WriteString(skey + "\n")
		if serr := f.Sync(); werr == nil {
			werr = serr
		}
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			os.Remove(path)
			return "", false, fmt.Errorf("storage: writing the log signing key %s: %w", path, werr)
		}
		return skey, true, nil
	case err != nil:
		return "", false, fmt.Errorf("storage: log signing key: %w", err)
	case !fi.Mode().IsRegular():
		return "", false, fmt.Errorf("storage: log signing key %s is not a regular file (%s)", path, fi.Mode().Type())
	case fi.Mode().Perm()&0o077 != 0:
		return "", false, fmt.Errorf("storage: log signing key %s has mode %s: other users could read it and sign checkpoints in this server's name; make it readable by its owner only (chmod 600 %s)", path, fi.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false, fmt.Errorf("storage: log signing key: %w", err)
	}
	skey = strings.TrimSpace(string(b))
	if _, err := note.NewSigner(skey); err != nil {
		return "", false, fmt.Errorf("storage: log signing key %s is not a note signing key: %w", path, err)
	}
	return skey, false, nil
}

// verifierKey derives the note verifier key of Ed25519 signing key skey
// ("PRIVATE+KEY+<name>+<hash>+<base64(1 ‖ seed)>").
func verifierKey(skey string) (string, error) {
	// The base64 key may itself hold '+': cut the fields from the left,
	// as note.NewSigner does.
	priv, rest, _ := strings.Cut(skey, "+")
	key, rest, _ := strings.Cut(rest, "+")
	name, rest, _ := strings.Cut(rest, "+")
	_, key64, ok := strings.Cut(rest, "+")
	if priv != "PRIVATE" || key != "KEY" || !ok {
		return "", errors.New("storage: log signing key is not PRIVATE+KEY+<name>+<hash>+<key>")
	}
	k, err := base64.StdEncoding.DecodeString(key64)
	if err != nil || len(k) != 1+ed25519.SeedSize || k[0] != 1 {
		return "", errors.New("storage: log signing key is not an Ed25519 note key")
	}
	pub := ed25519.NewKeyFromSeed(k[1:]).Public().(ed25519.PublicKey)
	return note.NewEd25519VerifierKey(name, pub)
}

// errStopScan ends a bucket scan early; it is never returned.
var errStopScan = errors.New("stop")

// headText returns the text of a stored head's checkpoint note and
// whether it is signed. With vkey set, a signed note must carry a valid
// signature by that key.
func headText(cp, vkey string) (text string, signed bool, err error) {
	if !strings.Contains(cp, "\n\n") {
		return cp, false, nil // written without a signer
	}
	var verifiers []note.Verifier
	if vkey != "" {
		v, err := note.NewVerifier(vkey)
		if err != nil {
			return "", true, err
		}
		verifiers = append(verifiers, v)
	}
	n, err := note.Open([]byte(cp), note.VerifierList(verifiers...))
	var unverified *note.UnverifiedNoteError
	switch {
	case errors.As(err, &unverified) && vkey == "":
		return unverified.Note.Text, true, nil
	case errors.As(err, &unverified):
		var by []string
		for _, s := range unverified.Note.UnverifiedSigs {
			by = append(by, s.Name)
		}
		return "", true, fmt.Errorf("the checkpoint is signed by %v, not by this server's key %s (the key file was replaced, or the checkpoint rewritten)", by, vkey)
	case err != nil:
		return "", true, fmt.Errorf("checkpoint signature: %v (the checkpoint was altered)", err)
	}
	return n.Text, true, nil
}
