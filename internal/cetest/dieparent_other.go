//go:build !linux

package cetest

import "os/exec"

// dieWithParent has no kernel support outside Linux: the child outlives an
// interrupted parent there.
func dieWithParent(*exec.Cmd) {}
