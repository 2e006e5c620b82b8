//go:build !linux

package hatest

import "os/exec"

// dieWithParent is a no-op where the kernel offers no parent-death signal.
func dieWithParent(cmd *exec.Cmd) {}
