//go:build linux

package actor

import "golang.org/x/sys/unix"

// threadCPU is the CPU time the calling OS thread has used, in ns. The
// writer locks itself to its thread while it measures a batch, so the
// difference of two readings is the batch's own CPU (user and system),
// fsync's waiting excluded, other goroutines' work never included.
func threadCPU() (int64, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return ts.Nano(), true
}
