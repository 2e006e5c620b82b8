package job

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpfl/dpfl/api/types"
)

// leafSpec is a small LEAF job on the directories train and test.
func leafSpec(t *testing.T, train, test string) types.Spec {
	return small(t, func(s *types.Spec) {
		s.Dataset = "leaf"
		s.LEAF = types.LEAFSpec{TrainDir: train, TestDir: test}
		s.Sampling = types.SamplingSpec{Scheme: "fixed", CohortSize: 2}
		s.DP.Enabled = false
	})
}

// A job's client names the LEAF directories, so they are refused unless
// they lie under the server's data root, and the refusals tell nothing
// about anything outside it.
func TestLEAFPathsStayUnderTheDataRoot(t *testing.T) {
	root := t.TempDir()
	file := `{"users": ["a", "b"], "num_samples": [1, 1], "user_data": {"a": {"x": [[1, 0]], "y": [0]}, "b": {"x": [[0, 1]], "y": [1]}}}`
	for _, d := range []string{"train", "test"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, d, "all.json"), []byte(file), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Outside the root: a secret, and a valid LEAF directory.
	out := t.TempDir()
	secret := filepath.Join(out, "shadow")
	if err := os.WriteFile(secret, []byte("root:SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "all.json"), []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"train/shadow.json": secret, "outdir": out, "test/up.json": "../../" + filepath.Base(out) + "/all.json"} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Skipf("symbolic links unavailable: %v", err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "bad.json"), []byte("root:SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}

	m := managerWithDataRoot(t, root)
	for _, c := range []struct {
		name, train, test string
		field, want       string
	}{
		{"absolute", "/etc", "test", "leaf.train_dir", "relative"},
		{"absolute test", "train", out, "leaf.test_dir", "relative"},
		{"parent", "../x", "test", "leaf.train_dir", `".."`},
		{"parent inside", "train/../train", "test", "leaf.train_dir", `".."`},
		{"glob", "a/*", "test", "leaf.train_dir", "glob"},
		{"no test dir", "train", "", "leaf.test_dir", "required"},
		{"missing", "nope", "test", "leaf.train_dir", "nope: not a readable LEAF directory under the data root"},
		{"dir link out", "outdir", "test", "leaf.train_dir", "outdir: not a readable LEAF directory under the data root"},
		// train/all.json is read, then train/shadow.json is refused.
		{"file link out", "train", "test", "leaf.train_dir", "train/shadow.json: cannot be read under the data root"},
	} {
		_, err := m.Submit(leafSpec(t, c.train, c.test))
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field || !strings.Contains(ve.Rule, c.want) {
			t.Errorf("%s: error %v, want a validation error on %s saying %q", c.name, err, c.field, c.want)
			continue
		}
		for _, leak := range []string{"SECRET", "'r'", secret, filepath.Base(out)} {
			if c.test != out && strings.Contains(err.Error(), leak) {
				t.Errorf("%s: error %q reveals %q", c.name, err, leak)
			}
		}
	}
	// The test directory's link out (test/up.json, relative, by ..) is
	// refused too, on leaf.test_dir; and once it is gone the job runs.
	if err := os.Remove(filepath.Join(root, "train", "shadow.json")); err != nil {
		t.Fatal(err)
	}
	_, err := m.Submit(leafSpec(t, "train", "test"))
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "leaf.test_dir" || !strings.Contains(ve.Rule, "test/up.json: cannot be read") || strings.Contains(err.Error(), filepath.Base(out)) {
		t.Errorf("relative link out of the root: %v", err)
	}
	if err := os.Remove(filepath.Join(root, "test", "up.json")); err != nil {
		t.Fatal(err)
	}
	st := runToEnd(t, m, leafSpec(t, "train", "./test/"))
	if st.State != types.StateCompleted || st.Spec.Population.Size != 2 {
		t.Errorf("leaf job under the root: %s, %d clients: %s", st.State, st.Spec.Population.Size, st.Message)
	}
}

// Without --data-root, every LEAF job is refused, whatever its paths.
func TestLEAFWithoutDataRoot(t *testing.T) {
	m := manager(t)
	for _, dir := range []string{"train", "femnist/data/train"} {
		_, err := m.Submit(leafSpec(t, dir, "test"))
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != "dataset" || !strings.Contains(ve.Rule, "the server has no --data-root; leaf datasets are disabled") {
			t.Errorf("%s: error %v, want leaf datasets disabled", dir, err)
		}
	}
}
