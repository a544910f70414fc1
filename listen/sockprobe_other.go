//go:build !(linux && (amd64 || arm64))

package listen

import "net"

// newSocketProbe has no probe on this platform: streams end on the queue,
// lag-in-queue and write-deadline rules only.
func newSocketProbe(net.Conn) socketProbe { return nil }
