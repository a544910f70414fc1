//go:build unix

package httpapi

import (
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/commonroom/ce/room"
)

// dialSmallWindow connects with a tiny receive buffer, so a response the
// client never reads stops the server's writes after a few kilobytes
// instead of filling megabytes of kernel buffer first.
func dialSmallWindow(t testing.TB, url string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}); err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestBoundsUnreadResponseClosedAfterWriteDeadline(t *testing.T) {
	// An answer of about 12 MB: "<" is sent as \u003c, and the read bound is
	// raised to 2 MiB, so it cannot all wait in the kernel's buffers (at
	// most 4 MiB on the server's side here).
	doc := "# Idea\n\n" + strings.Repeat(strings.Repeat("<", 99)+"\n", 20_000)
	h := newHarness(t, doc, harnessOpts{
		Limits: func(l *room.Limits) { l.MaxBodyBytes = 2 << 20 },
		Server: func(c *Config) { c.WriteTimeout = 500 * time.Millisecond },
	})
	s := h.join("reader", "read")
	// A first, small read parses the document, so the stalled one below
	// starts writing at once. (Reading the whole 12 MB here would itself
	// race the 500 ms write deadline on a loaded machine.)
	wantOK(t, h.do("GET", h.IngressURL("/workspace/read?max_bytes=64"), s.SessionToken, nil))
	idleConns(t, h)

	c := dialSmallWindow(t, h.Ingress.URL)
	fmt.Fprintf(c, "GET /workspace/read HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n", s.SessionToken)
	waitFor(t, "the server accepts the connection", func() bool { return h.API.ingressConns.open.Load() == 1 })
	// Never read: the server must give up on the answer and close.
	waitFor(t, "the server closes the connection it cannot write to", func() bool {
		return h.API.ingressConns.open.Load() == 0
	})
	c.SetReadDeadline(time.Now().Add(serverWait))
	got, _ := io.ReadAll(c)
	// Nothing at all arrives if the deadline passed before the first write
	// (a slow machine); otherwise the answer is a 200 cut short.
	if len(got) > 0 && !strings.HasPrefix(string(got), "HTTP/1.1 200 ") {
		t.Errorf("the answer began %.100q, want a 200", got)
	}
	if len(got) >= 12_000_000 {
		t.Errorf("the whole answer (%d bytes) arrived; the test did not stall the server", len(got))
	}
	t.Run("the room still answers", func(t *testing.T) {
		wantOK(t, h.do("GET", h.IngressURL("/workspace/status"), s.SessionToken, nil))
	})
}
