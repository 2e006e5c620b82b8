package storage

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// bucketDevices holds the devices enrolled for devices jobs, one nested
// bucket per job:
//
//	devices/<job id>/
//	    ids/              <device id>          → framed JSON of Device
//	    credentials/      SHA-256(credential)  → framed device id
//
// Only the SHA-256 hash of a device's credential is stored; the
// credential itself is shown once, at enrolment, and never written.
var bucketDevices = []byte("devices")

var (
	bucketDeviceIDs   = []byte("ids")
	bucketDeviceCreds = []byte("credentials")
)

// Device is a participant enrolled for one devices job. It authenticates
// to that job's participate routes with a credential whose SHA-256 hash is
// CredentialHash.
type Device struct {
	ID    string `json:"id"`
	JobID string `json:"job_id"`
	// CredentialHash is SHA-256 of the device's credential (sha256.Size
	// bytes); the credential itself is never stored.
	CredentialHash []byte    `json:"credential_hash"`
	EnrolledAt     time.Time `json:"enrolled_at"`
}

// EnrollDevice stores d for job d.JobID in one transaction. d.ID must be
// 1…MaxJobIDLen bytes and d.CredentialHash sha256.Size bytes; a zero
// EnrolledAt becomes the current UTC time. Errors wrap ErrNotFound for an
// unknown job, ErrConflict for a job in a terminal state (nothing
// written), and ErrExists when the device ID or the credential hash is
// already enrolled for the job.
func (db *DB) EnrollDevice(d Device) error {
	switch {
	case d.ID == "" || len(d.ID) > MaxJobIDLen:
		return fmt.Errorf("storage: device id must have 1..%d bytes", MaxJobIDLen)
	case len(d.CredentialHash) != sha256.Size:
		return fmt.Errorf("storage: device %q: credential hash has %d bytes, want %d", d.ID, len(d.CredentialHash), sha256.Size)
	}
	if d.EnrolledAt.IsZero() {
		d.EnrolledAt = time.Now().UTC()
	}
	p, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("storage: device %q: encode: %w", d.ID, err)
	}
	return db.update(func(tx kvTx) error {
		if _, _, err := liveJob(tx, d.JobID, "enroll devices"); err != nil {
			return err
		}
		jb, err := tx.Bucket(bucketDevices).CreateBucketIfNotExists([]byte(d.JobID))
		if err != nil {
			return err
		}
		ids, err := jb.CreateBucketIfNotExists(bucketDeviceIDs)
		if err != nil {
			return err
		}
		creds, err := jb.CreateBucketIfNotExists(bucketDeviceCreds)
		if err != nil {
			return err
		}
		if ids.Get([]byte(d.ID)) != nil {
			return fmt.Errorf("storage: job %q device %q: %w", d.JobID, d.ID, ErrExists)
		}
		if creds.Get(d.CredentialHash) != nil {
			return fmt.Errorf("storage: job %q: credential of device %q is already enrolled: %w", d.JobID, d.ID, ErrExists)
		}
		if err := ids.Put([]byte(d.ID), frame(p)); err != nil {
			return err
		}
		return creds.Put(d.CredentialHash, frame([]byte(d.ID)))
	})
}

// Devices returns the devices enrolled for a job, ordered by EnrolledAt
// with ties broken by ID: none for a job without enrolments, an error
// wrapping ErrNotFound for an unknown job, and one wrapping ErrCorrupt
// for a record that fails its checksum or does not decode.
func (db *DB) Devices(jobID string) ([]Device, error) {
	var out []Device
	err := db.view(func(tx kvTx) error {
		if _, err := jobBucket(tx, jobID); err != nil {
			return err
		}
		ids, _, err := deviceBuckets(tx, jobID)
		if err != nil || ids == nil {
			return err
		}
		return ids.ForEach(func(k, v []byte) error {
			d, err := decodeDevice(jobID, string(k), v)
			if err != nil {
				return err
			}
			out = append(out, d)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Device) int {
		if c := a.EnrolledAt.Compare(b.EnrolledAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// DeviceByCredentialHash returns the device of job jobID whose credential
// hashes to hash. It returns an error wrapping ErrNotFound when the job
// has no such device (or does not exist), and one wrapping ErrCorrupt
// when the stored records disagree. The caller should still compare
// hash with the returned CredentialHash in constant time.
func (db *DB) DeviceByCredentialHash(jobID string, hash []byte) (Device, error) {
	var d Device
	err := db.view(func(tx kvTx) error {
		ids, creds, err := deviceBuckets(tx, jobID)
		if err != nil {
			return err
		}
		var raw []byte
		if creds != nil {
			raw = creds.Get(hash)
		}
		if raw == nil {
			return fmt.Errorf("storage: job %q: no device with this credential: %w", jobID, ErrNotFound)
		}
		id, err := unframe(raw)
		if err != nil {
			return fmt.Errorf("storage: job %q device credential index: %v: %w", jobID, err, ErrCorrupt)
		}
		v := ids.Get(id)
		if v == nil {
			return fmt.Errorf("storage: job %q: credential index names device %q, which has no record: %w", jobID, id, ErrCorrupt)
		}
		if d, err = decodeDevice(jobID, string(id), v); err != nil {
			return err
		}
		if !bytes.Equal(d.CredentialHash, hash) {
			return fmt.Errorf("storage: job %q device %q: record and credential index disagree: %w", jobID, id, ErrCorrupt)
		}
		return nil
	})
	return d, err
}

// deviceBuckets returns devices/<job id>/ids and /credentials, both nil
// when the job has no enrolments; one without the other is ErrCorrupt.
func deviceBuckets(tx kvTx, jobID string) (ids, creds kvBucket, err error) {
	jb := tx.Bucket(bucketDevices).Bucket([]byte(jobID))
	if jb == nil {
		return nil, nil, nil
	}
	ids, creds = jb.Bucket(bucketDeviceIDs), jb.Bucket(bucketDeviceCreds)
	if ids == nil || creds == nil {
		return nil, nil, fmt.Errorf("storage: job %q: incomplete devices bucket: %w", jobID, ErrCorrupt)
	}
	return ids, creds, nil
}

// decodeDevice checks and decodes one devices/<job>/ids value.
func decodeDevice(jobID, id string, v []byte) (Device, error) {
	var d Device
	p, err := unframe(v)
	if err != nil {
		return d, fmt.Errorf("storage: job %q device %q: %v: %w", jobID, id, err, ErrCorrupt)
	}
	// json.Unmarshal copies, so d does not alias the mmap.
	if err := json.Unmarshal(p, &d); err != nil {
		return d, fmt.Errorf("storage: job %q device %q: %v: %w", jobID, id, err, ErrCorrupt)
	}
	if d.ID != id || d.JobID != jobID || len(d.CredentialHash) != sha256.Size {
		return d, fmt.Errorf("storage: job %q device %q: inconsistent record (id %q, job %q, %d-byte hash): %w", jobID, id, d.ID, d.JobID, len(d.CredentialHash), ErrCorrupt)
	}
	return d, nil
}
