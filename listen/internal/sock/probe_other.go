//go:build !(linux && (amd64 || arm64))

package sock

import "net"

// NewProbe has no probe on this platform: streams end on the queue,
// lag-in-queue and write-deadline rules only.
func NewProbe(net.Conn) Probe { return nil }
