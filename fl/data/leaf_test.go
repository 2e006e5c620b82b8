package data

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// A LEAF fixture: two training files (users u1, u2 | u3) and one test file
// (u1, u3 and the test-only u4), 3 features, labels up to 4.
const (
	leafTrainA = `{"users": ["u1", "u2"], "num_samples": [2, 1], "user_data": {
		"u1": {"x": [[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]], "y": [0, 4]},
		"u2": {"x": [[1, 1, 1]], "y": [2]}}}`
	leafTrainB = `{"users": ["u3"], "num_samples": [3], "hierarchies": [],
		"user_data": {"u3": {"x": [[0, 0, 0.5], [0, 0, 0.25], [0, 0, 0.125]], "y": [1, 1, 3]}}}`
	leafTest = `{"users": ["u1", "u3", "u4"], "num_samples": [1, 1, 2], "user_data": {
		"u1": {"x": [[0.7, 0.8, 0.9]], "y": [4]},
		"u3": {"x": [[0, 0, 1]], "y": [3]},
		"u4": {"x": [[2, 2, 2], [3, 3, 3]], "y": [0, 2]}}}`
)

// writeLEAF writes the fixture (with files replaced by name: "a.json",
// "b.json" in train, "test.json" in test) under a new data root and
// returns the root, opened, and the two directories relative to it.
func writeLEAF(t *testing.T, replace map[string]string) (root *os.Root, train, test string) {
	t.Helper()
	dir := t.TempDir()
	train, test = "train", "test"
	for _, f := range []struct{ dir, name, body string }{
		{train, "a.json", leafTrainA}, {train, "b.json", leafTrainB}, {test, "test.json", leafTest},
	} {
		body := f.body
		if r, ok := replace[f.name]; ok {
			body = r
		}
		if err := os.MkdirAll(filepath.Join(dir, f.dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.dir, f.name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Files that are not *.json are ignored.
	if err := os.WriteFile(filepath.Join(dir, train, "README"), []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	return openRoot(t, dir), train, test
}

// openRoot opens dir as an os.Root, closed at the end of the test.
func openRoot(t *testing.T, dir string) *os.Root {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}

// rowsOf is the set of (features…, label) rows of client id, sorted.
func rowsOf(f *Federated, id int) [][]float32 {
	ds := f.Base()
	var rows [][]float32
	for _, i := range allIdx(f.Client(id)) {
		row := slices.Clone(ds.X[int(i)*ds.Dim : (int(i)+1)*ds.Dim])
		rows = append(rows, append(row, float32(ds.Y[i])))
	}
	slices.SortFunc(rows, slices.Compare)
	return rows
}

func TestLoadLEAF(t *testing.T) {
	root, trainDir, testDir := writeLEAF(t, nil)
	train, test, users, err := LoadLEAF(root, trainDir, testDir, LEAFOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(users, []string{"u1", "u2", "u3", "u4"}) {
		t.Fatalf("users %v", users)
	}
	for _, ds := range []*Dataset{train.Base(), test.Base()} {
		if err := ds.Validate(); err != nil || ds.Dim != 3 || ds.Classes != 5 {
			t.Fatalf("dim %d, classes %d (want 3, 5 = max label + 1): %v", ds.Dim, ds.Classes, err)
		}
	}
	if train.NumClients() != 4 || test.NumClients() != 4 || train.TotalExamples() != 6 || test.TotalExamples() != 4 {
		t.Fatalf("%d/%d clients, %d/%d examples", train.NumClients(), test.NumClients(), train.TotalExamples(), test.TotalExamples())
	}
	want := map[*Federated][][][]float32{
		train: {
			{{0.1, 0.2, 0.3, 0}, {0.4, 0.5, 0.6, 4}},
			{{1, 1, 1, 2}},
			{{0, 0, 0.125, 3}, {0, 0, 0.25, 1}, {0, 0, 0.5, 1}},
			nil,
		},
		test: {
			{{0.7, 0.8, 0.9, 4}},
			nil,
			{{0, 0, 1, 3}},
			{{2, 2, 2, 0}, {3, 3, 3, 2}},
		},
	}
	for f, clients := range want {
		for id, rows := range clients {
			if got := rowsOf(f, id); !slices.EqualFunc(got, rows, slices.Equal) {
				t.Errorf("client %d (%s) rows %v, want %v", id, users[id], got, rows)
			}
			if f.ClientSize(id) != len(rows) {
				t.Errorf("client %d: size %d, want %d", id, f.ClientSize(id), len(rows))
			}
		}
	}

	train, _, _, err = LoadLEAF(root, trainDir, testDir, LEAFOptions{Classes: 62, HeldOutFraction: 0.5, Seed: 3})
	if err != nil || train.Base().Classes != 62 || len(train.Client(2).HeldOut) != 1 || train.ClientSize(2) != 2 {
		t.Errorf("classes 62, held out 0.5: %v", err)
	}
	train, test, users, err = LoadLEAF(root, trainDir, "", LEAFOptions{})
	if err != nil || test != nil || len(users) != 3 || train.NumClients() != 3 {
		t.Errorf("no test dir: %v users, test %v, %v", users, test, err)
	}
}

// userName matches the fixture's user names.
var userName = regexp.MustCompile(`\bu[0-9]\b`)

func TestLoadLEAFErrors(t *testing.T) {
	r := strings.NewReplacer
	a := func(old, new string) map[string]string {
		return map[string]string{"a.json": r(old, new).Replace(leafTrainA)}
	}
	te := func(old, new string) map[string]string {
		return map[string]string{"test.json": r(old, new).Replace(leafTest)}
	}
	cases := []struct {
		name    string
		replace map[string]string
		want    []string // substrings: the file, the user's position, the problem
	}{
		{"num_samples vs x", a(`[2, 1]`, `[2, 2]`), []string{"train/a.json", "users[1]", `"num_samples" disagrees`}},
		{"y length", a(`"y": [0, 4]`, `"y": [0]`), []string{"train/a.json", "users[0]", `"num_samples" disagrees`}},
		{"dim across files", te(`[[2, 2, 2], [3, 3, 3]]`, `[[2, 2, 2], [3, 3]]`), []string{"test/test.json", "users[2]", "sample 1 has a different number of features than train/a.json users[0] sample 0"}},
		{"empty vector", a(`[[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]]`, `[[], []]`), []string{"train/a.json", "users[0]", "empty feature vector"}},
		{"label ≥ 256", a(`"y": [0, 4]`, `"y": [0, 300]`), []string{"train/a.json", "users[0]", "sample 1 has a label outside [0, 256)"}},
		{"negative label", a(`"y": [2]`, `"y": [-1]`), []string{"train/a.json", "users[1]", "label outside"}},
		{"fractional label", a(`"y": [2]`, `"y": [1.5]`), []string{"train/a.json", "users[1]", "integer labels"}},
		{"string x", a(`[[1, 1, 1]]`, `["to be or not to b"]`), []string{"train/a.json", "users[1]", "not supported yet"}},
		{"string features", a(`[[1, 1, 1]]`, `[["id", "Mon Apr 06", "NO_QUERY", "user", "tweet"]]`), []string{"train/a.json", "users[1]", "not supported yet"}},
		{"string y", a(`"y": [2]`, `"y": ["e"]`), []string{"train/a.json", "users[1]", "y holds strings", "not supported yet"}},
		{"flat x", a(`[[1, 1, 1]]`, `[1]`), []string{"train/a.json", "users[1]", "numeric feature vectors"}},
		{"no x", a(`"x": [[1, 1, 1]], `, ``), []string{"train/a.json", "users[1]", `no "x"`}},
		{"no y", a(`, "y": [2]`, ``), []string{"train/a.json", "users[1]", `no "y"`}},
		{"data for an unlisted user", a(`"u2": {"x": [[1, 1, 1]], "y": [2]}`, `"u9": {"x": [[1, 1, 1]], "y": [2]}`), []string{"train/a.json", `"user_data" has a user who is not in "users"`}},
		{"listed, no user_data", a(`["u1", "u2"], "num_samples": [2, 1]`, `["u1", "u2", "u5"], "num_samples": [2, 1, 0]`), []string{"train/a.json", `users[2] has no "user_data"`}},
		{"duplicate in file", a(`["u1", "u2"], "num_samples": [2, 1]`, `["u1", "u2", "u1"], "num_samples": [2, 1, 2]`), []string{"train/a.json", "users[2] is listed twice"}},
		{"duplicate across files", map[string]string{"b.json": r(`"u3"`, `"u2"`).Replace(leafTrainB)}, []string{"train/b.json", "users[0] is also listed in train/a.json"}},
		{"num_samples count", a(`[2, 1]`, `[2]`), []string{"train/a.json", `"num_samples" and "users" differ in length`}},
		{"no users", a(`"users"`, `"people"`), []string{"train/a.json", `no "users"`}},
		{"no num_samples", a(`"num_samples"`, `"counts"`), []string{"train/a.json", `no "num_samples"`}},
		{"no user_data", a(`"user_data"`, `"data"`), []string{"train/a.json", `no "user_data"`}},
		{"bad JSON", a(`]}}}`, `]}}`), []string{"train/a.json", "not valid JSON"}},
		{"not an object", map[string]string{"b.json": `[1, 2]`}, []string{"train/b.json", "not a LEAF object"}},
		{"no test examples", map[string]string{"test.json": `{"users": [], "num_samples": [], "user_data": {}}`}, []string{"test: no examples"}},
	}
	for _, c := range cases {
		root, trainDir, testDir := writeLEAF(t, c.replace)
		_, _, _, err := LoadLEAF(root, trainDir, testDir, LEAFOptions{})
		var le *LEAFError
		if !errors.As(err, &le) || le.Test != strings.HasPrefix(le.Path, "test") {
			t.Errorf("%s: error %#v, want a *LEAFError for the right directory", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %v, want one mentioning %q", c.name, err, w)
				break
			}
		}
		// User names are file contents: errors give positions instead.
		if userName.MatchString(err.Error()) {
			t.Errorf("%s: error %v names a user", c.name, err)
		}
	}

	root, trainDir, testDir := writeLEAF(t, nil)
	if err := os.Mkdir(filepath.Join(root.Name(), "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name        string
		root        *os.Root
		train, test string
		opt         LEAFOptions
		want        []string
	}{
		{"labels ≥ classes", root, trainDir, testDir, LEAFOptions{Classes: 4}, []string{"train/a.json", "users[0]", "sample 1 has a label outside [0, 4)"}},
		{"classes", root, trainDir, testDir, LEAFOptions{Classes: 257}, []string{"classes"}},
		{"held out", root, trainDir, testDir, LEAFOptions{HeldOutFraction: math.NaN()}, []string{"held-out"}},
		{"no root", nil, trainDir, testDir, LEAFOptions{}, []string{"no data root"}},
		{"empty dir", root, "empty", testDir, LEAFOptions{}, []string{"empty: no *.json files"}},
		{"missing dir", root, "nope", testDir, LEAFOptions{}, []string{"nope: not a readable LEAF directory under the data root"}},
		{"missing test dir", root, trainDir, "nope", LEAFOptions{}, []string{"nope: not a readable LEAF directory"}},
		{"a file, not a dir", root, "train/a.json", testDir, LEAFOptions{}, []string{"train/a.json: not a readable LEAF directory"}},
		{"absolute", root, "/etc", testDir, LEAFOptions{}, []string{"/etc: must be a path relative"}},
		{"parent", root, "train/../../x", testDir, LEAFOptions{}, []string{`".." is not allowed`}},
		{"glob", root, "tr*", testDir, LEAFOptions{}, []string{"glob characters"}},
	} {
		_, _, _, err := LoadLEAF(c.root, c.train, c.test, c.opt)
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %v, want one mentioning %q", c.name, err, w)
				break
			}
		}
	}
}
