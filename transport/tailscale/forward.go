package tailscale

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/commonroom/ce/transport"
)

// MaxForwards is how many tailnet connections the room forwards at once;
// one more is closed as it arrives. It sits well under the ingress
// listener's own cap (httpapi.DefaultMaxConns), so the tailnet alone cannot
// use up the ingress.
const MaxForwards = 1024

// ingressDialTimeout bounds connecting to the local ingress.
const ingressDialTimeout = 10 * time.Second

// forwardIngress carries the tailnet listener's connections to the local
// ingress address, at most max at once and max/8 of them for one node
// (the listener names each connection's node: transport.PeerConn).
func forwardIngress(ln net.Listener, ingressAddr string, max int, grace time.Duration, log *slog.Logger) *transport.Forwarder {
	return transport.Forward(ln, transport.ForwardConfig{
		Name: "tailscale",
		Dial: func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", ingressAddr)
		},
		DialTimeout:    ingressDialTimeout,
		Max:            max,
		MaxPerPeer:     MaxForwardsPerNode * max / MaxForwards,
		HalfCloseGrace: grace,
		Log:            log,
	})
}
