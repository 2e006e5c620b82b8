package storage

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The etcd store: kvStore (kv.go) over an etcd cluster, for servers that
// share their state and elect a leader per job.
//
// # Keys
//
// Everything lives under one prefix R (EtcdOptions.Prefix). A bucket path
// P = p1/…/pn is encoded as E(P) = 'b' uvarint(len p1) p1 … 'b'
// uvarint(len pn) pn, which is prefix-free, and
//
//	R E(P) 'k' key  → a direct child of P: 'v' ‖ value, or "B" for a nested bucket
//	R E(P) 'm'      → the largest child key of P (a hint that makes Last cheap)
//	R 'c'           → the commit key, rewritten by every write transaction
//
// The tag byte after E(P) ('k', 'b' or 'm') tells a child from a nested
// bucket's contents, so no key can collide with a bucket, and the
// direct children of P are exactly the keys with prefix R E(P) 'k', in
// the bucket's key order. Values are the same framed (CRC-32C) bytes a
// bbolt file holds. Bucket markers are never deleted.
//
// # Transactions
//
// A transaction reads at one revision, the snapshot (etcd keeps every
// revision until compaction: https://etcd.io/docs/v3.4/learning/data_model/),
// and buffers its writes; its reads, cursors included, see its own writes
// merged in key order. It commits as one etcd Txn
// (https://etcd.io/docs/v3.4/learning/api/#transaction): If(the commit
// key's ModRevision ≤ snapshot revision [, the fence's
// CreateRevision(Key) = Rev]) Then(the puts and deletes, and a put of
// the commit key) Else(a get of the fence key). etcd applies a Txn
// atomically, so either every write is applied or none is; since every
// write transaction rewrites the commit key, the comparison fails iff
// another write transaction committed after the snapshot, and the
// transaction is then run again (up to etcdTxnRetries times): every
// write transaction is serializable, as bbolt's single writer makes
// them. A transaction that wrote nothing commits nothing. (Comparing the
// whole prefix's ModRevision instead would miss deletes and make etcd
// read every key under the prefix on each write.)
//
// A Txn that fails without an answer (a timeout, a lost connection) may
// or may not have been applied. The store settles it: it rewrites the
// commit key if unchanged since the snapshot (after which the lost Txn
// can never apply) — success means it was not applied, and it is run
// again; otherwise it watches the commit key's first change after the
// snapshot, which carries this transaction's random ID if and only if it
// was applied. When that too fails, the error wraps ErrUnavailable and
// the outcome is unknown.

// MaxEtcdValueBytes is the largest value, in bytes, that the etcd store
// accepts (512 KiB): values stay well under etcd's request limit
// (--max-request-bytes, 1.5 MiB by default). Checkpoints, the only larger
// values, go to the blob directory.
const MaxEtcdValueBytes = 512 << 10

const (
	// Defaults of EtcdOptions.
	defaultEtcdPrefix          = "/dpfl/"
	defaultEtcdTimeout         = 5 * time.Second
	defaultEtcdMaxRequestBytes = 1536 << 10 // etcd's --max-request-bytes default
	defaultEtcdMaxTxnOps       = 128        // etcd's --max-txn-ops default

	// etcdTxnRetries bounds how often a write transaction is run again
	// after losing a race with another writer.
	etcdTxnRetries = 20
	// etcdOpOverhead over-estimates the bytes an operation adds to a Txn
	// request beyond its key and value (protobuf framing).
	etcdOpOverhead = 32
	// etcdMaxPage is the most keys one cursor read fetches.
	etcdMaxPage = 512
)

// Tags of the key encoding (see above).
const (
	tagSub    = 'b'
	tagChild  = 'k'
	tagMax    = 'm'
	tagCommit = 'c'
	valTag    = 'v'
	bucketVal = "B"
)

// EtcdOptions configure OpenEtcd.
type EtcdOptions struct {
	// Endpoints are the etcd client URLs, e.g. "http://127.0.0.1:2379".
	Endpoints []string
	// Prefix is the key prefix under which the store keeps everything
	// (default "/dpfl/"; a "/" is appended if missing). Deployments
	// sharing a cluster need prefixes of which none is a prefix of
	// another.
	Prefix string
	// BlobDir is the directory of the checkpoint blobs (Options.BlobDir);
	// required, since a checkpoint exceeds etcd's request limit. Every
	// server that may lead a job must see the same directory.
	BlobDir string
	// DialTimeout bounds connecting to the cluster (default 5 s).
	DialTimeout time.Duration
	// RequestTimeout bounds each etcd call (default 5 s); a write
	// transaction makes several reads and one commit, and may run again.
	RequestTimeout time.Duration
	// MaxRequestBytes and MaxTxnOps are the cluster's --max-request-bytes
	// and --max-txn-ops (defaults 1.5 MiB and 128, etcd's): a transaction
	// past them is refused before it is sent.
	MaxRequestBytes, MaxTxnOps int
}

// OpenEtcd opens the store kept in the etcd cluster at opt.Endpoints
// under opt.Prefix, creating it if the prefix is empty: the same
// top-level buckets and format-version check as Open. ctx bounds the
// first contact with the cluster; an unreachable cluster gives an error
// wrapping ErrUnavailable. Every later call is bounded by
// opt.RequestTimeout. Close closes the client.
//
// Unlike a bbolt file, several servers may open the same store at once:
// every write transaction is serializable (see the comment at the top of
// etcd.go), and writes made for a job through DB.Fenced are refused by
// etcd once another server leads the job. Values over MaxEtcdValueBytes
// are refused with an error saying so.
func OpenEtcd(ctx context.Context, opt EtcdOptions) (*DB, error) {
	if len(opt.Endpoints) == 0 {
		return nil, errors.New("storage: etcd: no endpoints")
	}
	if opt.BlobDir == "" {
		return nil, errors.New("storage: etcd: EtcdOptions.BlobDir is required: a checkpoint exceeds etcd's request limit, so checkpoints are kept as files there")
	}
	if opt.Prefix == "" {
		opt.Prefix = defaultEtcdPrefix
	}
	if !strings.HasSuffix(opt.Prefix, "/") {
		opt.Prefix += "/"
	}
	if opt.DialTimeout <= 0 {
		opt.DialTimeout = defaultEtcdTimeout
	}
	if opt.RequestTimeout <= 0 {
		opt.RequestTimeout = defaultEtcdTimeout
	}
	if opt.MaxRequestBytes <= 0 {
		opt.MaxRequestBytes = defaultEtcdMaxRequestBytes
	}
	if opt.MaxTxnOps <= 0 {
		opt.MaxTxnOps = defaultEtcdMaxTxnOps
	}
	desc := "etcd " + strings.Join(opt.Endpoints, ",") + " " + opt.Prefix
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:          opt.Endpoints,
		DialTimeout:        opt.DialTimeout,
		Logger:             zap.NewNop(),
		MaxCallSendMsgSize: opt.MaxRequestBytes + 64<<10,
	})
	if err != nil {
		return nil, fmt.Errorf("storage: %s: %v: %w", desc, err, ErrUnavailable)
	}
	s := newEtcdStore(cli, opt)
	pctx, cancel := context.WithTimeout(ctx, opt.RequestTimeout)
	_, err = cli.Get(pctx, s.commitKey)
	cancel()
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("storage: %s: not reachable: %v: %w", desc, err, ErrUnavailable)
	}
	db, err := initDB(s, desc, opt.BlobDir)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("storage: open %s: %w", desc, err)
	}
	return db, nil
}

// etcdStore is kvStore over etcd.
type etcdStore struct {
	cli       *clientv3.Client
	root      string
	commitKey string
	timeout   time.Duration
	maxOps    int
	maxBytes  int
	ctx       context.Context // cancelled by Close
	cancel    context.CancelFunc
	closeOnce sync.Once
	closeErr  error

	// markers caches the bucket markers seen to exist, with the
	// revision that wrote them: markers are never deleted, so one
	// exists at every later revision.
	mu      sync.Mutex
	markers map[string]int64

	// txn sends a transaction's Txn; tests replace it to lose answers.
	txn func(ctx context.Context, cmps []clientv3.Cmp, then, els []clientv3.Op) (*clientv3.TxnResponse, error)
}

func newEtcdStore(cli *clientv3.Client, opt EtcdOptions) *etcdStore {
	ctx, cancel := context.WithCancel(context.Background())
	s := &etcdStore{
		cli: cli, root: opt.Prefix, commitKey: opt.Prefix + string(rune(tagCommit)),
		timeout: opt.RequestTimeout, maxOps: opt.MaxTxnOps, maxBytes: opt.MaxRequestBytes,
		ctx: ctx, cancel: cancel, markers: map[string]int64{},
	}
	s.txn = func(ctx context.Context, cmps []clientv3.Cmp, then, els []clientv3.Op) (*clientv3.TxnResponse, error) {
		return cli.Txn(ctx).If(cmps...).Then(then...).Else(els...).Commit()
	}
	return s
}

func (s *etcdStore) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		s.closeErr = s.cli.Close()
	})
	return s.closeErr
}

func (s *etcdStore) structureCheck() bool { return false }

// call returns the context of one etcd call.
func (s *etcdStore) call() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.ctx, s.timeout)
}

// unavailable wraps an etcd error as ErrUnavailable, keeping it
// inspectable (errors.Is(err, rpctypes.ErrCompacted)).
func (s *etcdStore) unavailable(what string, err error) error {
	return fmt.Errorf("storage: etcd %s: %w: %w", what, err, ErrUnavailable)
}

func (s *etcdStore) View(fn func(kvTx) error) error {
	t, err := s.begin(false)
	if err != nil {
		return err
	}
	err = fn(t)
	if t.err != nil {
		return t.err
	}
	return err
}

func (s *etcdStore) Update(fence *Fence, fn func(kvTx) error) error {
	if fence != nil && (fence.Key == "" || fence.Rev <= 0) {
		return fmt.Errorf("storage: invalid fence (key %q, revision %d)", fence.Key, fence.Rev)
	}
	for try := 1; ; try++ {
		t, err := s.begin(true)
		if err != nil {
			return err
		}
		err = fn(t)
		if t.err != nil {
			if errors.Is(t.err, rpctypes.ErrCompacted) && try < etcdTxnRetries {
				continue // the snapshot was compacted away: start again
			}
			return t.err
		}
		if err != nil || len(t.buf) == 0 {
			return err
		}
		done, err := s.commit(t, fence)
		if err != nil || done {
			return err
		}
		if try == etcdTxnRetries {
			return fmt.Errorf("storage: etcd: the transaction lost the race with other writers %d times: %w", try, ErrUnavailable)
		}
		// Back off 1–10 ms × try, jittered, so racing writers spread out.
		time.Sleep(time.Duration(try) * (time.Millisecond + rand.N(9*time.Millisecond)))
	}
}

// begin starts a transaction at the current revision.
func (s *etcdStore) begin(writable bool) (*etcdTx, error) {
	ctx, cancel := s.call()
	defer cancel()
	resp, err := s.cli.Get(ctx, s.commitKey)
	if err != nil {
		return nil, s.unavailable("read", err)
	}
	t := &etcdTx{s: s, rev: resp.Header.Revision, writable: writable, cache: map[string]*mvccpb.KeyValue{}}
	if writable {
		t.buf = map[string]bufOp{}
	}
	t.root = &etcdBucket{t: t, pfx: s.root}
	return t, nil
}

// commit sends t's writes as one Txn. It returns true when they were
// applied, false (nil error) when the transaction must run again.
func (s *etcdStore) commit(t *etcdTx, fence *Fence) (bool, error) {
	keys := make([]string, 0, len(t.buf))
	for k := range t.buf {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	id := make([]byte, 16)
	crand.Read(id)
	txnID := hex.EncodeToString(id)
	ops := make([]clientv3.Op, 0, len(keys)+1)
	size := len(s.commitKey) + len(txnID) + 2*etcdOpOverhead
	for _, k := range keys {
		op := t.buf[k]
		if op.del {
			ops = append(ops, clientv3.OpDelete(k))
		} else {
			ops = append(ops, clientv3.OpPut(k, string(op.val)))
		}
		size += len(k) + len(op.val) + etcdOpOverhead
	}
	ops = append(ops, clientv3.OpPut(s.commitKey, txnID))
	if len(ops) > s.maxOps {
		return false, fmt.Errorf("storage: etcd: the transaction writes %d keys, more than etcd's limit of %d operations (--max-txn-ops)", len(ops), s.maxOps)
	}
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.commitKey), "<", t.rev+1)}
	var els []clientv3.Op
	if fence != nil {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(fence.Key), "=", fence.Rev))
		els = append(els, clientv3.OpGet(fence.Key, clientv3.WithKeysOnly()))
		size += 2*len(fence.Key) + 2*etcdOpOverhead
	}
	if size > s.maxBytes {
		return false, fmt.Errorf("storage: etcd: the transaction is about %d bytes, more than etcd's request limit of %d bytes (--max-request-bytes)", size, s.maxBytes)
	}
	ctx, cancel := s.call()
	resp, err := s.txn(ctx, cmps, ops, els)
	cancel()
	if err != nil {
		if definite(err) {
			return false, fmt.Errorf("storage: etcd refused the write: %w", err)
		}
		return s.settle(t.rev, txnID, err)
	}
	if resp.Succeeded {
		s.noteMarkers(t, resp.Header.Revision)
		return true, nil
	}
	if fence != nil {
		if r := resp.Responses[0].GetResponseRange(); r == nil || len(r.Kvs) == 0 || r.Kvs[0].CreateRevision != fence.Rev {
			return false, fmt.Errorf("storage: etcd refused the write: the fence %q (revision %d) no longer holds: %w", fence.Key, fence.Rev, ErrFenced)
		}
	}
	return false, nil
}

// definite reports whether a Txn error means the Txn was not applied
// (and will not be): etcd refused the request itself.
func definite(err error) bool {
	var ee rpctypes.EtcdError
	code := status.Code(err)
	if errors.As(err, &ee) {
		code = ee.Code()
	}
	switch code {
	case codes.InvalidArgument, codes.FailedPrecondition, codes.PermissionDenied,
		codes.Unauthenticated, codes.ResourceExhausted, codes.OutOfRange:
		return true
	}
	return false
}

// settle finds out whether the Txn with ID txnID, whose snapshot was rev
// and whose answer was lost (cause), was applied; see the comment at the
// top of this file. It returns true if it was, false (nil error) if it
// was not and cannot be any more, and an error wrapping ErrUnavailable
// if that could not be told.
func (s *etcdStore) settle(rev int64, txnID string, cause error) (bool, error) {
	unknown := func(err error) (bool, error) {
		return false, fmt.Errorf("storage: etcd: the write's outcome is unknown (%v; settling it: %v): %w", cause, err, ErrUnavailable)
	}
	ctx, cancel := s.call()
	defer cancel()
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(s.commitKey), "<", rev+1)).
		Then(clientv3.OpPut(s.commitKey, "void "+txnID)).
		Commit()
	if err != nil {
		return unknown(err)
	}
	if resp.Succeeded {
		return false, nil // not applied, and now it never will be
	}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	for wr := range s.cli.Watch(wctx, s.commitKey, clientv3.WithRev(rev+1)) {
		if err := wr.Err(); err != nil {
			return unknown(err)
		}
		if len(wr.Events) > 0 {
			return string(wr.Events[0].Kv.Value) == txnID, nil
		}
	}
	if err := ctx.Err(); err != nil {
		return unknown(err)
	}
	return unknown(errors.New("watch closed"))
}

// noteMarkers records the bucket markers t created, committed at rev.
func (s *etcdStore) noteMarkers(t *etcdTx, rev int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.markers) > 1<<16 {
		clear(s.markers)
	}
	for k, op := range t.buf {
		if !op.del && string(op.val) == bucketVal {
			s.markers[k] = rev
		}
	}
}

// etcdTx is one transaction: reads at revision rev, writes buffered in
// buf (nil for a read-only transaction).
type etcdTx struct {
	s        *etcdStore
	rev      int64
	writable bool
	buf      map[string]bufOp
	// cache holds the snapshot's values read so far (nil: absent).
	cache map[string]*mvccpb.KeyValue
	// err is the first failed read: reads then return nothing, and the
	// transaction fails with it whatever fn returns.
	err  error
	root *etcdBucket
}

// bufOp is a buffered write: a put of val, or a delete.
type bufOp struct {
	val []byte
	del bool
}

func (t *etcdTx) fail(err error) {
	if t.err == nil {
		t.err = t.s.unavailable("read", err)
	}
}

// snap returns key at the snapshot (nil if absent).
func (t *etcdTx) snap(key string) *mvccpb.KeyValue {
	if kv, ok := t.cache[key]; ok {
		return kv
	}
	if t.err != nil {
		return nil
	}
	ctx, cancel := t.s.call()
	defer cancel()
	resp, err := t.s.cli.Get(ctx, key, clientv3.WithRev(t.rev))
	if err != nil {
		t.fail(err)
		return nil
	}
	var kv *mvccpb.KeyValue
	if len(resp.Kvs) > 0 {
		kv = resp.Kvs[0]
	}
	t.cache[key] = kv
	return kv
}

// get returns key's raw value as the transaction sees it.
func (t *etcdTx) get(key string) ([]byte, bool) {
	if op, ok := t.buf[key]; ok {
		return op.val, !op.del
	}
	if kv := t.snap(key); kv != nil {
		return kv.Value, true
	}
	return nil, false
}

// isBucket reports whether key is a bucket marker in the transaction's
// view; after a failed read it says true, so that callers go on to
// reads that return nothing instead of taking a missing bucket for nil.
func (t *etcdTx) isBucket(key string) bool {
	if t.err != nil {
		return true
	}
	if op, ok := t.buf[key]; ok {
		return !op.del && string(op.val) == bucketVal
	}
	t.s.mu.Lock()
	rev, ok := t.s.markers[key]
	t.s.mu.Unlock()
	if ok && rev <= t.rev {
		return true
	}
	kv := t.snap(key)
	if kv == nil || string(kv.Value) != bucketVal {
		return t.err != nil
	}
	t.s.mu.Lock()
	t.s.markers[key] = kv.ModRevision
	t.s.mu.Unlock()
	return true
}

func (t *etcdTx) put(key string, val []byte) { t.buf[key] = bufOp{val: val} }

func (t *etcdTx) Bucket(name []byte) kvBucket { return t.root.Bucket(name) }

func (t *etcdTx) CreateBucketIfNotExists(name []byte) (kvBucket, error) {
	return t.root.CreateBucketIfNotExists(name)
}

func (t *etcdTx) Check() <-chan error {
	c := make(chan error)
	close(c)
	return c
}

// etcdBucket is the bucket whose keys have prefix pfx = R E(P); path
// names it in errors.
type etcdBucket struct {
	t    *etcdTx
	pfx  string
	path string
}

func (b *etcdBucket) child(k []byte) string { return b.pfx + string(rune(tagChild)) + string(k) }
func (b *etcdBucket) maxKey() string        { return b.pfx + string(rune(tagMax)) }

func (b *etcdBucket) sub(name []byte) *etcdBucket {
	var n [binary.MaxVarintLen64]byte
	l := binary.PutUvarint(n[:], uint64(len(name)))
	return &etcdBucket{t: b.t, pfx: b.pfx + string(rune(tagSub)) + string(n[:l]) + string(name), path: b.path + "/" + string(name)}
}

// value decodes a child's raw value: nil for a bucket marker.
func value(raw []byte) []byte {
	if string(raw) == bucketVal {
		return nil
	}
	if len(raw) > 0 && raw[0] == valTag {
		return raw[1:]
	}
	return raw // not written by this package: let the frame check fail
}

func (b *etcdBucket) Get(key []byte) []byte {
	raw, ok := b.t.get(b.child(key))
	if !ok {
		return nil
	}
	return value(raw)
}

// writable checks that key may be written in this transaction.
func (b *etcdBucket) writable(key []byte) error {
	switch {
	case !b.t.writable:
		return berrors.ErrTxNotWritable
	case len(key) == 0:
		return berrors.ErrKeyRequired
	case len(key) > bolt.MaxKeySize:
		return berrors.ErrKeyTooLarge
	}
	return nil
}

func (b *etcdBucket) Put(key, val []byte) error {
	if err := b.writable(key); err != nil {
		return err
	}
	if len(val) > MaxEtcdValueBytes {
		return fmt.Errorf("storage: etcd: a value of %d bytes (bucket %s, key %q) exceeds the etcd store's cap of %d bytes (MaxEtcdValueBytes)", len(val), b.path, key, MaxEtcdValueBytes)
	}
	k := b.child(key)
	if b.t.isBucket(k) && b.t.err == nil {
		return berrors.ErrIncompatibleValue
	}
	v := make([]byte, 1+len(val))
	v[0] = valTag
	copy(v[1:], val)
	b.t.put(k, v)
	b.raiseMax(key)
	return nil
}

// raiseMax keeps the bucket's largest-key hint at least key.
func (b *etcdBucket) raiseMax(key []byte) {
	if m, ok := b.t.get(b.maxKey()); !ok || bytes.Compare(key, m) > 0 {
		b.t.put(b.maxKey(), bytes.Clone(key))
	}
}

func (b *etcdBucket) Delete(key []byte) error {
	if err := b.writable(key); err != nil {
		return err
	}
	k := b.child(key)
	raw, ok := b.t.get(k)
	if !ok {
		return nil
	}
	if string(raw) == bucketVal {
		return berrors.ErrIncompatibleValue
	}
	b.t.buf[k] = bufOp{del: true}
	// The hint may now name a deleted key; Last checks the hint and
	// falls back to a scan, and drop it so it is not trusted blindly.
	if m, ok := b.t.get(b.maxKey()); ok && bytes.Equal(m, key) {
		b.t.buf[b.maxKey()] = bufOp{del: true}
	}
	return nil
}

func (b *etcdBucket) Bucket(name []byte) kvBucket {
	if len(name) == 0 || !b.t.isBucket(b.child(name)) {
		return nil
	}
	return b.sub(name)
}

func (b *etcdBucket) CreateBucket(name []byte) (kvBucket, error) {
	if len(name) == 0 {
		return nil, berrors.ErrBucketNameRequired
	}
	if err := b.writable(name); err != nil {
		return nil, err
	}
	k := b.child(name)
	if raw, ok := b.t.get(k); ok {
		if string(raw) == bucketVal {
			return nil, berrors.ErrBucketExists
		}
		return nil, berrors.ErrIncompatibleValue
	}
	if b.t.err != nil {
		return b.sub(name), nil // the transaction fails with t.err
	}
	b.t.put(k, []byte(bucketVal))
	b.raiseMax(name)
	return b.sub(name), nil
}

func (b *etcdBucket) CreateBucketIfNotExists(name []byte) (kvBucket, error) {
	if nb := b.Bucket(name); nb != nil {
		return nb, nil
	}
	return b.CreateBucket(name)
}

func (b *etcdBucket) ForEach(fn func(k, v []byte) error) error {
	c := b.cursor(64)
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return b.t.err
}

func (b *etcdBucket) ForEachBucket(fn func(k []byte) error) error {
	return b.ForEach(func(k, v []byte) error {
		if v != nil {
			return nil
		}
		return fn(k)
	})
}

func (b *etcdBucket) Cursor() kvCursor { return b.cursor(1) }

// cursor returns a cursor whose first etcd read fetches first keys, and
// each further read twice as many (up to etcdMaxPage).
func (b *etcdBucket) cursor(first int64) *etcdCursor {
	lo := b.pfx + string(rune(tagChild))
	return &etcdCursor{b: b, lo: lo, hi: b.pfx + string(rune(tagChild+1)), first: first}
}

// etcdCursor walks a bucket's children: the snapshot's (read from etcd
// a page at a time, in the cursor's direction) merged with the
// transaction's buffered writes, which override them.
type etcdCursor struct {
	b      *etcdBucket
	lo, hi string // the children's keys are [lo, hi)
	first  int64
	desc   bool
	// The snapshot side: keys read ahead, in direction order, and where
	// reading continues (at next, inclusive or not; more false: done).
	queue []*mvccpb.KeyValue
	next  string
	incl  bool
	more  bool
	limit int64
	// The buffer side: buffered keys in [lo, hi), sorted, and the bound
	// beyond which the next one is taken.
	bufKeys []string
	bound   string
	bincl   bool
	// pos is the current key and state how the cursor stands there;
	// off the ends it keeps bbolt's positions (see cursorState).
	pos   string
	state cursorState
}

// cursorState is where a cursor stands, as bbolt's would: a move past
// the last key leaves it on the last key (Prev then returns the one
// before), one before the first leaves it on the first (Next then
// returns the second), and a Seek past the end leaves it after the end
// (Prev then returns the last key).
type cursorState int

const (
	curNone     cursorState = iota // unpositioned, or the bucket was empty
	curAt                          // on pos
	curOffEnd                      // a Next found nothing after pos
	curOffStart                    // a Prev found nothing before pos
	curPastEnd                     // a Seek found nothing
)

// reset positions the cursor before the keys from from on (desc: from
// from down); from "" means from the first (desc: the last) key.
func (c *etcdCursor) reset(from string, incl, desc bool) {
	c.desc, c.queue, c.more, c.limit = desc, nil, true, c.first
	switch {
	case from != "":
		c.next, c.incl = from, incl
	case desc:
		c.next, c.incl = c.hi, false
	default:
		c.next, c.incl = c.lo, true
	}
	c.bound, c.bincl = c.next, c.incl
	c.bufKeys = c.bufKeys[:0]
	for k := range c.b.t.buf {
		if k >= c.lo && k < c.hi {
			c.bufKeys = append(c.bufKeys, k)
		}
	}
	slices.Sort(c.bufKeys)
}

// fill reads the next page of the snapshot when the queue is empty.
func (c *etcdCursor) fill() {
	t := c.b.t
	for len(c.queue) == 0 && c.more && t.err == nil {
		key, end := c.next, c.hi
		opts := []clientv3.OpOption{clientv3.WithRev(t.rev), clientv3.WithLimit(c.limit)}
		if !c.incl {
			key += "\x00"
		}
		if c.desc {
			key, end = c.lo, c.next
			if c.incl {
				end += "\x00"
			}
			opts = append(opts, clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend))
		}
		if key >= end {
			c.more = false
			return
		}
		ctx, cancel := t.s.call()
		resp, err := t.s.cli.Get(ctx, key, append(opts, clientv3.WithRange(end))...)
		cancel()
		if err != nil {
			t.fail(err)
			c.more = false
			return
		}
		c.queue, c.more = resp.Kvs, resp.More
		if n := len(resp.Kvs); n > 0 {
			c.next, c.incl = string(resp.Kvs[n-1].Key), false
		}
		c.limit = min(2*c.limit, etcdMaxPage)
	}
}

// beyond reports whether key lies past bound in the cursor's direction.
func (c *etcdCursor) beyond(key, bound string, incl bool) bool {
	if key == bound {
		return incl
	}
	return (key > bound) != c.desc
}

// step moves to the next key in the cursor's direction.
func (c *etcdCursor) step() ([]byte, []byte) {
	t := c.b.t
	for {
		c.fill()
		if len(c.queue) == 0 {
			break
		}
		if _, ok := t.buf[string(c.queue[0].Key)]; !ok {
			break
		}
		c.queue = c.queue[1:] // the buffer overrides it
	}
	// The buffer's next put past the bound.
	var bk string
	if c.desc {
		for i := len(c.bufKeys) - 1; i >= 0; i-- {
			if k := c.bufKeys[i]; c.beyond(k, c.bound, c.bincl) && !t.buf[k].del {
				bk = k
				break
			}
		}
	} else {
		for _, k := range c.bufKeys {
			if c.beyond(k, c.bound, c.bincl) && !t.buf[k].del {
				bk = k
				break
			}
		}
	}
	var key string
	var raw []byte
	switch {
	case len(c.queue) > 0 && (bk == "" || c.beyond(bk, string(c.queue[0].Key), false)):
		key, raw = string(c.queue[0].Key), c.queue[0].Value
		c.queue = c.queue[1:]
	case bk != "":
		key, raw = bk, t.buf[bk].val
	default:
		return nil, nil
	}
	c.pos, c.bound, c.bincl = key, key, false
	return []byte(key[len(c.lo):]), value(raw)
}

// moved sets the state after a move that returned k: at the new key, or
// miss when there was none (pos then stays where it was).
func (c *etcdCursor) moved(k, v []byte, miss cursorState) ([]byte, []byte) {
	if k != nil {
		c.state = curAt
	} else {
		c.state = miss
	}
	return k, v
}

func (c *etcdCursor) First() ([]byte, []byte) {
	c.reset("", true, false)
	k, v := c.step()
	return c.moved(k, v, curNone)
}

// Last uses the bucket's largest-key hint when it checks out (the key
// exists and none follows it, both cheap reads); otherwise it reads the
// range in descending order, which etcd serves by reading the whole range.
func (c *etcdCursor) Last() ([]byte, []byte) {
	t := c.b.t
	if m, ok := t.get(c.b.maxKey()); ok {
		key := c.b.child(m)
		if raw, ok := t.get(key); ok {
			c.reset(key, false, false)
			if k, _ := c.step(); k == nil && t.err == nil {
				// At key, facing down; the next read is below it.
				c.reset(key, false, true)
				c.pos, c.state = key, curAt
				return []byte(key[len(c.lo):]), value(raw)
			}
		}
	}
	c.reset("", false, true)
	k, v := c.step()
	return c.moved(k, v, curNone)
}

func (c *etcdCursor) Next() ([]byte, []byte) {
	if c.state != curAt && c.state != curOffStart {
		return nil, nil
	}
	if c.desc {
		c.reset(c.pos, false, false)
	}
	k, v := c.step()
	return c.moved(k, v, curOffEnd)
}

func (c *etcdCursor) Prev() ([]byte, []byte) {
	switch c.state {
	case curNone, curOffStart:
		return nil, nil
	case curPastEnd:
		c.reset("", false, true)
		k, v := c.step()
		return c.moved(k, v, curNone)
	}
	if !c.desc {
		c.reset(c.pos, false, true)
	}
	k, v := c.step()
	return c.moved(k, v, curOffStart)
}

func (c *etcdCursor) Seek(seek []byte) ([]byte, []byte) {
	c.reset(c.b.child(seek), true, false)
	k, v := c.step()
	return c.moved(k, v, curPastEnd)
}

// EtcdClient is the etcd client of a store opened with OpenEtcd (shared by
// its fenced views), for the per-job elections (internal/leader) that
// produce the fences; nil for a bbolt store. Do not close it: DB.Close does.
func (db *DB) EtcdClient() *clientv3.Client {
	if s, ok := db.kv.(*etcdStore); ok {
		return s.cli
	}
	return nil
}
