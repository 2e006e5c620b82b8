package storage

import (
	"bytes"
	"errors"
	"fmt"
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
	bolt *bolt.DB
	path string
	// signer signs the transparency log's heads and logKey is its
	// verifier key (SetLogSigner; nil and "" until then).
	signer note.Signer
	logKey string
}

// Open opens (creating if needed, mode 0600) the store at path and ensures
// the top-level buckets exist, the transparency log's included (a file
// written before the log gets one, started with its history: initLog in
// tlog.go). If another process holds the file lock for
// more than one second it returns an error wrapping ErrLocked that says so.
// A file written in another format version is refused.
func Open(path string) (*DB, error) {
	b, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("storage: database %s is locked by another dpfl-server? (no lock after %v): %w", path, lockTimeout, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	}
	db := &DB{bolt: b, path: path}
	err = b.Update(func(tx *bolt.Tx) error {
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
		b.Close()
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	}
	return db, nil
}

// Close releases the file and its lock. Calls after the first are no-ops.
func (db *DB) Close() error {
	return db.bolt.Close()
}

// Path returns the file path given to Open.
func (db *DB) Path() string {
	return db.path
}

// Setting returns a copy of the value stored under key; ok is false if none.
// A value failing its checksum yields an error wrapping ErrCorrupt.
func (db *DB) Setting(key string) (v []byte, ok bool, err error) {
	err = db.bolt.View(func(tx *bolt.Tx) error {
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
	return db.bolt.Update(func(tx *bolt.Tx) error {
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
	err := db.bolt.Update(func(tx *bolt.Tx) error {
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
