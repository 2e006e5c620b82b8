package job

import (
	"encoding/json"
	"fmt"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/dpfl/dpfl/accounting"
	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/audit"
	"github.com/dpfl/dpfl/storage"
)

// The transparency log (package audit, storage/tlog.go) records every
// ledger charge, every committed round's model hash and every shared
// budget in an append-only Merkle log whose head the server signs after
// each append. Leaves are written by storage in the transaction of the
// record they log:
//
//   - a charge leaf when a round's DP event is appended to the ledger
//     (write-ahead, before the round runs: the model is not known yet),
//     naming the job's shared budget when it has one;
//   - a release leaf when the round commits, with the SHA-256 of the model
//     it released and the seq of the charge that covers it;
//   - a unit leaf (audit.KindUnit) when a budget is created.
//
// This file serves the log to the API: the signed head, consistency
// proofs, a job's audit bundle, and the model certificate of
// GET /v1/jobs/{id}/model.

// errNoLogKey: the database has no log signer, so nothing it serves can
// be verified against a key.
var errNoLogKey = fmt.Errorf("%w: this server does not sign its transparency log (no signing key loaded)", ErrConflict)

// LogKey is the note verifier key of the server's log signer
// ("<name>+<hash>+<base64 Ed25519 public key>"), "" when the database has
// none.
func (m *Manager) LogKey() string { return m.db.LogPublicKey() }

// LogHead returns the log's latest signed head.
func (m *Manager) LogHead() (storage.LogHead, error) {
	if m.db.LogPublicKey() == "" {
		return storage.LogHead{}, errNoLogKey
	}
	return m.db.LogHead()
}

// LogConsistency returns the log's latest signed head and the proof that
// the log of old leaves is a prefix of it. old past the head is an error
// wrapping storage.ErrConflict.
func (m *Manager) LogConsistency(old int64) (storage.LogHead, tlog.TreeProof, error) {
	if m.db.LogPublicKey() == "" {
		return storage.LogHead{}, nil, errNoLogKey
	}
	return m.db.ConsistencyProof(old)
}

// LogLeaves returns leaves start … end−1 of the log.
func (m *Manager) LogLeaves(start, end int64) ([][]byte, error) {
	return m.db.LogLeaves(start, end)
}

// bundleAttempts bounds how often AuditBundle reads again when a round of
// a running job commits between its two reads.
const bundleAttempts = 20

// AuditBundle assembles job id's audit bundle (audit.Bundle): every leaf
// of the job with its inclusion proof against the log's current signed
// head, the job's configuration, the server's public key, the privacy
// report as the claim and, when since > 0, the proof that the log of
// since leaves is a prefix of the current one (the caller adds the
// earlier checkpoint itself). The claim and the log are read in two
// transactions; when a round of a running job commits in between, the
// two are read again, so the claim always speaks of the logged entries.
// Unknown jobs are storage.ErrNotFound; since past the log's size wraps
// storage.ErrConflict.
func (m *Manager) AuditBundle(id string, since int64) (audit.Bundle, error) {
	key := m.db.LogPublicKey()
	if key == "" {
		return audit.Bundle{}, errNoLogKey
	}
	for range bundleAttempts {
		head, j, entries, proof, err := m.db.JobLog(id, since)
		if err != nil {
			return audit.Bundle{}, err
		}
		rep, err := m.Privacy(id)
		if err != nil {
			return audit.Bundle{}, err
		}
		charges, releases := 0, 0
		out := make([]audit.Entry, len(entries))
		for i, e := range entries {
			l, err := audit.ParseLeaf(e.Leaf)
			if err != nil {
				return audit.Bundle{}, fmt.Errorf("job %s: log leaf %d: %v: %w", id, e.Index, err, storage.ErrCorrupt)
			}
			switch l.Kind {
			case audit.KindCharge:
				charges++
			case audit.KindRelease:
				releases++
			}
			out[i] = audit.Entry{Index: e.Index, Leaf: string(e.Leaf), Proof: e.Proof}
		}
		if charges != len(rep.Events) || releases != rep.Rounds {
			continue // a round was charged or committed in between
		}
		var spec types.Spec
		if err := json.Unmarshal(j.Config, &spec); err != nil {
			return audit.Bundle{}, fmt.Errorf("job %s: %w: %v", id, errConfigUnreadable, err)
		}
		b := audit.Bundle{
			Format: audit.BundleFormat, Job: id, Spec: string(j.Config), PublicKey: key,
			Checkpoint: head.Checkpoint, Entries: out, Claim: claimOf(rep, spec), CreatedAt: time.Now().UTC(),
		}
		if since > 0 {
			b.Since = &audit.Consistency{Size: since, Proof: proof}
		}
		return b, nil
	}
	return audit.Bundle{}, fmt.Errorf("%w: job %s commits rounds faster than its audit bundle can be read (%d attempts); try again, or when the job has ended", ErrConflict, id, bundleAttempts)
}

// claimOf is the bundle's claim: the privacy report rep of a job with
// spec.
func claimOf(rep types.PrivacyReport, spec types.Spec) audit.Claim {
	c := audit.Claim{
		Private: rep.Private, Epsilon: rep.Epsilon, Accountant: rep.Accountant, Delta: rep.Delta, AbortDelta: rep.AbortDelta,
		Adjacency: rep.Adjacency, Rounds: rep.Rounds, Events: len(rep.Events), ExtraEvents: rep.ExtraEvents,
	}
	if rep.Private {
		c.PrivacyUnit, c.PLDMethod = spec.DP.Budget, accounting.PLDMethod
	}
	if a := rep.Accounting; a != nil {
		if a.RDP.Valid {
			c.RDPEpsilon = a.RDP.Epsilon
		}
		if a.PLD.Valid {
			c.PLDEpsilon = a.PLD.Epsilon
		}
	}
	return c
}

// modelCertificate is the certificate of job id's model of round (see
// audit.ModelCertificate): ε over the job's charges up to the release,
// and the release leaf with its inclusion proof against the log's signed
// head. It is nil when the server does not sign its log.
func (m *Manager) modelCertificate(id string, spec types.Spec, round int) (*audit.ModelCertificate, error) {
	key := m.db.LogPublicKey()
	if key == "" {
		return nil, nil
	}
	head, e, err := m.db.ReleaseEntry(id, round)
	if err != nil {
		return nil, err
	}
	l, err := audit.ParseLeaf(e.Leaf)
	if err != nil {
		return nil, fmt.Errorf("job %s: log leaf %d: %v: %w", id, e.Index, err, storage.ErrCorrupt)
	}
	c := &audit.ModelCertificate{
		Job: id, Round: round, ChargeSeq: l.ChargeSeq, ModelSHA256: l.ModelSHA256,
		LogSize: head.Size, LogRoot: head.Root, Checkpoint: head.Checkpoint, PublicKey: key,
		LeafIndex: e.Index, Leaf: string(e.Leaf), Proof: e.Proof,
	}
	if !spec.DP.Enabled {
		return c, nil
	}
	c.Delta, c.AbortDelta, c.Adjacency = spec.DP.Delta, spec.DP.AbortDelta, Adjacency(spec)
	if l.ChargeSeq == 0 {
		return nil, fmt.Errorf("job %s: the log's release of round %d names no charge: %w", id, round, storage.ErrCorrupt)
	}
	events, err := ledgerEvents(m.db, id)
	if err != nil {
		return nil, err
	}
	if l.ChargeSeq > uint64(len(events)) {
		return nil, fmt.Errorf("job %s: the log's release of round %d names charge seq %d, but the ledger holds %d: %w", id, round, l.ChargeSeq, len(events), storage.ErrCorrupt)
	}
	rep, err := accounting.Account(events[:l.ChargeSeq], AccountingDelta(spec.DP))
	if err != nil {
		return nil, err
	}
	c.Epsilon, c.Accountant, c.PLDMethod = rep.Best.Epsilon, rep.Best.Accountant, rep.PLDMethod
	return c, nil
}
