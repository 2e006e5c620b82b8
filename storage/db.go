package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"golang.org/x/mod/sumdb/note"
)

// Sentinel errors. Methods wrap them with context (job id, seq, round) via
// fmt.Errorf("...: %w"); test with errors.Is.
var (
	// ErrNotFound: the job (or setting) does not exist.
	ErrNotFound = errors.New("not found")
	// ErrExists: CreateJob was given an ID that is already taken.
	ErrExists = errors.New("already exists")
	// ErrCorrupt: a stored value failed its CRC-32C check, did not decode,
	// or broke a structural invariant (see the package doc).
	ErrCorrupt = errors.New("corrupt data")
	// ErrConflict: the write is inconsistent with the stored state: a state
	// change out of a terminal state, a write to a terminal job, or a
	// CommitRound whose round is not Job.Round+1. Nothing was written.
	ErrConflict = errors.New("conflict with stored state")
	// ErrLocked: Open could not take the file lock within lockTimeout
	// because another process (normally another dpfl-server) holds it.
	ErrLocked = errors.New("database locked")
	// ErrFenced: a write made through a fenced view (DB.Fenced) was
	// refused by etcd because the fence no longer holds: the job's
	// leadership passed to another server (or lapsed) since the fence
	// was taken. Nothing was written; the caller is not the leader any
	// more and must stop writing for the job.
	ErrFenced = errors.New("fenced: not the leader any more")
	// ErrUnavailable: the etcd store could not be reached or did not
	// answer in time (EtcdOptions.RequestTimeout), or the transaction
	// kept losing races with other writers. For a write whose outcome
	// could not be settled, it is unknown whether it was applied: re-read
	// the state before deciding what to do.
	ErrUnavailable = errors.New("store unavailable")
)

// formatVersion is stored under meta/"format"; Open refuses other values so
// a future layout is never misread as this one.
const formatVersion = "dpfl-storage/1"

// lockTimeout bounds how long Open waits for bbolt's exclusive flock.
const lockTimeout = time.Second

var (
	bucketMeta     = []byte("meta")
	bucketSettings = []byte("settings")
	bucketJobs     = []byte("jobs")
	keyFormat      = []byte("format")
)

// DB is an open dpfl store. It is safe for concurrent use; see the package
// doc for the transaction model.
type DB struct {
	kv   kvStore
	path string
	// signer signs the transparency log's heads and logKey is its
	// verifier key (SetLogSigner; nil and "" until then).
	signer note.Signer
	logKey string
	// blobDir, when set, holds the checkpoints as content-addressed
	// files, the store only their pointers (blob.go).
	blobDir string
	// fence, when set, must hold for every write (Fenced); fenceJob is
	// the job it was taken for, for errors. isView marks such a view.
	fence    *Fence
	fenceJob string
	isView   bool
	// shared is the state common to a DB and its fenced views.
	shared *dbShared
}

// dbShared is the state that a DB and its fenced views share.
type dbShared struct {
	fenced atomic.Uint64 // writes refused by a fence (FencedWrites)
}

// Options are the optional settings of OpenWith.
type Options struct {
	// BlobDir, when set, is a directory (created with mode 0700 if
	// needed) where CommitRound writes each checkpoint as a
	// content-addressed file, storing only its SHA-256 and length in the
	// store (blob.go). Empty: checkpoints are stored in the file itself,
	// as Open does.
	BlobDir string
}

// Open opens (creating if needed, mode 0600) the store at path and ensures
// the top-level buckets exist, the transparency log's included (a file
// written before the log gets one, started with its history: initLog in
// tlog.go). If another process holds the file lock for
// more than one second it returns an error wrapping ErrLocked that says so.
// A file written in another format version is refused.
func Open(path string) (*DB, error) {
	return OpenWith(path, Options{})
}

// OpenWith is Open with options: see Options.
func OpenWith(path string, opt Options) (*DB, error) {
	b, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("storage: database %s is locked by another dpfl-server? (no lock after %v): %w", path, lockTimeout, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	}
	db, err := initDB(boltStore{b}, path, opt.BlobDir)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	}
	return db, nil
}

// initDB makes the DB over an opened store: it prepares the blob
// directory and, in one write transaction, ensures the top-level buckets
// and checks (or, in a new store, writes) the format marker.
func initDB(kv kvStore, path, blobDir string) (*DB, error) {
	db := &DB{kv: kv, path: path, blobDir: blobDir, shared: &dbShared{}}
	if blobDir != "" {
		if err := os.MkdirAll(blobDir, 0o700); err != nil {
			return nil, fmt.Errorf("blob directory: %w", err)
		}
	}
	err := db.update(func(tx kvTx) error {
		for _, name := range [][]byte{bucketMeta, bucketSettings, bucketJobs, bucketUnits, bucketDevices} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		m := tx.Bucket(bucketMeta)
		v := m.Get(keyFormat)
		if v == nil {
			if err := db.initLog(tx); err != nil {
				return err
			}
			return m.Put(keyFormat, frame([]byte(formatVersion)))
		}
		p, err := unframe(v)
		if err != nil {
			return fmt.Errorf("format marker: %v: %w", err, ErrCorrupt)
		}
		if !bytes.Equal(p, []byte(formatVersion)) {
			return fmt.Errorf("file format %q, this build reads %q", p, formatVersion)
		}
		// A file from before the transparency log gets one, with its
		// history (tlog.go).
		return db.initLog(tx)
	})
	if err != nil {
		return nil, err
	}
	return db, nil
}

// update runs fn in one write transaction of the store, under the DB's
// fence if it has one, and counts the writes a fence refused.
func (db *DB) update(fn func(kvTx) error) error {
	err := db.kv.Update(db.fence, fn)
	if errors.Is(err, ErrFenced) {
		db.shared.fenced.Add(1)
		if db.fenceJob != "" {
			err = fmt.Errorf("storage: job %q: %w", db.fenceJob, err)
		}
	}
	return err
}

// view runs fn in one read transaction of the store.
func (db *DB) view(fn func(kvTx) error) error {
	return db.kv.View(fn)
}

// Close releases the file and its lock (the etcd store: its client).
// Calls after the first are no-ops, and so is Close on a fenced view
// (Fenced): the DB it came from owns the store.
func (db *DB) Close() error {
	if db.isView {
		return nil
	}
	return db.kv.Close()
}

// Path returns the file path given to Open (the etcd store: a
// description of its endpoints and prefix).
func (db *DB) Path() string {
	return db.path
}

// Setting returns a copy of the value stored under key; ok is false if none.
// A value failing its checksum yields an error wrapping ErrCorrupt.
func (db *DB) Setting(key string) (v []byte, ok bool, err error) {
	err = db.view(func(tx kvTx) error {
		raw := tx.Bucket(bucketSettings).Get([]byte(key))
		if raw == nil {
			return nil
		}
		p, err := unframe(raw)
		if err != nil {
			return fmt.Errorf("storage: setting %q: %v: %w", key, err, ErrCorrupt)
		}
		v, ok = bytes.Clone(p), true
		if v == nil {
			v = []byte{}
		}
		return nil
	})
	return v, ok, err
}

// SetSetting stores v under key, replacing any previous value. key must be
// non-empty.
func (db *DB) SetSetting(key string, v []byte) error {
	if key == "" {
		return errors.New("storage: empty setting key")
	}
	return db.update(func(tx kvTx) error {
		return tx.Bucket(bucketSettings).Put([]byte(key), frame(v))
	})
}

// SetSettingIfAbsent atomically returns the value already stored under key
// or, if there is none, stores v and returns a copy of it. Concurrent callers
// (goroutines of one process) therefore all observe the same first-stored
// value, which makes it suitable for generate-once secrets and identifiers.
func (db *DB) SetSettingIfAbsent(key string, v []byte) ([]byte, error) {
	if key == "" {
		return nil, errors.New("storage: empty setting key")
	}
	var out []byte
	err := db.update(func(tx kvTx) error {
		b := tx.Bucket(bucketSettings)
		if raw := b.Get([]byte(key)); raw != nil {
			p, err := unframe(raw)
			if err != nil {
				return fmt.Errorf("storage: setting %q: %v: %w", key, err, ErrCorrupt)
			}
			out = append([]byte{}, p...)
			return nil
		}
		out = append([]byte{}, v...)
		return b.Put([]byte(key), frame(v))
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
