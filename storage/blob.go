package storage

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Checkpoints in a blob directory (Options.BlobDir, EtcdOptions.BlobDir).
//
// A CNN checkpoint (about 800 KB) exceeds etcd's request limit, so with
// a blob directory CommitRound writes the framed checkpoint (the same
// bytes a bbolt file stores, CRC-32C included) to a file named by its
// SHA-256, and stores in the job's bucket only a pointer:
//
//	jobs/<job id>/"checkpoint_blob" → framed JSON of blobRef (SHA-256, length,
//	                                  the previous round's SHA-256)
//	<BlobDir>/<hex SHA-256 of the job id>/<hex SHA-256 of the blob>
//
// The key "checkpoint" is then absent: a job has one of the two. The
// file is written to a temporary name, fsynced, renamed and its
// directory fsynced before the transaction that stores the pointer, so
// a stored pointer always names a complete file; writing the same bytes
// again is harmless (same name). Every read checks the file's length and
// SHA-256 against the pointer (a missing, truncated or altered file is
// an error wrapping ErrCorrupt), and then the frame's CRC as before.
//
// Each job has its own directory, so a file is only ever named by one
// job. After a commit of round r the job's directory keeps the blobs of
// rounds r and r−1 (a reader that read the previous pointer can still
// open it) and of later rounds (a commit in flight); blobs of earlier
// rounds, which no commit can ever name again (a blob holds its round),
// are removed, as are temporary files older than blobTempAge. A blob
// directory must be shared by every server that may lead the job.

var keyJobCheckpointBlob = []byte("checkpoint_blob")

// blobRef is a stored checkpoint pointer.
type blobRef struct {
	// SHA256 is the hex SHA-256 of the blob (the framed checkpoint) and
	// Size its length in bytes.
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	// Prev is the SHA-256 of the previous round's blob ("" for none),
	// which the directory keeps until the next commit.
	Prev string `json:"prev,omitempty"`
}

// blobTempAge is the age after which a leftover temporary file (a crash
// during a blob write) is removed.
const blobTempAge = time.Hour

// errBlobMissing marks a pointer whose file does not exist; Checkpoint
// re-reads the pointer once, since a commit may have moved it on.
var errBlobMissing = errors.New("checkpoint blob file missing")

// blobJobDir is the directory of job id's blobs.
func (db *DB) blobJobDir(id string) string {
	sum := sha256.Sum256([]byte(id))
	return filepath.Join(db.blobDir, hex.EncodeToString(sum[:]))
}

// writeBlob stores v (a framed checkpoint) as a blob of job id, durably,
// and returns its pointer (Prev unset).
func (db *DB) writeBlob(id string, v []byte) (blobRef, error) {
	sum := sha256.Sum256(v)
	ref := blobRef{SHA256: hex.EncodeToString(sum[:]), Size: int64(len(v))}
	dir := db.blobJobDir(id)
	path := filepath.Join(dir, ref.SHA256)
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, v) {
		return ref, nil // written before: a retried commit
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return ref, err
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return ref, err
	}
	_, err = f.Write(v)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return ref, err
	}
	return ref, syncDir(dir)
}

// syncDir fsyncs a directory, making a rename in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// decodeBlobRef checks and decodes a stored pointer. Errors describe the
// defect; the caller wraps ErrCorrupt.
func decodeBlobRef(raw []byte) (blobRef, error) {
	var r blobRef
	p, err := unframe(raw)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(p, &r); err != nil {
		return r, fmt.Errorf("checkpoint pointer: %v", err)
	}
	if !isSHA256Hex(r.SHA256) || r.Size < frameHeader+ckHeaderLen || (r.Prev != "" && !isSHA256Hex(r.Prev)) {
		return r, fmt.Errorf("checkpoint pointer: inconsistent (sha256 %q, %d bytes, prev %q)", r.SHA256, r.Size, r.Prev)
	}
	return r, nil
}

// isSHA256Hex reports whether s is 64 lower-case hex digits.
func isSHA256Hex(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// readBlob returns the blob of job id that ref points to, checked
// against ref's length and SHA-256. Errors describe the defect (the
// caller wraps ErrCorrupt); a missing file wraps errBlobMissing.
func (db *DB) readBlob(id string, ref blobRef) ([]byte, error) {
	if db.blobDir == "" {
		return nil, fmt.Errorf("the checkpoint is a blob (SHA-256 %s), but the store was opened without a blob directory (Options.BlobDir)", ref.SHA256)
	}
	path := filepath.Join(db.blobJobDir(id), ref.SHA256)
	v, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("blob %s: %w", path, errBlobMissing)
	}
	if err != nil {
		return nil, fmt.Errorf("blob %s: %v", path, err)
	}
	sum := sha256.Sum256(v)
	if int64(len(v)) != ref.Size || hex.EncodeToString(sum[:]) != ref.SHA256 {
		return nil, fmt.Errorf("blob %s: %d bytes with SHA-256 %x, but the stored pointer says %d bytes with SHA-256 %s (the file was altered or truncated)",
			path, len(v), sum, ref.Size, ref.SHA256)
	}
	return v, nil
}

// blobHeader returns the first frameHeader+ckHeaderLen bytes of ref's
// blob after checking that the file exists with the pointer's length
// (VerifyWith's check of a checkpoint past its byte cap).
func (db *DB) blobHeader(id string, ref blobRef) ([]byte, error) {
	if db.blobDir == "" {
		return nil, fmt.Errorf("the checkpoint is a blob (SHA-256 %s), but the store was opened without a blob directory (Options.BlobDir)", ref.SHA256)
	}
	path := filepath.Join(db.blobJobDir(id), ref.SHA256)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("blob %s: %v", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() != ref.Size {
		return nil, fmt.Errorf("blob %s: %d bytes, but the stored pointer says %d", path, fi.Size(), ref.Size)
	}
	h := make([]byte, frameHeader+ckHeaderLen)
	if _, err := io.ReadFull(f, h); err != nil {
		return nil, fmt.Errorf("blob %s: %v", path, err)
	}
	return h, nil
}

// checkpointValue returns job id's stored checkpoint, framed: inline
// (the key "checkpoint") or from its blob; nil if it has none. size is
// its length (from the pointer, for a blob) and blob whether it is one.
// With load false a blob is not read (v nil), only its pointer.
func (db *DB) checkpointValue(b kvBucket, id string, load bool) (v []byte, size int64, ref *blobRef, err error) {
	if raw := b.Get(keyJobCheckpointBlob); raw != nil {
		r, err := decodeBlobRef(raw)
		if err != nil {
			return nil, 0, nil, fmt.Errorf("%v: %w", err, ErrCorrupt)
		}
		if !load {
			return nil, r.Size, &r, nil
		}
		v, err := db.readBlob(id, r)
		if err != nil {
			return nil, 0, nil, fmt.Errorf("%w: %w", err, ErrCorrupt)
		}
		return v, r.Size, &r, nil
	}
	v = b.Get(keyJobCheckpoint)
	return v, int64(len(v)), nil, nil
}

// collectBlobs removes from job id's blob directory the blobs that no
// commit can name any more (see the comment at the top of this file),
// after a commit: those of rounds before the committed one, other than
// the current and previous pointers' blobs. It is best-effort: a failure
// leaves garbage, never a missing blob.
func (db *DB) collectBlobs(id string) {
	var round int
	var keep [2]string
	err := db.view(func(tx kvTx) error {
		b, err := jobBucket(tx, id)
		if err != nil {
			return err
		}
		j, err := readMeta(b, id)
		if err != nil {
			return err
		}
		round = j.Round
		raw := b.Get(keyJobCheckpointBlob)
		if raw == nil {
			return errors.New("no pointer")
		}
		r, err := decodeBlobRef(raw)
		keep = [2]string{r.SHA256, r.Prev}
		return err
	})
	if err != nil {
		return
	}
	dir := db.blobJobDir(id)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		path := filepath.Join(dir, name)
		if strings.HasPrefix(name, ".tmp-") {
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > blobTempAge {
				os.Remove(path)
			}
			continue
		}
		if !isSHA256Hex(name) || name == keep[0] || name == keep[1] {
			continue
		}
		if r, ok := blobRound(path); ok && r <= uint64(round) {
			os.Remove(path)
		}
	}
}

// blobRound reads the round in the header of the blob at path.
func blobRound(path string) (uint64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	h := make([]byte, frameHeader+ckHeaderLen)
	if _, err := io.ReadFull(f, h); err != nil || string(h[frameHeader:frameHeader+4]) != ckMagic {
		return 0, false
	}
	return binary.LittleEndian.Uint64(h[frameHeader+8:]), true
}
