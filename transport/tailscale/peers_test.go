package tailscale

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/commonroom/ce/transport"
	"github.com/commonroom/ce/transport/tailscale/tailnettest"
)

// TestExposeConnsNamesEachNode: the listener ExposeConns hands the room
// names every connection's tailnet node (transport.PeerConn) — the same
// name for a node's IPv4 and IPv6 address, another for another node — which
// is what the room's connection policy shares its connections by.
func TestExposeConnsNamesEachNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	tn := tailnettest.Start(t, tailnettest.Options{})
	room := openPlugin(t, []string{"--ts-control-url", tn.ControlURL}, transport.Options{StateDir: stateDir(t, "peers.md")})
	hint, ln, err := room.ExposeConns(ctx, "127.0.0.1:9")
	if err != nil {
		t.Fatalf("expose: %v", err)
	}
	if ln == nil || len(hint.IPs) != 2 {
		t.Fatalf("ExposeConns gave listener %v, hint %+v", ln, hint)
	}
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	peerOfNext := func(t *testing.T) string {
		t.Helper()
		select {
		case c, ok := <-accepted:
			if !ok {
				t.Fatal("the listener stopped")
			}
			defer c.Close()
			return transport.PeerOf(c)
		case <-ctx.Done():
			t.Fatal("no connection arrived")
		}
		return ""
	}
	a, b := tn.Node(t, ctx, "peer-a"), tn.Node(t, ctx, "peer-b")
	name := func(t *testing.T, dial func(context.Context, string, string) (net.Conn, error), ip string) string {
		t.Helper()
		c, err := dial(ctx, "tcp", net.JoinHostPort(ip, "80"))
		if err != nil {
			t.Fatalf("dial %s: %v", ip, err)
		}
		defer c.Close()
		return peerOfNext(t)
	}
	a4, a6 := name(t, a.Dial, hint.IPs[0]), name(t, a.Dial, hint.IPs[1])
	b4 := name(t, b.Dial, hint.IPs[0])
	if !strings.HasPrefix(a4, "node ") || a4 != a6 {
		t.Errorf("node A is %q over IPv4 and %q over IPv6, want one node name", a4, a6)
	}
	if b4 == a4 || !strings.HasPrefix(b4, "node ") {
		t.Errorf("node B is %q, node A %q: want two node names", b4, a4)
	}
	if err := room.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := ln.Accept(); err == nil {
		t.Errorf("the handed listener still accepts after the plugin closed")
	}
}
