package transport

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// DefaultHalfCloseGrace is how long a forward stays open in one direction
// once the other has ended. Both ends speak HTTP, which never keeps talking
// long after either side is done, so a peer that keeps its half open beyond
// this only holds a forward slot.
const DefaultHalfCloseGrace = time.Minute

// ForwardConfig says where a Forwarder carries its connections and how many.
type ForwardConfig struct {
	// Name prefixes log messages ("tailscale", "ce join --hold").
	Name string
	// Dial opens the far side for one accepted connection. Its context ends
	// after DialTimeout or when the forwarder closes.
	Dial        func(ctx context.Context) (net.Conn, error)
	DialTimeout time.Duration // 0: 10 s
	// Max is how many forwards run at once; one more is closed as it
	// arrives (0: no cap).
	Max int
	// MaxPerPeer is how many of them one peer may hold, by the name its
	// transport gives it (PeerOf; connections without one share no cap but
	// Max), so that one peer cannot fill Max by itself; one more of that
	// peer's is closed as it arrives (0: no share).
	MaxPerPeer int
	// HalfCloseGrace bounds a half-open forward (0: DefaultHalfCloseGrace).
	HalfCloseGrace time.Duration
	Log            *slog.Logger // nil: discarded
}

// Forwarder carries every connection accepted on a listener to the far side
// its Dial opens, both ways, until either side ends. A room exposes its
// ingress on a tailnet with one, and `ce join --hold` / `ce mcp` reach a room
// elsewhere through one, so there is one copy loop with one set of rules:
// an end of input is passed on as a half-close (a client that finished its
// request still gets the whole answer) and bounded by the grace period, an
// error in either direction ends both, the number of forwards is capped, and
// Close ends every forward and waits for every goroutine it started.
type Forwarder struct {
	ln     net.Listener
	cfg    ForwardConfig
	failed chan error

	ctx    context.Context // ends on Close: aborts dials in progress
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	conns   map[net.Conn]struct{}
	active  int            // forwards in progress
	atLimit bool           // the last arrival found the cap full (logged once per episode)
	peers   map[string]int // forwards in progress per named peer (MaxPerPeer), only those above 0
}

// Forward starts carrying ln's connections; stop it with Close.
func Forward(ln net.Listener, cfg ForwardConfig) *Forwarder {
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.HalfCloseGrace <= 0 {
		cfg.HalfCloseGrace = DefaultHalfCloseGrace
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &Forwarder{ln: ln, cfg: cfg, failed: make(chan error, 1), ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}, peers: map[string]int{}}
	f.wg.Add(1)
	go f.acceptLoop()
	return f
}

// Addr is the listener's address.
func (f *Forwarder) Addr() net.Addr { return f.ln.Addr() }

// Failed receives the error when the listener stops by itself (not through
// Close), so whoever holds the forward open can say so and exit.
func (f *Forwarder) Failed() <-chan error { return f.failed }

// Active is how many forwards are in progress.
func (f *Forwarder) Active() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.active
}

func (f *Forwarder) acceptLoop() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			f.mu.Lock()
			closed := f.closed
			f.mu.Unlock()
			if !closed {
				f.cfg.Log.Warn(f.cfg.Name+": the forward's listener stopped", "err", Redact(err.Error()))
				f.failed <- err
			}
			return
		}
		peer := PeerOf(c)
		if !f.admit(c, peer) {
			c.Close()
			continue
		}
		f.wg.Add(1)
		go f.forward(c, peer)
	}
}

// admit counts and tracks a new connection of peer, or refuses it when the
// forwarder is closed or full, or the peer holds its share.
func (f *Forwarder) admit(c net.Conn, peer string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	if peer != "" && f.cfg.MaxPerPeer > 0 && f.peers[peer] >= f.cfg.MaxPerPeer {
		return false
	}
	if f.cfg.Max > 0 && f.active >= f.cfg.Max {
		if !f.atLimit {
			f.cfg.Log.Warn(f.cfg.Name+": too many connections; refusing new ones until some end", "max", f.cfg.Max)
			f.atLimit = true
		}
		return false
	}
	f.atLimit = false
	f.active++
	if peer != "" {
		f.peers[peer]++
	}
	f.conns[c] = struct{}{}
	return true
}

// track adds the far side of a forward; false when closing meanwhile.
func (f *Forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *Forwarder) release(peer string, cs ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range cs {
		if c != nil {
			delete(f.conns, c)
		}
	}
	f.active--
	if peer != "" {
		if f.peers[peer]--; f.peers[peer] <= 0 {
			delete(f.peers, peer)
		}
	}
}

// forward carries one accepted connection of peer to the far side and back.
func (f *Forwarder) forward(down net.Conn, peer string) {
	defer f.wg.Done()
	var up net.Conn
	defer func() {
		down.Close()
		if up != nil {
			up.Close()
		}
		f.release(peer, down, up)
	}()

	ctx, cancel := context.WithTimeout(f.ctx, f.cfg.DialTimeout)
	c, err := f.cfg.Dial(ctx)
	cancel()
	if err != nil {
		f.cfg.Log.Warn(f.cfg.Name+": cannot reach the far side for a connection", "err", Redact(err.Error()))
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
// gives the other direction (reading dst) the grace period to finish; on
// an error, or when dst cannot half-close, it closes both, which ends the
// other direction too.
func (f *Forwarder) pipe(dst, src net.Conn) {
	_, err := io.Copy(dst, src)
	if err == nil && closeWrite(dst) == nil {
		dst.SetReadDeadline(time.Now().Add(f.cfg.HalfCloseGrace))
		return
	}
	dst.Close()
	src.Close()
}

// closeWrite half-closes a connection that can (TCP on either side).
func closeWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.New("no half-close")
}

// Close stops accepting, ends every forward and waits for their goroutines.
func (f *Forwarder) Close() error {
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
