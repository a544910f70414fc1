package tailscale

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/commonroom/ce/transport"
	"github.com/commonroom/ce/transport/tailscale/tailnettest"
)

// TestExposeAndDial puts a room's ingress (a real HTTP server on
// 127.0.0.1) on a test tailnet and reaches it from a joiner's own embedded
// node, the way `ce serve --transport tailscale` and `ce join` on another
// machine do.
func TestExposeAndDial(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tn := tailnettest.Start(t, tailnettest.Options{})
	in := newIngress(t)

	roomLog, roomLogs := debugLogger()
	room := openPlugin(t, []string{"--ts-control-url", tn.ControlURL}, transport.Options{
		StateDir: stateDir(t, "notes.md"), Logger: roomLog,
	})
	hint, err := room.Expose(ctx, in.addr())
	if err != nil {
		t.Fatalf("expose: %v", err)
	}

	t.Run("the hint names the node on the tailnet", func(t *testing.T) {
		want := "notes." + tailnettest.MagicDNSDomain
		if hint.Type != "tailscale" || hint.Address != want || hint.Port != TailnetPort ||
			!hint.Encrypted || hint.Mode != "private" || len(hint.Params) != 0 {
			t.Fatalf("hint %+v, want tailscale %s:%d encrypted private", hint, want, TailnetPort)
		}
		if len(hint.IPs) != 2 {
			t.Fatalf("hint IPs %v, want an IPv4 and an IPv6 address", hint.IPs)
		}
		for i, s := range hint.IPs {
			ip, err := netip.ParseAddr(s)
			if err != nil || !inTailnet(ip) || ip.Is4() != (i == 0) {
				t.Errorf("hint IP %d %q is not a tailnet address in v4, v6 order", i, s)
			}
		}
		if got := hint.Describe(); got != "tailscale (private, encrypted) "+want+":80" {
			t.Errorf("describe %q", got)
		}
	})

	joiner := notOnTailnet(openPlugin(t, []string{"--ts-control-url", tn.ControlURL}, transport.Options{
		StateDir: t.TempDir(), Joining: true,
	}))

	t.Run("a joiner's own node reaches the ingress", func(t *testing.T) {
		c, err := joiner.Dial(ctx, hint)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer c.Close()
		code, body := get(t, c, hint.HostPort(), "/hello")
		if code != 200 || body != "hello from the room; host="+hint.HostPort() {
			t.Fatalf("GET /hello: %d %q", code, body)
		}
		if joiner.node == nil || !joiner.cfg.ephemeral {
			t.Errorf("the joiner did not dial through an ephemeral node of its own")
		}
	})

	t.Run("another machine reaches it by name through its own tailnet client", func(t *testing.T) {
		peer := tn.Node(t, ctx, "agent")
		c, err := peer.Dial(ctx, "tcp", hint.HostPort())
		if err != nil {
			t.Fatalf("dial by MagicDNS name: %v", err)
		}
		defer c.Close()
		if code, _ := get(t, c, hint.HostPort(), "/hello"); code != 200 {
			t.Fatalf("GET /hello: %d", code)
		}
	})

	t.Run("a stream flows through the forward as it is written", func(t *testing.T) {
		c, err := joiner.Dial(ctx, hint)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		io.WriteString(c, "GET /events HTTP/1.1\r\nHost: "+hint.HostPort()+"\r\n\r\n")
		br := bufio.NewReader(c)
		// The second event is only written once the first has arrived here,
		// so a forward that buffered the stream would never deliver it.
		readUntil(t, br, "data: one")
		in.release <- struct{}{}
		readUntil(t, br, "data: two")
	})

	t.Run("a half-close reaches the ingress and the answer still comes back", func(t *testing.T) {
		half := newHalfCloseServer(t)
		room2 := openPlugin(t, []string{"--ts-control-url", tn.ControlURL, "--ts-ephemeral", "--ts-hostname", "halfclose"},
			transport.Options{StateDir: t.TempDir()})
		h2, err := room2.Expose(ctx, half.Addr().String())
		if err != nil {
			t.Fatalf("expose: %v", err)
		}
		c, err := joiner.Dial(ctx, h2)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		payload := strings.Repeat("x", 100_000)
		if _, err := io.WriteString(c, payload); err != nil {
			t.Fatal(err)
		}
		if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
			t.Fatalf("close write: %v", err)
		}
		got, err := io.ReadAll(c)
		if err != nil {
			t.Fatalf("read the answer after the half-close: %v", err)
		}
		if string(got) != "read 100000 bytes to EOF" {
			t.Fatalf("answer %q", got)
		}
	})

	t.Run("at info and above the log holds no tailnet name or IP, at debug it does", func(t *testing.T) {
		// SECURITY.md: ce's logs name the transport, never its endpoint;
		// the banner and ce status show that to the host.
		secret := append([]string{hint.Address, tailnettest.MagicDNSDomain}, hint.IPs...)
		var info, debug []string
		for _, line := range strings.Split(roomLogs.String(), "\n") {
			if strings.Contains(line, "level=DEBUG") {
				debug = append(debug, line)
			} else if line != "" {
				info = append(info, line)
			}
		}
		if !slices.ContainsFunc(info, func(l string) bool { return strings.Contains(l, "tailscale: node up") }) ||
			!slices.ContainsFunc(info, func(l string) bool { return strings.Contains(l, "tailscale: exposing the ingress") }) {
			t.Fatalf("the start-up lines are not at info:\n%s", strings.Join(info, "\n"))
		}
		for _, l := range info {
			for _, s := range secret {
				if strings.Contains(l, s) {
					t.Errorf("a line above debug names the endpoint (%s):\n%s", s, l)
				}
			}
		}
		for _, s := range secret[:1] {
			if !slices.ContainsFunc(debug, func(l string) bool { return strings.Contains(l, s) }) {
				t.Errorf("no debug line names %s, for troubleshooting", s)
			}
		}
	})

	t.Run("the logs hold the node's own lines, at debug level", func(t *testing.T) {
		logs := roomLogs.String()
		if !strings.Contains(logs, "level=DEBUG") || !strings.Contains(logs, "source=tsnet") {
			t.Fatalf("no tsnet debug lines in the room's log:\n%.2000s", logs)
		}
	})
}

func readUntil(t testing.TB, br *bufio.Reader, want string) {
	t.Helper()
	for {
		line, err := br.ReadString('\n')
		if strings.Contains(line, want) {
			return
		}
		if err != nil {
			t.Fatalf("reading for %q: %v", want, err)
		}
	}
}

// newHalfCloseServer is an ingress that reads its request to the end of
// input and only then answers, on the same connection.
func newHalfCloseServer(t testing.TB) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.SetDeadline(time.Now().Add(20 * time.Second))
			n, err := io.Copy(io.Discard, c)
			if err == nil {
				io.WriteString(c, "read "+strconv.FormatInt(n, 10)+" bytes to EOF")
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln
}
