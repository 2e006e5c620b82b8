package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/dpfl/dpfl/storage"
)

// etcdScheme begins a --store that names an etcd cluster.
const etcdScheme = "etcd://"

// etcdDialTimeout bounds the first contact with the etcd cluster at
// start; etcdRequestTimeout each later etcd call.
const (
	etcdDialTimeout    = 5 * time.Second
	etcdRequestTimeout = 5 * time.Second
)

// blobLogKeyName is the signing key's file name in --blob-dir, its
// default place with the etcd store (which has no database file to put
// it beside). Blob directories are named by a SHA-256 in hex, so it
// cannot collide with one.
const blobLogKeyName = "signing-key"

// storeFlags choose the store: the bbolt file --db (the default), or an
// etcd cluster (--store etcd://host:port,…) under --store-prefix, with
// checkpoints in --blob-dir.
type storeFlags struct {
	dbPath  string // --db
	store   string // --store, as given
	prefix  string // --store-prefix
	blobDir string // --blob-dir
	// endpoints are the etcd client URLs of an etcd --store; nil for
	// bbolt.
	endpoints []string
}

// register adds --store, --store-prefix and --blob-dir to fs (the caller
// adds --db).
func (s *storeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.store, "store", "", "the store: empty for the bbolt file --db, or etcd://host:port[,host:port…] for an etcd cluster (needs --blob-dir)")
	fs.StringVar(&s.prefix, "store-prefix", "/dpfl/", "key prefix of the etcd store (with --store etcd://…)")
	fs.StringVar(&s.blobDir, "blob-dir", "", "directory of the checkpoint files (required with --store etcd://…, shared by every server of the cluster; optional with bbolt)")
}

// check parses --store: it sets endpoints for an etcd store, and refuses a
// malformed URL or an etcd store without --blob-dir.
func (s *storeFlags) check() error {
	if s.store == "" {
		return nil
	}
	rest, ok := strings.CutPrefix(s.store, etcdScheme)
	if !ok {
		return fmt.Errorf("--store %q: want etcd://host:port[,host:port…] (for example etcd://127.0.0.1:2379), or leave it out for the bbolt file --db", s.store)
	}
	if strings.ContainsAny(rest, "/?#@") {
		return fmt.Errorf("--store %q: want etcd://host:port[,host:port…] with no path, query or user (the key prefix is --store-prefix)", s.store)
	}
	s.endpoints = nil
	for _, hp := range strings.Split(rest, ",") {
		host, port, err := net.SplitHostPort(hp)
		if err != nil || host == "" || port == "" {
			return fmt.Errorf("--store %q: %q is not host:port (want etcd://host:port[,host:port…])", s.store, hp)
		}
		s.endpoints = append(s.endpoints, "http://"+hp)
	}
	if s.blobDir == "" {
		return errors.New("--store etcd://… needs --blob-dir: checkpoints exceed etcd's request limit and are kept as files there (a directory every server of the cluster shares)")
	}
	if s.prefix == "" || !strings.HasPrefix(s.prefix, "/") {
		return fmt.Errorf("--store-prefix %q: want a key prefix beginning with /, such as /dpfl/", s.prefix)
	}
	return nil
}

// etcd reports whether the store is etcd.
func (s *storeFlags) etcd() bool { return s.endpoints != nil }

// logKeyFile is the signing key's default file: beside the bbolt file, or
// in --blob-dir with etcd.
func (s *storeFlags) logKeyFile() string {
	if s.etcd() {
		return filepath.Join(s.blobDir, blobLogKeyName)
	}
	return storage.LogKeyFile(s.dbPath)
}

// describe names the store for the log.
func (s *storeFlags) describe() string {
	if s.etcd() {
		return s.store + " " + s.prefix
	}
	return s.dbPath
}

// open opens the store that check chose.
func (s *storeFlags) open(ctx context.Context) (*storage.DB, error) {
	if !s.etcd() {
		return storage.OpenWith(s.dbPath, storage.Options{BlobDir: s.blobDir})
	}
	db, err := storage.OpenEtcd(ctx, storage.EtcdOptions{
		Endpoints: s.endpoints, Prefix: s.prefix, BlobDir: s.blobDir,
		DialTimeout: etcdDialTimeout, RequestTimeout: etcdRequestTimeout,
	})
	if errors.Is(err, storage.ErrUnavailable) {
		return nil, fmt.Errorf("%w (is etcd running at %s?)", err, strings.Join(s.endpoints, ","))
	}
	return db, err
}
