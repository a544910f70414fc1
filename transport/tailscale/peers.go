package tailscale

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"tailscale.com/client/local"

	"github.com/commonroom/ce/transport"
)

// MaxForwardsPerNode is how many of the MaxForwards one tailnet node may
// hold when the plugin forwards (Expose), so that one node cannot fill the
// forwards by itself. When the room serves the tailnet's connections itself
// (ExposeConns) its own connection policy shares them among nodes instead.
const MaxForwardsPerNode = MaxForwards / 8

const (
	// whoisTimeout bounds asking the node who a connection comes from; it
	// runs in the accept loop, and tsnet drops a connection that is not
	// accepted within a second.
	whoisTimeout = 500 * time.Millisecond
	// peerNameTTL is how long a tailnet address's node is remembered: a
	// node keeps its addresses, but one that left may see them reused.
	peerNameTTL = time.Minute
	// maxPeerNames bounds the memory of addresses; when it is full it is
	// emptied (lookups are cheap; the bound is what matters).
	maxPeerNames = 4096
)

// peerListener names the tailnet node of every connection it accepts
// (transport.PeerConn): "node " and the node's stable ID, which is the same
// for its IPv4 and IPv6 addresses, as the node's own WhoIs says; or, if
// that cannot be asked, "ip " and the connection's tailnet address.
type peerListener struct {
	net.Listener
	whois func(ctx context.Context, remoteAddr string) (string, error)
	now   func() time.Time

	mu    sync.Mutex
	names map[netip.Addr]peerName
}

type peerName struct {
	name string
	at   time.Time
}

// newPeerListener names ln's connections with lc's WhoIs.
func newPeerListener(ln net.Listener, lc *local.Client) *peerListener {
	return &peerListener{Listener: ln, now: time.Now, names: map[netip.Addr]peerName{},
		whois: func(ctx context.Context, remoteAddr string) (string, error) {
			who, err := lc.WhoIs(ctx, remoteAddr)
			if err != nil {
				return "", err
			}
			if who == nil || who.Node == nil || who.Node.StableID == "" {
				return "", errors.New("no node")
			}
			return string(who.Node.StableID), nil
		}}
}

func (l *peerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &peerConn{Conn: c, peer: l.nameOf(c.RemoteAddr())}, nil
}

// nameOf is the peer name of a connection from addr.
func (l *peerListener) nameOf(addr net.Addr) string {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return "addr " + addr.String()
	}
	ip := ap.Addr().Unmap()
	now := l.now()
	l.mu.Lock()
	n, ok := l.names[ip]
	l.mu.Unlock()
	if ok && now.Sub(n.at) < peerNameTTL {
		return n.name
	}
	name := "ip " + ip.String()
	ctx, cancel := context.WithTimeout(context.Background(), whoisTimeout)
	id, err := l.whois(ctx, ap.String())
	cancel()
	if err == nil {
		name = "node " + id
	}
	l.mu.Lock()
	if len(l.names) >= maxPeerNames {
		clear(l.names)
	}
	l.names[ip] = peerName{name: name, at: now}
	l.mu.Unlock()
	return name
}

// peerConn is a tailnet connection that names its node.
type peerConn struct {
	net.Conn
	peer string
}

var _ transport.PeerConn = (*peerConn)(nil)

// Peer is the connection's tailnet node (transport.PeerConn).
func (c *peerConn) Peer() string { return c.peer }

// CloseWrite passes a half-close on to the tailnet connection.
func (c *peerConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.New("no half-close")
}
