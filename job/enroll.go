package job

import (
	crand "crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/storage"
)

// Devices jobs admit only enrolled devices. An administrator enrolls each
// device for one job (Enroll) and hands it the credential, which is shown
// once: the store keeps only its SHA-256 hash. The device presents the
// credential on that job's participate routes (AuthenticateDevice); it
// opens nothing else, neither another job nor the administrative API.

// ErrUnauthorized: a device credential is missing, malformed, or not one
// enrolled for the job. It arrives wrapped with context.
var ErrUnauthorized = errors.New("unauthorized")

// ErrForbidden: an authenticated device presented a per-round client
// token (ClientTokenHeader) that join gave to another device.
var ErrForbidden = errors.New("forbidden")

// CredentialBytes is the length of a device credential before hex
// encoding: 32 bytes from crypto/rand.
const CredentialBytes = 32

// Enroll enrolls a new device for devices job jobID and returns its ID
// and credential. An unknown job is storage.ErrNotFound; a simulated job
// is ErrConflict, and one that has ended storage.ErrConflict (storage
// refuses the write).
func (m *Manager) Enroll(jobID string) (types.Enrollment, error) {
	if _, _, err := m.deviceJob(jobID); err != nil {
		return types.Enrollment{}, err
	}
	var cred [CredentialBytes]byte
	var id [8]byte
	if _, err := crand.Read(cred[:]); err != nil {
		return types.Enrollment{}, err
	}
	if _, err := crand.Read(id[:]); err != nil {
		return types.Enrollment{}, err
	}
	h := sha256.Sum256(cred[:])
	d := storage.Device{ID: "dev-" + hex.EncodeToString(id[:]), JobID: jobID, CredentialHash: h[:], EnrolledAt: time.Now().UTC()}
	if err := m.db.EnrollDevice(d); err != nil {
		return types.Enrollment{}, err
	}
	if ps := m.participation(); ps != nil {
		ps.devices.forget(jobID, h)
	}
	return types.Enrollment{JobID: jobID, DeviceID: d.ID, Credential: hex.EncodeToString(cred[:]), EnrolledAt: d.EnrolledAt}, nil
}

// Devices lists the devices enrolled for devices job jobID, oldest
// first. An unknown job is storage.ErrNotFound; a simulated job is
// ErrConflict.
func (m *Manager) Devices(jobID string) ([]types.DeviceInfo, error) {
	if _, _, err := m.deviceJob(jobID); err != nil {
		return nil, err
	}
	ds, err := m.db.Devices(jobID)
	if err != nil {
		return nil, err
	}
	out := make([]types.DeviceInfo, len(ds))
	for i, d := range ds {
		out[i] = types.DeviceInfo{DeviceID: d.ID, EnrolledAt: d.EnrolledAt}
	}
	return out, nil
}

// AuthenticateDevice returns the ID of the device of job jobID whose
// credential is credential, or an error wrapping ErrUnauthorized when
// there is none (wrong or malformed credential, a device enrolled for
// another job, or an unknown job). The stored hash is compared with the
// credential's in constant time.
func (m *Manager) AuthenticateDevice(jobID, credential string) (string, error) {
	raw, err := hex.DecodeString(credential)
	if err != nil || len(raw) != CredentialBytes {
		return "", fmt.Errorf("%w: not a device credential (%d hex digits)", ErrUnauthorized, 2*CredentialBytes)
	}
	h := sha256.Sum256(raw)
	lookup := func() (string, error) {
		d, err := m.db.DeviceByCredentialHash(jobID, h[:])
		if errors.Is(err, storage.ErrNotFound) {
			return "", errUnknownCredential(jobID)
		}
		if err != nil {
			return "", err
		}
		if subtle.ConstantTimeCompare(d.CredentialHash, h[:]) != 1 {
			return "", errUnknownCredential(jobID)
		}
		return d.ID, nil
	}
	if ps := m.participation(); ps != nil {
		// Several replicas: from memory after the first time
		// (devicecache.go), so that polls do not each read etcd.
		return ps.devices.authenticate(jobID, h, lookup)
	}
	return lookup()
}

// errUnknownCredential refuses a well-formed credential that no device of
// job jobID has.
func errUnknownCredential(jobID string) error {
	return fmt.Errorf("%w: no device enrolled for job %s has this credential", ErrUnauthorized, jobID)
}
