package httpapi

// The connection policy (connPolicy, issue 25 item 1): one client without
// credentials cannot hold every connection of a listener, connections that
// never showed a credential are reclaimed first and fast, a peer holds at
// most its share. Real listeners, real connections; the unauthenticated
// idle time runs on an injected clock.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/commonroom/ce/internal/mcptest"
	"github.com/commonroom/ce/internal/roomtest"
	"github.com/commonroom/ce/room"
)

// rawConn is one client connection spoken to by hand, so a test decides
// exactly which requests travel on which connection.
type rawConn struct {
	t  testing.TB
	c  net.Conn
	br *bufio.Reader
}

// dialRaw connects to url's host from 127.0.0.1, or from src when set (any
// of 127.0.0.0/8 on Linux), so a test can play several peers.
func dialRaw(t testing.TB, url string, src string) *rawConn {
	t.Helper()
	d := net.Dialer{Timeout: serverWait}
	if src != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(src)}
	}
	c, err := d.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, br: bufio.NewReader(c)}
}

// send writes one request (token "" sends none) and reads its answer: the
// status, or 0 when the server closed the connection instead.
func (r *rawConn) send(method, path, token string) int {
	r.t.Helper()
	auth := ""
	if token != "" {
		auth = "Authorization: Bearer " + token + "\r\n"
	}
	r.c.SetDeadline(time.Now().Add(serverWait))
	defer r.c.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(r.c, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%sContent-Length: 0\r\n\r\n", method, path, auth); err != nil {
		return 0
	}
	res, err := http.ReadResponse(r.br, nil)
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			r.t.Fatalf("%s %s: no answer within %v", method, path, serverWait)
		}
		return 0
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// closed waits until the server has closed the connection; it fails t if
// it is still open after serverWait.
func (r *rawConn) closed() {
	r.t.Helper()
	r.c.SetReadDeadline(time.Now().Add(serverWait))
	_, err := r.br.ReadByte()
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		r.t.Fatalf("the server still holds the connection after %v", serverWait)
	}
	if err == nil {
		r.t.Fatalf("the server sent bytes on an idle connection instead of closing it")
	}
}

// stillOpen reports whether the server still holds the connection: it
// reads (and drops) whatever arrives for a short probe, and the connection
// is open if that ends by the probe's deadline rather than by a close.
// Use it only where the answer is already settled.
func (r *rawConn) stillOpen() bool {
	r.c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	defer r.c.SetReadDeadline(time.Time{})
	_, err := io.Copy(io.Discard, r.br)
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// ingressStats reads /debug/metrics' connections.ingress (or owner) as the
// operator.
func connMetrics(t testing.TB, h *roomHarness, which string) ConnStats {
	t.Helper()
	r := h.do("GET", h.OwnerURL("/debug/metrics"), h.OpToken, nil)
	wantOK(t, r)
	var m struct {
		Connections map[string]ConnStats `json:"connections"`
	}
	r.Into(t, &m)
	return m.Connections[which]
}

// TestConnFloodLeavesRoomForSessions is the reproduction: one
// client with no credentials opens idle keep-alive connections to /healthz
// up to the ingress's cap and beyond. A participant with a session still
// gets 200 on a new connection (on main: 503), and the connection that
// showed its session survives a second flood while the flood's own are
// reclaimed.
func TestConnFloodLeavesRoomForSessions(t *testing.T) {
	const capN = 64
	h := newHarness(t, "", harnessOpts{Server: func(c *Config) { c.MaxConns = capN }})
	tok := h.join("agent", agentCaps...).SessionToken
	idleConns(t, h)

	flood := func(n int) (served int) {
		for range n {
			if dialRaw(t, h.Ingress.URL, "").send("GET", "/healthz", "") == 200 {
				served++
			}
		}
		return served
	}
	if served := flood(capN + capN/2); served != capN+capN/2 {
		t.Logf("the flood itself was served %d of %d times", served, capN+capN/2)
	}
	if open := h.API.ingressConns.open.Load(); open != capN {
		t.Fatalf("the flood holds %d connections, want the cap %d", open, capN)
	}

	agent := dialRaw(t, h.Ingress.URL, "")
	if code := agent.send("GET", "/workspace/status", tok); code != 200 {
		t.Fatalf("a participant's new connection while the ingress is flooded: %d, want 200", code)
	}
	flood(2 * capN)
	if code := agent.send("GET", "/workspace/status", tok); code != 200 {
		t.Fatalf("the participant's kept-alive connection after a second flood: %d, want 200", code)
	}
	if code := dialRaw(t, h.Ingress.URL, "").send("GET", "/workspace/status", tok); code != 200 {
		t.Fatalf("another new connection of the participant: %d, want 200", code)
	}

	st := connMetrics(t, h, "ingress")
	if st.Refused != 0 || st.ReclaimedBy["cap_unauthenticated_idle"] < uint64(capN/2+2*capN) ||
		st.ReclaimedBy["cap_authenticated_idle"] != 0 || st.Authenticated < 1 {
		t.Errorf("connections.ingress = %+v: want no refusal, only unauthenticated idle connections reclaimed (at least %d), the participant's authenticated",
			st, capN/2+2*capN)
	}
	if owner := connMetrics(t, h, "owner"); owner.Reclaimed != 0 || owner.Refused != 0 {
		t.Errorf("connections.owner = %+v: the ingress's flood touched the owner listener", owner)
	}
}

// TestConnReclaimOrder: at the cap a newcomer is given the slot of, in
// turn, the unauthenticated connection idle longest after an answer, a new
// connection that never sent a request, an unauthenticated request stalled
// beyond the unauthenticated idle time, the authenticated connection idle
// longest; a connection streaming for a session is never taken.
func TestConnReclaimOrder(t *testing.T) {
	const capN = 5
	clock := room.NewManualClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	h := newHarness(t, "", harnessOpts{Server: func(c *Config) { c.MaxConns, c.ConnClock = capN, clock.Now }})
	tok := h.join("agent", agentCaps...).SessionToken
	idleConns(t, h)
	url := h.Ingress.URL

	authedIdle := dialRaw(t, url, "")
	wantCode(t, authedIdle.send("GET", "/workspace/status", tok), 200, "status")
	clock.Advance(time.Second)
	silent := dialRaw(t, url, "") // connected first, never sends a byte
	waitFor(t, "the silent connection accepted", func() bool { return h.API.ingressConns.classes()[unauthNew] == 1 })
	clock.Advance(time.Second)
	unauthedIdle := dialRaw(t, url, "")
	wantCode(t, unauthedIdle.send("GET", "/healthz", ""), 200, "healthz")
	// A join whose body never comes: a request in progress, no credential.
	stalled := dialRaw(t, url, "")
	fmt.Fprintf(stalled.c, "POST /session/join HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"invite\":")
	// A live stream of the session.
	stream := dialRaw(t, url, "")
	fmt.Fprintf(stream.c, "GET /workspace/observe HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n", tok)
	stream.c.SetReadDeadline(time.Now().Add(serverWait))
	if line, err := stream.br.ReadString('\n'); err != nil || !strings.Contains(line, " 200 ") {
		t.Fatalf("the stream: %q %v", line, err)
	}
	waitFor(t, "five connections held, one of each kind", func() bool {
		return h.API.ingressConns.classes() == [5]int{1, 1, 1, 1, 1}
	})

	newcomer := func(name string) *rawConn {
		c := dialRaw(t, url, "")
		wantCode(t, c.send("GET", "/workspace/status", tok), 200, name)
		return c
	}
	newcomer("first newcomer")
	unauthedIdle.closed()
	if !silent.stillOpen() || !stalled.stillOpen() || !authedIdle.stillOpen() {
		t.Fatalf("the first newcomer took more than the unauthenticated idle connection")
	}
	newcomer("second newcomer")
	silent.closed()

	// The join has waited no time on the policy's clock: it is not taken
	// yet, an authenticated idle connection is (the oldest of them).
	third := newcomer("third newcomer")
	authedIdle.closed()
	if !stalled.stillOpen() {
		t.Fatalf("an unauthenticated request in progress for no time was taken")
	}

	clock.Advance(UnauthenticatedIdleTimeout)
	newcomer("fourth newcomer")
	stalled.closed()
	if !third.stillOpen() {
		t.Fatalf("an authenticated connection was taken before the stalled unauthenticated request")
	}

	st := connMetrics(t, h, "ingress")
	for _, why := range []string{"cap_unauthenticated_idle", "cap_unauthenticated_new", "cap_authenticated_idle", "cap_unauthenticated_busy"} {
		if st.ReclaimedBy[why] != 1 {
			t.Errorf("connections.ingress.reclaimed_by[%s] = %d, want 1 (%+v)", why, st.ReclaimedBy[why], st)
		}
	}
	if st.Reclaimed != 4 || st.Refused != 0 {
		t.Errorf("connections.ingress = %+v, want four reclaims and no refusal", st)
	}
	if !stream.stillOpen() {
		t.Fatalf("the session's stream was taken")
	}
}

// TestConnRefusedWhenNothingCanBeReclaimed: with every slot busy with a
// session's streams the newcomer is answered 503 at once, counted under
// "cap", and the streams go on.
func TestConnRefusedWhenNothingCanBeReclaimed(t *testing.T) {
	const capN = 2
	h := newHarness(t, "", harnessOpts{Server: func(c *Config) { c.MaxConns = capN }})
	tok := h.join("agent", agentCaps...).SessionToken
	idleConns(t, h)
	var streams []*rawConn
	for range capN {
		s := dialRaw(t, h.Ingress.URL, "")
		fmt.Fprintf(s.c, "GET /workspace/observe HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n", tok)
		s.c.SetReadDeadline(time.Now().Add(serverWait))
		if line, err := s.br.ReadString('\n'); err != nil || !strings.Contains(line, " 200 ") {
			t.Fatalf("stream: %q %v", line, err)
		}
		streams = append(streams, s)
	}
	over := dialRaw(t, h.Ingress.URL, "")
	fmt.Fprintf(over.c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	got := readToEnd(t, over.c)
	if len(got) > 0 && !strings.HasPrefix(string(got), "HTTP/1.1 503 ") {
		t.Fatalf("the newcomer got %q, want a 503 or nothing", got)
	}
	st := connMetrics(t, h, "ingress")
	if st.Refused != 1 || st.RefusedBy["cap"] != 1 || st.Reclaimed != 0 {
		t.Errorf("connections.ingress = %+v, want one refusal for the cap and nothing reclaimed", st)
	}
	for i, s := range streams {
		if !s.stillOpen() {
			t.Errorf("stream %d was closed", i)
		}
	}
}

// TestConnUnauthenticatedIdleReclaimed: a keep-alive connection that never
// showed a credential is closed once it has waited UnauthenticatedIdleTimeout
// on the policy's clock; one that showed a session keeps the keep-alive
// idle time; a connection that showed the operator's credential on the
// owner listener too.
func TestConnUnauthenticatedIdleReclaimed(t *testing.T) {
	clock := room.NewManualClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	h := newHarness(t, "", harnessOpts{Server: func(c *Config) { c.ConnClock = clock.Now }})
	tok := h.join("agent", agentCaps...).SessionToken
	idleConns(t, h)

	anon := dialRaw(t, h.Ingress.URL, "")
	wantCode(t, anon.send("GET", "/healthz", ""), 200, "healthz")
	silent := dialRaw(t, h.Ingress.URL, "") // never sends a byte
	badToken := dialRaw(t, h.Ingress.URL, "")
	wantCode(t, badToken.send("GET", "/workspace/status", "ses_not_a_session"), 401, "a wrong token")
	agent := dialRaw(t, h.Ingress.URL, "")
	wantCode(t, agent.send("GET", "/workspace/status", tok), 200, "status")
	mcp := dialRaw(t, h.Ingress.URL, "")
	wantCode(t, mcp.sendMCP(h.Ingress.URL, tok), 200, "MCP tools/list")
	op := dialRaw(t, h.Owner.URL, "")
	wantCode(t, op.send("GET", "/workspace/status", h.OpToken), 200, "operator status")
	waitFor(t, "every connection counted", func() bool {
		return h.API.ingressConns.open.Load() == 5 && h.API.ownerConns.open.Load() >= 1
	})

	clock.Advance(UnauthenticatedIdleTimeout - time.Millisecond)
	h.API.ingressConns.reapIdle(clock.Now())
	if !anon.stillOpen() || !silent.stillOpen() {
		t.Fatalf("closed before its unauthenticated idle time was up")
	}
	clock.Advance(time.Millisecond)
	h.API.ingressConns.reapIdle(clock.Now())
	h.API.ownerConns.reapIdle(clock.Now())
	anon.closed()
	silent.closed()
	badToken.closed()
	for name, c := range map[string]*rawConn{"the session's": agent, "the MCP client's": mcp, "the operator's": op} {
		if !c.stillOpen() {
			t.Errorf("%s connection was closed", name)
		}
	}
	wantCode(t, agent.send("GET", "/workspace/status", tok), 200, "status on the kept connection")
	if st := connMetrics(t, h, "ingress"); st.ReclaimedBy["idle_unauthenticated"] != 3 || st.Authenticated != 2 {
		t.Errorf("connections.ingress = %+v, want 3 reclaimed as idle_unauthenticated and 2 authenticated", st)
	}
}

// TestConnPeerShare: peers a transport names (here a listener that names
// each connection's peer by its source address, as a plugin's listener
// names a tailnet node) hold at most their share. A peer at its share only
// ever displaces its own connections, or is refused when none of its own
// can go; another peer is not touched either way. The loopback pool has no
// share.
func TestConnPeerShare(t *testing.T) {
	const capN, share = 16, 3
	h := newHarness(t, "", harnessOpts{Server: func(c *Config) { c.MaxConns, c.MaxConnsPerPeer = capN, share }})
	tok := h.join("agent", agentCaps...).SessionToken
	idleConns(t, h)
	ln := &namedPeers{Listener: roomtest.Listener(t)}
	srv := NewHTTPServer(h.API.IngressHandler(), h.Log)
	go srv.Serve(h.API.IngressListener(ln))
	t.Cleanup(func() { srv.Close() })
	url := "http://" + ln.Addr().String()

	const a, b = "127.0.0.2", "127.0.0.3"
	var first []*rawConn
	for i := range share {
		c := dialRaw(t, url, a)
		wantCode(t, c.send("GET", "/healthz", ""), 200, fmt.Sprint("peer A's connection ", i))
		first = append(first, c)
		// The server marks a connection idle just after its answer: wait,
		// so that the order of these is the order they went idle in.
		waitFor(t, "the answered connection idle", func() bool { return h.API.ingressConns.classes()[unauthIdle] == i+1 })
	}
	other := dialRaw(t, url, b)
	wantCode(t, other.send("GET", "/workspace/status", tok), 200, "peer B")

	wantCode(t, dialRaw(t, url, a).send("GET", "/healthz", ""), 200, "peer A over its share")
	first[0].closed()
	if !other.stillOpen() {
		t.Fatalf("peer A's extra connection took peer B's")
	}
	if !first[1].stillOpen() {
		t.Fatalf("peer A's extra connection took another of its own than the oldest")
	}

	// Peer A's share, all busy with streams of a session: its next
	// connection is refused, peer B's and the loopback pool's are served.
	for range share {
		s := dialRaw(t, url, a)
		fmt.Fprintf(s.c, "GET /workspace/observe HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n", tok)
		s.c.SetReadDeadline(time.Now().Add(serverWait))
		if line, err := s.br.ReadString('\n'); err != nil || !strings.Contains(line, " 200 ") {
			t.Fatalf("stream: %q %v", line, err)
		}
	}
	over := dialRaw(t, url, a)
	fmt.Fprintf(over.c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	if got := readToEnd(t, over.c); len(got) > 0 && !strings.HasPrefix(string(got), "HTTP/1.1 503 ") {
		t.Fatalf("peer A over a busy share got %q, want a 503 or nothing", got)
	}
	wantCode(t, dialRaw(t, url, b).send("GET", "/workspace/status", tok), 200, "peer B while A is refused")
	if !other.stillOpen() {
		t.Fatalf("peer B's connection was taken for peer A")
	}
	for i := range share + 1 {
		wantCode(t, dialRaw(t, h.Ingress.URL, "").send("GET", "/healthz", ""), 200, fmt.Sprint("loopback connection ", i))
	}

	st := connMetrics(t, h, "ingress")
	if st.PerPeer != share || st.RefusedBy["peer_share"] != 1 || st.ReclaimedBy["peer_share_unauthenticated_idle"] < 1 ||
		st.ReclaimedBy["cap_unauthenticated_idle"] != 0 || st.Peers < 3 {
		t.Errorf("connections.ingress = %+v, want share %d, one refusal and reclaims for peer A's share only, three peers", st, share)
	}
}

// namedPeers is a listener whose connections name their peer, the way a
// transport plugin's listener names the tailnet node of each connection
// (transport.PeerConn): here by the source address.
type namedPeers struct{ net.Listener }

func (l *namedPeers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return peerNamed{c}, nil
}

type peerNamed struct{ net.Conn }

func (c peerNamed) Peer() string { return c.RemoteAddr().(*net.TCPAddr).IP.String() }

// classes counts the open connections of each class: unauthenticated idle,
// new, unauthenticated busy, authenticated idle, authenticated busy.
func (p *connPolicy) classes() (n [5]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pc := range p.peers {
		for i := range pc.queues {
			for c := pc.queues[i].head; c != nil; c = c.own.next {
				n[i]++
			}
		}
	}
	n[authBusy] = int(p.open.Load()) - n[0] - n[1] - n[2] - n[3]
	return n
}

func wantCode(t testing.TB, got, want int, what string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: %d, want %d", what, got, want)
	}
}

// sendMCP sends one authenticated MCP tools/list on r and returns its
// status.
func (r *rawConn) sendMCP(url, token string) int {
	r.t.Helper()
	req, _, err := mcptest.New(nil, url+"/mcp", token, false, "conn-test").NewRequest(context.Background(), mcptest.Request{ID: 1, Method: "tools/list"})
	if err != nil {
		r.t.Fatal(err)
	}
	r.c.SetDeadline(time.Now().Add(serverWait))
	defer r.c.SetDeadline(time.Time{})
	if err := req.Write(r.c); err != nil {
		return 0
	}
	res, err := http.ReadResponse(r.br, req)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}
