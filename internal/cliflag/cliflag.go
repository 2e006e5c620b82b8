// Package cliflag registers deprecated flag names on a standard library
// flag.FlagSet: an old name keeps working for one release, setting the
// same value as the flag that replaced it, and warns on each use.
package cliflag

import (
	"flag"
	"fmt"
)

// Deprecated registers old as a deprecated alias of the flag name in fs,
// which must already be defined (else Deprecated panics: a programming
// error). Setting --old sets --name's value and writes one line to
// fs.Output() (standard error unless the program changed it):
//
//	<fs name>: flag --old is deprecated and will be removed in the next release; use --name
//
// Given both, the later on the command line wins, as when one flag is
// repeated. A boolean flag's alias is boolean too (--old alone sets true).
func Deprecated(fs *flag.FlagSet, old, name string) {
	f := fs.Lookup(name)
	if f == nil {
		panic(fmt.Sprintf("cliflag: --%s is an alias of --%s, which is not defined", old, name))
	}
	a := &alias{fs: fs, old: old, target: f}
	usage := fmt.Sprintf("deprecated: use --%s", name)
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		fs.Var(boolAlias{a}, old, usage)
		return
	}
	fs.Var(a, old, usage)
}

// alias is the flag.Value of a deprecated name: it forwards to the
// target flag's value after warning.
type alias struct {
	fs     *flag.FlagSet
	old    string
	target *flag.Flag
}

// String implements flag.Value. The flag package calls it on a zero
// alias to find the default, so it must not touch a nil target.
func (a *alias) String() string {
	if a == nil || a.target == nil {
		return ""
	}
	return a.target.Value.String()
}

// Set implements flag.Value: it warns, then sets the target flag.
func (a *alias) Set(s string) error {
	fmt.Fprintf(a.fs.Output(), "%s: flag --%s is deprecated and will be removed in the next release; use --%s\n", a.fs.Name(), a.old, a.target.Name)
	return a.target.Value.Set(s)
}

// boolAlias is the alias of a boolean flag, which takes no argument.
type boolAlias struct{ *alias }

// IsBoolFlag implements the flag package's boolFlag interface.
func (boolAlias) IsBoolFlag() bool { return true }
