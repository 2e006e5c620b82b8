package client

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The client links neither the server nor its numerics: of dpfl's
// packages only the wire types, secure aggregation's messages (with the
// internal helpers they use), and nothing of echo, bbolt, gonum or plot.
func TestClientDependencies(t *testing.T) {
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		switch {
		case strings.Contains(p, "labstack/echo"), strings.Contains(p, "bbolt"), strings.Contains(p, "gonum"), strings.Contains(p, "plot"):
			t.Errorf("api/client depends on %s", p)
		case strings.HasPrefix(p, "github.com/dpfl/dpfl/"):
			rest := strings.TrimPrefix(p, "github.com/dpfl/dpfl/")
			if rest != "api/client" && rest != "api/types" && rest != "secagg" && !strings.HasPrefix(rest, "internal/") {
				t.Errorf("api/client depends on dpfl's %s", rest)
			}
		}
	}
}
