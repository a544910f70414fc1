//go:build unix && !linux

package exec

import "syscall"

// sysProcAttr puts the child in its own process group, so Close ends it
// and anything it started. (Without Pdeathsig, a child outlives a ce killed
// with SIGKILL; a graceful exit still ends it.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
