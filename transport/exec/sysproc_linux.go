package exec

import "syscall"

// sysProcAttr puts the child in its own process group (so Close ends it
// and anything it started) and has the kernel kill it if ce dies first.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
