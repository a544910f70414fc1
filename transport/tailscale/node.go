package tailscale

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"tailscale.com/client/local"
	"tailscale.com/ipn"
	"tailscale.com/ipn/ipnstate"
	"tailscale.com/ipn/store/mem"
	"tailscale.com/logtail"
	"tailscale.com/tsnet"

	"github.com/commonroom/ce/transport"
)

// derpWait bounds how long a node that is up waits for its home relay
// (DERP) connection before it is used: until then a peer's first packets
// to it may be dropped, which costs a retransmission, not the connection.
const derpWait = 10 * time.Second

// node is one embedded tailnet node, up and running.
type node struct {
	srv       *tsnet.Server
	lc        *local.Client
	tmpDir    string // an ephemeral node's directory, removed on close
	started   bool   // Start succeeded, so Close must run (and may: never before Start)
	begun     time.Time
	dnsName   string // the MagicDNS name, without the trailing dot
	ips       []netip.Addr
	closeOnce sync.Once
}

// nodeConfig is what startNode needs beyond the plugin's config.
type nodeConfig struct {
	config
	role string // "room" or "joiner", for messages
}

// disableLogUpload keeps the embedded nodes from sending their logs to
// Tailscale's log service: a room's logs stay on its machine (they go to
// Options.Logger at debug level).
var disableLogUpload = sync.OnceFunc(logtail.Disable)

// startNode starts an embedded node and waits until it is running on the
// tailnet, asking for an interactive login through Notice when it has no
// auth key, all within the login timeout and ctx. On failure the node is
// shut down and the error wraps transport.ErrUnavailable and names why.
func startNode(ctx context.Context, nc nodeConfig) (_ *node, err error) {
	disableLogUpload()
	log := nc.logger()
	n := &node{begun: time.Now()}
	srv := &tsnet.Server{
		Hostname:   nc.hostname,
		ControlURL: nc.controlURL,
		AuthKey:    nc.authKey,
		Ephemeral:  nc.ephemeral,
		Logf:       nc.tsLogf(log, "tsnet"),
		UserLogf:   nc.tsLogf(log, "tsnet-user"),
	}
	if nc.ephemeral {
		// A fresh identity every time: nothing persists, and the control
		// server forgets the node once it is gone.
		parent := ""
		if nc.opts.StateDir != "" {
			if err := ensureStateDir(nc.opts.StateDir, log); err != nil {
				return nil, err
			}
			parent = nc.opts.StateDir
		}
		dir, err := os.MkdirTemp(parent, "ephemeral-")
		if err != nil {
			return nil, fmt.Errorf("%w: tailscale: a directory for the ephemeral node: %v", transport.ErrUnavailable, err)
		}
		n.tmpDir = dir
		srv.Dir = dir
		srv.Store = new(mem.Store)
	} else {
		if err := ensureStateDir(nc.opts.StateDir, log); err != nil {
			return nil, err
		}
		srv.Dir = nc.opts.StateDir
	}
	n.srv = srv
	defer func() {
		if err != nil {
			n.close()
		}
	}()

	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("%w: tailscale: starting the %s's node: %s", transport.ErrUnavailable, nc.role, nc.redact(err.Error()))
	}
	n.started = true
	n.lc, err = srv.LocalClient()
	if err != nil {
		return nil, fmt.Errorf("%w: tailscale: %s", transport.ErrUnavailable, nc.redact(err.Error()))
	}

	upCtx, cancel := context.WithTimeout(ctx, nc.loginTimeout)
	defer cancel()
	if err := n.waitRunning(upCtx, nc, log); err != nil {
		return nil, err
	}
	st, err := srv.Up(upCtx) // running already: this reads the status and clears stale serve settings
	if err != nil {
		return nil, fmt.Errorf("%w: tailscale: the %s's node: %s", transport.ErrUnavailable, nc.role, nc.redact(err.Error()))
	}
	if st.Self != nil {
		n.dnsName = strings.TrimSuffix(st.Self.DNSName, ".")
	}
	n.ips = sortIPs(st.TailscaleIPs)
	n.waitHomeDERP(ctx, log)
	log.Info("tailscale: node up", "role", nc.role, "ephemeral", nc.ephemeral)
	log.Debug("tailscale: the node's tailnet address", "role", nc.role, "name", n.dnsName, "ips", n.ips) // never at info: see Expose
	return n, nil
}

// waitRunning follows the node's state until it runs. A login URL from the
// control server goes to Notice and the log, once per URL. When ctx ends
// first, the error says what the node was waiting for.
func (n *node) waitRunning(ctx context.Context, nc nodeConfig, log *slog.Logger) error {
	w, err := n.lc.WatchIPNBus(ctx, ipn.NotifyInitialState)
	if err != nil {
		return n.notUpError(ctx, nc, "", ipn.NoState, err)
	}
	defer w.Close()
	var (
		state   = ipn.NoState
		authURL string
	)
	for {
		msg, err := w.Next()
		if err != nil {
			return n.notUpError(ctx, nc, authURL, state, err)
		}
		if msg.ErrMessage != nil {
			return fmt.Errorf("%w: tailscale: the control server %s refused the %s's node: %s",
				transport.ErrUnavailable, nc.controlName(), nc.role, nc.redact(*msg.ErrMessage))
		}
		if msg.BrowseToURL != nil && *msg.BrowseToURL != "" && *msg.BrowseToURL != authURL {
			authURL = *msg.BrowseToURL
			text := fmt.Sprintf("Tailscale: to let this %s's node join the tailnet, open %s (waiting up to %s)", nc.role, authURL, nc.loginTimeout)
			log.Info("tailscale: login required", "role", nc.role, "url", authURL, "timeout", nc.loginTimeout.String())
			if nc.opts.Notice != nil {
				nc.opts.Notice(text)
			}
		}
		if msg.State != nil {
			state = *msg.State
			log.Debug("tailscale: node state", "role", nc.role, "state", state.String())
			if state == ipn.Running {
				return nil
			}
		}
	}
}

// notUpError names why a node is not up when its wait ended.
func (n *node) notUpError(ctx context.Context, nc nodeConfig, authURL string, state ipn.State, err error) error {
	if ctx.Err() == nil {
		return fmt.Errorf("%w: tailscale: watching the %s's node: %s", transport.ErrUnavailable, nc.role, nc.redact(err.Error()))
	}
	why := ""
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		why = "cancelled"
	case authURL != "":
		why = fmt.Sprintf("the login at %s was not completed", authURL)
	case state == ipn.NeedsMachineAuth:
		why = "the node waits for an administrator to approve it on the control server"
	case state == ipn.Starting:
		why = "the node logged in but did not reach the tailnet (state Starting)"
	default:
		why = fmt.Sprintf("the control server %s did not answer (state %s)", nc.controlName(), state)
	}
	if st, serr := n.statusQuick(); serr == nil {
		var health []string
		for _, h := range st.Health {
			if !strings.Contains(h, "is starting") { // says nothing the message does not
				health = append(health, h)
			}
		}
		if len(health) > 0 {
			why += "; health: " + nc.redact(strings.Join(health, "; "))
		}
	}
	return fmt.Errorf("%w: tailscale: the %s's node did not come up in %s (--ts-login-timeout %s): %s",
		transport.ErrUnavailable, nc.role, time.Since(n.begun).Round(time.Millisecond), nc.loginTimeout, why)
}

func (n *node) statusQuick() (*ipnstate.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return n.lc.StatusWithoutPeers(ctx)
}

// waitHomeDERP waits, bounded, until the node has a home relay region and
// has heard from it, so that the first peer to dial it is not dropped by a
// relay that does not know it yet. It never fails: a node may work without.
func (n *node) waitHomeDERP(ctx context.Context, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, derpWait)
	defer cancel()
	sys := n.srv.Sys()
	h, ms := sys.HealthTracker.Get(), sys.MagicSock.Get()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if r := ms.GetLastNetcheckReport(ctx); r != nil && r.PreferredDERP != 0 &&
			!h.GetDERPRegionReceivedTime(r.PreferredDERP).IsZero() {
			return
		}
		select {
		case <-ctx.Done():
			log.Debug("tailscale: no home relay yet; going on", "err", ctx.Err())
			return
		case <-t.C:
		}
	}
}

// close shuts the node down and removes an ephemeral node's directory.
func (n *node) close() error {
	var err error
	n.closeOnce.Do(func() {
		if n.started {
			err = n.srv.Close()
		}
		if n.tmpDir != "" {
			if rerr := os.RemoveAll(n.tmpDir); rerr != nil && err == nil {
				err = rerr
			}
		}
	})
	return err
}

// ensureStateDir creates the state directory 0700, and narrows an existing
// one that is wider (it holds the node's private keys).
func ensureStateDir(dir string, log *slog.Logger) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%w: tailscale: the state directory: %v", transport.ErrUnavailable, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%w: tailscale: the state directory: %v", transport.ErrUnavailable, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: tailscale: the state directory %s is not a directory", transport.ErrUnavailable, dir)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("%w: tailscale: narrowing the state directory %s: %v", transport.ErrUnavailable, dir, err)
		}
		log.Warn("tailscale: the state directory was readable by others; narrowed to 0700", "dir", dir, "was", fs.FileMode(fi.Mode().Perm()).String())
	}
	return nil
}

func sortIPs(ips []netip.Addr) []netip.Addr {
	out := make([]netip.Addr, 0, len(ips))
	for _, ip := range ips {
		if ip.Is4() {
			out = append(out, ip)
		}
	}
	for _, ip := range ips {
		if !ip.Is4() {
			out = append(out, ip)
		}
	}
	return out
}

func (c config) logger() *slog.Logger {
	if c.opts.Logger != nil {
		return c.opts.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// controlName is the control server as messages name it.
func (c config) controlName() string {
	if c.controlURL != "" {
		return c.controlURL
	}
	if v := c.opts.Getenv("TS_CONTROL_URL"); v != "" {
		return v
	}
	return ipn.DefaultControlURL
}

// keyPattern matches Tailscale auth keys and OAuth secrets, whoever says
// them, so that no log line or error carries one.
var keyPattern = regexp.MustCompile(`tskey-[A-Za-z0-9_-]+`)

// redact removes the configured auth key and anything shaped like a key.
func (c config) redact(s string) string {
	if c.authKey != "" {
		s = strings.ReplaceAll(s, c.authKey, "[redacted]")
	}
	return keyPattern.ReplaceAllString(s, "tskey-[redacted]")
}

// tsLogf sends a tsnet log stream to the logger at debug level (it is
// chatty), redacted, and never to stdout.
func (c config) tsLogf(log *slog.Logger, source string) func(string, ...any) {
	return func(format string, args ...any) {
		if !log.Enabled(context.Background(), slog.LevelDebug) {
			return
		}
		log.Debug(c.redact(strings.TrimRight(fmt.Sprintf(format, args...), "\n")), "source", source)
	}
}
