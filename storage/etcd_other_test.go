//go:build !linux

package storage

import "os/exec"

// dieWithParent is a no-op where there is no parent-death signal; the
// test's cleanups stop etcd.
func dieWithParent(*exec.Cmd) {}
