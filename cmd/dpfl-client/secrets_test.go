package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpfl/dpfl/job"
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

// --save-inputs keeps the device's unmasked update private: the directory
// 0700 (also one that existed open), the files 0600 (also over a file
// that existed open).
func TestSaveInputIsPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "inputs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, "round-1-attempt-1.json")
	if err := os.WriteFile(name, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := &device{save: dir}
	if err := d.saveInput(job.JoinInfo{Round: 1, Attempt: 1}, []uint32{1, 2}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	di, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || di.Mode().Perm() != 0o700 {
		t.Fatalf("file %v, directory %v; want 0600 and 0700", fi.Mode().Perm(), di.Mode().Perm())
	}
	if b, _ := os.ReadFile(name); !bytes.Contains(b, []byte(`"input":[1,2]`)) {
		t.Fatalf("saved %s", b)
	}
}
