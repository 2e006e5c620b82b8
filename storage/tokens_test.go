package storage

import (
	"bytes"
	"crypto/sha256"
	"testing"
)

func TestTokenHashes(t *testing.T) {
	db, _ := openTemp(t)
	if _, ok, err := db.TokenHash("admin"); ok || err != nil {
		t.Fatalf("fresh store has an admin hash (%v, %v)", ok, err)
	}
	a, b := sha256.Sum256([]byte("a")), sha256.Sum256([]byte("b"))
	if got, err := db.SetTokenHashIfAbsent("admin", a[:]); err != nil || !bytes.Equal(got, a[:]) {
		t.Fatalf("first store: %x %v", got, err)
	}
	if got, err := db.SetTokenHashIfAbsent("admin", b[:]); err != nil || !bytes.Equal(got, a[:]) {
		t.Fatalf("second store replaced the first: %x %v", got, err)
	}
	if err := db.SetTokenHash("auditor", b[:]); err != nil {
		t.Fatal(err)
	}
	if h, ok, err := db.TokenHash("auditor"); !ok || err != nil || !bytes.Equal(h, b[:]) {
		t.Fatalf("auditor hash %x %v %v", h, ok, err)
	}
	if err := db.SetTokenHash("auditor", []byte("plaintext")); err == nil {
		t.Fatal("a non-hash was stored as a token hash")
	}
}

// A plaintext token from an older version becomes its hash, and the
// plaintext is gone from the file.
func TestMigratePlaintextToken(t *testing.T) {
	db, _ := openTemp(t)
	if found, err := db.MigratePlaintextToken("api_token", "admin"); found || err != nil {
		t.Fatalf("nothing to migrate: %v %v", found, err)
	}
	if err := db.SetSetting("api_token", []byte("old-secret")); err != nil {
		t.Fatal(err)
	}
	if found, err := db.MigratePlaintextToken("api_token", "admin"); !found || err != nil {
		t.Fatalf("migration: %v %v", found, err)
	}
	want := sha256.Sum256([]byte("old-secret"))
	if h, ok, err := db.TokenHash("admin"); !ok || err != nil || !bytes.Equal(h, want[:]) {
		t.Fatalf("migrated hash %x %v %v", h, ok, err)
	}
	if _, ok, _ := db.Setting("api_token"); ok {
		t.Fatal("the plaintext token is still stored")
	}
	// A stored hash is newer than a leftover plaintext token and wins.
	if err := db.SetSetting("api_token", []byte("older")); err != nil {
		t.Fatal(err)
	}
	if found, err := db.MigratePlaintextToken("api_token", "admin"); !found || err != nil {
		t.Fatal(found, err)
	}
	if h, _, _ := db.TokenHash("admin"); !bytes.Equal(h, want[:]) {
		t.Fatal("a leftover plaintext token replaced the stored hash")
	}
	if _, ok, _ := db.Setting("api_token"); ok {
		t.Fatal("the leftover plaintext token is still stored")
	}
}
