package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The API token comes from --token-file, else --token (with a warning:
// the command line is visible in ps), else $DPFL_TOKEN.
func TestTokenSources(t *testing.T) {
	t.Setenv("DPFL_TOKEN", "from-env")
	file := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args     []string
		want     string
		warns    bool
		failsSay string
	}{
		{nil, "from-env", false, ""},
		{[]string{"--token-file", file}, "from-file", false, ""},
		{[]string{"--token", "from-flag"}, "from-flag", true, ""},
		{[]string{"--token", "x", "--token-file", file}, "", false, "not both"},
		{[]string{"--token-file", filepath.Join(t.TempDir(), "missing")}, "", false, "no such file"},
	} {
		var stderr bytes.Buffer
		c0 := newCommand("list", &stderr)
		if err := c0.fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		got, err := c0.secret("token", *c0.token, *c0.tokenFile, "DPFL_TOKEN")
		if c.failsSay != "" {
			if err == nil || !strings.Contains(err.Error(), c.failsSay) {
				t.Errorf("%v: %q, %v; want an error saying %q", c.args, got, err, c.failsSay)
			}
			continue
		}
		if err != nil || got != c.want || strings.Contains(stderr.String(), "command line") != c.warns {
			t.Errorf("%v: %q, %v, stderr %q; want %q (warning %v)", c.args, got, err, stderr.String(), c.want, c.warns)
		}
	}
}
