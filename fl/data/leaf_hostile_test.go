package data

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The directories of a LEAF job come from the client that submits it, so
// LoadLEAF must read nothing outside the data root, and its errors must
// reveal nothing outside the root and no file's contents.

// secret is what a file outside the root (or a non-LEAF file inside it)
// holds; like /etc/shadow it starts with "r", the byte a JSON decoder's
// error would quote.
const secret = "root:$6$SECRETHASH:19000:0:99999:7:::\n"

// outside writes secret, as name, into a directory outside any data root
// and returns the file's path.
func outside(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// symlink makes link (under root) point at target, or skips the test
// where links cannot be made.
func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("symbolic links unavailable: %v", err)
	}
}

// leakFree fails the test if msg holds anything of secret or of the
// outside paths.
func leakFree(t *testing.T, what, msg string, paths ...string) {
	t.Helper()
	for _, s := range append([]string{"SECRET", "'r'", `"r"`, "root:", "$6$"}, paths...) {
		if strings.Contains(msg, s) {
			t.Errorf("%s: error %q reveals %q", what, msg, s)
		}
	}
}

func TestLoadLEAFRefusesLinksOutOfTheRoot(t *testing.T) {
	secretFile := outside(t, "shadow")
	// A complete LEAF directory outside the root: reading it would succeed.
	validOutside := t.TempDir()
	if err := os.WriteFile(filepath.Join(validOutside, "a.json"), []byte(leafTrainA), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, target string // the link's target
		file         bool   // a file link inside train (else train_dir is the link)
	}{
		{"file link to an absolute path", secretFile, true},
		{"file link by ../", "", true}, // relative, filled in below
		{"file link to a valid LEAF file outside", filepath.Join(validOutside, "a.json"), true},
		{"dir link to a valid LEAF dir outside", validOutside, false},
		{"dir link to a missing path outside", filepath.Join(validOutside, "missing"), false},
	} {
		root, trainDir, testDir := writeLEAF(t, nil)
		target := c.target
		if target == "" {
			rel, err := filepath.Rel(filepath.Join(root.Name(), trainDir), secretFile)
			if err != nil {
				t.Fatal(err)
			}
			target = rel
		}
		if c.file {
			symlink(t, target, filepath.Join(root.Name(), trainDir, "c.json"))
		} else {
			symlink(t, target, filepath.Join(root.Name(), "link"))
			trainDir = "link"
		}
		_, _, _, err := LoadLEAF(root, trainDir, testDir, LEAFOptions{})
		var le *LEAFError
		if !errors.As(err, &le) || le.Test {
			t.Fatalf("%s: error %v, want a *LEAFError about the training directory", c.name, err)
		}
		want := "train/c.json: cannot be read under the data root"
		if !c.file {
			want = "link: not a readable LEAF directory under the data root"
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %q, want one saying %q", c.name, err, want)
		}
		leakFree(t, c.name, err.Error(), secretFile, validOutside, filepath.Dir(secretFile), target)
	}
}

// An outside path that exists and one that does not give the same error:
// the error is no oracle for what exists outside the root.
func TestLoadLEAFErrorsSayNothingOfOutsideExistence(t *testing.T) {
	exists := filepath.Dir(outside(t, "shadow"))
	var msgs []string
	for _, target := range []string{exists, filepath.Join(exists, "missing"), filepath.Join(exists, "shadow")} {
		root, _, testDir := writeLEAF(t, nil)
		symlink(t, target, filepath.Join(root.Name(), "link"))
		for _, dir := range []string{"link", "link/x"} {
			_, _, _, err := LoadLEAF(root, dir, testDir, LEAFOptions{})
			if err == nil {
				t.Fatalf("link to %s: no error", target)
			}
			msgs = append(msgs, err.Error())
		}
	}
	for _, m := range msgs[2:] {
		if m != msgs[0] && m != msgs[1] {
			t.Errorf("errors differ with what exists outside the root: %q", msgs)
			break
		}
	}
	// The same error as for a directory missing inside the root.
	root, _, testDir := writeLEAF(t, nil)
	_, _, _, err := LoadLEAF(root, "link", testDir, LEAFOptions{})
	if err == nil || err.Error() != msgs[0] {
		t.Errorf("missing inside the root: %v, want %q", err, msgs[0])
	}
}

// A link that stays inside the root is followed.
func TestLoadLEAFFollowsLinksInsideTheRoot(t *testing.T) {
	root, trainDir, _ := writeLEAF(t, nil)
	symlink(t, trainDir, filepath.Join(root.Name(), "again"))
	train, test, _, err := LoadLEAF(root, trainDir, "again", LEAFOptions{})
	// Train and test may list the same users: "again" holds train's.
	if err != nil || train.TotalExamples() != 6 || test.TotalExamples() != 6 {
		t.Fatalf("test dir linked to train: %v", err)
	}
}

// Files that are not LEAF JSON (a password file, JSON with other keys)
// give errors that quote none of their bytes, keys or values.
func TestLoadLEAFErrorsQuoteNoContents(t *testing.T) {
	for _, c := range []struct{ name, body, want string }{
		{"not JSON", secret, "not valid JSON"},
		{"truncated JSON", `{"users": ["SECRETUSER"`, "not valid JSON"},
		{"bad escape", `{"users": ["\SECRET"]}`, "not valid JSON"},
		{"wrong types", `{"users": {"SECRETKEY": "SECRETVALUE"}}`, "not a LEAF object"},
		{"wrong nested type", `{"users": ["u"], "num_samples": [1], "user_data": {"u": {"SECRETKEY": 1}, "v": 2}}`, "not a LEAF object"},
		{"unlisted user", `{"users": [], "num_samples": [], "user_data": {"SECRETUSER": {}}}`, `"user_data" has a user who is not in "users"`},
		{"user without data", `{"users": ["SECRETUSER"], "num_samples": [1], "user_data": {}}`, `users[0] has no "user_data"`},
		{"bad x", `{"users": ["SECRETUSER"], "num_samples": [1], "user_data": {"SECRETUSER": {"x": {"SECRET": 1}, "y": [1]}}}`, "users[0]: x must be"},
		{"bad y", `{"users": ["SECRETUSER"], "num_samples": [1], "user_data": {"SECRETUSER": {"x": [[1]], "y": [12345678901234567890]}}}`, "users[0]: y must be"},
		{"label value", `{"users": ["SECRETUSER"], "num_samples": [1], "user_data": {"SECRETUSER": {"x": [[1]], "y": [777]}}}`, "users[0]: sample 0 has a label outside [0, 256)"},
		{"count", `{"users": ["SECRETUSER"], "num_samples": [4242], "user_data": {"SECRETUSER": {"x": [[1]], "y": [1]}}}`, `users[0]: "num_samples" disagrees`},
	} {
		root, trainDir, testDir := writeLEAF(t, map[string]string{"a.json": c.body})
		_, _, _, err := LoadLEAF(root, trainDir, testDir, LEAFOptions{})
		if err == nil || !strings.Contains(err.Error(), "train/a.json: "+c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
			continue
		}
		leakFree(t, c.name, err.Error(), "777", "4242", "12345")
	}
}

func TestLoadLEAFLimits(t *testing.T) {
	root, trainDir, testDir := writeLEAF(t, nil)
	// A file over the limit is refused from its size, before reading: a
	// sparse file costs no disk.
	big := filepath.Join(root.Name(), trainDir, "big.json")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, MaxLEAFFileBytes+1); err != nil {
		t.Skipf("no sparse file: %v", err)
	}
	_, _, _, err := LoadLEAF(root, trainDir, testDir, LEAFOptions{})
	if err == nil || !strings.Contains(err.Error(), "train/big.json: larger than the limit of 1 GiB on one LEAF file") {
		t.Errorf("file over the limit: %v", err)
	}
	if err := os.Remove(big); err != nil {
		t.Fatal(err)
	}

	all := leafLimits{fileBytes: MaxLEAFFileBytes, files: MaxLEAFFiles, bytes: MaxLEAFBytes}
	size := func(name string) int64 {
		fi, err := root.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	for _, c := range []struct {
		name string
		lim  leafLimits
		want string // "" for success
	}{
		{"all", all, ""},
		{"two files", leafLimits{all.fileBytes, 2, all.bytes}, ""},
		{"one file", leafLimits{all.fileBytes, 1, all.bytes}, "train: more than 1 *.json files"},
		{"file at the limit", leafLimits{max(size("train/a.json"), size("train/b.json"), size("test/test.json")), all.files, all.bytes}, ""},
		{"file over", leafLimits{size("train/a.json") - 1, all.files, all.bytes}, "train/a.json: larger than the limit of"},
		{"total over", leafLimits{all.fileBytes, all.files, size("train/a.json") + size("train/b.json")}, "test/test.json: the LEAF files read so far and this one exceed the limit"},
	} {
		_, _, _, err := loadLEAF(root, trainDir, testDir, LEAFOptions{}, c.lim)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		}
	}
}

func TestCheckLEAFDir(t *testing.T) {
	for _, c := range []struct{ dir, want string }{
		{"train", ""},
		{"femnist/data/train", ""},
		{"./train/", ""},
		{".", ""},
		{"a..b", ""},
		{"", "must name a directory"},
		{"/etc", "relative"},
		{"/", "relative"},
		{"..", `".."`},
		{"../x", `".."`},
		{"a/../b", `".."`},
		{"a/..", `".."`},
		{"a/*", "glob"},
		{"a?", "glob"},
		{"[ab]", "glob"},
		{`a\b`, "glob"},
		{"a\x00b", "control"},
		{"a\nb", "control"},
	} {
		err := CheckLEAFDir(c.dir)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v, want it accepted", c.dir, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: error %v, want one mentioning %s", c.dir, err, c.want)
		}
	}
}

// A deadline that has passed stops the reading with ErrLEAFDeadline, and
// one in the future changes nothing.
func TestLoadLEAFDeadline(t *testing.T) {
	root, train, test := writeLEAF(t, nil)
	_, _, _, err := LoadLEAF(root, train, test, LEAFOptions{Deadline: time.Now().Add(-time.Second)})
	if !errors.Is(err, ErrLEAFDeadline) {
		t.Fatalf("past deadline: %v, want ErrLEAFDeadline", err)
	}
	if _, _, _, err := LoadLEAF(root, train, test, LEAFOptions{Deadline: time.Now().Add(time.Hour)}); err != nil {
		t.Fatalf("future deadline: %v", err)
	}
}
