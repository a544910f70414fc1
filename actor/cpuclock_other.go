//go:build !linux

package actor

// threadCPU has no per-thread CPU clock off Linux: the writer's CPU counter
// then stays at zero rather than report wall time under CPU's name.
func threadCPU() (int64, bool) { return 0, false }
