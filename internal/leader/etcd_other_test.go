//go:build !linux

package leader

import "os/exec"

// dieWithTest is a no-op where the kernel offers no parent-death signal.
func dieWithTest(cmd *exec.Cmd) {}
