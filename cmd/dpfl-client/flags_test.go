package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The flags of the previous release still work, each with a warning that
// names its replacement, and mean what the new flags mean.
func TestDeprecatedFlags(t *testing.T) {
	offline := func(args ...string) (string, string) {
		var out, stderr bytes.Buffer
		c := newCommand("privacy", &stderr)
		if err := privacyOffline(c, args[0], args[1:], &out); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		return out.String(), stderr.String()
	}
	newOut, newErr := offline("compute", "--sampling-rate", "0.02", "--noise-multiplier", "1", "--rounds", "30", "--delta", "1e-5")
	oldOut, oldErr := offline("compute", "--q", "0.02", "--noise", "1", "--steps", "30", "--delta", "1e-5")
	if newErr != "" || oldOut != newOut || !strings.Contains(newOut, "ε =") {
		t.Fatalf("new flags: %q (stderr %q); old flags: %q", newOut, newErr, oldOut)
	}
	for _, w := range []string{"flag --q is deprecated; use --sampling-rate", "flag --noise is deprecated; use --noise-multiplier", "flag --steps is deprecated; use --rounds"} {
		if !strings.Contains(oldErr, w) {
			t.Errorf("stderr %q lacks %q", oldErr, w)
		}
	}
	calNew, _ := offline("calibrate", "--target-epsilon", "2", "--sampling-rate", "0.02", "--rounds", "30")
	calOld, calErr := offline("calibrate", "--epsilon", "2", "--q", "0.02", "--steps", "30")
	if calOld != calNew || !strings.Contains(calErr, "flag --epsilon is deprecated; use --target-epsilon") {
		t.Fatalf("calibrate: %q vs %q (stderr %q)", calNew, calOld, calErr)
	}
}

// A submit flag of the previous release sets the field its replacement
// sets, and replaces the field's old key from a job file.
func TestSubmitOverridesUseNewKeys(t *testing.T) {
	spec := map[string]any{"population": map[string]any{"clients": 600.0}}
	for _, o := range overrides {
		if o.flag == "population" {
			if err := setPath(spec, o, "300"); err != nil {
				t.Fatal(err)
			}
		}
	}
	pop := spec["population"].(map[string]any)
	if pop["size"] != int64(300) || pop["clients"] != nil {
		t.Fatalf("population %v, want size 300 and no clients", pop)
	}
	seen := map[string]bool{}
	for _, o := range overrides {
		for _, f := range append([]string{o.flag}, o.old...) {
			if seen[f] {
				t.Errorf("flag --%s defined twice", f)
			}
			seen[f] = true
		}
	}
	for _, f := range []string{"population", "sampling-rate", "cohort-size", "clip-norm", "noise-multiplier", "epsilon-budget", "target-epsilon", "clients", "q", "cohort", "clip", "z", "noise"} {
		if !seen[f] {
			t.Errorf("no flag --%s", f)
		}
	}
}

// Every command of the usage text runs through the table, and an unknown
// one is refused.
func TestSubcommandTable(t *testing.T) {
	for _, name := range []string{"submit", "watch", "list", "status", "privacy", "audit", "verify", "budget", "cancel", "model", "devices", "participate", "rounds"} {
		if subcommands[name] == nil || !strings.Contains(usage, "  "+name) {
			t.Errorf("command %s: in table %v, in usage %v", name, subcommands[name] != nil, strings.Contains(usage, "  "+name))
		}
	}
	if err := run(context.Background(), []string{"nope"}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Fatalf("unknown command: %v", err)
	}
}
