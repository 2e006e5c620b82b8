package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/dpfl/dpfl/api/client"
	auditlog "github.com/dpfl/dpfl/audit"
)

// auditBundle writes job id's audit bundle (auditlog.Bundle) to path: the
// job's transparency log entries with their inclusion proofs, the signed
// checkpoint, the server's public key, the job's spec and its privacy
// report as the claim. With sincePath (an earlier bundle, or a checkpoint
// note, that the auditor kept) the bundle also proves that the log only
// grew since then. The bundle is written even if it does not verify
// against its own key (it is then evidence), but the command fails.
func auditBundle(ctx context.Context, cl *client.Client, id, path, sincePath string, out io.Writer) error {
	var sinceNote string
	var since auditlog.Checkpoint
	if sincePath != "" {
		data, err := os.ReadFile(sincePath)
		if err != nil {
			return fmt.Errorf("--since-checkpoint: %w", err)
		}
		if sinceNote, since, err = auditlog.EarlierCheckpoint(data); err != nil {
			return fmt.Errorf("--since-checkpoint %s: %w", sincePath, err)
		}
	}
	raw, err := cl.AuditBundle(ctx, id, since.Size)
	if err != nil {
		return err
	}
	var b auditlog.Bundle
	if err := json.Unmarshal(raw, &b); err != nil {
		return fmt.Errorf("the server's audit bundle does not decode: %w", err)
	}
	if sincePath != "" {
		if b.Since == nil { // an earlier checkpoint of the empty log
			b.Since = &auditlog.Consistency{}
		}
		b.Since.Checkpoint = sinceNote
	}
	data, err := json.MarshalIndent(&b, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return err
	}
	cp, _ := auditlog.PeekCheckpoint(b.Checkpoint)
	fmt.Fprintf(out, "wrote %s: job %s, %d log entries proven against the checkpoint of %d leaves signed by %s\n", path, id, len(b.Entries), cp.Size, cp.Origin)
	if c := b.Claim; c.Epsilon != nil {
		fmt.Fprintf(out, "claim: ε = %.4f at δ = %g (%s), %s adjacency, %d rounds, %d events\n", *c.Epsilon, c.Delta, c.Accountant, c.Adjacency, c.Rounds, c.Events)
	}
	if _, err := auditlog.Verify(&b, auditlog.Options{Key: b.PublicKey}); err != nil {
		return fmt.Errorf("the bundle the server sent does not verify even against its own key: %w", err)
	}
	fmt.Fprintf(out, "verify it offline against the server's key (obtained from its operator):\n  dpfl-client verify %s --key '%s'\n", path, b.PublicKey)
	return nil
}
