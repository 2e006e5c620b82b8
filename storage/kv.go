package storage

import (
	bolt "go.etcd.io/bbolt"
)

// The package's logic is written against the small key-value
// transaction interface below, which mirrors exactly the part of bbolt's
// API that it uses: nested buckets of ordered byte keys, one read-write
// or read-only transaction per exported method. Two stores implement it:
// boltStore (a thin adapter over a bbolt file, the default; its
// behaviour is bbolt's) and etcdStore (etcd.go).
//
// The discipline is bbolt's for both: a slice returned by Get, ForEach
// or a cursor is valid only until the transaction ends (bbolt's alias
// its memory map) and must not be modified; values passed to Put must
// not be modified until the transaction ends.

// kvStore is a transactional store of nested buckets.
type kvStore interface {
	// View runs fn in a read-only transaction on one consistent
	// snapshot. fn runs once.
	View(fn func(kvTx) error) error
	// Update runs fn in a read-write transaction and commits its writes
	// atomically if fn returns nil; nothing is written otherwise. With a
	// non-nil fence the commit also requires the fence to hold (the
	// etcd store; the bbolt store refuses fenced writes). fn may run more
	// than once (the etcd store retries a transaction that lost a race
	// with another writer), so it must set everything it reports on each
	// run.
	Update(fence *Fence, fn func(kvTx) error) error
	// Close releases the store.
	Close() error
	// structureCheck reports whether kvTx.Check checks anything (bbolt's
	// page check; etcd has no equivalent reachable from a client).
	structureCheck() bool
}

// kvTx is one transaction.
type kvTx interface {
	// Bucket returns the top-level bucket name, or nil if there is none.
	Bucket(name []byte) kvBucket
	// CreateBucketIfNotExists returns the top-level bucket name, creating
	// it in a read-write transaction if needed.
	CreateBucketIfNotExists(name []byte) (kvBucket, error)
	// Check runs the store's structural consistency check, sending each
	// problem found; the channel is closed at the end.
	Check() <-chan error
}

// kvBucket is a bucket: ordered keys (bytewise) whose values are either
// byte strings or nested buckets.
type kvBucket interface {
	// Get returns the value of key, or nil if it is absent or a bucket.
	Get(key []byte) []byte
	// Put sets key to value; key must not be a bucket.
	Put(key, value []byte) error
	// Delete removes key (absent: no-op); key must not be a bucket.
	Delete(key []byte) error
	// Bucket returns the nested bucket name, or nil if there is none.
	Bucket(name []byte) kvBucket
	// CreateBucket creates the nested bucket name, which must not exist.
	CreateBucket(name []byte) (kvBucket, error)
	// CreateBucketIfNotExists returns the nested bucket name, creating
	// it if needed.
	CreateBucketIfNotExists(name []byte) (kvBucket, error)
	// ForEach calls fn for every key in order, with a nil value for a
	// nested bucket; an error from fn stops it and is returned.
	ForEach(fn func(k, v []byte) error) error
	// ForEachBucket calls fn for every nested bucket's name in order.
	ForEachBucket(fn func(k []byte) error) error
	// Cursor returns a cursor over the bucket's keys.
	Cursor() kvCursor
}

// kvCursor walks a bucket's keys in order. Each method returns the key
// and value it moved to (value nil for a nested bucket), or a nil key
// when there is none.
type kvCursor interface {
	First() (k, v []byte)
	Last() (k, v []byte)
	Next() (k, v []byte)
	Prev() (k, v []byte)
	// Seek moves to key, or to the first key after it.
	Seek(seek []byte) (k, v []byte)
}

// boltStore is kvStore over a bbolt file: every call is the bbolt call
// of the same name.
type boltStore struct{ db *bolt.DB }

func (s boltStore) View(fn func(kvTx) error) error {
	return s.db.View(func(tx *bolt.Tx) error { return fn(boltTx{tx}) })
}

func (s boltStore) Update(fence *Fence, fn func(kvTx) error) error {
	if fence != nil {
		return errBoltFence
	}
	return s.db.Update(func(tx *bolt.Tx) error { return fn(boltTx{tx}) })
}

func (s boltStore) Close() error         { return s.db.Close() }
func (s boltStore) structureCheck() bool { return true }

type boltTx struct{ tx *bolt.Tx }

func (t boltTx) Bucket(name []byte) kvBucket { return wrapBolt(t.tx.Bucket(name)) }

func (t boltTx) CreateBucketIfNotExists(name []byte) (kvBucket, error) {
	b, err := t.tx.CreateBucketIfNotExists(name)
	return wrapBolt(b), err
}

func (t boltTx) Check() <-chan error { return t.tx.Check() }

// boltBucket holds a single pointer, so it is stored in an interface
// value without an allocation.
type boltBucket struct{ b *bolt.Bucket }

// wrapBolt returns b as a kvBucket: a nil interface (not a typed nil)
// for a nil b, so the callers' nil checks keep their meaning.
func wrapBolt(b *bolt.Bucket) kvBucket {
	if b == nil {
		return nil
	}
	return boltBucket{b}
}

func (b boltBucket) Get(key []byte) []byte                    { return b.b.Get(key) }
func (b boltBucket) Put(key, value []byte) error              { return b.b.Put(key, value) }
func (b boltBucket) Delete(key []byte) error                  { return b.b.Delete(key) }
func (b boltBucket) Bucket(name []byte) kvBucket              { return wrapBolt(b.b.Bucket(name)) }
func (b boltBucket) Cursor() kvCursor                         { return boltCursor{b.b.Cursor()} }
func (b boltBucket) ForEach(fn func(k, v []byte) error) error { return b.b.ForEach(fn) }
func (b boltBucket) ForEachBucket(fn func(k []byte) error) error {
	return b.b.ForEachBucket(fn)
}

func (b boltBucket) CreateBucket(name []byte) (kvBucket, error) {
	nb, err := b.b.CreateBucket(name)
	return wrapBolt(nb), err
}

func (b boltBucket) CreateBucketIfNotExists(name []byte) (kvBucket, error) {
	nb, err := b.b.CreateBucketIfNotExists(name)
	return wrapBolt(nb), err
}

type boltCursor struct{ c *bolt.Cursor }

func (c boltCursor) First() (k, v []byte)           { return c.c.First() }
func (c boltCursor) Last() (k, v []byte)            { return c.c.Last() }
func (c boltCursor) Next() (k, v []byte)            { return c.c.Next() }
func (c boltCursor) Prev() (k, v []byte)            { return c.c.Prev() }
func (c boltCursor) Seek(seek []byte) (k, v []byte) { return c.c.Seek(seek) }
