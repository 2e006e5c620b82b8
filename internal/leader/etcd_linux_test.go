package leader

import (
	"os/exec"
	"syscall"
)

// dieWithTest makes the kernel kill etcd if the test process dies first
// (panic, -timeout), so no server outlives an aborted run.
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
