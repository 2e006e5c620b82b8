package data

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"
)

// LEAFOptions configure LoadLEAF.
type LEAFOptions struct {
	// Classes is the number of classes, in [0, 256]; 0 infers it as the
	// largest label in train and test plus one (FEMNIST has 62, which a
	// small sample of users may not all show, so pass 62 for it).
	Classes int
	// HeldOutFraction and Seed are passed to NewFederatedFromClients for
	// the training population: a further ⌊HeldOutFraction·m⌋ of each
	// user's m training examples, chosen with a PCG seeded from Seed, are
	// held out for per-client evaluation. 0 holds none out.
	HeldOutFraction float64
	Seed            uint64
	// Deadline, if not zero, stops the reading when it passes: LoadLEAF
	// checks it before each file and each user and then returns
	// ErrLEAFDeadline. A server that loads a dataset while a request
	// waits sets it, so a slow directory cannot hold the request.
	Deadline time.Time
}

// ErrLEAFDeadline is LoadLEAF's error when LEAFOptions.Deadline passed
// before the dataset was read.
var ErrLEAFDeadline = errors.New("data: LEAF: reading the dataset took longer than its deadline")

// Limits on what LoadLEAF reads. A job's client chooses the directories,
// so a directory must not make the server read without bound.
const (
	// MaxLEAFFileBytes bounds one *.json file: the reader holds a file's
	// bytes and their parse in memory together. LEAF writes its datasets
	// as a few dozen files per split, each far smaller.
	MaxLEAFFileBytes = 1 << 30
	// MaxLEAFFiles bounds the *.json files of one directory.
	MaxLEAFFiles = 1000
	// MaxLEAFBytes bounds the *.json files of both directories together:
	// their examples stay in memory for as long as the job runs.
	MaxLEAFBytes int64 = 8 << 30
)

// LEAFError is LoadLEAF's error about one directory or one of its files.
// It names the directory or file relative to the root and gives a generic
// reason, never a file's contents (not a byte, a user name or a value),
// an operating system's error text, or anything outside the root, so
// that it can be shown to whoever named the directories.
type LEAFError struct {
	// Test is true for an error about testDir, false for trainDir.
	Test bool
	// Path is the directory or file, slash-separated, relative to the root.
	Path string
	// Reason says what is wrong.
	Reason string
}

// Error is "data: LEAF: " followed by the path and the reason.
func (e *LEAFError) Error() string { return "data: LEAF: " + e.Path + ": " + e.Reason }

// CheckLEAFDir reports why dir cannot name a directory under a data root,
// or nil. dir must be a relative, slash-separated path: not empty, not
// absolute, with no ".." element (even one that would stay inside), no
// glob metacharacter (* ? [ ] or backslash: the name is never expanded),
// and no control character. "." names the root itself. The rules are
// lexical; LoadLEAF also opens everything through an os.Root, which
// refuses symbolic links that lead out of the root.
func CheckLEAFDir(dir string) error {
	switch {
	case dir == "":
		return errors.New("must name a directory under the data root")
	case strings.ContainsFunc(dir, unicode.IsControl):
		return errors.New("must not contain control characters")
	case strings.HasPrefix(dir, "/") || filepath.IsAbs(dir) || filepath.VolumeName(dir) != "":
		return errors.New("must be a path relative to the server's data root, not an absolute one")
	case strings.ContainsAny(dir, `*?[]\`):
		return errors.New(`must be a plain path: glob characters * ? [ ] and \ are not allowed`)
	case slices.Contains(strings.Split(dir, "/"), ".."):
		return errors.New(`must stay under the data root: ".." is not allowed`)
	case !filepath.IsLocal(filepath.FromSlash(path.Clean(dir))):
		return errors.New("must be a local path under the data root") // reserved names on Windows
	}
	return nil
}

// LoadLEAF reads a naturally federated dataset in the JSON format of LEAF
// (Caldas, Duddu, Wu, Li, Konečný, McMahan, Smith, Talwalkar, "LEAF: A
// Benchmark for Federated Settings", 2018; github.com/TalwalkarLab/leaf,
// the files its preprocess.sh writes to data/<dataset>/data/train and
// .../test) from the directories trainDir and testDir under root. Each of
// the *.json files of a directory (in name order; no globbing) is
//
//	{"users": [u, …], "num_samples": [n_u, …],
//	 "user_data": {u: {"x": [[f, …], …], "y": [label, …]}, …}}
//
// with other keys ignored. Only numeric features are supported: x must be
// a list of equally long numeric vectors (FEMNIST: 784 floats in [0, 1],
// one 28×28 image each) and y a list of integer labels in [0, 256).
// Shakespeare's and Sent140's string x (and Shakespeare's string y) are
// rejected as not supported yet.
//
// The directories must pass CheckLEAFDir, and everything is opened
// through root, so that nothing outside it is read, symbolic links
// included. A file must be a regular file of at most MaxLEAFFileBytes, a
// directory may hold at most MaxLEAFFiles *.json files, and all of them
// together at most MaxLEAFBytes.
//
// Users are clients: users[i] is client i of both train and test. The
// order is the training files' users in file order, then users found only
// in testDir (LEAF's user-based split puts different users in test); a
// user absent from one split is an empty client there. train.Base() and
// test.Base() hold all the split's examples, each user's contiguous; test's
// clients keep their examples as Train (none held out). testDir "" reads
// no test split and returns a nil test.
//
// Errors about the directories and files are *LEAFError: a directory
// that is missing, unreadable, not a directory or reached through a link
// out of the root (one reason for all of these), a directory with no
// *.json file or too many, a file that cannot be read or is too large,
// invalid JSON, a missing "users", "num_samples" or "user_data",
// len(num_samples) ≠ len(users), a user listed twice (in one file or
// across a split's files) or listed without user_data, user_data for an
// unlisted user, num_samples ≠ len(x) or len(y), a missing or non-numeric
// x or y, feature vectors of differing lengths (across all files of both
// splits), labels outside [0, 256) or not below opt.Classes, and a split
// with no examples. They name users by their position in the file's
// users list. A nil root and opt.Classes or opt.HeldOutFraction out of
// range give other errors.
func LoadLEAF(root *os.Root, trainDir, testDir string, opt LEAFOptions) (train, test *Federated, users []string, err error) {
	return loadLEAF(root, trainDir, testDir, opt, leafLimits{MaxLEAFFileBytes, MaxLEAFFiles, MaxLEAFBytes})
}

// leafLimits are LoadLEAF's limits, smaller in tests.
type leafLimits struct {
	fileBytes int64
	files     int
	bytes     int64
}

// loadLEAF is LoadLEAF under the given limits.
func loadLEAF(root *os.Root, trainDir, testDir string, opt LEAFOptions, lim leafLimits) (train, test *Federated, users []string, err error) {
	if root == nil {
		return nil, nil, nil, errors.New("data: LEAF: no data root")
	}
	if opt.Classes < 0 || opt.Classes > 256 {
		return nil, nil, nil, fmt.Errorf("data: LEAF: classes must be in [0, 256] (0: infer), got %d", opt.Classes)
	}
	if !(opt.HeldOutFraction >= 0 && opt.HeldOutFraction < 1) {
		return nil, nil, nil, fmt.Errorf("data: LEAF: held-out fraction must be in [0, 1), got %v", opt.HeldOutFraction)
	}
	r := &leafReader{root: root, lim: lim, classes: opt.Classes, deadline: opt.Deadline}
	tr, err := r.readDir(trainDir, false)
	if err != nil {
		return nil, nil, nil, err
	}
	var te *leafSplit
	if testDir != "" {
		if te, err = r.readDir(testDir, true); err != nil {
			return nil, nil, nil, err
		}
	}
	classes := opt.Classes
	if classes == 0 {
		classes = r.maxLabel + 1
	}
	users = slices.Clone(tr.users)
	id := make(map[string]int, len(users))
	for i, u := range users {
		id[u] = i
	}
	if te != nil {
		for _, u := range te.users {
			if _, ok := id[u]; !ok {
				id[u] = len(users)
				users = append(users, u)
			}
		}
	}
	build := func(s *leafSplit, held float64) (*Federated, error) {
		if len(s.y) == 0 {
			return nil, &LEAFError{Test: s.test, Path: s.dir, Reason: "no examples"}
		}
		ds := &Dataset{X: s.x, Y: s.y, Dim: r.dim, Classes: classes}
		clients := make([][]int32, len(users))
		for k, u := range s.users {
			lo, hi := s.start[k], s.start[k+1]
			c := make([]int32, hi-lo)
			for j := range c {
				c[j] = int32(lo + j)
			}
			clients[id[u]] = c
		}
		f, err := NewFederatedFromClients(ds, clients, held, opt.Seed)
		if err != nil {
			return nil, fmt.Errorf("data: LEAF: %s: %w", s.dir, err)
		}
		return f, nil
	}
	if train, err = build(tr, opt.HeldOutFraction); err != nil {
		return nil, nil, nil, err
	}
	if te != nil {
		if test, err = build(te, 0); err != nil {
			return nil, nil, nil, err
		}
	}
	return train, test, users, nil
}

// leafReader carries what must agree across all files of both splits.
type leafReader struct {
	root     *os.Root
	lim      leafLimits
	classes  int // 0: any label below 256
	dim      int // 0 until the first feature vector
	dimFrom  string
	maxLabel int
	bytes    int64 // read so far, of lim.bytes
	deadline time.Time
}

// late reports whether the reader's deadline has passed.
func (r *leafReader) late() bool { return !r.deadline.IsZero() && time.Now().After(r.deadline) }

// leafSplit is one directory's examples: user users[k] holds rows
// start[k] … start[k+1]−1.
type leafSplit struct {
	test  bool
	dir   string // cleaned, slash-separated
	x     []float32
	y     []uint8
	users []string
	start []int
	seen  map[string]string // user → file that lists them
}

type leafFile struct {
	Users      []string                `json:"users"`
	NumSamples []int                   `json:"num_samples"`
	UserData   map[string]leafUserData `json:"user_data"`
}

type leafUserData struct {
	X json.RawMessage `json:"x"`
	Y json.RawMessage `json:"y"`
}

// errNotLEAFDir is the one reason for every way a directory cannot be
// listed: telling "missing" from "a link out of the root" apart would
// tell the client about paths it must not learn about.
const errNotLEAFDir = "not a readable LEAF directory under the data root (missing, not a directory, unreadable, or a link leading out of the root)"

// readDir reads the *.json files of dir, in name order.
func (r *leafReader) readDir(dir string, test bool) (*leafSplit, error) {
	if err := CheckLEAFDir(dir); err != nil {
		return nil, &LEAFError{Test: test, Path: dir, Reason: err.Error()}
	}
	s := &leafSplit{test: test, dir: path.Clean(dir), start: []int{0}, seen: map[string]string{}}
	fail := func(reason string) (*leafSplit, error) {
		return nil, &LEAFError{Test: test, Path: s.dir, Reason: reason}
	}
	rel := filepath.FromSlash(s.dir)
	// Stat before Open: opening a FIFO would block until a writer came.
	if info, err := r.root.Stat(rel); err != nil || !info.IsDir() {
		return fail(errNotLEAFDir)
	}
	d, err := r.root.Open(rel)
	if err != nil {
		return fail(errNotLEAFDir)
	}
	defer d.Close()
	var names []string
	for {
		ents, err := d.ReadDir(256)
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".json") {
				names = append(names, e.Name())
			}
		}
		if len(names) > r.lim.files {
			return fail(fmt.Sprintf("more than %d *.json files", r.lim.files))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fail(errNotLEAFDir)
		}
	}
	if len(names) == 0 {
		return fail("no *.json files")
	}
	slices.Sort(names)
	for _, name := range names {
		if r.late() {
			return nil, ErrLEAFDeadline
		}
		file := path.Join(s.dir, name)
		b, reason := r.readFile(file)
		if reason == "" {
			if err := r.parse(file, b, s); errors.Is(err, ErrLEAFDeadline) {
				return nil, err
			} else if err != nil {
				reason = err.Error()
			}
		}
		if reason != "" {
			return nil, &LEAFError{Test: test, Path: file, Reason: reason}
		}
	}
	return s, nil
}

// readFile reads file (slash-separated, under the root), or says why not
// in words that hold nothing of the operating system's error.
func (r *leafReader) readFile(file string) ([]byte, string) {
	const unreadable = "cannot be read under the data root (unreadable, or a link leading out of the root)"
	tooLarge := "larger than the limit of " + byteSize(r.lim.fileBytes) + " on one LEAF file"
	rel := filepath.FromSlash(file)
	// Stat before Open: opening a FIFO would block until a writer came.
	info, err := r.root.Stat(rel)
	switch {
	case err != nil:
		return nil, unreadable
	case !info.Mode().IsRegular():
		return nil, "not a regular file"
	case info.Size() > r.lim.fileBytes:
		return nil, tooLarge
	case r.bytes+info.Size() > r.lim.bytes:
		return nil, "the LEAF files read so far and this one exceed the limit of " + byteSize(r.lim.bytes) + " on one dataset"
	}
	f, err := r.root.Open(rel)
	if err != nil {
		return nil, unreadable
	}
	defer f.Close()
	// The file may have grown since Stat: read at most one byte past the
	// limit, to notice.
	buf := bytes.NewBuffer(make([]byte, 0, info.Size()+1))
	if _, err := buf.ReadFrom(io.LimitReader(f, r.lim.fileBytes+1)); err != nil {
		return nil, unreadable
	}
	if int64(buf.Len()) > r.lim.fileBytes {
		return nil, tooLarge
	}
	r.bytes += int64(buf.Len())
	return buf.Bytes(), ""
}

// parse adds the users of file, whose contents are b, to s. Its errors
// name users by position (users[k]) and never quote b: not a user name,
// a key, a value or the JSON decoder's text, which shows bytes of b.
func (r *leafReader) parse(file string, b []byte, s *leafSplit) error {
	var f leafFile
	if err := json.Unmarshal(b, &f); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return errors.New("not valid JSON")
		}
		return errors.New(`not a LEAF object {"users": [names], "num_samples": [counts], "user_data": {name: {"x": …, "y": …}}}`)
	}
	switch {
	case f.Users == nil:
		return errors.New(`no "users" list`)
	case f.NumSamples == nil:
		return errors.New(`no "num_samples" list`)
	case f.UserData == nil:
		return errors.New(`no "user_data" object`)
	case len(f.NumSamples) != len(f.Users):
		return errors.New(`"num_samples" and "users" differ in length`)
	}
	listed := make(map[string]bool, len(f.Users))
	for _, u := range f.Users {
		listed[u] = true
	}
	for u := range f.UserData {
		if !listed[u] {
			return errors.New(`"user_data" has a user who is not in "users"`)
		}
	}
	for k, u := range f.Users {
		if r.late() {
			return ErrLEAFDeadline
		}
		if prev, ok := s.seen[u]; ok {
			if prev == file {
				return fmt.Errorf("users[%d] is listed twice", k)
			}
			return fmt.Errorf("users[%d] is also listed in %s", k, prev)
		}
		s.seen[u] = file
		d, ok := f.UserData[u]
		if !ok {
			return fmt.Errorf(`users[%d] has no "user_data"`, k)
		}
		if err := r.parseUser(file, k, f.NumSamples[k], d, s); err != nil {
			return fmt.Errorf("users[%d]: %w", k, err)
		}
		s.users = append(s.users, u)
		s.start = append(s.start, len(s.y))
	}
	return nil
}

// parseUser appends the examples of users[k] of file to s.
func (r *leafReader) parseUser(file string, k, n int, d leafUserData, s *leafSplit) error {
	switch {
	case len(d.X) == 0:
		return errors.New(`no "x"`)
	case len(d.Y) == 0:
		return errors.New(`no "y"`)
	}
	var x [][]float32
	if err := json.Unmarshal(d.X, &x); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Value == "string" {
			return errors.New("x holds strings (text data such as Shakespeare or Sent140), which is not supported yet: only numeric feature vectors (such as FEMNIST's) are")
		}
		return errors.New("x must be a list of numeric feature vectors")
	}
	var y []int
	if err := json.Unmarshal(d.Y, &y); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Value == "string" {
			return errors.New("y holds strings (such as Shakespeare's next characters), which is not supported yet: only integer labels are")
		}
		return errors.New("y must be a list of integer labels")
	}
	if len(x) != n || len(y) != n {
		return errors.New(`"num_samples" disagrees with the number of x or y entries`)
	}
	for i, row := range x {
		if r.dim == 0 {
			if len(row) == 0 {
				return fmt.Errorf("sample %d has an empty feature vector", i)
			}
			r.dim, r.dimFrom = len(row), fmt.Sprintf("%s users[%d] sample %d", file, k, i)
		}
		if len(row) != r.dim {
			return fmt.Errorf("sample %d has a different number of features than %s", i, r.dimFrom)
		}
		l := y[i]
		if l < 0 || l > 255 || (r.classes > 0 && l >= r.classes) {
			limit := 256
			if r.classes > 0 {
				limit = r.classes
			}
			return fmt.Errorf("sample %d has a label outside [0, %d)", i, limit)
		}
		r.maxLabel = max(r.maxLabel, l)
		s.x = append(s.x, row...)
		s.y = append(s.y, uint8(l))
	}
	return nil
}

// byteSize writes n bytes in GiB where that is exact.
func byteSize(n int64) string {
	if n >= 1<<30 && n%(1<<30) == 0 {
		return fmt.Sprintf("%d GiB", n>>30)
	}
	return fmt.Sprintf("%d bytes", n)
}
