package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/dpfl/dpfl/accounting"
)

// EpsilonTolerance is the relative slack Verify allows a claimed ε below
// the recomputed bound: a claim passes if claim ≥ bound·(1 − 1e-6).
// Verify runs the same accountants as the server (package accounting:
// RDP, and PLD with pessimistic discretization by the method the claim
// names, pldMethod), so an honest claim equals the recomputed bound up
// to floating-point differences between builds and machines (FFT
// summation order, fused multiply-add), which are around 1e-12 relative.
// The slack is far below what one step of the PLD discretization moves ε
// (about 1e-4), so a claim trimmed by even one step fails.
const EpsilonTolerance = 1e-6

// Options configure Verify.
type Options struct {
	// Key is the server's note verifier key that the auditor trusts,
	// obtained from the operator out of band (GET /v1/log/key, or the
	// line dpfl-server prints at start). Empty: the bundle's own key,
	// which proves only that the bundle is consistent with itself
	// (Result.SelfVouched).
	Key string
	// Model, when set, is a model file (GET /v1/jobs/{id}/model) to
	// check against the bundle: its parameters must hash to the model
	// hash of its round's release, and its certificate, if any, must
	// verify and agree with the bundle.
	Model *ModelFile
}

// ModelFile is the part of a model export (GET /v1/jobs/{id}/model,
// dpfl-client model --out) that Verify and VerifyModel read.
type ModelFile struct {
	JobID       string            `json:"job_id"`
	Round       int               `json:"round"`
	Params      []float32         `json:"params"`
	Certificate *ModelCertificate `json:"certificate,omitempty"`
}

// Result is what a successful Verify established.
type Result struct {
	// Job is the job audited; Checkpoint the verified tree head.
	Job        string
	Checkpoint Checkpoint
	// SelfVouched: no key was given, so the bundle's own key verified
	// its checkpoint.
	SelfVouched bool
	// SinceSize is the size of the earlier checkpoint the log was shown
	// to extend (0: none given).
	SinceSize int64
	// Charges, Rounds and ExtraEvents count the job's charge leaves, its
	// released (committed) rounds and the charges beyond one per round.
	Charges, Rounds, ExtraEvents int
	// Private says the job's spec enables DP; Unit is the shared budget
	// it is charged to (dp.budget; "" for none).
	Private bool
	Unit    string
	// AccountingDelta is the δ ε was recomputed at (dp.delta −
	// dp.abort_delta of the spec); Recomputed holds both accountants'
	// ε over the logged charges (nil without charges), the PLD one by
	// the claim's method (Recomputed.PLDMethod).
	AccountingDelta float64
	Recomputed      *accounting.Report
	// Claim is the bundle's claim, now checked.
	Claim Claim
	// ModelRound and ModelEpsilon, when a model was checked, are its
	// round and ε recomputed over the charges up to its release.
	ModelRound   int
	ModelEpsilon *float64
	// Warnings are facts that do not fail the verification but qualify
	// it.
	Warnings []string
}

// specFields are the parts of a job's configuration that Verify reads.
type specFields struct {
	DP struct {
		Enabled         bool    `json:"enabled"`
		NoiseMultiplier float64 `json:"noise_multiplier"`
		Delta           float64 `json:"delta"`
		AbortDelta      float64 `json:"abort_delta"`
		Budget          string  `json:"budget"`
		// PrivacyUnit is dp.budget's earlier name, in the specs of jobs
		// submitted before the rename.
		PrivacyUnit string `json:"privacy_unit"`
		// Mechanism and Distributed: the distributed discrete Gaussian's
		// published parameters (ddg.go).
		Mechanism   string     `json:"mechanism"`
		Distributed *ddgFields `json:"distributed"`
	} `json:"dp"`
	Sampling struct {
		Scheme string `json:"scheme"`
	} `json:"sampling"`
	Population struct {
		Source string `json:"source"`
	} `json:"population"`
}

// budget is the shared budget the spec charges (dp.budget, or its
// earlier name dp.privacy_unit); "" for none.
func (s specFields) budget() string {
	if s.DP.Budget != "" {
		return s.DP.Budget
	}
	return s.DP.PrivacyUnit
}

// adjacency is the neighbouring relation of the job's guarantee, by the
// rule of job.Spec.Adjacency.
func (s specFields) adjacency() string {
	if s.Population.Source == "devices" || s.Sampling.Scheme == "fixed" {
		return "replace_one"
	}
	return "add_remove"
}

// parsed is one entry of the bundle, decoded.
type parsed struct {
	Entry
	leaf Leaf
	// what names the entry in messages.
	what string
}

// Verify checks bundle b offline and returns what it established, or an
// error naming the first problem found. The checks, in order:
//
//  1. the checkpoint's signature under opt.Key (else the bundle's own
//     key), and that its origin is the key's name;
//  2. with b.Since, the earlier checkpoint's signature and the
//     consistency proof from it to the bundle's checkpoint;
//  3. the entries: in increasing log order, no index twice, each within
//     the checkpoint, each a readable leaf of the audited job;
//  4. the job's chain: job_leaf 1, 2, … with each prev naming the
//     previous entry's index; charges with seqs 1, 2, …, each for the
//     round after the last release; releases of rounds 1, 2, …, each
//     naming the last charge of its round;
//  5. the spec: its SHA-256 is every entry's spec_sha256; every charge
//     names its budget (dp.budget) and records one and the same event, with
//     the spec's noise multiplier z (or z/2, the replace-one and
//     two-clip sensitivities);
//  6. every inclusion proof against the checkpoint's root;
//  7. the claim: rounds, events and extra events as logged; δ, abort δ,
//     adjacency and budget as the spec has them; and its ε (and each
//     accountant's) not below ε recomputed over the logged charges with
//     both accountants at the spec's δ − abort δ (EpsilonTolerance), the
//     PLD one by the method the claim names (pldMethod: none named is
//     "pld/1", the only method before names);
//  8. with opt.Model, the model's hash against its round's release, and
//     a certificate's ε against its recomputation by its method.
func Verify(b *Bundle, opt Options) (*Result, error) {
	res := &Result{Job: b.Job, Claim: b.Claim}
	if b.Format != BundleFormat {
		return nil, fmt.Errorf("bundle format %q, this verifier reads %q", b.Format, BundleFormat)
	}
	if b.Job == "" {
		return nil, errors.New("bundle names no job")
	}
	key := opt.Key
	if key == "" {
		key, res.SelfVouched = b.PublicKey, true
		res.Warnings = append(res.Warnings, "no --key given: the checkpoint was checked with the bundle's own public key, which proves only that the bundle is consistent with itself; pin the server's key (GET /v1/log/key, or the line dpfl-server prints at start)")
	}
	cp, err := checkCheckpoints(b, key, res) // steps 1 and 2
	if err != nil {
		return nil, err
	}
	entries, err := parseEntries(b, cp) // step 3
	if err != nil {
		return nil, err
	}
	var spec specFields
	if err := json.Unmarshal([]byte(b.Spec), &spec); err != nil {
		return nil, fmt.Errorf("the bundle's job spec is not JSON: %w", err)
	}
	res.Private, res.Unit = spec.DP.Enabled, spec.budget()
	charges, err := checkChain(entries, spec.DP.Enabled, res) // step 4
	if err != nil {
		return nil, err
	}
	warnBackfilled(entries, res)
	events, err := checkEvents(b.Spec, spec, entries, charges) // step 5
	if err != nil {
		return nil, err
	}
	if err := checkInclusion(entries, cp); err != nil { // step 6
		return nil, err
	}
	if err := checkClaim(b.Claim, spec, events, res); err != nil { // step 7
		return nil, err
	}
	if opt.Model != nil { // step 8
		if err := checkModel(opt.Model, entries, events, key, res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// checkCheckpoints opens the bundle's checkpoint under key (step 1 of
// Verify) and, with b.Since, checks that the log extends the earlier
// checkpoint (step 2); it sets res.Checkpoint and res.SinceSize.
func checkCheckpoints(b *Bundle, key string, res *Result) (Checkpoint, error) {
	cp, err := OpenCheckpoint(b.Checkpoint, key)
	if err != nil {
		return cp, fmt.Errorf("checkpoint: %w", err)
	}
	res.Checkpoint = cp
	s := b.Since
	if s == nil {
		return cp, nil
	}
	old, err := OpenCheckpoint(s.Checkpoint, key)
	if err != nil {
		return cp, fmt.Errorf("earlier checkpoint: %w", err)
	}
	if old.Size > cp.Size {
		return cp, fmt.Errorf("earlier checkpoint has %d leaves, more than the bundle's %d: the log shrank", old.Size, cp.Size)
	}
	if s.Size != old.Size {
		return cp, fmt.Errorf("consistency proof is for a log of %d leaves, but the earlier checkpoint has %d", s.Size, old.Size)
	}
	// Every log extends the empty one.
	if err := tlog.CheckTree(s.Proof, cp.Size, cp.Root, old.Size, old.Root); old.Size > 0 && err != nil {
		return cp, fmt.Errorf("consistency proof from the earlier checkpoint (%d leaves) to the bundle's (%d leaves) fails (%v): the log was rewritten or forked since the earlier checkpoint", old.Size, cp.Size, err)
	}
	res.SinceSize = old.Size
	return cp, nil
}

// parseEntries decodes the bundle's entries (step 3 of Verify): in
// increasing log order, no index twice, each within checkpoint cp, each
// a readable leaf of the audited job.
func parseEntries(b *Bundle, cp Checkpoint) ([]parsed, error) {
	entries := make([]parsed, len(b.Entries))
	for i, e := range b.Entries {
		p := parsed{Entry: e, what: fmt.Sprintf("entry %d (log index %d)", i+1, e.Index)}
		switch {
		case e.Index < 0 || e.Index >= cp.Size:
			return nil, fmt.Errorf("%s: index outside the checkpoint's %d leaves", p.what, cp.Size)
		case i > 0 && e.Index == b.Entries[i-1].Index:
			return nil, fmt.Errorf("%s repeats the log index of entry %d: an entry was inserted", p.what, i)
		case i > 0 && e.Index < b.Entries[i-1].Index:
			return nil, fmt.Errorf("%s comes after log index %d: the entries were reordered (they must be in log order)", p.what, b.Entries[i-1].Index)
		}
		var err error
		if p.leaf, err = ParseLeaf([]byte(e.Leaf)); err != nil {
			return nil, fmt.Errorf("%s: %w", p.what, err)
		}
		if p.leaf.Job != b.Job {
			return nil, fmt.Errorf("%s is a %s leaf of job %q, not of job %q: an entry was inserted", p.what, p.leaf.Kind, p.leaf.Job, b.Job)
		}
		entries[i] = p
	}
	return entries, nil
}

// warnBackfilled adds a warning if any entry was backfilled, i.e.
// logged after the fact when the log was started over an existing
// database.
func warnBackfilled(entries []parsed, res *Result) {
	backfilled := 0
	for _, p := range entries {
		if p.leaf.Backfilled {
			backfilled++
		}
	}
	if backfilled > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d of the job's entries were backfilled when the server started its log over a database that already held them: they were logged after the fact, and releases before the job's latest then have no model hash", backfilled))
	}
}

// checkEvents checks the entries against the spec (step 5 of Verify):
// every entry records the SHA-256 of rawSpec, every charge names the
// spec's budget and records the same event as the first, whose
// noise multiplier is the spec's (checkNoise). It returns the charges'
// events in order.
func checkEvents(rawSpec string, spec specFields, entries, charges []parsed) ([]accounting.Event, error) {
	specHash := SHA256Hex([]byte(rawSpec))
	for _, p := range entries {
		if p.leaf.SpecSHA256 != specHash {
			return nil, fmt.Errorf("%s records spec SHA-256 %s, but the bundle's spec hashes to %s: the spec or the entry was altered", p.what, p.leaf.SpecSHA256, specHash)
		}
	}
	var events []accounting.Event
	for i, p := range charges {
		l := p.leaf
		if l.Unit != spec.budget() {
			return nil, fmt.Errorf("%s: charge seq %d names budget %q, but the job's spec names %q (dp.budget)", p.what, l.Seq, l.Unit, spec.budget())
		}
		if i > 0 && !bytes.Equal(l.Event, charges[0].leaf.Event) {
			return nil, fmt.Errorf("%s: charge seq %d records event %s, unlike seq 1's %s (every round of a job charges the same event): an event parameter was changed", p.what, l.Seq, l.Event, charges[0].leaf.Event)
		}
		ev, err := accounting.UnmarshalEvent(l.Event)
		if err != nil {
			return nil, fmt.Errorf("%s: charge seq %d: %w", p.what, l.Seq, err)
		}
		if i == 0 {
			if err := checkEventParams(ev, spec); err != nil {
				return nil, fmt.Errorf("%s: charge seq %d: %w: an event parameter was changed", p.what, l.Seq, err)
			}
		}
		events = append(events, ev)
	}
	return events, nil
}

// checkInclusion checks every entry's inclusion proof against the
// checkpoint's root (step 6 of Verify).
func checkInclusion(entries []parsed, cp Checkpoint) error {
	for _, p := range entries {
		if err := tlog.CheckRecord(p.Proof, cp.Size, cp.Root, p.Index, tlog.RecordHash([]byte(p.Leaf))); err != nil {
			return fmt.Errorf("%s, the job's %s of round %d, is not in the log: its inclusion proof does not lead to the checkpoint's root (%v); the entry or its proof was altered", p.what, p.leaf.Kind, p.leaf.Round, err)
		}
	}
	return nil
}

// checkChain checks the job's chain (step 4 of Verify) and returns its
// charges in order; it sets res.Charges, Rounds and ExtraEvents.
func checkChain(entries []parsed, private bool, res *Result) ([]parsed, error) {
	var charges []parsed
	released := 0
	var last *Leaf // the last charge
	for i, p := range entries {
		l := p.leaf
		switch want := int64(i + 1); {
		case l.JobLeaf > want:
			missing := fmt.Sprintf("leaf %d is", want)
			if l.JobLeaf-1 > want {
				missing = fmt.Sprintf("leaves %d … %d are", want, l.JobLeaf-1)
			}
			return nil, fmt.Errorf("%s is the job's leaf %d, but the bundle holds only %d before it: the job's %s missing here (an entry was removed or moved)", p.what, l.JobLeaf, i, missing)
		case l.JobLeaf < want:
			return nil, fmt.Errorf("%s is the job's leaf %d again, after %d others: an entry was inserted", p.what, l.JobLeaf, i)
		}
		if i > 0 && (l.Prev == nil || *l.Prev != entries[i-1].Index) {
			return nil, fmt.Errorf("%s links to log index %v as the job's previous leaf, but the previous entry is at %d: an entry was removed, inserted or moved", p.what, deref(l.Prev), entries[i-1].Index)
		}
		switch l.Kind {
		case KindCharge:
			if !private {
				return nil, fmt.Errorf("%s charges a DP event, but the job's spec has DP disabled", p.what)
			}
			if l.Seq != uint64(len(charges)+1) {
				return nil, fmt.Errorf("%s is charge seq %d, but %d charges precede it: charge seq %d is missing (an entry was removed or inserted)", p.what, l.Seq, len(charges), len(charges)+1)
			}
			if l.Round != released+1 {
				return nil, fmt.Errorf("%s charges round %d after %d released rounds: a charge is always for the next round (%d)", p.what, l.Round, released, released+1)
			}
			charges = append(charges, p)
			last = &entries[i].leaf
		case KindRelease:
			if l.Round != released+1 {
				return nil, fmt.Errorf("%s releases round %d after %d released rounds: round %d's release is missing or out of place", p.what, l.Round, released, released+1)
			}
			if private && (last == nil || last.Round != l.Round || l.ChargeSeq != last.Seq) {
				got := "none"
				if last != nil {
					got = fmt.Sprintf("seq %d of round %d", last.Seq, last.Round)
				}
				return nil, fmt.Errorf("%s releases round %d under charge seq %d, but the last charge before it is %s: every DP round is charged before it is released", p.what, l.Round, l.ChargeSeq, got)
			}
			if !private && l.ChargeSeq != 0 {
				return nil, fmt.Errorf("%s names charge seq %d, but the job's spec has DP disabled", p.what, l.ChargeSeq)
			}
			released++
		default:
			return nil, fmt.Errorf("%s is a %s leaf, which no job has", p.what, l.Kind)
		}
	}
	res.Charges, res.Rounds = len(charges), released
	if private { // every release follows its own charge, so never negative
		res.ExtraEvents = len(charges) - released
	}
	return charges, nil
}

// checkEventParams checks a job's (first) charged event against the
// spec's mechanism: the distributed discrete Gaussian's ρ
// (checkDDGEvent), or the central Gaussian's noise multiplier
// (checkNoise).
func checkEventParams(e accounting.Event, spec specFields) error {
	if spec.DP.Mechanism == mechanismDDG {
		return checkDDGEvent(e, spec)
	}
	return checkNoise(e, spec.DP.NoiseMultiplier)
}

// checkNoise checks that every Gaussian in e has noise multiplier z or
// z/2: dpfl records z for one clip norm of sensitivity and z/2 for two
// (replace-one adjacency, or a round that keeps only its first reports).
func checkNoise(e accounting.Event, z float64) error {
	var walk func(e accounting.Event) error
	walk = func(e accounting.Event) error {
		switch e := e.(type) {
		case accounting.Gaussian:
			if e.NoiseMultiplier != z && e.NoiseMultiplier != z/2 {
				return fmt.Errorf("event has noise multiplier %g, but the job's spec sets dp.noise_multiplier = %g (the event must record z or z/2)", e.NoiseMultiplier, z)
			}
		case accounting.PoissonSampled:
			return walk(e.Event)
		case accounting.SampledWithoutReplacement:
			return walk(e.Event)
		case accounting.SelfComposed:
			return walk(e.Event)
		case accounting.Composed:
			for _, s := range e.Events {
				if err := walk(s); err != nil {
					return err
				}
			}
		case accounting.NonPrivate:
			return errors.New("event is a non-private release")
		case accounting.ZCDP:
			return fmt.Errorf("event is a zCDP bound (ρ = %v), which only the distributed discrete Gaussian charges, but the job's spec adds central Gaussian noise", e.Rho)
		}
		return nil
	}
	return walk(e)
}

// checkClaim checks the bundle's claim against the log and the spec
// (step 7 of Verify).
func checkClaim(c Claim, spec specFields, events []accounting.Event, res *Result) error {
	switch {
	case c.Private != spec.DP.Enabled:
		return fmt.Errorf("claim: private = %v, but the job's spec has dp.enabled = %v", c.Private, spec.DP.Enabled)
	case c.Rounds != res.Rounds:
		return fmt.Errorf("claim: %d committed rounds, but the log releases %d: the claim does not match the log", c.Rounds, res.Rounds)
	case c.Events != res.Charges:
		return fmt.Errorf("claim: %d ledger events, but the log holds %d charges: the claim does not match the log", c.Events, res.Charges)
	case c.ExtraEvents != res.ExtraEvents:
		return fmt.Errorf("claim: %d extra events, but the log shows %d (charges beyond one per released round)", c.ExtraEvents, res.ExtraEvents)
	}
	if !spec.DP.Enabled {
		if c.Epsilon != nil {
			return errors.New("claim: an ε for a job without DP")
		}
		return nil
	}
	switch {
	case c.Delta != spec.DP.Delta:
		return fmt.Errorf("claim: δ = %g, but the job's spec has dp.delta = %g", c.Delta, spec.DP.Delta)
	case c.AbortDelta != spec.DP.AbortDelta:
		return fmt.Errorf("claim: abort δ = %g, but the job's spec has dp.abort_delta = %g", c.AbortDelta, spec.DP.AbortDelta)
	case c.Adjacency != spec.adjacency():
		return fmt.Errorf("claim: adjacency %q, but the job's spec makes it %q", c.Adjacency, spec.adjacency())
	case c.PrivacyUnit != spec.budget():
		return fmt.Errorf("claim: budget %q, but the job's spec names %q (dp.budget)", c.PrivacyUnit, spec.budget())
	}
	res.AccountingDelta = spec.DP.Delta - spec.DP.AbortDelta
	if len(events) == 0 {
		if c.Epsilon != nil && *c.Epsilon < 0 {
			return fmt.Errorf("claim: ε = %g < 0", *c.Epsilon)
		}
		return nil
	}
	method, err := pldMethod(c.PLDMethod, "claim")
	if err != nil {
		return err
	}
	rep, err := accounting.AccountMethod(events, res.AccountingDelta, method)
	if err != nil {
		return fmt.Errorf("recomputing ε at δ = %g: %w", res.AccountingDelta, err)
	}
	res.Recomputed = &rep
	bound := rep.Epsilon()
	if c.Epsilon == nil {
		return fmt.Errorf("claim: no ε for %d logged charges (recomputed bound ε = %.6g)", len(events), bound)
	}
	if below(*c.Epsilon, bound) {
		return fmt.Errorf("claim: ε = %.6g is below the bound recomputed from the log, ε = %.6g (rdp %s, pld %s) at δ = %g over %d charges: the claimed ε is too low",
			*c.Epsilon, bound, show(rep.RDP), show(rep.PLD), res.AccountingDelta, len(events))
	}
	for _, p := range []struct {
		claim *float64
		est   accounting.Estimate
	}{{c.RDPEpsilon, rep.RDP}, {c.PLDEpsilon, rep.PLD}} {
		if p.claim != nil && p.est.Valid && p.est.Epsilon != nil && below(*p.claim, *p.est.Epsilon) {
			return fmt.Errorf("claim: the %s accountant's ε = %.6g is below its recomputation from the log, ε = %.6g: the claimed ε is too low", p.est.Accountant, *p.claim, *p.est.Epsilon)
		}
	}
	if *c.Epsilon > bound*(1+EpsilonTolerance) {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the claimed ε = %.6g is above the recomputed bound %.6g: valid, but looser than it need be", *c.Epsilon, bound))
	}
	return nil
}

// pldMethod returns the PLD method to recompute a figure with: the one
// its record names, or accounting.PLDMethodV1 for a record from before
// methods were named (every server then ran it). Both methods give proven
// upper bounds, so a figure at or above either one's recomputation is a
// valid bound; recomputing with the figure's own method is what lets the
// comparison be exact (EpsilonTolerance) rather than loose by the
// methods' difference (about 1e-4 of ε). A method this verifier does not
// know is an error naming it: recompute with a newer dpfl, or
// independently (docs/audit_bundle.py). what names the record.
func pldMethod(named, what string) (string, error) {
	switch named {
	case "":
		return accounting.PLDMethodV1, nil
	case accounting.PLDMethodV1, accounting.PLDMethodV2:
		return named, nil
	}
	return "", fmt.Errorf("%s: ε computed by PLD method %q, which this verifier does not know (it knows %q and %q): verify with a newer dpfl-client", what, named, accounting.PLDMethodV1, accounting.PLDMethodV2)
}

// below reports whether a claimed ε is below bound beyond EpsilonTolerance.
func below(claim, bound float64) bool {
	if math.IsInf(bound, 1) {
		return !math.IsInf(claim, 1)
	}
	return claim < bound*(1-EpsilonTolerance)
}

func show(e accounting.Estimate) string {
	if e.Epsilon == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.6g", *e.Epsilon)
}

func deref(p *int64) any {
	if p == nil {
		return "none"
	}
	return *p
}

// checkModel checks a model file against the verified bundle (step 8).
func checkModel(m *ModelFile, entries []parsed, events []accounting.Event, key string, res *Result) error {
	if m.JobID != "" && m.JobID != res.Job {
		return fmt.Errorf("model: the file is job %q's model, the bundle job %q's", m.JobID, res.Job)
	}
	var rel *parsed
	for i := range entries {
		if l := entries[i].leaf; l.Kind == KindRelease && l.Round == m.Round {
			rel = &entries[i]
		}
	}
	if rel == nil {
		return fmt.Errorf("model: the log holds no release of round %d for job %s", m.Round, res.Job)
	}
	if h := ModelHash(m.Params); h != rel.leaf.ModelSHA256 {
		return fmt.Errorf("model: the file's %d parameters hash to %s, but the log's release of round %d records %s: this is not the released model", len(m.Params), h, m.Round, rel.leaf.ModelSHA256)
	}
	res.ModelRound = m.Round
	c := m.Certificate
	if res.Private {
		// The certificate's ε is recomputed by its own method; without a
		// certificate, by the claim's (one server made both).
		named, what := res.Claim.PLDMethod, "claim"
		if c != nil {
			named, what = c.PLDMethod, "model certificate"
		}
		method, err := pldMethod(named, what)
		if err != nil {
			return err
		}
		rep, err := accounting.AccountMethod(events[:rel.leaf.ChargeSeq], res.AccountingDelta, method)
		if err != nil {
			return fmt.Errorf("model: recomputing its ε: %w", err)
		}
		e := rep.Epsilon()
		res.ModelEpsilon = &e
	}
	if c == nil {
		return nil
	}
	if _, err := VerifyModel(c, m.Params, key); err != nil {
		return err
	}
	if c.LeafIndex != rel.Index || c.Leaf != rel.Leaf {
		return fmt.Errorf("model: the certificate's release leaf (log index %d) is not the bundle's release of round %d (log index %d)", c.LeafIndex, m.Round, rel.Index)
	}
	if res.ModelEpsilon != nil && (c.Epsilon == nil || below(*c.Epsilon, *res.ModelEpsilon)) {
		return fmt.Errorf("model: the certificate claims ε = %v, below the bound recomputed over the charges up to its release, ε = %.6g", deref64(c.Epsilon), *res.ModelEpsilon)
	}
	return nil
}

func deref64(p *float64) any {
	if p == nil {
		return "none"
	}
	return *p
}

// VerifyModel checks a model certificate against the model's
// parameters: the checkpoint's signature under key (empty: the
// certificate's own key, which proves only consistency), that LogSize
// and LogRoot are the checkpoint's, that the leaf is a release of the
// certificate's job and round recording ModelHash(params), and the
// leaf's inclusion proof. It returns the verified checkpoint, or an
// error naming the first problem. It cannot check Epsilon, which needs
// the job's charges: Verify does, given the job's bundle and the model.
func VerifyModel(c *ModelCertificate, params []float32, key string) (Checkpoint, error) {
	if key == "" {
		key = c.PublicKey
	}
	cp, err := OpenCheckpoint(c.Checkpoint, key)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("model certificate: checkpoint: %w", err)
	}
	if cp.Size != c.LogSize || cp.Root != c.LogRoot {
		return Checkpoint{}, fmt.Errorf("model certificate: log_size %d and log_root %s are not the signed checkpoint's (%d, %s)", c.LogSize, c.LogRoot, cp.Size, cp.Root)
	}
	l, err := ParseLeaf([]byte(c.Leaf))
	if err != nil {
		return Checkpoint{}, fmt.Errorf("model certificate: %w", err)
	}
	if l.Kind != KindRelease || l.Job != c.Job || l.Round != c.Round || l.ModelSHA256 != c.ModelSHA256 || l.ChargeSeq != c.ChargeSeq {
		return Checkpoint{}, fmt.Errorf("model certificate: its leaf is a %s of job %q round %d (model %s, charge seq %d), not the certificate's release of job %q round %d (model %s, charge seq %d)",
			l.Kind, l.Job, l.Round, l.ModelSHA256, l.ChargeSeq, c.Job, c.Round, c.ModelSHA256, c.ChargeSeq)
	}
	if h := ModelHash(params); h != c.ModelSHA256 {
		return Checkpoint{}, fmt.Errorf("model certificate: the model's %d parameters hash to %s, but the certificate records %s: this is not the certified model", len(params), h, c.ModelSHA256)
	}
	if c.LeafIndex < 0 || c.LeafIndex >= cp.Size {
		return Checkpoint{}, fmt.Errorf("model certificate: leaf index %d outside the checkpoint's %d leaves", c.LeafIndex, cp.Size)
	}
	if err := tlog.CheckRecord(c.Proof, cp.Size, cp.Root, c.LeafIndex, tlog.RecordHash([]byte(c.Leaf))); err != nil {
		return Checkpoint{}, fmt.Errorf("model certificate: the release leaf is not in the log: its inclusion proof does not lead to the checkpoint's root (%v)", err)
	}
	return cp, nil
}
