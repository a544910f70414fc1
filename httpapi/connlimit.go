package httpapi

import (
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/commonroom/ce/listen"
)

// connLimiter counts the connections one listener holds. Every connection
// costs a file descriptor, a goroutine and buffers until it ends, so without
// a cap a flood of connections that each wait for a deadline exhausts the
// process's descriptors and both listeners stop accepting.
type connLimiter struct {
	max     int64
	open    atomic.Int64
	refused atomic.Uint64
}

// ConnStats is one listener's connection figures for /debug/metrics.
type ConnStats struct {
	Open    int64  `json:"open"`
	Max     int64  `json:"max"`
	Refused uint64 `json:"refused"`
}

func (l *connLimiter) stats() ConnStats {
	return ConnStats{Open: l.open.Load(), Max: l.max, Refused: l.refused.Load()}
}

// OwnerListener wraps the owner listener's socket with its connection cap
// (Config.OwnerMaxConns). The owner listener has a cap of its own so that a
// flood of the ingress cannot lock the host out of the page.
func (s *Server) OwnerListener(ln net.Listener) net.Listener {
	return &limitedListener{Listener: ln, l: s.ownerConns}
}

// IngressListener wraps the ingress listener's socket with its connection
// cap (Config.MaxConns).
func (s *Server) IngressListener(ln net.Listener) net.Listener {
	return &limitedListener{Listener: ln, l: s.ingressConns}
}

// connStats is the "connections" member of /debug/metrics.
func (s *Server) connStats() map[string]ConnStats {
	return map[string]ConnStats{"owner": s.ownerConns.stats(), "ingress": s.ingressConns.stats()}
}

// limitedListener accepts at most l.max connections at once. Beyond that it
// still accepts, at once, and answers 503 and closes: a listener that stopped
// accepting would let the kernel's backlog fill, and then honest clients
// would wait in it, unanswered, behind the flood.
type limitedListener struct {
	net.Listener
	l *connLimiter
}

// refusalBody and refusal are the whole answer to a connection over the
// cap. It is written without reading the request, so a client may see the
// connection reset instead; either way it was not served.
const refusalBody = `{"error":"overloaded","message":"too many connections; try again shortly"}` + "\n"

var refusal = []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nCache-Control: no-store\r\n" +
	"Retry-After: 1\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(refusalBody)) + "\r\n\r\n" + refusalBody)

// refusalWriteTimeout bounds the refusal's write; a fresh socket's send
// buffer takes it at once, so this only matters for a broken socket.
const refusalWriteTimeout = 100 * time.Millisecond

func (ln *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if ln.l.open.Add(1) > ln.l.max {
			ln.l.open.Add(-1)
			ln.l.refused.Add(1)
			_ = c.SetWriteDeadline(time.Now().Add(refusalWriteTimeout))
			_, _ = c.Write(refusal)
			_ = c.Close()
			continue
		}
		return &countedConn{Conn: c, l: ln.l}, nil
	}
}

// countedConn gives its slot back when it is closed, once.
type countedConn struct {
	net.Conn
	l    *connLimiter
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}

// CloseWrite keeps net/http's graceful close (FIN, then a pause before the
// full close) working through the wrapper.
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// NetConn is the socket under the wrapper.
func (c *countedConn) NetConn() net.Conn { return c.Conn }

var _ listen.PassThroughConn = (*countedConn)(nil)

// PassThrough says the wrapper's writes reach the socket unchanged
// (listen.PassThroughConn), so a detached listen stream's frames may be
// written to the socket directly by the hub's writers.
func (c *countedConn) PassThrough() net.Conn { return c.Conn }

// connContext is http.Server.ConnContext: it hands listen the socket itself,
// not the counting wrapper, so its stall probe can read the socket's state.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if cc, ok := c.(*countedConn); ok {
		c = cc.Conn
	}
	return listen.ConnContext(ctx, c)
}
