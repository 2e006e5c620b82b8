package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	auditlog "github.com/dpfl/dpfl/audit"
)

// verifyUsage is 'dpfl-client verify -h'.
const verifyUsage = `usage: dpfl-client verify FILE [--key PUB] [--model MODEL.json]

Checks offline, without the server, an audit bundle (dpfl-client audit JOB
--bundle FILE) or a model file (dpfl-client model JOB --out FILE): the
checkpoint's signature, every inclusion proof and the job's chain of
entries, and recomputes ε from the logged events with both accountants
(RDP and PLD) to compare with the claim. It exits non-zero and names the
first problem.

`

// verify is 'dpfl-client verify': offline verification of a bundle or a
// model file.
func verify(c *command, args []string, out io.Writer) error {
	key := c.fs.String("key", "", "the server's public key: its note verifier key <name>+<hash>+<key> (GET /v1/log/key, or the line dpfl-server prints at start), or a file holding it; default: the file's own key, which proves only that the file is consistent")
	model := c.fs.String("model", "", "with a bundle: a model file (dpfl-client model JOB --out FILE) to check against it")
	c.fs.Usage = func() {
		fmt.Fprint(c.fs.Output(), verifyUsage)
		c.fs.PrintDefaults()
	}
	pos, err := c.positional(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("verify: want exactly one FILE (a bundle or a model file), got %d arguments", len(pos))
	}
	file := pos[0]
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	pub, err := readKey(*key)
	if err != nil {
		return err
	}
	var kind struct {
		Format      string          `json:"format"`
		Certificate json.RawMessage `json:"certificate"`
	}
	if err := json.Unmarshal(data, &kind); err != nil {
		return fmt.Errorf("verify %s: FAILED: not JSON (%v): neither an audit bundle nor a model file", file, err)
	}
	if kind.Format == "" && len(kind.Certificate) > 0 {
		if *model != "" {
			return errors.New("verify: --model goes with a bundle; a model file is verified on its own")
		}
		return verifyModelFile(file, data, pub, out)
	}
	b, err := auditlog.ReadBundle(data)
	if err != nil {
		return fmt.Errorf("verify %s: FAILED: %w", file, err)
	}
	opt := auditlog.Options{Key: pub}
	if *model != "" {
		m, err := readModelFile(*model)
		if err != nil {
			return err
		}
		opt.Model = m
	}
	res, err := auditlog.Verify(b, opt)
	if err != nil {
		return fmt.Errorf("verify %s: FAILED: %w", file, err)
	}
	printVerified(out, file, b, res)
	return nil
}

// readKey returns --key's verifier key: the value itself, or the first
// line of the file it names.
func readKey(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	if fi, err := os.Stat(v); err == nil && fi.Mode().IsRegular() {
		b, err := os.ReadFile(v)
		if err != nil {
			return "", fmt.Errorf("--key: %w", err)
		}
		line, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
		return strings.TrimSpace(line), nil
	}
	return v, nil
}

func readModelFile(path string) (*auditlog.ModelFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--model: %w", err)
	}
	var m auditlog.ModelFile
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("--model %s: not a model file: %w", path, err)
	}
	return &m, nil
}

// verifyModelFile checks a model file's certificate against its
// parameters.
func verifyModelFile(file string, data []byte, pub string, out io.Writer) error {
	var m auditlog.ModelFile
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("verify %s: FAILED: not a model file: %w", file, err)
	}
	c := m.Certificate
	if c.Job != m.JobID || c.Round != m.Round {
		return fmt.Errorf("verify %s: FAILED: the certificate is for job %s round %d, the file holds job %s round %d", file, c.Job, c.Round, m.JobID, m.Round)
	}
	cp, err := auditlog.VerifyModel(c, m.Params, pub)
	if err != nil {
		return fmt.Errorf("verify %s: FAILED: %w", file, err)
	}
	fmt.Fprintf(out, "OK: %s is the model job %s released in round %d (SHA-256 %s)\n", file, m.JobID, m.Round, c.ModelSHA256)
	fmt.Fprintf(out, "  its release is leaf %d of log %q, in the checkpoint of %d leaves (root %s)\n", c.LeafIndex, cp.Origin, cp.Size, cp.Root)
	if c.Epsilon != nil {
		fmt.Fprintf(out, "  certified: ε = %.4f at δ = %g (%s, %s adjacency) over charges 1 … %d; check it with the job's bundle: dpfl-client verify BUNDLE --model %s\n",
			*c.Epsilon, c.Delta-c.AbortDelta, c.Accountant, c.Adjacency, c.ChargeSeq, file)
	}
	if pub == "" {
		fmt.Fprintln(out, "WARNING: no --key given: the certificate was checked with its own public key, which proves only that it is consistent; pin the server's key")
	}
	return nil
}

// printVerified reports a verified bundle.
func printVerified(out io.Writer, file string, b *auditlog.Bundle, res *auditlog.Result) {
	fmt.Fprintf(out, "OK: %s verifies: job %s\n", file, res.Job)
	cp := res.Checkpoint
	fmt.Fprintf(out, "  checkpoint: log %q, %d leaves, root %s, signature valid\n", cp.Origin, cp.Size, cp.Root)
	if res.SinceSize > 0 {
		fmt.Fprintf(out, "  the log only grew since the earlier checkpoint of %d leaves (consistency proof valid)\n", res.SinceSize)
	}
	fmt.Fprintf(out, "  entries: %d, every inclusion proof valid; chain: %d charges, %d rounds released, %d extra events\n",
		len(b.Entries), res.Charges, res.Rounds, res.ExtraEvents)
	if !res.Private {
		fmt.Fprintln(out, "  the job was trained without DP: no (ε, δ) guarantee")
	}
	if r := res.Recomputed; r != nil {
		show := func(e *float64) string {
			if e == nil {
				return "n/a"
			}
			return fmt.Sprintf("%.4f", *e)
		}
		fmt.Fprintf(out, "  recomputed at δ = %g: rdp ε = %s, pld ε = %s; bound ε = %.4f\n", res.AccountingDelta, show(r.RDP.Epsilon), show(r.PLD.Epsilon), r.Epsilon())
		fmt.Fprintf(out, "  claimed: ε = %.4f (%s) at δ = %g, %s adjacency: not below the bound\n", *res.Claim.Epsilon, res.Claim.Accountant, res.Claim.Delta, res.Claim.Adjacency)
	}
	if res.Unit != "" {
		fmt.Fprintf(out, "  charged to budget %s as well\n", res.Unit)
	}
	if res.ModelRound > 0 {
		fmt.Fprintf(out, "  model: the file is the model released in round %d", res.ModelRound)
		if res.ModelEpsilon != nil {
			fmt.Fprintf(out, ", ε = %.4f over the charges up to its release", *res.ModelEpsilon)
		}
		fmt.Fprintln(out)
	}
	for _, w := range res.Warnings {
		fmt.Fprintln(out, "WARNING:", w)
	}
}
