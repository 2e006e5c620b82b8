package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dpfl/dpfl/storage"
)

// --store: bbolt by default (--db, key beside it), etcd with endpoints
// and the key in --blob-dir; clear errors for a bad URL, a missing
// --blob-dir or both stores at once.
func TestStoreFlags(t *testing.T) {
	f, err := parseFlags(nil)
	if err != nil || f.st.etcd() || f.st.dbPath != "./dpfl.db" || f.logKeyFile != storage.LogKeyFile("./dpfl.db") {
		t.Fatalf("default: %+v, %v", f, err)
	}
	f, err = parseFlags([]string{"--db", "x.db", "--blob-dir", "b"})
	if err != nil || f.st.etcd() || f.st.blobDir != "b" || f.logKeyFile != "x.db.signing-key" {
		t.Fatalf("bbolt with --blob-dir: %+v, %v", f, err)
	}
	f, err = parseFlags([]string{"--store", "etcd://10.0.0.1:2379,[::1]:2380", "--blob-dir", "/srv/blobs"})
	if err != nil || !slices.Equal(f.st.endpoints, []string{"http://10.0.0.1:2379", "http://[::1]:2380"}) ||
		f.st.prefix != "/dpfl/" || f.logKeyFile != filepath.Join("/srv/blobs", "signing-key") {
		t.Fatalf("etcd: %+v, %v", f, err)
	}
	f, err = parseFlags([]string{"--store", "etcd://h:1", "--blob-dir", "b", "--log-key", "k"})
	if err != nil || f.logKeyFile != "k" {
		t.Fatalf("etcd with --log-key: %+v, %v", f, err)
	}
	for args, want := range map[string]string{
		"--store bolt.db":                                     "want etcd://host:port",
		"--store http://h:2379":                               "want etcd://host:port",
		"--store etcd://":                                     "is not host:port",
		"--store etcd://h":                                    "is not host:port",
		"--store etcd://h:1,":                                 "is not host:port",
		"--store etcd://h:1/dpfl --blob-dir b":                "no path",
		"--store etcd://h:1":                                  "needs --blob-dir",
		"--store etcd://h:1 --blob-dir b --db x":              "give one of them",
		"--store etcd://h:1 --blob-dir b --store-prefix dpfl": "--store-prefix",
	} {
		_, err := parseFlags(strings.Fields(args))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", args, err, want)
		}
	}
}
