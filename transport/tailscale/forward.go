package tailscale

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// MaxForwards is how many tailnet connections the room forwards at once;
// one more is closed as it arrives. It sits well under the ingress
// listener's own cap (httpapi.DefaultMaxConns), so the tailnet alone cannot
// use up the ingress.
const MaxForwards = 1024

// ingressDialTimeout bounds connecting to the local ingress.
const ingressDialTimeout = 10 * time.Second

// halfCloseGrace is how long a forward stays open in one direction once the
// other has ended. The ingress speaks HTTP, which never keeps talking long
// after either side is done, so a peer that keeps its half open beyond this
// only holds a forward slot.
const halfCloseGrace = time.Minute

// forwarder accepts connections on the tailnet listener and copies each,
// both ways, to the local ingress address. Close stops it and waits for
// every goroutine it started.
type forwarder struct {
	ln     net.Listener
	target string // the ingress, host:port on loopback
	log    *slog.Logger
	max    int
	grace  time.Duration // halfCloseGrace; tests shorten it

	ctx    context.Context // ends on close: aborts dials to the ingress
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	conns   map[net.Conn]struct{}
	active  int  // forwards in progress
	atLimit bool // the last arrival found the cap full (logged once per episode)
}

func newForwarder(ln net.Listener, target string, max int, grace time.Duration, log *slog.Logger) *forwarder {
	ctx, cancel := context.WithCancel(context.Background())
	f := &forwarder{ln: ln, target: target, log: log, max: max, grace: grace, ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.acceptLoop()
	return f
}

func (f *forwarder) acceptLoop() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			f.mu.Lock()
			closed := f.closed
			f.mu.Unlock()
			if !closed {
				f.log.Warn("tailscale: the tailnet listener stopped", "err", err)
			}
			return
		}
		if !f.admit(c) {
			c.Close()
			continue
		}
		f.wg.Add(1)
		go f.forward(c)
	}
}

// admit counts and tracks a new connection, or refuses it when the forwarder
// is closed or full.
func (f *forwarder) admit(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	if f.active >= f.max {
		if !f.atLimit {
			f.log.Warn("tailscale: too many connections from the tailnet; refusing new ones until some end", "max", f.max)
			f.atLimit = true
		}
		return false
	}
	f.atLimit = false
	f.active++
	f.conns[c] = struct{}{}
	return true
}

// track adds the ingress side of a forward; false when closing meanwhile.
func (f *forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *forwarder) release(cs ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range cs {
		if c != nil {
			delete(f.conns, c)
		}
	}
	f.active--
}

// forward copies one tailnet connection to the ingress and back. An end of
// input in one direction is passed on as a half-close, so a client that
// finishes its request still gets the whole answer; an error in either
// direction ends both.
func (f *forwarder) forward(down net.Conn) {
	defer f.wg.Done()
	var up net.Conn
	defer func() {
		down.Close()
		if up != nil {
			up.Close()
		}
		f.release(down, up)
	}()

	d := net.Dialer{Timeout: ingressDialTimeout}
	c, err := d.DialContext(f.ctx, "tcp", f.target)
	if err != nil {
		f.log.Warn("tailscale: cannot reach the ingress for a tailnet connection", "ingress", f.target, "err", err)
		return
	}
	up = c
	if !f.track(up) {
		return
	}

	var both sync.WaitGroup
	both.Add(2)
	go func() { defer both.Done(); f.pipe(up, down) }()
	go func() { defer both.Done(); f.pipe(down, up) }()
	both.Wait()
}

// pipe copies src to dst. At src's end of input it half-closes dst and
// gives the other direction (reading dst) the grace period to finish; on an
// error it closes both, which ends the other direction too.
func (f *forwarder) pipe(dst, src net.Conn) {
	_, err := io.Copy(dst, src)
	if err == nil && closeWrite(dst) == nil {
		dst.SetReadDeadline(time.Now().Add(f.grace))
		return
	}
	dst.Close()
	src.Close()
}

// closeWrite half-closes a connection that can (TCP on either side); a
// connection that cannot is closed.
func closeWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.New("no half-close")
}

// close stops accepting, ends every forward and waits for their goroutines.
func (f *forwarder) close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	err := f.ln.Close()
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.cancel()
	f.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
