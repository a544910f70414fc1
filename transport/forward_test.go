package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"
)

// streamServer answers /hello at once and holds /events open (a stream)
// until the client leaves.
func streamServer(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") })
	mux.HandleFunc("/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv
}

func dialTo(addr string) func(context.Context) (net.Conn, error) {
	return func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func open(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return c
}

// waitFor polls cond for up to 20 s: the forwarder's goroutines end on
// their own schedule, and the test asserts that they do, not how fast.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestForwardCarriesCapsAndCloses: a forward carries a request and its
// answer; beyond the cap a new connection is closed as it arrives and one is
// admitted again once another ends; Close ends the held ones and every
// goroutine the forwarder started.
func TestForwardCarriesCapsAndCloses(t *testing.T) {
	srv := streamServer(t)
	ln := listen(t)
	before := runtime.NumGoroutine()
	f := Forward(ln, ForwardConfig{Name: "test", Dial: dialTo(srv.Listener.Addr().String()), Max: 2})

	get := func(c net.Conn, path string) (string, error) {
		io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		b, err := io.ReadAll(c)
		c.Close()
		return string(b), err
	}
	if got, err := get(open(t, ln.Addr().String()), "/hello"); err != nil || !strings.Contains(got, "hello") {
		t.Fatalf("GET /hello through the forward = %q, %v", got, err)
	}
	waitFor(t, "the finished forward is still counted", func() bool { return f.Active() == 0 })

	stream := func() net.Conn {
		c := open(t, ln.Addr().String())
		io.WriteString(c, "GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
		if _, err := c.Read(make([]byte, 16)); err != nil {
			t.Fatalf("the stream did not start: %v", err)
		}
		return c
	}
	a, b := stream(), stream()
	if got, err := get(open(t, ln.Addr().String()), "/hello"); err == nil && got != "" {
		t.Fatalf("a third connection was carried past a cap of 2: %q", got)
	}
	a.Close()
	waitFor(t, "no connection admitted after one of the two ended", func() bool {
		got, _ := get(open(t, ln.Addr().String()), "/hello")
		return strings.Contains(got, "hello")
	})

	closed := make(chan error, 1)
	go func() { closed <- f.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not return while a stream was carried")
	}
	if _, err := io.Copy(io.Discard, b); err != nil {
		t.Errorf("the held stream did not end at Close: %v", err)
	}
	b.Close()
	srv.CloseClientConnections()
	waitFor(t, "goroutines left behind after Close", func() bool { return runtime.NumGoroutine() <= before })
	select {
	case err := <-f.Failed():
		t.Fatalf("Close reported as a listener failure: %v", err)
	default:
	}
}

// TestForwardHalfOpenPeer: once the far side has ended a connection, a peer
// that keeps its own half open holds its forward only for the grace period.
func TestForwardHalfOpenPeer(t *testing.T) {
	far := listen(t)
	defer far.Close()
	go func() { // answers at once and closes, as an HTTP server ends a connection
		for {
			c, err := far.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "bye")
			c.Close()
		}
	}()
	ln := listen(t)
	f := Forward(ln, ForwardConfig{Dial: dialTo(far.Addr().String()), HalfCloseGrace: 200 * time.Millisecond})
	defer f.Close()

	c := open(t, ln.Addr().String())
	defer c.Close()
	if b, err := io.ReadAll(c); err != nil || string(b) != "bye" {
		t.Fatalf("read %q %v", b, err)
	}
	// The peer keeps its half open and says nothing more.
	waitFor(t, "a half-open peer still holds its forward after the grace period", func() bool { return f.Active() == 0 })
	if _, err := c.Write([]byte("more")); err == nil {
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Error("the peer's connection is still open")
		}
	}
}

// TestForwardFarSideUnreachable: a connection whose far side cannot be
// dialled is closed at once and frees its slot; the forwarder keeps
// accepting.
func TestForwardFarSideUnreachable(t *testing.T) {
	dials := 0
	ln := listen(t)
	f := Forward(ln, ForwardConfig{Max: 1, Dial: func(context.Context) (net.Conn, error) {
		dials++
		return nil, errors.New("no route")
	}})
	defer f.Close()
	for i := range 3 {
		c := open(t, ln.Addr().String())
		if n, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatalf("connection %d: read %d bytes from a forward with no far side", i, n)
		}
		c.Close()
		waitFor(t, "the failed forward still holds its slot", func() bool { return f.Active() == 0 })
	}
	if dials != 3 {
		t.Fatalf("dialled %d times for 3 connections; a slot was not freed", dials)
	}
}

// TestForwardDialEndsAtClose: Close does not wait for a dial's own timeout.
func TestForwardDialEndsAtClose(t *testing.T) {
	ln := listen(t)
	started := make(chan struct{})
	f := Forward(ln, ForwardConfig{DialTimeout: time.Hour, Dial: func(ctx context.Context) (net.Conn, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}})
	c := open(t, ln.Addr().String())
	defer c.Close()
	<-started
	done := make(chan error, 1)
	go func() { done <- f.Close() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Close waited for a dial in progress")
	}
}

// TestForwardListenerFailure: a listener that stops by itself (not through
// Close) is reported on Failed, so a holder can exit with a reason.
func TestForwardListenerFailure(t *testing.T) {
	ln := listen(t)
	f := Forward(ln, ForwardConfig{Dial: dialTo("127.0.0.1:1")})
	defer f.Close()
	ln.Close()
	select {
	case err := <-f.Failed():
		if err == nil {
			t.Fatal("Failed delivered a nil error")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a dead listener was not reported")
	}
}

// namedBySource is a listener whose connections name their peer by their
// source address (PeerConn), as a plugin's listener names a tailnet node.
type namedBySource struct{ net.Listener }

func (l namedBySource) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return sourceNamed{c}, nil
}

type sourceNamed struct{ net.Conn }

func (c sourceNamed) Peer() string { return c.RemoteAddr().(*net.TCPAddr).IP.String() }

// TestForwardPeerShare: one peer holds at most MaxPerPeer forwards, so it
// cannot fill the forwarder's cap by itself; another peer is carried while
// the first is at its share, and the first is again once one of its own
// ends.
func TestForwardPeerShare(t *testing.T) {
	srv := streamServer(t)
	ln := listen(t)
	f := Forward(namedBySource{ln}, ForwardConfig{Name: "test", Dial: dialTo(srv.Listener.Addr().String()), Max: 10, MaxPerPeer: 2})
	t.Cleanup(func() { f.Close() })
	from := func(src string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 20 * time.Second}
		c, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(20 * time.Second))
		t.Cleanup(func() { c.Close() })
		return c
	}
	stream := func(src string) (net.Conn, error) {
		c := from(src)
		io.WriteString(c, "GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
		_, err := c.Read(make([]byte, 16))
		return c, err
	}
	a1, err := stream("127.0.0.2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream("127.0.0.2"); err != nil {
		t.Fatal(err)
	}
	if _, err := stream("127.0.0.2"); err == nil {
		t.Fatalf("a third forward of one peer was carried past its share of 2")
	}
	if _, err := stream("127.0.0.3"); err != nil {
		t.Fatalf("another peer while the first holds its share: %v", err)
	}
	a1.Close()
	waitFor(t, "the peer was not carried again after one of its forwards ended", func() bool {
		c, err := stream("127.0.0.2")
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}
