package tailscale

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/commonroom/ce/transport"
	"github.com/commonroom/ce/transport/tailscale/tailnettest"
)

// TestRestartKeepsIdentity: a room restarted with the same state directory
// comes back under the same MagicDNS name and IPs (its invitations stay
// good); an ephemeral node is a new node every time and leaves no state.
func TestRestartKeepsIdentity(t *testing.T) {
	tn := tailnettest.Start(t, tailnettest.Options{})
	in := newIngress(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	expose := func(args []string, dir string) transport.Hint {
		t.Helper()
		p, err := tryOpen(append([]string{"--ts-control-url", tn.ControlURL}, args...), transport.Options{StateDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		h, err := p.Expose(ctx, in.addr())
		if err != nil {
			t.Fatalf("expose: %v", err)
		}
		return h
	}

	t.Run("the same state directory keeps the name and the IPs", func(t *testing.T) {
		dir := stateDir(t, "kept.md")
		first := expose(nil, dir)
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("state directory %v %v, want mode 0700", fi.Mode(), err)
		}
		if _, err := os.Stat(filepath.Join(dir, "tailscaled.state")); err != nil {
			t.Fatalf("no node state kept: %v", err)
		}
		second := expose(nil, dir)
		if first.Address != second.Address || !slices.Equal(first.IPs, second.IPs) {
			t.Fatalf("restart moved the room: %s %v → %s %v", first.Address, first.IPs, second.Address, second.IPs)
		}
	})

	t.Run("a wider state directory is narrowed to 0700", func(t *testing.T) {
		dir := stateDir(t, "wide.md")
		os.MkdirAll(dir, 0o755)
		os.Chmod(dir, 0o755)
		expose(nil, dir)
		if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
			t.Fatalf("state directory left %v", fi.Mode().Perm())
		}
	})

	t.Run("an ephemeral node is a new node each time and keeps nothing", func(t *testing.T) {
		dir := stateDir(t, "throwaway.md")
		first := expose([]string{"--ts-ephemeral"}, dir)
		second := expose([]string{"--ts-ephemeral"}, dir)
		if slices.Equal(first.IPs, second.IPs) {
			t.Fatalf("an ephemeral node came back as the same node: %v", first.IPs)
		}
		// The test control server does not rename a node whose name is
		// taken (Tailscale's appends -1 until the old ephemeral node is
		// dropped), so only the identity is compared here.
		left, _ := os.ReadDir(dir)
		if len(left) != 0 {
			t.Fatalf("an ephemeral node left state behind: %v", left)
		}
	})
}

// TestDialUnusableHints: every hint that cannot be used is an error
// wrapping ErrUnavailable that says why; none reaches beyond the tailnet.
func TestDialUnusableHints(t *testing.T) {
	tn := tailnettest.Start(t, tailnettest.Options{})
	in := newIngress(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	gone := openPlugin(t, []string{"--ts-control-url", tn.ControlURL, "--ts-ephemeral", "--ts-hostname", "gone"},
		transport.Options{StateDir: t.TempDir()})
	goneHint, err := gone.Expose(ctx, in.addr())
	if err != nil {
		t.Fatal(err)
	}
	live := openPlugin(t, []string{"--ts-control-url", tn.ControlURL, "--ts-ephemeral", "--ts-hostname", "live"},
		transport.Options{StateDir: t.TempDir()})
	liveHint, err := live.Expose(ctx, in.addr())
	if err != nil {
		t.Fatal(err)
	}
	joiner := notOnTailnet(openPlugin(t, []string{"--ts-control-url", tn.ControlURL}, transport.Options{Joining: true}))
	if c, err := joiner.Dial(ctx, goneHint); err != nil {
		t.Fatalf("the hint does not work while its room is up: %v", err)
	} else {
		c.Close()
	}
	gone.Close()

	closedPort := liveHint
	closedPort.Port = 81

	for _, c := range []struct {
		name string
		h    transport.Hint
		want string
	}{
		{"a hint of another type", transport.Hint{Type: "loopback", Address: "127.0.0.1", Port: 80}, "not a tailscale one"},
		{"a hint without a port", transport.Hint{Type: "tailscale", Address: "x.ts.net"}, "no port"},
		{"a hint without an address", transport.Hint{Type: "tailscale", Port: 80}, "no address"},
		{"a hint naming a loopback address", transport.Hint{Type: "tailscale", Address: "127.0.0.1", Port: 80}, "not a tailnet address"},
		{"a hint naming a public address among its IPs", transport.Hint{Type: "tailscale", Address: "x.ts.net", IPs: []string{"192.0.2.7"}, Port: 80}, "not a tailnet address"},
		{"a hint naming a node of another tailnet", transport.Hint{Type: "tailscale", Address: "elsewhere.example.ts.net", IPs: []string{"100.100.7.7"}, Port: 80}, "no node on the tailnet"},
		{"a hint whose room's node is gone", goneHint, "cannot reach"},
		{"a hint of a live node on a port nobody listens on", closedPort, "cannot reach"},
	} {
		t.Run(c.name+" is unavailable", func(t *testing.T) {
			dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			conn, err := joiner.Dial(dctx, c.h)
			if err == nil {
				conn.Close()
				t.Fatalf("dialled %+v", c.h)
			}
			if !errors.Is(err, transport.ErrUnavailable) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want ErrUnavailable saying %q", err, c.want)
			}
		})
	}
}

// TestDialDirect: on a machine that is on the tailnet itself, Dial uses
// that connection and starts no node of its own; when that fails it falls
// back to its own node. (This machine is not on a tailnet, so the test
// stands a tsnet node in for the machine's own Tailscale.)
func TestDialDirect(t *testing.T) {
	tn := tailnettest.Start(t, tailnettest.Options{})
	in := newIngress(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	room := openPlugin(t, []string{"--ts-control-url", tn.ControlURL, "--ts-ephemeral"}, transport.Options{StateDir: stateDir(t, "direct.md")})
	hint, err := room.Expose(ctx, in.addr())
	if err != nil {
		t.Fatal(err)
	}
	machine := tn.Node(t, ctx, "laptop")
	v4, v6 := machine.TailscaleIPs()
	onTailnet := func() []netip.Addr { return []netip.Addr{v4, v6} }

	t.Run("this machine's own tailnet connection is used first", func(t *testing.T) {
		joiner := openPlugin(t, []string{"--ts-control-url", tn.ControlURL}, transport.Options{Joining: true})
		joiner.localTailnetAddrs = onTailnet
		joiner.directDial = machine.Dial
		c, err := joiner.Dial(ctx, hint)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer c.Close()
		if code, _ := get(t, c, hint.HostPort(), "/hello"); code != 200 {
			t.Fatalf("GET /hello: %d", code)
		}
		if joiner.node != nil {
			t.Errorf("started a node of its own although the machine is on the tailnet")
		}
	})

	t.Run("a direct path that leads off the tailnet is refused", func(t *testing.T) {
		decoy := newIngress(t)
		joiner := notOnTailnet(openPlugin(t, []string{"--ts-control-url", tn.ControlURL}, transport.Options{Joining: true}))
		joiner.localTailnetAddrs = onTailnet
		joiner.directDial = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer // what a CGNAT network that is not a tailnet looks like: a non-tailnet peer
			return d.DialContext(ctx, "tcp", decoy.addr())
		}
		c, err := joiner.Dial(ctx, hint)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer c.Close()
		if _, body := get(t, c, hint.HostPort(), "/hello"); !strings.Contains(body, "host="+hint.HostPort()) || joiner.node == nil {
			t.Fatalf("did not fall back to its own node (body %q)", body)
		}
	})

	t.Run("when the direct path fails the joiner's own node is used", func(t *testing.T) {
		joiner := openPlugin(t, []string{"--ts-control-url", tn.ControlURL}, transport.Options{Joining: true})
		joiner.localTailnetAddrs = onTailnet
		joiner.directDial = func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("no route to host")
		}
		c, err := joiner.Dial(ctx, hint)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		c.Close()
		if joiner.node == nil {
			t.Fatalf("no node of its own")
		}
	})
}

// TestCloseLeavesNothing: Close ends the forwards (an open stream
// included), the listener and the node, leaves no goroutine behind, and may
// be called again; a Close during a pending login cuts it short.
func TestCloseLeavesNothing(t *testing.T) {
	tn := tailnettest.Start(t, tailnettest.Options{})
	in := newIngress(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Warm up once, so that what tailscale starts once per process is
	// running before the count is taken.
	warm := openPlugin(t, []string{"--ts-control-url", tn.ControlURL, "--ts-ephemeral", "--ts-hostname", "warmup"}, transport.Options{StateDir: t.TempDir()})
	if _, err := warm.Expose(ctx, in.addr()); err != nil {
		t.Fatal(err)
	}
	warm.Close()

	t.Run("a room and a joiner with a stream open close without a trace", func(t *testing.T) {
		before := goroutines()
		room, err := tryOpen([]string{"--ts-control-url", tn.ControlURL, "--ts-ephemeral"}, transport.Options{StateDir: stateDir(t, "leak.md")})
		if err != nil {
			t.Fatal(err)
		}
		hint, err := room.Expose(ctx, in.addr())
		if err != nil {
			t.Fatal(err)
		}
		joiner, err := tryOpen([]string{"--ts-control-url", tn.ControlURL}, transport.Options{Joining: true})
		if err != nil {
			t.Fatal(err)
		}
		notOnTailnet(joiner)
		c, err := joiner.Dial(ctx, hint)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
		buf := make([]byte, 64)
		if _, err := c.Read(buf); err != nil {
			t.Fatalf("the stream did not start: %v", err)
		}
		if err := room.Close(); err != nil {
			t.Errorf("room close: %v", err)
		}
		// The room's node is gone with its forwards; the joiner's end of the
		// stream only learns it by its own timeouts, so it simply closes.
		c.Close()
		if err := joiner.Close(); err != nil {
			t.Errorf("joiner close: %v", err)
		}
		if err := room.Close(); err != nil {
			t.Errorf("a second close: %v", err)
		}
		if _, err := room.Expose(ctx, in.addr()); !errors.Is(err, transport.ErrUnavailable) {
			t.Errorf("expose after close: %v", err)
		}
		if _, err := joiner.Dial(ctx, hint); !errors.Is(err, transport.ErrUnavailable) {
			t.Errorf("dial after close: %v", err)
		}
		in.srv.CloseClientConnections()
		expectNoNewGoroutines(t, before)
	})

	t.Run("a close during a pending login ends the wait at once", func(t *testing.T) {
		pending := tailnettest.Start(t, tailnettest.Options{RequireLogin: true})
		before := goroutines()
		var ns notices
		asked := make(chan struct{}, 1)
		ns.on = func(string) { asked <- struct{}{} }
		room, err := tryOpen([]string{"--ts-control-url", pending.ControlURL, "--ts-login-timeout", "90s"},
			transport.Options{StateDir: stateDir(t, "closing.md"), Notice: ns.notice})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { _, err := room.Expose(context.Background(), in.addr()); done <- err }()
		select {
		case <-asked:
		case <-ctx.Done():
			t.Fatal("no login was asked for")
		}
		closed := make(chan struct{})
		go func() { room.Close(); close(closed) }()
		select {
		case <-closed:
		case <-ctx.Done():
			t.Fatal("Close waited for the pending login")
		}
		select {
		case err := <-done:
			if !errors.Is(err, transport.ErrUnavailable) || !strings.Contains(err.Error(), "cancelled") {
				t.Errorf("expose ended with %v", err)
			}
		case <-ctx.Done():
			t.Fatal("Close did not end the pending login")
		}
		expectNoNewGoroutines(t, before)
	})
}
