package httpapi

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/commonroom/ce/listen"
)

// connPolicy decides which connections one listener holds. Every connection
// costs a descriptor, a goroutine and buffers until it ends, and opening one
// takes no credential, so a plain cap lets one client hold all of them with
// idle keep-alive requests to a public route (/healthz) and lock every
// participant out. The rules, all of them here:
//
//  1. Peers. Each connection belongs to a peer: the one its transport names
//     (a connection with a Peer method, as a transport plugin's listener
//     hands them over: one tailnet node), else its remote IP address. Every
//     loopback address (and any connection that is not TCP) is one peer,
//     the loopback pool: nothing on a loopback TCP connection tells one
//     local client from another that the client does not choose itself
//     (the source address is any of 127.0.0.0/8, the source port is per
//     connection; peer credentials exist only on Unix sockets), so the
//     pool gets no share and is protected by rules 3–5.
//  2. Shares. A peer other than the pool holds at most perPeer connections
//     (Config.MaxConnsPerPeer, default max/8). When it opens one more, one
//     of its own is reclaimed in rule 4's order, or, if none can be, the new
//     one is refused: a peer only ever crowds out itself.
//  3. Unauthenticated and idle goes fast. A connection that has not shown a
//     valid credential (a request that authenticated: a session, the
//     operator, the owner cookie) and waits for a request, or has not sent
//     its first, is closed after unauthIdle (UnauthenticatedIdleTimeout,
//     10 s). One that has shown a credential keeps the server's keep-alive
//     idle time (IdleTimeout).
//  4. Room for a newcomer. At the cap a new connection is not refused while
//     one can be reclaimed, in this order: the unauthenticated connection
//     idle longest after an answer; the new connection that has waited
//     longest without sending its first request (a new one's client is most
//     likely sending it now, so it goes after those already answered); the
//     unauthenticated one whose request has been in progress longest, once
//     that is over unauthIdle (a trickled body); the authenticated
//     connection idle longest. An authenticated connection with a request in
//     progress (a stream included) is never reclaimed.
//  5. Refusal is the last resort: only when nothing can be reclaimed is a
//     newcomer answered 503 at once and closed (a listener that stopped
//     accepting would let honest clients wait in the kernel's backlog).
//
// Every refusal and reclaim is counted by reason for /debug/metrics. Memory
// is bounded by the cap: one entry per open connection and one per peer
// that holds at least one.
type connPolicy struct {
	max        int
	perPeer    int
	unauthIdle time.Duration
	now        func() time.Time

	// open counts the admitted connections; it is atomic for readers that
	// must not take mu (tests, the cap check's fast path).
	open    atomic.Int64
	refused atomic.Uint64

	mu        sync.Mutex
	peers     map[string]*peerConns
	queues    [reclaimable]connQueue // every peer's reclaimable connections, oldest first
	authed    int
	refusedBy map[string]uint64
	reclaimed map[string]uint64

	// The idle reaper runs while at least one listener is wrapped.
	listeners int
	kick      chan struct{}
	stop      chan struct{}
	done      chan struct{}
}

// connClass is where a connection stands in the reclaim order; all but
// authBusy are reclaimable, in this order.
type connClass int8

const (
	unauthIdle connClass = iota // no credential shown; answered, waiting for another request
	unauthNew                   // accepted; no request yet
	unauthBusy                  // no credential shown; a request in progress
	authIdle                    // a credential shown; waiting for a request
	authBusy                    // a credential shown; a request or stream in progress
)

// reclaimable is how many classes are, the ones before authBusy.
const reclaimable = authBusy

var classNames = [reclaimable]string{"unauthenticated_idle", "unauthenticated_new", "unauthenticated_busy", "authenticated_idle"}

func newConnPolicy(maxConns, perPeer int, unauthIdle time.Duration, now func() time.Time) *connPolicy {
	maxConns = max(maxConns, 1)
	if perPeer <= 0 {
		perPeer = max(maxConns/8, 1)
	}
	if now == nil {
		now = time.Now
	}
	p := &connPolicy{max: maxConns, perPeer: min(perPeer, maxConns), unauthIdle: unauthIdle, now: now,
		peers: map[string]*peerConns{}, refusedBy: map[string]uint64{}, reclaimed: map[string]uint64{},
		kick: make(chan struct{}, 1)}
	for i := range p.queues {
		p.queues[i].at = globalLink
	}
	return p
}

// peerConns is one peer's connections.
type peerConns struct {
	key    string
	pooled bool // the loopback pool: no share
	n      int
	queues [reclaimable]connQueue
}

// ConnStats is one listener's connection figures for /debug/metrics.
type ConnStats struct {
	Open int64 `json:"open"`
	Max  int64 `json:"max"`
	// PerPeer is the share one peer may hold (the loopback pool has none).
	PerPeer int `json:"per_peer"`
	// Authenticated is how many open connections have shown a credential.
	Authenticated int `json:"authenticated"`
	// Peers is how many peers hold connections (the loopback pool is one).
	Peers int `json:"peers"`
	// Refused counts connections answered 503 and closed; RefusedBy splits
	// it by reason: "cap" (nothing could be reclaimed) or "peer_share".
	Refused   uint64            `json:"refused"`
	RefusedBy map[string]uint64 `json:"refused_by"`
	// Reclaimed counts connections the room closed to share them fairly;
	// ReclaimedBy splits it by reason: "idle_unauthenticated" (rule 3), or
	// why room was made ("cap_", "peer_share_") and what was taken
	// ("unauthenticated_idle", "unauthenticated_new", "unauthenticated_busy",
	// "authenticated_idle").
	Reclaimed   uint64            `json:"reclaimed"`
	ReclaimedBy map[string]uint64 `json:"reclaimed_by"`
}

func (p *connPolicy) stats() ConnStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := ConnStats{Open: p.open.Load(), Max: int64(p.max), PerPeer: p.perPeer, Authenticated: p.authed, Peers: len(p.peers),
		Refused: p.refused.Load(), RefusedBy: map[string]uint64{}, ReclaimedBy: map[string]uint64{}}
	for k, v := range p.refusedBy {
		st.RefusedBy[k] = v
	}
	for k, v := range p.reclaimed {
		st.ReclaimedBy[k] = v
		st.Reclaimed += v
	}
	return st
}

// OwnerListener wraps the owner listener's socket with its connection
// policy (Config.OwnerMaxConns). The owner listener has a policy of its own
// so that a flood of the ingress cannot lock the host out of the page.
func (s *Server) OwnerListener(ln net.Listener) net.Listener {
	return s.ownerConns.wrap(ln)
}

// IngressListener wraps an ingress socket with the ingress's connection
// policy (Config.MaxConns, Config.MaxConnsPerPeer). Every listener the
// ingress is served on (the loopback socket, a transport's own) shares the
// one policy, so its cap and the peers' shares cover them all.
func (s *Server) IngressListener(ln net.Listener) net.Listener {
	return s.ingressConns.wrap(ln)
}

// connStats is the "connections" member of /debug/metrics (and /metrics'
// connection families): the metrics listener's only while it is served.
func (s *Server) connStats() map[string]ConnStats {
	m := map[string]ConnStats{"owner": s.ownerConns.stats(), "ingress": s.ingressConns.stats()}
	if s.metricsConns.serving() {
		m["metrics"] = s.metricsConns.stats()
	}
	return m
}

// serving reports whether a listener is wrapped with the policy now.
func (p *connPolicy) serving() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.listeners > 0
}

// policyListener hands every accepted connection to its policy, which
// admits it (making room if it must) or refuses it.
type policyListener struct {
	net.Listener
	p         *connPolicy
	closeOnce sync.Once
}

func (p *connPolicy) wrap(ln net.Listener) net.Listener {
	p.mu.Lock()
	p.listeners++
	if p.listeners == 1 {
		p.stop, p.done = make(chan struct{}), make(chan struct{})
		go p.reaper(p.stop, p.done)
	}
	p.mu.Unlock()
	return &policyListener{Listener: ln, p: p}
}

// Close closes the socket and, with the policy's last listener, stops its
// idle reaper and waits for it.
func (ln *policyListener) Close() error {
	err := ln.Listener.Close()
	ln.closeOnce.Do(func() {
		p := ln.p
		p.mu.Lock()
		p.listeners--
		var stop, done chan struct{}
		if p.listeners == 0 {
			stop, done = p.stop, p.done
		}
		p.mu.Unlock()
		if stop != nil {
			close(stop)
			<-done
		}
	})
	return err
}

// refusalBody and refusal are the whole answer to a connection that is
// refused. It is written without reading the request, so a client may see
// the connection reset instead; either way it was not served.
const refusalBody = `{"error":"overloaded","message":"too many connections; try again shortly"}` + "\n"

var refusal = []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nCache-Control: no-store\r\n" +
	"Retry-After: 1\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(refusalBody)) + "\r\n\r\n" + refusalBody)

// refusalWriteTimeout bounds the refusal's write; a fresh socket's send
// buffer takes it at once, so this only matters for a broken socket.
const refusalWriteTimeout = 100 * time.Millisecond

func (ln *policyListener) Accept() (net.Conn, error) {
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if tc := ln.p.admit(c); tc != nil {
			return tc, nil
		}
		_ = c.SetWriteDeadline(time.Now().Add(refusalWriteTimeout))
		_, _ = c.Write(refusal)
		_ = c.Close()
	}
}

// peerOf names c's peer (rule 1); pooled is the loopback pool.
func peerOf(c net.Conn) (key string, pooled bool) {
	if pc, ok := c.(interface{ Peer() string }); ok {
		if k := pc.Peer(); k != "" {
			return "peer " + k, false
		}
	}
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		ip := ta.AddrPort().Addr().Unmap()
		if !ip.IsLoopback() && ip.IsValid() {
			return "ip " + ip.String(), false
		}
	}
	return "loopback", true
}

// admit registers c, reclaiming a connection first if c's peer is at its
// share or the listener at its cap; nil means c is refused.
func (p *connPolicy) admit(c net.Conn) *trackedConn {
	key, pooled := peerOf(c)
	now := p.now()
	var victims [2]*trackedConn
	p.mu.Lock()
	pc := p.peers[key]
	if pc != nil && !pc.pooled && pc.n >= p.perPeer {
		v := p.pick(&pc.queues, now)
		if v == nil {
			p.refuse("peer_share")
			p.mu.Unlock()
			return nil
		}
		victims[0] = v
		p.detach(v, "peer_share_"+classNames[v.class])
	}
	if int(p.open.Load()) >= p.max {
		v := p.pick(&p.queues, now)
		if v == nil {
			p.refuse("cap")
			p.mu.Unlock()
			closeAll(victims[:])
			return nil
		}
		victims[1] = v
		p.detach(v, "cap_"+classNames[v.class])
	}
	if pc == nil || pc.n == 0 {
		pc = &peerConns{key: key, pooled: pooled}
		for i := range pc.queues {
			pc.queues[i].at = peerLink
		}
		p.peers[key] = pc
	}
	tc := &trackedConn{Conn: c, p: p, peer: pc, class: unauthNew, since: now}
	pc.n++
	p.open.Add(1)
	p.enqueue(tc)
	p.mu.Unlock()
	closeAll(victims[:])
	return tc
}

func (p *connPolicy) refuse(why string) {
	p.refused.Add(1)
	p.refusedBy[why]++
}

// pick is the first connection to reclaim from qs (rule 4), or nil.
func (p *connPolicy) pick(qs *[reclaimable]connQueue, now time.Time) *trackedConn {
	for _, cl := range [...]connClass{unauthIdle, unauthNew} {
		if c := qs[cl].head; c != nil {
			return c
		}
	}
	if c := qs[unauthBusy].head; c != nil && now.Sub(c.since) >= p.unauthIdle {
		return c
	}
	return qs[authIdle].head
}

// enqueue puts c at the back of its class's queues (the newest there).
func (p *connPolicy) enqueue(c *trackedConn) {
	if c.class >= reclaimable {
		return
	}
	if (c.class == unauthIdle || c.class == unauthNew) && p.queues[c.class].head == nil {
		select { // the reaper may be asleep for want of anything to reap
		case p.kick <- struct{}{}:
		default:
		}
	}
	p.queues[c.class].push(c)
	c.peer.queues[c.class].push(c)
}

func (p *connPolicy) dequeue(c *trackedConn) {
	if c.class >= reclaimable {
		return
	}
	p.queues[c.class].remove(c)
	c.peer.queues[c.class].remove(c)
}

// detach takes c out of the accounting (it is closed by the caller, outside
// the lock); why, when set, counts it as reclaimed.
func (p *connPolicy) detach(c *trackedConn, why string) {
	if c.gone {
		return
	}
	c.gone = true
	p.dequeue(c)
	if c.class >= authIdle {
		p.authed--
	}
	c.peer.n--
	if c.peer.n == 0 {
		delete(p.peers, c.peer.key)
	}
	p.open.Add(-1)
	if why != "" {
		p.reclaimed[why]++
	}
}

// move puts c in class to, from now on.
func (p *connPolicy) move(c *trackedConn, to connClass) {
	if c.gone || c.class == to {
		return
	}
	p.dequeue(c)
	if (c.class >= authIdle) != (to >= authIdle) {
		p.authed++
	}
	c.class, c.since = to, p.now()
	p.enqueue(c)
}

// setState follows net/http's view of the connection (http.Server.ConnState).
func (p *connPolicy) setState(c *trackedConn, st http.ConnState) {
	switch st {
	case http.StateActive, http.StateHijacked:
		p.mu.Lock()
		p.move(c, c.busyClass())
		p.mu.Unlock()
	case http.StateIdle:
		p.mu.Lock()
		p.move(c, c.idleClass())
		p.mu.Unlock()
	case http.StateClosed:
		c.release()
	}
}

// authenticated records that a request on c showed a valid credential.
func (p *connPolicy) authenticated(c *trackedConn) {
	if !c.auth.CompareAndSwap(false, true) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.class < authIdle {
		to := authIdle
		if c.class == unauthBusy {
			to = authBusy
		}
		p.move(c, to)
	}
}

// reapIdle closes the connections that have waited unauthenticated for
// unauthIdle as of now (rule 3) and says when the next one is due (zero:
// none waits).
func (p *connPolicy) reapIdle(now time.Time) (next time.Time) {
	var victims []*trackedConn
	p.mu.Lock()
	for _, cl := range [...]connClass{unauthIdle, unauthNew} {
		q := &p.queues[cl]
		for q.head != nil && !now.Before(q.head.since.Add(p.unauthIdle)) {
			v := q.head
			p.detach(v, "idle_unauthenticated")
			victims = append(victims, v)
		}
		if q.head != nil && (next.IsZero() || q.head.since.Add(p.unauthIdle).Before(next)) {
			next = q.head.since.Add(p.unauthIdle)
		}
	}
	p.mu.Unlock()
	closeAll(victims)
	return next
}

// reaper runs reapIdle whenever a connection's unauthenticated idle time is
// up, until stop is closed.
func (p *connPolicy) reaper(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTimer(p.unauthIdle)
	defer t.Stop()
	for {
		wait := p.unauthIdle
		if next := p.reapIdle(p.now()); !next.IsZero() {
			wait = max(next.Sub(p.now()), time.Millisecond)
		}
		t.Reset(wait)
		select {
		case <-t.C:
		case <-p.kick:
		case <-stop:
			return
		}
	}
}

func closeAll(cs []*trackedConn) {
	for _, c := range cs {
		if c != nil {
			c.closeSocket()
		}
	}
}

// trackedConn is one admitted connection. It gives its slot back when it is
// closed, once, whoever closes it.
type trackedConn struct {
	net.Conn
	p    *connPolicy
	peer *peerConns
	auth atomic.Bool // a credential was shown (read without the lock)

	// Under p.mu:
	class    connClass
	since    time.Time // when it entered its class
	gone     bool      // no longer counted
	all, own link      // its place in the policy's and its peer's queue

	closeOnce sync.Once
}

func (c *trackedConn) busyClass() connClass {
	if c.auth.Load() {
		return authBusy
	}
	return unauthBusy
}

func (c *trackedConn) idleClass() connClass {
	if c.auth.Load() {
		return authIdle
	}
	return unauthIdle
}

// release gives the slot back.
func (c *trackedConn) release() {
	c.p.mu.Lock()
	c.p.detach(c, "")
	c.p.mu.Unlock()
}

func (c *trackedConn) closeSocket() {
	c.closeOnce.Do(func() { _ = c.Conn.Close() })
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() {})
	c.release()
	return err
}

// CloseWrite keeps net/http's graceful close (FIN, then a pause before the
// full close) working through the wrapper.
func (c *trackedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// NetConn is the socket under the wrapper.
func (c *trackedConn) NetConn() net.Conn { return c.Conn }

var _ listen.PassThroughConn = (*trackedConn)(nil)

// PassThrough says the wrapper's writes reach the socket unchanged
// (listen.PassThroughConn), so a detached listen stream's frames may be
// written to the socket directly by the hub's writers.
func (c *trackedConn) PassThrough() net.Conn { return c.Conn }

// link is a connection's place in one queue.
type link struct{ prev, next *trackedConn }

func globalLink(c *trackedConn) *link { return &c.all }
func peerLink(c *trackedConn) *link   { return &c.own }

// connQueue is a queue of connections in the order they entered it, linked
// through the connections themselves (no allocation per move).
type connQueue struct {
	head, tail *trackedConn
	at         func(*trackedConn) *link
}

func (q *connQueue) push(c *trackedConn) {
	l := q.at(c)
	l.prev, l.next = q.tail, nil
	if q.tail != nil {
		q.at(q.tail).next = c
	} else {
		q.head = c
	}
	q.tail = c
}

func (q *connQueue) remove(c *trackedConn) {
	l := q.at(c)
	if l.prev != nil {
		q.at(l.prev).next = l.next
	} else {
		q.head = l.next
	}
	if l.next != nil {
		q.at(l.next).prev = l.prev
	} else {
		q.tail = l.prev
	}
	l.prev, l.next = nil, nil
}

type trackedConnKey struct{}

// connContext is http.Server.ConnContext: it keeps the admitted connection
// for credentialShown, and hands listen the socket itself, not the
// wrapper, so its stall probe can read the socket's state.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*trackedConn); ok {
		ctx = context.WithValue(ctx, trackedConnKey{}, tc)
		c = tc.Conn
	}
	return listen.ConnContext(ctx, c)
}

// connState is http.Server.ConnState: the policy follows each connection
// between idle and busy.
func connState(c net.Conn, st http.ConnState) {
	if tc, ok := c.(*trackedConn); ok {
		tc.p.setState(tc, st)
	}
}

// credentialShown marks the connection a request arrived on as one that
// has shown a valid credential (rule 3): it keeps the keep-alive idle time
// and is reclaimed last.
func credentialShown(ctx context.Context) {
	if tc, ok := ctx.Value(trackedConnKey{}).(*trackedConn); ok && !tc.auth.Load() {
		tc.p.authenticated(tc)
	}
}
