package etcdtest

import (
	"os/exec"
	"syscall"
)

// DieWithParent makes the kernel kill cmd's process (etcd, a test
// server) if the test process dies first (a panic, -timeout), so no
// server outlives an aborted run.
func DieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
