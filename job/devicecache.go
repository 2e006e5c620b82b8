package job

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// The device credential cache of a replica under Leadership: devices poll
// their round several times a second, and each request presents the
// device's credential, so AuthenticateDevice must not read the store each
// time (on etcd, a request to the cluster).
//
// A device that authenticated once stays authenticated: nothing revokes a
// device or deletes one (the store has no such operation; a job is never
// deleted either), so a verified (job, credential hash) → device ID pair
// stays true. The map is indexed by the first half of the credential's
// SHA-256 and the whole hash is then compared in constant time, as the
// store's answer is compared today: timing can tell an attacker at most
// something about a hash prefix, never about a credential.
//
// A refused credential is remembered for refusedTTL, so that a device
// retrying with a wrong credential, or a flood of one bad credential,
// reaches the store once per refusedTTL rather than per request;
// concurrent lookups of one credential share one store read. A refusal is
// never wrong for long: a credential is drawn from crypto/rand at
// enrolment, so none can be presented before it exists, and Enroll on
// this replica forgets any refusal of the hash it enrolls.

// Bounds of the device credential cache.
const (
	// refusedTTL is how long a refused credential is answered from
	// memory.
	refusedTTL = 5 * time.Second
	// maxRefused bounds the remembered refusals; when full, the expired
	// ones go and, if none has, all of them.
	maxRefused = 1 << 14
	// maxKnownDevices bounds the remembered authentications (one per
	// enrolled device that has polled); beyond it a device is looked up
	// in the store each time.
	maxKnownDevices = 1 << 20
)

// credIndex is a known device's index: its job and the first half of its
// credential's SHA-256.
type credIndex struct {
	job    string
	prefix [sha256.Size / 2]byte
}

// credKey is a refused credential: its job and its whole hash.
type credKey struct {
	job  string
	hash [sha256.Size]byte
}

// knownDevice is an authenticated device: its ID and its credential's
// whole hash, compared in constant time on every use.
type knownDevice struct {
	id   string
	hash [sha256.Size]byte
}

// deviceCache remembers authenticated and refused device credentials. Its
// methods are safe for concurrent use.
type deviceCache struct {
	mu      sync.RWMutex
	known   map[credIndex]knownDevice
	refused map[credKey]time.Time // → when the refusal expires
	lookups singleflight.Group
	now     func() time.Time
}

func newDeviceCache() *deviceCache {
	return &deviceCache{known: map[credIndex]knownDevice{}, refused: map[credKey]time.Time{}, now: time.Now}
}

func indexOf(jobID string, h [sha256.Size]byte) credIndex {
	ix := credIndex{job: jobID}
	copy(ix.prefix[:], h[:])
	return ix
}

// authenticate returns the device of job jobID whose credential hashes to
// h: from memory when known (or refused, recently), else from lookup (the
// store), whose answer it remembers. lookup returns an error wrapping
// ErrUnauthorized for a credential that is no device's; any other error
// (the store unavailable) is returned and not remembered.
func (c *deviceCache) authenticate(jobID string, h [sha256.Size]byte, lookup func() (string, error)) (string, error) {
	ix, k := indexOf(jobID, h), credKey{job: jobID, hash: h}
	c.mu.RLock()
	d, known := c.known[ix]
	until, refused := c.refused[k]
	c.mu.RUnlock()
	if known && subtle.ConstantTimeCompare(d.hash[:], h[:]) == 1 {
		return d.id, nil
	}
	if refused && c.now().Before(until) {
		return "", errUnknownCredential(jobID)
	}
	v, err, _ := c.lookups.Do(jobID+"\x00"+string(h[:]), func() (any, error) {
		id, err := lookup()
		switch {
		case err == nil:
			c.remember(ix, knownDevice{id: id, hash: h})
		case errors.Is(err, ErrUnauthorized):
			c.refuse(k)
		}
		return id, err
	})
	if err != nil {
		return "", err
	}
	return v.(string), nil
}

func (c *deviceCache) remember(ix credIndex, d knownDevice) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.known[ix]; ok || len(c.known) >= maxKnownDevices {
		return // a prefix shared by two devices' hashes: the first keeps it
	}
	c.known[ix] = d
	delete(c.refused, credKey{job: ix.job, hash: d.hash})
}

func (c *deviceCache) refuse(k credKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if len(c.refused) >= maxRefused {
		for k, until := range c.refused {
			if !now.Before(until) {
				delete(c.refused, k)
			}
		}
		if len(c.refused) >= maxRefused {
			clear(c.refused)
		}
	}
	c.refused[k] = now.Add(refusedTTL)
}

// forget drops any refusal of hash h for job jobID (a device just
// enrolled with it).
func (c *deviceCache) forget(jobID string, h [sha256.Size]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.refused, credKey{job: jobID, hash: h})
}
