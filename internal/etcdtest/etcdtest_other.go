//go:build !linux

package etcdtest

import "os/exec"

// dieWithParent is a no-op where the kernel offers no parent-death signal.
func dieWithParent(cmd *exec.Cmd) {}
