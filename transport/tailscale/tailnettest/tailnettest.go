// Package tailnettest runs a whole tailnet inside a test process, with no
// internet: Tailscale's own test control server and a DERP relay and STUN
// server on 127.0.0.1, the way tsnet's own tests run. Use it from tests
// only (it imports package testing).
//
//	tn := tailnettest.Start(t, tailnettest.Options{})
//	// ce serve --transport tailscale --ts-control-url tn.ControlURL …
//	peer := tn.Node(t, ctx, "agent") // another machine on the tailnet
//	conn, err := peer.Dial(ctx, "tcp", hint.Address+":80")
//
// A `ce` child process reaches the same tailnet with --ts-control-url
// tn.ControlURL and the environment from tn.ChildEnv().
package tailnettest

import (
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"tailscale.com/envknob"
	"tailscale.com/ipn/store/mem"
	"tailscale.com/net/netns"
	"tailscale.com/tailcfg"
	"tailscale.com/tsnet"
	"tailscale.com/tstest/integration"
	"tailscale.com/tstest/integration/testcontrol"
	"tailscale.com/types/logger"
)

// MagicDNSDomain is the test tailnet's DNS suffix: a node named "room" is
// "room.tail-scale.ts.net".
const MagicDNSDomain = "tail-scale.ts.net"

// Options shape the test tailnet.
type Options struct {
	// RequireLogin makes the control server ask every node without an auth
	// key for an interactive login (a URL the test completes with
	// CompleteLogin, or leaves pending).
	RequireLogin bool
	// AuthKey, when set, is the only auth key the control server accepts.
	AuthKey string
	// Logf receives the control server's and the relay's logs; nil drops them.
	Logf func(format string, args ...any)
}

// Tailnet is a running test tailnet. Everything it started stops when the
// test ends.
type Tailnet struct {
	// ControlURL is the control server, for --ts-control-url.
	ControlURL string
	// Control is Tailscale's test control server, for what this package
	// does not wrap.
	Control *testcontrol.Server
	// DERPMap is the relay map the control server hands out.
	DERPMap *tailcfg.DERPMap

	authKey string // Options.AuthKey: what Node logs in with
}

var knobsOnce sync.Once

// Start runs a control server, a DERP relay and a STUN server on 127.0.0.1
// and turns off what would reach beyond this machine (the socket marks of
// package netns, port-mapping probes of the gateway, log uploads).
func Start(t testing.TB, o Options) *Tailnet {
	t.Helper()
	netns.SetEnabled(false)
	t.Cleanup(func() { netns.SetEnabled(true) })
	knobsOnce.Do(func() {
		for _, kv := range hermeticKnobs {
			envknob.Setenv(kv[0], kv[1])
		}
	})
	logf := logger.Discard
	if o.Logf != nil {
		logf = o.Logf
	}
	derpMap := integration.RunDERPAndSTUN(t, logf, "127.0.0.1")
	control := &testcontrol.Server{
		DERPMap:        derpMap,
		DNSConfig:      &tailcfg.DNSConfig{Proxied: true},
		MagicDNSDomain: MagicDNSDomain,
		RequireAuth:    o.RequireLogin,
		RequireAuthKey: o.AuthKey,
		Logf:           logf,
	}
	control.HTTPTestServer = httptest.NewUnstartedServer(control)
	control.HTTPTestServer.Start()
	t.Cleanup(control.HTTPTestServer.Close)
	return &Tailnet{ControlURL: control.HTTPTestServer.URL, Control: control, DERPMap: derpMap, authKey: o.AuthKey}
}

// hermeticKnobs keep a node on this machine: no UPnP/NAT-PMP probes of the
// gateway, no log uploads, no dependence on a "network is up" check.
var hermeticKnobs = [][2]string{
	{"TS_DISABLE_PORTMAPPER", "1"},
	{"TS_NO_LOGS_NO_SUPPORT", "true"},
	{"TS_ASSUME_NETWORK_UP_FOR_TEST", "1"},
	{"TS_PANIC_IF_HIT_MAIN_CONTROL", "1"},
}

// ChildEnv is the environment (KEY=VALUE) to add to a child process — the
// real `ce` binary — that joins this tailnet with --ts-control-url, so that
// it too stays on this machine.
func (tn *Tailnet) ChildEnv() []string {
	out := make([]string, 0, len(hermeticKnobs))
	for _, kv := range hermeticKnobs {
		out = append(out, kv[0]+"="+kv[1])
	}
	return out
}

// CompleteLogin completes the interactive login at url (a login URL a node
// was given), as if its user had opened it; false if the control server
// does not know the URL.
func (tn *Tailnet) CompleteLogin(url string) bool {
	return tn.Control.CompleteAuth(url)
}

// Node starts another machine on the tailnet: an ephemeral node, up and
// connected to its relay, closed when the test ends. On a tailnet that
// takes only Options.AuthKey, it logs in with that key.
func (tn *Tailnet) Node(t testing.TB, ctx context.Context, hostname string) *tsnet.Server {
	t.Helper()
	dir := filepath.Join(t.TempDir(), hostname)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s := &tsnet.Server{
		Dir:        dir,
		ControlURL: tn.ControlURL,
		Hostname:   hostname,
		Store:      new(mem.Store),
		Ephemeral:  true,
		AuthKey:    tn.authKey,
		Logf:       logger.Discard,
		UserLogf:   logger.Discard,
	}
	t.Cleanup(func() { closeBounded(t, s) })
	if _, err := s.Up(ctx); err != nil {
		t.Fatalf("tailnettest: node %s: %v", hostname, err)
	}
	if err := WaitHomeDERP(ctx, s); err != nil {
		t.Fatalf("tailnettest: node %s: %v", hostname, err)
	}
	return s
}

// nodeCloseBound bounds closing a test node. tsnet's Close stops its
// packet pump before it aborts the node's TCP endpoints, so a node that
// still holds more than its outbound queue's 512 packets of them (a test
// that flooded the room with connections) never returns from Close; the
// test goes on without it rather than hang.
const nodeCloseBound = 30 * time.Second

func closeBounded(t testing.TB, s *tsnet.Server) {
	done := make(chan struct{})
	go func() {
		s.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(nodeCloseBound):
		t.Logf("tailnettest: node %s did not close within %s (too many live TCP endpoints for tsnet's Close); left behind", s.Hostname, nodeCloseBound)
	}
}

// WaitHomeDERP waits until s has a home relay and has heard from it; until
// then the relay drops a peer's first packets for s.
func WaitHomeDERP(ctx context.Context, s *tsnet.Server) error {
	h, ms := s.Sys().HealthTracker.Get(), s.Sys().MagicSock.Get()
	for {
		if r := ms.GetLastNetcheckReport(ctx); r != nil && r.PreferredDERP != 0 &&
			!h.GetDERPRegionReceivedTime(r.PreferredDERP).IsZero() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no home relay: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// SilentControlURL is a control server that never answers: it accepts
// connections on 127.0.0.1 and reads them without replying, until the
// test ends.
func SilentControlURL(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 4096)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "http://" + ln.Addr().String()
}
