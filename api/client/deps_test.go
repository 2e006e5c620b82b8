package client

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// The client links neither the server nor its numerics: of dpfl's
// packages only the wire types, secure aggregation's messages (with the
// internal helpers they use), and nothing of echo, bbolt, gonum or plot.
// It is checked for the platforms devices run on as well as this one,
// since files chosen by build constraints (secagg's words_other.go, for
// one) differ between them.
func TestClientDependencies(t *testing.T) {
	targets := [][2]string{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "arm64"}, {"android", "arm64"}, {"windows", "amd64"}}
	if host := [2]string{runtime.GOOS, runtime.GOARCH}; !slices.Contains(targets, host) {
		targets = append(targets, host)
	}
	for _, tg := range targets {
		t.Run(tg[0]+"/"+tg[1], func(t *testing.T) {
			cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "list", "-deps", ".")
			cmd.Env = append(os.Environ(), "GOOS="+tg[0], "GOARCH="+tg[1], "CGO_ENABLED=0")
			out, err := cmd.Output()
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
		})
	}
}
