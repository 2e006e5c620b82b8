package data

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
}

// LoadLEAF reads a naturally federated dataset in the JSON format of LEAF
// (Caldas, Duddu, Wu, Li, Konečný, McMahan, Smith, Talwalkar, "LEAF: A
// Benchmark for Federated Settings", 2018; github.com/TalwalkarLab/leaf,
// the files its preprocess.sh writes to data/<dataset>/data/train and
// .../test). Each of the *.json files of a directory (in name order) is
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
// Users are clients: users[i] is client i of both train and test. The
// order is the training files' users in file order, then users found only
// in testDir (LEAF's user-based split puts different users in test); a
// user absent from one split is an empty client there. train.Base() and
// test.Base() hold all the split's examples, each user's contiguous; test's
// clients keep their examples as Train (none held out). testDir "" reads
// no test split and returns a nil test.
//
// Errors name the file and, where it applies, the user: a directory with
// no *.json file, unreadable or malformed JSON, a missing "users",
// "num_samples" or "user_data", len(num_samples) ≠ len(users), a user
// listed twice (in one file or across a split's files) or listed without
// user_data, user_data for an unlisted user, num_samples ≠ len(x) or
// len(y), a missing or non-numeric x or y, feature vectors of differing
// lengths (across all files of both splits), labels outside [0, 256) or
// not below opt.Classes, a split with no examples, and opt.Classes or
// opt.HeldOutFraction out of range.
func LoadLEAF(trainDir, testDir string, opt LEAFOptions) (train, test *Federated, users []string, err error) {
	if opt.Classes < 0 || opt.Classes > 256 {
		return nil, nil, nil, fmt.Errorf("data: LEAF: classes must be in [0, 256] (0: infer), got %d", opt.Classes)
	}
	if !(opt.HeldOutFraction >= 0 && opt.HeldOutFraction < 1) {
		return nil, nil, nil, fmt.Errorf("data: LEAF: held-out fraction must be in [0, 1), got %v", opt.HeldOutFraction)
	}
	r := &leafReader{classes: opt.Classes}
	tr, err := r.readDir(trainDir)
	if err != nil {
		return nil, nil, nil, err
	}
	var te *leafSplit
	if testDir != "" {
		if te, err = r.readDir(testDir); err != nil {
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
	build := func(s *leafSplit, dir string, held float64) (*Federated, error) {
		if len(s.y) == 0 {
			return nil, fmt.Errorf("data: LEAF: %s: no examples", dir)
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
			return nil, fmt.Errorf("data: LEAF: %s: %w", dir, err)
		}
		return f, nil
	}
	if train, err = build(tr, trainDir, opt.HeldOutFraction); err != nil {
		return nil, nil, nil, err
	}
	if te != nil {
		if test, err = build(te, testDir, 0); err != nil {
			return nil, nil, nil, err
		}
	}
	return train, test, users, nil
}

// leafReader carries what must agree across all files of both splits.
type leafReader struct {
	classes  int // 0: any label below 256
	dim      int // 0 until the first feature vector
	dimFrom  string
	maxLabel int
}

// leafSplit is one directory's examples: user users[k] holds rows
// start[k] … start[k+1]−1.
type leafSplit struct {
	x     []float32
	y     []uint8
	users []string
	start []int
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

func (r *leafReader) readDir(dir string) (*leafSplit, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err == nil && len(files) == 0 {
		if _, err = os.Stat(dir); err == nil {
			err = errors.New("no *.json files")
		}
	}
	if err != nil {
		return nil, fmt.Errorf("data: LEAF: %s: %w", dir, err)
	}
	slices.Sort(files)
	s := &leafSplit{start: []int{0}}
	seen := map[string]string{} // user → file
	for _, path := range files {
		if err := r.readFile(path, s, seen); err != nil {
			return nil, fmt.Errorf("data: LEAF: %s: %w", path, err)
		}
	}
	return s, nil
}

func (r *leafReader) readFile(path string, s *leafSplit, seen map[string]string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var f leafFile
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	switch {
	case f.Users == nil:
		return errors.New(`no "users" list`)
	case f.NumSamples == nil:
		return errors.New(`no "num_samples" list`)
	case f.UserData == nil:
		return errors.New(`no "user_data" object`)
	case len(f.NumSamples) != len(f.Users):
		return fmt.Errorf("%d num_samples for %d users", len(f.NumSamples), len(f.Users))
	}
	listed := make(map[string]bool, len(f.Users))
	for _, u := range f.Users {
		listed[u] = true
	}
	for u := range f.UserData {
		if !listed[u] {
			return fmt.Errorf("user_data has user %q, who is not in users", u)
		}
	}
	for k, u := range f.Users {
		if prev, ok := seen[u]; ok {
			if prev == path {
				return fmt.Errorf("user %q listed twice", u)
			}
			return fmt.Errorf("user %q is also in %s", u, prev)
		}
		seen[u] = path
		if err := r.readUser(path, u, f.NumSamples[k], f.UserData, s); err != nil {
			return fmt.Errorf("user %q: %w", u, err)
		}
	}
	return nil
}

func (r *leafReader) readUser(path, u string, n int, data map[string]leafUserData, s *leafSplit) error {
	d, ok := data[u]
	switch {
	case !ok:
		return errors.New("listed in users but has no user_data")
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
		return fmt.Errorf("x must be a list of numeric feature vectors: %w", err)
	}
	var y []int
	if err := json.Unmarshal(d.Y, &y); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Value == "string" {
			return errors.New("y holds strings (such as Shakespeare's next characters), which is not supported yet: only integer labels are")
		}
		return fmt.Errorf("y must be a list of integer labels: %w", err)
	}
	if len(x) != n || len(y) != n {
		return fmt.Errorf("num_samples is %d but x has %d and y %d entries", n, len(x), len(y))
	}
	for i, row := range x {
		if r.dim == 0 {
			if len(row) == 0 {
				return fmt.Errorf("sample %d has an empty feature vector", i)
			}
			r.dim, r.dimFrom = len(row), fmt.Sprintf("%s, user %q", path, u)
		}
		if len(row) != r.dim {
			return fmt.Errorf("sample %d has %d features, but %s has %d", i, len(row), r.dimFrom, r.dim)
		}
		l := y[i]
		if l < 0 || l > 255 || (r.classes > 0 && l >= r.classes) {
			limit := 256
			if r.classes > 0 {
				limit = r.classes
			}
			return fmt.Errorf("sample %d has label %d, outside [0, %d)", i, l, limit)
		}
		r.maxLabel = max(r.maxLabel, l)
		s.x = append(s.x, row...)
		s.y = append(s.y, uint8(l))
	}
	s.users = append(s.users, u)
	s.start = append(s.start, len(s.y))
	return nil
}
