//go:build !linux

package etcdtest

import "os/exec"

// DieWithParent is a no-op where the kernel offers no parent-death signal.
func DieWithParent(cmd *exec.Cmd) {}
