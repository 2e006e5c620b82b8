package storage

import (
	"crypto/sha256"
	"errors"
	"fmt"
)

// API tokens live in the settings bucket only as SHA-256 hashes, one per
// role, under "token_sha256.<role>": a copy of the database file (a
// backup, a support bundle) then holds nothing that opens the API.

// tokenKey is the settings key of role's token hash.
func tokenKey(role string) string { return "token_sha256." + role }

// TokenHash returns the SHA-256 hash stored for role's API token; ok is
// false if none is stored.
func (db *DB) TokenHash(role string) (hash []byte, ok bool, err error) {
	if role == "" {
		return nil, false, errors.New("storage: empty token role")
	}
	return db.Setting(tokenKey(role))
}

// SetTokenHash stores hash (a SHA-256 sum) as role's API token hash,
// replacing (and so revoking) any previous one.
func (db *DB) SetTokenHash(role string, hash []byte) error {
	if role == "" || len(hash) != sha256.Size {
		return fmt.Errorf("storage: token hash for role %q must be %d bytes, got %d", role, sha256.Size, len(hash))
	}
	return db.SetSetting(tokenKey(role), hash)
}

// SetTokenHashIfAbsent stores hash as role's API token hash unless one is
// stored already, and returns the hash in force (SetSettingIfAbsent): the
// caller's token is the one in force exactly when the two are equal.
func (db *DB) SetTokenHashIfAbsent(role string, hash []byte) ([]byte, error) {
	if role == "" || len(hash) != sha256.Size {
		return nil, fmt.Errorf("storage: token hash for role %q must be %d bytes, got %d", role, sha256.Size, len(hash))
	}
	return db.SetSettingIfAbsent(tokenKey(role), hash)
}

// MigratePlaintextToken converts a token that an older version stored in
// plaintext under settings key oldKey: in one transaction it stores the
// token's SHA-256 hash as role's (unless a hash is stored already, which
// is newer and wins) and deletes the plaintext. It reports whether a
// plaintext token was found; without one it changes nothing.
func (db *DB) MigratePlaintextToken(oldKey, role string) (bool, error) {
	if oldKey == "" || role == "" {
		return false, errors.New("storage: empty setting key or token role")
	}
	found := false
	err := db.update(func(tx kvTx) error {
		found = false // the etcd store may run this again
		b := tx.Bucket(bucketSettings)
		raw := b.Get([]byte(oldKey))
		if raw == nil {
			return nil
		}
		plain, err := unframe(raw)
		if err != nil {
			return fmt.Errorf("storage: setting %q: %v: %w", oldKey, err, ErrCorrupt)
		}
		found = true
		if b.Get([]byte(tokenKey(role))) == nil {
			sum := sha256.Sum256(plain)
			if err := b.Put([]byte(tokenKey(role)), frame(sum[:])); err != nil {
				return err
			}
		}
		return b.Delete([]byte(oldKey))
	})
	return found, err
}
