package tailscale

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"time"
)

// TestForwardCap: beyond its cap the forwarder closes a new connection as
// it arrives, and admits again once one ends; Close ends the held ones.
func TestForwardCap(t *testing.T) {
	in := newIngress(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	before := goroutines()
	f := newForwarder(ln, in.addr(), 2, halfCloseGrace, slog.New(slog.DiscardHandler))
	closed := make(chan error, 1)
	closeF := func() { closed <- f.close() }
	t.Cleanup(func() { go closeF() }) // before the ingress closes: it waits for its streams

	open := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(20 * time.Second))
		return c
	}
	stream := func() net.Conn { // a forward that stays open: an SSE stream
		t.Helper()
		c := open()
		io.WriteString(c, "GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
		if _, err := c.Read(make([]byte, 16)); err != nil {
			t.Fatalf("the stream did not start: %v", err)
		}
		return c
	}
	refused := func(c net.Conn) bool {
		io.WriteString(c, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
		_, err := c.Read(make([]byte, 16))
		c.Close()
		return err != nil
	}

	a, b := stream(), stream()
	if !refused(open()) {
		t.Fatal("a third connection was forwarded past a cap of 2")
	}
	a.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c := open()
		if !refused(c) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no connection admitted after one of the two ended")
		}
		time.Sleep(20 * time.Millisecond)
	}
	go closeF()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("close: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("close did not return while a forward was open")
	}
	if _, err := io.Copy(io.Discard, b); err != nil {
		t.Errorf("the held stream did not end cleanly at close: %v", err)
	}
	b.Close()
	in.srv.CloseClientConnections()
	expectNoNewGoroutines(t, before)
}

// TestForwardHalfOpenPeer: once the ingress has ended a connection, a peer
// that keeps its own half open holds its forward only for the grace period.
func TestForwardHalfOpenPeer(t *testing.T) {
	ingress, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ingress.Close()
	go func() { // answers at once and closes, as an HTTP server ends a connection
		for {
			c, err := ingress.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "bye")
			c.Close()
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := newForwarder(ln, ingress.Addr().String(), 4, 200*time.Millisecond, slog.New(slog.DiscardHandler))
	defer f.close()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if b, err := io.ReadAll(c); err != nil || string(b) != "bye" {
		t.Fatalf("read %q %v", b, err)
	}
	// The peer keeps its half open and says nothing more.
	deadline := time.Now().Add(20 * time.Second)
	for {
		f.mu.Lock()
		active := f.active
		f.mu.Unlock()
		if active == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a half-open peer still holds its forward after the grace period")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// and its connection is now closed from this side
	if _, err := c.Write([]byte("more")); err == nil {
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Error("the peer's connection is still open")
		}
	}
}
