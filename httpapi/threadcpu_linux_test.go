//go:build linux

package httpapi

import "golang.org/x/sys/unix"

// threadCPU is the CPU time the calling OS thread has used, in ns; with the
// goroutine locked to its thread, the difference of two readings is that
// goroutine's own CPU, other goroutines' (the writer's) never included.
func threadCPU() (int64, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return ts.Nano(), true
}
