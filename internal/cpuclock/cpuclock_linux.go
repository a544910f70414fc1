//go:build linux

// Package cpuclock reads the CPU time of the calling OS thread. A goroutine
// locked to its thread (runtime.LockOSThread) measures its own CPU, user and
// system, with the difference of two readings: waiting (fsync, a channel) is
// left out, and so is every other goroutine's work. The room's writer uses
// it for its cpu_seconds; benchmarks use it for one goroutine's cost.
package cpuclock

import "golang.org/x/sys/unix"

// Thread is the CPU time the calling OS thread has used, in ns; ok is false
// where there is no such clock.
func Thread() (ns int64, ok bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return ts.Nano(), true
}
