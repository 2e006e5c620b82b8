package hatest

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill the process if the test process
// dies first (a panic, -timeout), so no server outlives an aborted run.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
