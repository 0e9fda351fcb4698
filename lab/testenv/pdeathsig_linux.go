package testenv

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the server get SIGTERM when the test binary dies
// (a test timeout panics past TestMain's Stop): no server is left behind.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
