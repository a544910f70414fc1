package transport

import (
	"context"
	"net"
)

// PeerConn is a connection whose transport knows who is at the other end:
// the node of a private network, where an address alone may not say it (a
// node has several) or may be all the room sees (a forward arrives from
// loopback). The room shares its connections among peers by this name, so
// that no single peer can hold them all (httpapi's connection policy).
type PeerConn interface {
	net.Conn
	// Peer names the peer: the same for every connection of one peer,
	// different for different peers, and never a secret (it may appear in
	// the room's figures). "" means unknown.
	Peer() string
}

// PeerOf is the name c's transport gives its peer (PeerConn), or "".
func PeerOf(c net.Conn) string {
	if pc, ok := c.(PeerConn); ok {
		return pc.Peer()
	}
	return ""
}

// ConnExposer is a Plugin that can hand the room the connections it
// accepts instead of forwarding them to the ingress's address. `ce serve`
// prefers it when a plugin offers it: the room then serves its ingress on
// the plugin's listener itself, sees each connection's peer (PeerConn) and
// shares its one connection cap fairly among the peers, and closing a
// connection it reclaims ends it at the peer at once, with no forward in
// between holding a slot of its own.
type ConnExposer interface {
	Plugin
	// ExposeConns is Expose without the forward: it returns the hint and a
	// listener whose connections are the transport's, each a PeerConn. The
	// room serves its ingress on that listener and closes it; the plugin's
	// Close closes it too. ingressAddr is the loopback ingress the
	// connections stand for.
	ExposeConns(ctx context.Context, ingressAddr string) (Hint, net.Listener, error)
}
