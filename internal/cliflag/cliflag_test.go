package cliflag

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// newSet is a flag set with a float, a string and a bool flag and an
// old name for each, warning into w.
func newSet(w io.Writer) (fs *flag.FlagSet, z *float64, dir *string, quick *bool) {
	fs = flag.NewFlagSet("prog", flag.ContinueOnError)
	fs.SetOutput(w)
	z = fs.Float64("noise-multiplier", 1, "z")
	dir = fs.String("data-dir", "/default", "dir")
	quick = fs.Bool("quick", false, "quick")
	Deprecated(fs, "z", "noise-multiplier")
	Deprecated(fs, "data", "data-dir")
	Deprecated(fs, "fast", "quick")
	return fs, z, dir, quick
}

func TestDeprecatedSetsTargetAndWarns(t *testing.T) {
	var w strings.Builder
	fs, z, dir, quick := newSet(&w)
	if err := fs.Parse([]string{"--z", "0.7", "--data=/x", "--fast", "arg"}); err != nil {
		t.Fatal(err)
	}
	if *z != 0.7 || *dir != "/x" || !*quick || fs.Arg(0) != "arg" {
		t.Fatalf("z %v dir %q quick %v args %v", *z, *dir, *quick, fs.Args())
	}
	want := []string{
		"prog: flag --z is deprecated and will be removed in the next release; use --noise-multiplier",
		"prog: flag --data is deprecated and will be removed in the next release; use --data-dir",
		"prog: flag --fast is deprecated and will be removed in the next release; use --quick",
	}
	if got := strings.Split(strings.TrimSuffix(w.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("warnings:\n%s\nwant:\n%s", w.String(), strings.Join(want, "\n"))
	}
}

func TestNewNamesDoNotWarn(t *testing.T) {
	var w strings.Builder
	fs, z, dir, _ := newSet(&w)
	if err := fs.Parse([]string{"--noise-multiplier", "2", "--data-dir", "/y"}); err != nil {
		t.Fatal(err)
	}
	if *z != 2 || *dir != "/y" || w.Len() != 0 {
		t.Fatalf("z %v dir %q output %q", *z, *dir, w.String())
	}
}

// The later of two spellings wins, as when one flag is repeated; a bad
// value through the old name is the target's parse error.
func TestDeprecatedOrderAndErrors(t *testing.T) {
	fs, z, _, _ := newSet(io.Discard)
	if err := fs.Parse([]string{"--noise-multiplier", "2", "--z", "3"}); err != nil || *z != 3 {
		t.Fatalf("z %v err %v", *z, err)
	}
	fs, _, _, _ = newSet(io.Discard)
	if err := fs.Parse([]string{"--z", "nan-ish"}); err == nil || !strings.Contains(err.Error(), "-z") {
		t.Fatalf("bad value: err %v", err)
	}
}

func TestDeprecatedUnknownTargetPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for an alias of an undefined flag")
		}
	}()
	Deprecated(flag.NewFlagSet("p", flag.ContinueOnError), "old", "missing")
}

// PrintDefaults works (it calls String on zero values of the alias types).
func TestUsageListsAlias(t *testing.T) {
	var w strings.Builder
	fs, _, _, _ := newSet(&w)
	fs.PrintDefaults()
	if !strings.Contains(w.String(), "-z") || !strings.Contains(w.String(), "deprecated: use --noise-multiplier") {
		t.Fatalf("usage:\n%s", w.String())
	}
}
