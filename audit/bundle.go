package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// BundleFormat names the layout of Bundle this package writes and reads.
const BundleFormat = "dpfl-audit-bundle/1"

// Bundle is everything needed to audit one job offline: its log entries
// with inclusion proofs, the signed checkpoint they are proven against,
// the server's public key, the job's configuration and what the server
// claims about the job's privacy. dpfl-client audit JOB --bundle FILE
// writes one; Verify checks one.
type Bundle struct {
	// Format is BundleFormat.
	Format string `json:"format"`
	// Job is the job's ID.
	Job string `json:"job"`
	// Spec is the job's stored configuration, the exact bytes whose
	// SHA-256 every entry records (spec_sha256). Its dp.delta,
	// dp.abort_delta and dp.noise_multiplier are what Verify recomputes
	// against; no secret is in it (the server's noise comes from
	// crypto/rand, never from a seed in the spec).
	Spec string `json:"spec"`
	// PublicKey is the server's note verifier key
	// ("<name>+<hash>+<base64 Ed25519 key>"), as the server serves it.
	// A bundle's own key shows only that the bundle is consistent: pin
	// the key you obtained from the operator (dpfl-client verify --key).
	PublicKey string `json:"public_key"`
	// Checkpoint is the signed note of the tree head (Checkpoint.Text
	// plus signature lines) that every entry is proven against.
	Checkpoint string `json:"checkpoint"`
	// Entries are all of the job's leaves in the log up to the
	// checkpoint, in log order.
	Entries []Entry `json:"entries"`
	// Since, when set, proves that the log at Checkpoint extends an
	// earlier checkpoint the auditor kept.
	Since *Consistency `json:"since,omitempty"`
	// Claim is what the server's privacy report says of the job.
	Claim Claim `json:"claim"`
	// CreatedAt is when the server assembled the bundle (informative).
	CreatedAt time.Time `json:"created_at"`
}

// Entry is one leaf of the log with its inclusion proof.
type Entry struct {
	// Index is the leaf's position in the log (0-based).
	Index int64 `json:"index"`
	// Leaf is the leaf's exact log bytes (a JSON object, see Leaf),
	// carried as a JSON string so that re-indenting the bundle cannot
	// change them.
	Leaf string `json:"leaf"`
	// Proof proves that the leaf is at Index in the tree of the
	// bundle's checkpoint (tlog.ProveRecord; base64 hashes).
	Proof tlog.RecordProof `json:"proof"`
}

// Consistency proves that the log of the bundle's checkpoint extends the
// log of an earlier checkpoint (tlog.ProveTree).
type Consistency struct {
	// Checkpoint is the earlier signed checkpoint, as the auditor kept
	// it.
	Checkpoint string `json:"checkpoint"`
	// Size is the earlier checkpoint's size, for which the server made
	// Proof.
	Size int64 `json:"size"`
	// Proof proves that the tree of Size leaves is a prefix of the
	// bundle's tree.
	Proof tlog.TreeProof `json:"proof"`
}

// Claim is the server's privacy report of a job (GET
// /v1/jobs/{id}/privacy) when the bundle was made.
type Claim struct {
	// Private says whether the job was trained with DP.
	Private bool `json:"private"`
	// Epsilon is the reported ε at Delta − AbortDelta, from Accountant
	// ("rdp" or "pld"); RDPEpsilon and PLDEpsilon are both accountants'
	// figures (absent when one does not apply).
	Epsilon    *float64 `json:"epsilon,omitempty"`
	Accountant string   `json:"accountant,omitempty"`
	RDPEpsilon *float64 `json:"rdp_epsilon,omitempty"`
	PLDEpsilon *float64 `json:"pld_epsilon,omitempty"`
	// Delta is the job's δ; AbortDelta the part of it that secure
	// aggregation's aborts cost.
	Delta      float64 `json:"delta,omitempty"`
	AbortDelta float64 `json:"abort_delta,omitempty"`
	// Adjacency is "add_remove" or "replace_one".
	Adjacency string `json:"adjacency,omitempty"`
	// Rounds, Events and ExtraEvents are the committed rounds, the
	// ledger's events and the events beyond one per committed round.
	Rounds      int `json:"rounds"`
	Events      int `json:"events"`
	ExtraEvents int `json:"extra_events"`
	// PrivacyUnit is the shared budget (dp.budget) the job is charged to,
	// if any; the published bundle format keeps the field's first name.
	PrivacyUnit string `json:"privacy_unit,omitempty"`
	// PLDMethod names the PLD algorithm the server's ε came from
	// (accounting.PLDMethod, e.g. "pld/2"); Verify recomputes with it.
	// Bundles from servers before the field existed omit it, and their
	// figures are method accounting.PLDMethodV1.
	PLDMethod string `json:"pld_method,omitempty"`
}

// ModelCertificate ties a released model to the log: the privacy
// guarantee of the model (ε over the charges up to its release), the
// release leaf that records the model's hash, its inclusion proof and
// the signed checkpoint. GET /v1/jobs/{id}/model carries one; VerifyModel
// checks it offline.
type ModelCertificate struct {
	// Job and Round name the release.
	Job   string `json:"job"`
	Round int    `json:"round"`
	// Epsilon is ε at Delta − AbortDelta over the job's charges up to
	// the release (ledger seqs 1 … ChargeSeq), from Accountant; absent
	// for a job without DP. Adjacency is the neighbouring relation.
	Epsilon    *float64 `json:"epsilon,omitempty"`
	Delta      float64  `json:"delta,omitempty"`
	AbortDelta float64  `json:"abort_delta,omitempty"`
	Adjacency  string   `json:"adjacency,omitempty"`
	Accountant string   `json:"accountant,omitempty"`
	ChargeSeq  uint64   `json:"charge_seq,omitempty"`
	// PLDMethod names the PLD algorithm of Epsilon, as in Claim (absent:
	// accounting.PLDMethodV1).
	PLDMethod string `json:"pld_method,omitempty"`
	// ModelSHA256 is ModelHash of the model's parameters.
	ModelSHA256 string `json:"model_sha256"`
	// LogSize and LogRoot are the checkpoint's tree head; Checkpoint is
	// the signed note and PublicKey the server's verifier key.
	LogSize    int64     `json:"log_size"`
	LogRoot    tlog.Hash `json:"log_root"`
	Checkpoint string    `json:"checkpoint"`
	PublicKey  string    `json:"public_key"`
	// LeafIndex, Leaf and Proof are the release leaf, its bytes and its
	// inclusion proof against the checkpoint.
	LeafIndex int64            `json:"leaf_index"`
	Leaf      string           `json:"leaf"`
	Proof     tlog.RecordProof `json:"proof"`
}

// ReadBundle decodes a bundle: one JSON object, no unknown keys, nothing
// after it, of format BundleFormat.
func ReadBundle(data []byte) (*Bundle, error) {
	var b Bundle
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return nil, fmt.Errorf("not an audit bundle: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("not an audit bundle: data after the JSON object")
	}
	if b.Format != BundleFormat {
		return nil, fmt.Errorf("bundle format %q, this verifier reads %q", b.Format, BundleFormat)
	}
	return &b, nil
}

// OpenCheckpoint checks the signature of a signed checkpoint note with
// the verifier key vkey and parses its text. The note must carry a valid
// signature by that key, and its origin must be the key's name. The
// errors say which: a malformed key, a note not signed by the key (a
// wrong key, or a note signed by someone else), an invalid signature
// (the text or signature was altered), or malformed text.
func OpenCheckpoint(signed, vkey string) (Checkpoint, error) {
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("public key %q is not a note verifier key (<name>+<hash>+<key>): %w", vkey, err)
	}
	n, err := note.Open([]byte(signed), note.VerifierList(v))
	var unverified *note.UnverifiedNoteError
	var invalid *note.InvalidSignatureError
	switch {
	case errors.As(err, &unverified):
		var by []string
		for _, s := range unverified.Note.UnverifiedSigs {
			by = append(by, fmt.Sprintf("%s+%08x", s.Name, s.Hash))
		}
		return Checkpoint{}, fmt.Errorf("wrong key: the checkpoint is not signed by %s+%08x; it carries signatures by %v", v.Name(), v.KeyHash(), by)
	case errors.As(err, &invalid):
		return Checkpoint{}, fmt.Errorf("invalid signature: the signature by %s+%08x does not match the checkpoint text, so the checkpoint or its signature was altered", invalid.Name, invalid.Hash)
	case err != nil:
		return Checkpoint{}, fmt.Errorf("checkpoint is not a signed note: %w", err)
	}
	c, err := ParseCheckpoint(n.Text)
	if err != nil {
		return Checkpoint{}, err
	}
	if c.Origin != v.Name() {
		return Checkpoint{}, fmt.Errorf("checkpoint names log %q, but the key is %q's", c.Origin, v.Name())
	}
	return c, nil
}

// PeekCheckpoint parses a signed checkpoint note without checking its
// signature: for reading the size of an earlier checkpoint before asking
// the server for a consistency proof. Verify checks the signature.
func PeekCheckpoint(signed string) (Checkpoint, error) {
	_, err := note.Open([]byte(signed), note.VerifierList())
	var unverified *note.UnverifiedNoteError
	if !errors.As(err, &unverified) {
		return Checkpoint{}, fmt.Errorf("not a signed checkpoint note: %v", err)
	}
	return ParseCheckpoint(unverified.Note.Text)
}

// EarlierCheckpoint returns the signed checkpoint in data: the checkpoint
// of an audit bundle, or a checkpoint note as it is (GET
// /v1/log/checkpoint's "checkpoint"). An auditor keeps either to check,
// with the next bundle, that the log only grew.
func EarlierCheckpoint(data []byte) (string, Checkpoint, error) {
	signed := string(data)
	if b, err := ReadBundle(data); err == nil {
		signed = b.Checkpoint
	}
	cp, err := PeekCheckpoint(signed)
	if err != nil {
		return "", Checkpoint{}, fmt.Errorf("neither an audit bundle nor a checkpoint note: %w", err)
	}
	return signed, cp, nil
}
