package main

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the test's etcd die with the test binary, even
// when the binary is killed before its cleanups run.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
