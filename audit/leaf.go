// Package audit defines dpfl's transparency log records (Leaf, the signed
// Checkpoint) and the self-contained audit Bundle of one job, and verifies
// a bundle offline (Verify) or a model file against the log (VerifyModel).
//
// Every dpfl-server keeps one append-only Merkle log (RFC 6962 hashing, as
// golang.org/x/mod/sumdb/tlog implements it) beside its privacy ledgers:
// each charge of a DP event to a job's ledger, each round a job commits
// (with the SHA-256 of the model it released) and each shared budget
// created is one leaf, appended in the same bbolt transaction as the
// record it logs (package storage). After every append the server signs
// the new tree head with its Ed25519 key as a note
// (golang.org/x/mod/sumdb/note) in the C2SP tlog-checkpoint form
// (Checkpoint). An auditor who keeps the server's public key and earlier
// checkpoints can then check offline that a job's ledger is the one the
// log committed to, that the log was only ever appended to, and that the
// claimed ε is an upper bound for the logged events (docs/auditing.md).
//
// The package depends only on package accounting, golang.org/x/mod and
// the standard library, so a verifier needs neither the server nor its
// database.
package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/tlog"
)

// The kinds of leaf.
const (
	// KindCharge: a DP event charged (write-ahead) to a job's privacy
	// ledger, before the round it covers produces any noisy output. It
	// is the ledger entry itself: job, ledger Seq, Round, Time, Event,
	// and Unit when the job is charged to a shared budget (dp.budget) too.
	KindCharge = "charge"
	// KindRelease: a round committed, releasing the global model whose
	// parameters hash to ModelSHA256. ChargeSeq is the ledger seq of the
	// charge that covers it (0 for a job without DP).
	KindRelease = "release"
	// KindUnit: a shared budget (dp.budget) created with EpsilonBudget
	// and Delta. Shared budgets were called privacy units when the log
	// format was published; the kind and the Unit field keep that name so
	// that logs already written verify unchanged.
	KindUnit = "unit"
)

// Leaf is one record of the transparency log. Its bytes in the log are
// its JSON encoding (json.Marshal: keys in the order below, no spaces,
// omitted fields absent), written once by the server and hashed as they
// are: a verifier hashes the bytes it is given, never a re-encoding.
//
// A leaf holds no secret: no noise seed, key, token or user data, only
// the event's public parameters, hashes and counters.
type Leaf struct {
	// Kind is KindCharge, KindRelease or KindUnit.
	Kind string `json:"kind"`
	// Job is the job's ID (charge and release leaves).
	Job string `json:"job,omitempty"`
	// JobLeaf is the leaf's 1-based position among the job's leaves
	// (charges and releases together), and Prev the log index of the
	// job's previous leaf (absent for its first): together they chain a
	// job's leaves, so an entry removed from or inserted into a job's
	// history breaks the chain.
	JobLeaf int64  `json:"job_leaf,omitempty"`
	Prev    *int64 `json:"prev,omitempty"`
	// Seq is the charge's ledger seq (1, 2, … per job).
	Seq uint64 `json:"seq,omitempty"`
	// Round is the round charged or released (1-based).
	Round int `json:"round,omitempty"`
	// Time is when the record was written (UTC).
	Time time.Time `json:"time"`
	// Event is the charge's DP event, in dp_accounting's DpEvent JSON
	// form (package accounting), exactly as the ledger holds it.
	Event json.RawMessage `json:"event,omitempty"`
	// Unit names the shared budget a charge also counts against, or the
	// budget a KindUnit leaf creates.
	Unit string `json:"unit,omitempty"`
	// EpsilonBudget and Delta are a created unit's ε_max and δ.
	EpsilonBudget float64 `json:"epsilon_budget,omitempty"`
	Delta         float64 `json:"delta,omitempty"`
	// ChargeSeq is, on a release, the seq of the last charge of its round
	// before the commit (0 for a job without DP).
	ChargeSeq uint64 `json:"charge_seq,omitempty"`
	// SpecSHA256 is the lower-case hex SHA-256 of the job's stored
	// configuration (the exact bytes; Bundle.Spec carries them).
	SpecSHA256 string `json:"spec_sha256,omitempty"`
	// ModelSHA256 is, on a release, ModelHash of the round's global
	// model.
	ModelSHA256 string `json:"model_sha256,omitempty"`
	// Backfilled marks a leaf written when the log was started in a
	// database that already held this history (storage migrates such a
	// file at its first open by a build with the log): its Time is the
	// migration's, and a release of a round before the job's latest then
	// has no ModelSHA256, since that model no longer exists.
	Backfilled bool `json:"backfilled,omitempty"`
}

// Marshal returns the leaf's log bytes (its compact JSON). It refuses a
// leaf that ParseLeaf would refuse.
func (l Leaf) Marshal() ([]byte, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	return json.Marshal(l)
}

// ParseLeaf decodes log bytes into a Leaf: exactly one JSON object, no
// unknown keys, nothing after it, with the fields its Kind requires.
func ParseLeaf(data []byte) (Leaf, error) {
	var l Leaf
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return Leaf{}, fmt.Errorf("leaf is not a log record: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Leaf{}, errors.New("leaf is not a log record: data after the JSON object")
	}
	if err := l.check(); err != nil {
		return Leaf{}, err
	}
	return l, nil
}

// check verifies that l has the fields of its kind.
func (l Leaf) check() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%s leaf: %s", l.Kind, fmt.Sprintf(format, a...))
	}
	switch l.Kind {
	case KindCharge, KindRelease:
		switch {
		case l.Job == "":
			return bad("no job")
		case l.JobLeaf < 1:
			return bad("job_leaf %d, positions start at 1", l.JobLeaf)
		case (l.Prev == nil) != (l.JobLeaf == 1):
			return bad("job_leaf %d with prev %v: exactly the first leaf of a job has none", l.JobLeaf, l.Prev)
		case l.Prev != nil && *l.Prev < 0:
			return bad("prev %d is not a log index", *l.Prev)
		case l.Round < 1:
			return bad("round %d, rounds start at 1", l.Round)
		case !isHexSHA256(l.SpecSHA256):
			return bad("spec_sha256 %q is not a hex SHA-256", l.SpecSHA256)
		}
		if l.Kind == KindCharge {
			if l.Seq < 1 || len(l.Event) == 0 || !json.Valid(l.Event) || l.ModelSHA256 != "" || l.ChargeSeq != 0 {
				return bad("needs seq ≥ 1 and a JSON event, and no model_sha256 or charge_seq")
			}
		} else if l.Seq != 0 || len(l.Event) != 0 || !isHexSHA256(l.ModelSHA256) && !(l.Backfilled && l.ModelSHA256 == "") {
			return bad("needs a hex SHA-256 model_sha256 (absent only when backfilled), and no seq or event")
		}
	case KindUnit:
		if l.Unit == "" || !(l.EpsilonBudget > 0) || math.IsInf(l.EpsilonBudget, 0) || !(l.Delta > 0 && l.Delta < 1) || l.Job != "" {
			return bad("needs a unit name, ε_max > 0 and δ in (0, 1), and no job")
		}
	default:
		return fmt.Errorf("leaf of unknown kind %q", l.Kind)
	}
	return nil
}

func isHexSHA256(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// SHA256Hex is the lower-case hex SHA-256 of b: a leaf's SpecSHA256 of
// the job's stored configuration bytes.
func SHA256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// ModelHash is the lower-case hex SHA-256 of params encoded as IEEE-754
// binary32, little-endian, in order (4·len(params) bytes; NaN payloads
// as they are): the model hash of a release leaf and of a model
// certificate. numpy computes the same hash as
// hashlib.sha256(np.asarray(params, dtype="<f4").tobytes()).hexdigest().
func ModelHash(params []float32) string {
	h := sha256.New()
	var buf [4096]byte
	for len(params) > 0 {
		n := min(len(params), len(buf)/4)
		for i, p := range params[:n] {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(p))
		}
		h.Write(buf[:4*n])
		params = params[n:]
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Checkpoint is a tree head of the log: its origin (the signing key's
// name, which names the server's log), its size (number of leaves) and
// the Merkle tree hash of those leaves.
type Checkpoint struct {
	Origin string
	Size   int64
	Root   tlog.Hash
}

// Text is the checkpoint's note text in the C2SP tlog-checkpoint form
// (https://c2sp.org/tlog-checkpoint): the origin, the size in decimal and
// the root hash in standard base64, one a line. It is the body of
// golang.org/x/mod/sumdb/tlog.FormatTree with the Go checksum database's
// fixed first line replaced by the origin, so that a checkpoint names
// the log it belongs to.
func (c Checkpoint) Text() string {
	return fmt.Sprintf("%s\n%d\n%s\n", c.Origin, c.Size, c.Root)
}

// ParseCheckpoint parses a note text written by Checkpoint.Text (exactly
// three lines, each ending in a newline).
func ParseCheckpoint(text string) (Checkpoint, error) {
	lines := strings.SplitAfter(text, "\n")
	if len(lines) != 4 || lines[3] != "" {
		return Checkpoint{}, fmt.Errorf("checkpoint text has %d lines, want 3 (origin, size, root)", strings.Count(text, "\n"))
	}
	origin := strings.TrimSuffix(lines[0], "\n")
	size, err := strconv.ParseInt(strings.TrimSuffix(lines[1], "\n"), 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != strings.TrimSuffix(lines[1], "\n") {
		return Checkpoint{}, fmt.Errorf("checkpoint size %q is not a decimal count", strings.TrimSuffix(lines[1], "\n"))
	}
	root, err := tlog.ParseHash(strings.TrimSuffix(lines[2], "\n"))
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint root %q: %w", strings.TrimSuffix(lines[2], "\n"), err)
	}
	if origin == "" {
		return Checkpoint{}, errors.New("checkpoint has no origin line")
	}
	return Checkpoint{Origin: origin, Size: size, Root: root}, nil
}
