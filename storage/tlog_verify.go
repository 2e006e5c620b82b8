package storage

import (
	"encoding/json"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/dpfl/dpfl/audit"
)

// verifyLog checks the transparency log in tx: every leaf's checksum and
// format, the tree hash recomputed from the leaves against the stored
// hashes and the head, the head's checkpoint (its signature under logKey
// when given), each job's chain of leaves, and that the log and the
// records agree: each ledger entry is its charge leaf (seq, round, time,
// event), each committed round has its release, each leaf records the
// job's spec hash, and each privacy unit its unit leaf. A rewritten leaf,
// hash, head or ledger entry is reported. It returns the model hash of
// each job's latest release, for the checkpoint check.
func verifyLog(tx kvTx, logKey string, res *VerifyResult, add func(error)) map[string]string {
	c := &logCheck{tx: tx, res: res, add: add}
	var ok bool
	if c.lb, ok = openLog(tx); !ok {
		c.bad("its buckets are missing")
		return nil
	}
	if !c.readLeaves() {
		return nil
	}
	c.checkStoredHashes()
	if !c.checkHead(logKey) {
		return nil
	}
	chains := c.checkChains()
	models := c.checkRecords(chains)
	c.checkUnits()
	return models
}

// logCheck is one run of verifyLog: the log's buckets, the leaves as
// parsed and the tree's stored hashes recomputed from them alone (never
// read from the hashes bucket, which is what is being checked).
type logCheck struct {
	tx     kvTx
	lb     logBuckets
	res    *VerifyResult
	add    func(error)
	mem    []tlog.Hash  // stored hashes recomputed from the leaves
	leaves []audit.Leaf // leaf i at index i (zero Leaf if unparseable)
	n      int64        // number of leaves read
}

// bad reports one inconsistency of the log as an error wrapping ErrCorrupt.
func (c *logCheck) bad(format string, a ...any) {
	c.add(fmt.Errorf("storage: transparency log: %s: %w", fmt.Sprintf(format, a...), ErrCorrupt))
}

// reader reads the recomputed hashes, so that tree hashes are derived
// from the leaves only.
func (c *logCheck) reader() tlog.HashReader {
	return tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			if x < 0 || x >= int64(len(c.mem)) {
				return nil, fmt.Errorf("hash %d not computed", x)
			}
			out[i] = c.mem[x]
		}
		return out, nil
	})
}

// readLeaves reads the leaves in index order, recomputing the stored
// hashes. A gap or a damaged frame makes the rest of the tree
// meaningless: it reports it and returns false.
func (c *logCheck) readLeaves() bool {
	broken := false
	rd := c.reader()
	_ = c.lb.leaves.ForEach(func(k, v []byte) error {
		c.res.LogLeaves++
		i, ok := keyU64(k)
		if !ok || i != uint64(c.n) {
			c.bad("leaf %d: missing (next stored key %x)", c.n, k)
			broken = true
			return errStopScan
		}
		p, err := unframe(v)
		if err == nil {
			var hs []tlog.Hash
			hs, err = tlog.StoredHashes(c.n, p, rd)
			c.mem = append(c.mem, hs...)
		}
		if err != nil {
			c.bad("leaf %d: %v", c.n, err)
			broken = true
			return errStopScan
		}
		l, err := audit.ParseLeaf(p)
		if err != nil {
			c.bad("leaf %d: %v", c.n, err)
		}
		c.leaves = append(c.leaves, l)
		c.n++
		return nil
	})
	return !broken
}

// checkStoredHashes compares the hashes bucket with the recomputed hashes.
func (c *logCheck) checkStoredHashes() {
	stored, wrong := 0, int64(-1)
	_ = c.lb.hashes.ForEach(func(k, v []byte) error {
		stored++
		i, ok := keyU64(k)
		p, err := unframe(v)
		if wrong < 0 && (!ok || i >= uint64(len(c.mem)) || err != nil || string(p) != string(c.mem[i][:])) {
			wrong = int64(i)
		}
		return nil
	})
	if wrong >= 0 || stored != len(c.mem) {
		c.bad("%d stored hashes, %d recomputed from the leaves; first mismatch at stored index %d (a leaf or hash was rewritten)", stored, len(c.mem), wrong)
	}
}

// checkHead compares the stored head and its checkpoint note (signed by
// logKey when given) with the tree hash of the leaves. It returns false
// when the head or the tree hash cannot be read at all.
func (c *logCheck) checkHead(logKey string) bool {
	h, err := readHead(c.lb)
	if err != nil {
		c.add(err)
		return false
	}
	root, err := tlog.TreeHash(c.n, c.reader())
	if err != nil {
		c.bad("tree hash: %v", err)
		return false
	}
	if h.Size != c.n || h.Root != root {
		c.bad("the head says %d leaves with root %s, but the %d stored leaves hash to %s (a leaf or the head was rewritten)", h.Size, h.Root, c.n, root)
	}
	if text, _, err := headText(h.Checkpoint, logKey); err != nil {
		c.bad("head: %v", err)
	} else if cp, err := audit.ParseCheckpoint(text); err != nil || cp.Size != h.Size || cp.Root != h.Root {
		c.bad("head: the checkpoint note (%v) does not state the head's size %d and root %s", err, h.Size, h.Root)
	}
	return true
}

// checkChains checks each job's index of leaves (leaf k of the job is
// the job's k-th leaf and links to leaf k-1) and that every job leaf is
// indexed. It returns each job's chain of log indexes.
func (c *logCheck) checkChains() map[string][]int64 {
	claimed := make([]bool, c.n)
	chains := map[string][]int64{}
	_ = c.lb.jobs.ForEachBucket(func(k []byte) error {
		id := string(k)
		idx, err := jobLeafIndexes(c.lb, id)
		if err != nil {
			c.add(err)
			return nil
		}
		for pos, i := range idx {
			if i >= c.n || !c.chainLink(id, idx, pos) {
				c.bad("job %q: its leaf %d (log index %d) is not that leaf of its chain", id, pos+1, i)
				return nil
			}
			claimed[i] = true
		}
		chains[id] = idx
		return nil
	})
	for i, l := range c.leaves {
		if l.Job != "" && !claimed[i] {
			c.bad("leaf %d of job %q is not in the job's index", i, l.Job)
		}
	}
	return chains
}

// chainLink reports whether leaf idx[k] is the (k+1)-th leaf of job id,
// linked to the job's previous leaf idx[k-1] (none for the first).
func (c *logCheck) chainLink(id string, idx []int64, k int) bool {
	l := c.leaves[idx[k]]
	if l.Job != id || l.JobLeaf != int64(k+1) || (k > 0) != (l.Prev != nil) {
		return false
	}
	return k == 0 || *l.Prev == idx[k-1]
}

// checkRecords checks each job record against its chain of leaves
// (checkJob) and that no chain belongs to a missing job. It returns the
// model hash of each job's latest release.
func (c *logCheck) checkRecords(chains map[string][]int64) map[string]string {
	models := map[string]string{}
	jobs := c.tx.Bucket(bucketJobs)
	_ = jobs.ForEachBucket(func(k []byte) error {
		id := string(k)
		b := jobs.Bucket(k)
		j, err := readMeta(b, id)
		if err != nil {
			return nil // verifyJobs reports it
		}
		idx := chains[id]
		delete(chains, id)
		if m, ok := c.checkJob(j, ledgerEntries(b), idx); ok {
			models[id] = m
		}
		return nil
	})
	for id := range chains {
		c.bad("leaves of job %q, which does not exist", id)
	}
	return models
}

// ledgerEntries decodes a job's ledger up to its first damaged entry
// (verifyJobs reports the damage).
func ledgerEntries(b kvBucket) []LedgerEntry {
	var entries []LedgerEntry
	if led := b.Bucket(bucketLedger); led != nil {
		_ = led.ForEach(func(k, v []byte) error {
			e, err := decodeLedger(k, v, uint64(len(entries))+1)
			if err != nil {
				return errStopScan
			}
			entries = append(entries, e)
			return nil
		})
	}
	return entries
}

// checkJob checks job j's leaves (log indexes idx) against its record:
// every leaf carries the spec's hash, the i-th charge leaf is the i-th
// ledger entry, the r-th release releases round r, and the counts match.
// It returns the model hash of the latest release (ok false if none).
func (c *logCheck) checkJob(j Job, entries []LedgerEntry, idx []int64) (model string, ok bool) {
	spec := audit.SHA256Hex(j.Config)
	charges, releases := 0, 0
	for _, i := range idx {
		l := c.leaves[i]
		if l.SpecSHA256 != spec {
			c.bad("job %q: leaf %d records spec SHA-256 %s, but the job's configuration hashes to %s (the job record was rewritten)", j.ID, i, l.SpecSHA256, spec)
			return model, ok
		}
		switch l.Kind {
		case audit.KindCharge:
			if charges < len(entries) {
				if e := entries[charges]; e.Seq != l.Seq || e.Round != l.Round || !e.Time.Equal(l.Time) || string(e.Event) != string(l.Event) {
					c.bad("job %q: ledger seq %d (round %d, event %s) differs from its log leaf %d (seq %d, round %d, event %s): the ledger or the log was rewritten",
						j.ID, e.Seq, e.Round, e.Event, i, l.Seq, l.Round, l.Event)
					return model, ok
				}
			}
			charges++
		case audit.KindRelease:
			releases++
			if l.Round != releases {
				c.bad("job %q: log leaf %d releases round %d, but it is the job's release %d", j.ID, i, l.Round, releases)
				return model, ok
			}
			model, ok = l.ModelSHA256, true
		}
	}
	if charges != len(entries) || releases != j.Round {
		c.bad("job %q: %d ledger entries and %d committed rounds, but the log holds %d charges and %d releases (a record or leaf was added or removed)", j.ID, len(entries), j.Round, charges, releases)
	}
	return model, ok
}

// checkUnits checks that each privacy unit record has a unit leaf with
// its budget and δ (the last unit leaf of that name counts).
func (c *logCheck) checkUnits() {
	units := map[string]audit.Leaf{}
	for _, l := range c.leaves {
		if l.Kind == audit.KindUnit {
			units[l.Unit] = l
		}
	}
	_ = c.tx.Bucket(bucketUnits).ForEach(func(k, v []byte) error {
		p, err := unframe(v)
		var u Unit
		if err != nil || json.Unmarshal(p, &u) != nil {
			return nil // verifyUnits reports it
		}
		l, ok := units[u.Name]
		if !ok || l.EpsilonBudget != u.EpsilonBudget || l.Delta != u.Delta {
			c.bad("privacy unit %q (ε_max %g, δ %g) has no matching unit leaf (the unit record was rewritten)", u.Name, u.EpsilonBudget, u.Delta)
		}
		return nil
	})
}
