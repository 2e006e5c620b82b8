//go:build unix

package data

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A FIFO named like a LEAF file or directory is refused without opening
// it: opening one blocks until a writer comes, which would hang the
// submission.
func TestLoadLEAFRefusesFIFOs(t *testing.T) {
	root, trainDir, testDir := writeLEAF(t, nil)
	for _, p := range []string{filepath.Join(trainDir, "c.json"), "pipe"} {
		if err := syscall.Mkfifo(filepath.Join(root.Name(), p), 0o644); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
	}
	for _, c := range []struct{ dir, want string }{
		{trainDir, "train/c.json: not a regular file"},
		{"pipe", "pipe: not a readable LEAF directory"},
	} {
		_, _, _, err := LoadLEAF(root, c.dir, testDir, LEAFOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.dir, err, c.want)
		}
	}
}
