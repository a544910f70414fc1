//go:build !linux

package cpuclock

// Thread has no per-thread CPU clock off Linux: callers then report no CPU
// rather than wall time under CPU's name.
func Thread() (ns int64, ok bool) { return 0, false }
