package tailscale

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"

	"github.com/commonroom/ce/transport"
)

// Plugin is a running Tailscale transport. It starts at most one embedded
// node: the room's, on the first Expose, which Dial then also uses; or, for
// a joiner that is not on the tailnet itself, one on the first Dial that
// needs it.
type Plugin struct {
	cfg config

	closeCtx context.Context // ends on Close: cuts short a node's start
	cancel   context.CancelFunc
	busy     sync.WaitGroup // Expose and node starts in progress

	mu       sync.Mutex
	closed   bool
	exposed  bool
	node     *node // the embedded node, once up
	startErr error // why the node could not start (a later Dial does not retry)
	fwd      *transport.Forwarder
	handed   net.Listener // the tailnet listener ExposeConns handed to the room

	startMu sync.Mutex // one node start at a time

	// Test hooks for the direct path (this machine's own tailnet
	// connection): the tailnet addresses of this machine's interfaces, and
	// how to dial. Nil means the real ones.
	localTailnetAddrs func() []netip.Addr
	directDial        func(ctx context.Context, network, addr string) (net.Conn, error)
}

func newPlugin(cfg config) *Plugin {
	ctx, cancel := context.WithCancel(context.Background())
	return &Plugin{cfg: cfg, closeCtx: ctx, cancel: cancel}
}

// Name is "tailscale".
func (p *Plugin) Name() string { return Name }

// Expose starts the room's node, waits until it is on the tailnet (a login
// URL goes to Options.Notice), listens on TailnetPort there and forwards
// every connection to the ingress at ingressAddr, at most
// MaxForwardsPerNode of MaxForwards for one node. The hint names the node
// by its MagicDNS name and its tailnet IPs. A plugin exposes one ingress.
func (p *Plugin) Expose(ctx context.Context, ingressAddr string) (transport.Hint, error) {
	return p.expose(ctx, ingressAddr, false)
}

var _ transport.ConnExposer = (*Plugin)(nil)

// ExposeConns is Expose without the forward (transport.ConnExposer): the
// room serves its ingress on the returned tailnet listener itself, each of
// whose connections names its tailnet node (transport.PeerConn), so the
// room's connection policy shares its connections among the nodes and a
// connection it reclaims ends on the tailnet at once.
func (p *Plugin) ExposeConns(ctx context.Context, ingressAddr string) (transport.Hint, net.Listener, error) {
	h, err := p.expose(ctx, ingressAddr, true)
	if err != nil {
		return h, nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return h, p.handed, nil
}

// expose is Expose, or ExposeConns when handOver: the tailnet listener is
// then kept in p.handed rather than forwarded.
func (p *Plugin) expose(ctx context.Context, ingressAddr string, handOver bool) (transport.Hint, error) {
	host, _, err := net.SplitHostPort(ingressAddr)
	if ip, perr := netip.ParseAddr(host); err != nil || perr != nil || !ip.IsLoopback() {
		return transport.Hint{}, fmt.Errorf("%w: tailscale: the ingress %q is not a loopback host:port", transport.ErrUnavailable, ingressAddr)
	}
	if err := p.enter(); err != nil {
		return transport.Hint{}, err
	}
	defer p.busy.Done()
	p.mu.Lock()
	if p.exposed {
		p.mu.Unlock()
		return transport.Hint{}, errors.New("tailscale: this plugin already exposes an ingress")
	}
	p.exposed = true
	p.mu.Unlock()

	n, err := p.ensureNode(ctx, "room")
	if err != nil {
		p.mu.Lock()
		p.exposed = false
		p.mu.Unlock()
		return transport.Hint{}, err
	}
	ln, err := n.srv.Listen("tcp", ":"+strconv.Itoa(TailnetPort))
	if err != nil {
		return transport.Hint{}, fmt.Errorf("%w: tailscale: listening on the tailnet: %v", transport.ErrUnavailable, err)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		ln.Close()
		return transport.Hint{}, fmt.Errorf("%w: tailscale: closed", transport.ErrUnavailable)
	}
	if named := newPeerListener(ln, n.lc); handOver {
		p.handed = named
	} else {
		p.fwd = forwardIngress(named, ingressAddr, MaxForwards, transport.DefaultHalfCloseGrace, p.cfg.logger())
	}
	p.mu.Unlock()

	h := transport.Hint{
		Type:      Name,
		Address:   n.dnsName,
		Port:      TailnetPort,
		Encrypted: true,
		Mode:      "private",
	}
	for _, ip := range n.ips {
		h.IPs = append(h.IPs, ip.String())
	}
	if h.Address == "" && len(h.IPs) > 0 { // a control server without MagicDNS names
		h.Address, h.IPs = h.IPs[0], h.IPs[1:]
	}
	// The endpoint (name and tailnet IPs) only at debug: at info and above
	// ce's logs name the transport, never where it is (SECURITY.md); the
	// banner and ce status show it to the host.
	log := p.cfg.logger()
	log.Info("tailscale: exposing the ingress on the tailnet")
	log.Debug("tailscale: the ingress's address on the tailnet", "hint", h.Describe(), "ips", h.IPs, "ingress", ingressAddr)
	return h, nil
}

// enter registers an operation Close must wait for; it fails once closed.
func (p *Plugin) enter() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("%w: tailscale: closed", transport.ErrUnavailable)
	}
	p.busy.Add(1)
	return nil
}

// ensureNode returns the plugin's node, starting it once; a start that
// failed is not retried (each would wait the whole login timeout again).
func (p *Plugin) ensureNode(ctx context.Context, role string) (*node, error) {
	p.startMu.Lock()
	defer p.startMu.Unlock()
	p.mu.Lock()
	n, serr := p.node, p.startErr
	p.mu.Unlock()
	if n != nil || serr != nil {
		return n, serr
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(p.closeCtx, cancel)
	defer stop()

	n, err := startNode(ctx, nodeConfig{config: p.cfg, role: role})
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case err != nil:
		if ctx.Err() == nil || p.closeCtx.Err() != nil {
			p.startErr = err // the caller's own cancellation is not the node's fault
		}
		return nil, err
	case p.closed:
		n.close()
		return nil, fmt.Errorf("%w: tailscale: closed", transport.ErrUnavailable)
	}
	p.node = n
	return n, nil
}

// Close stops the forwards and the listener and shuts the node down, cutting
// short a node that is still starting. Later calls do nothing.
func (p *Plugin) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.busy.Wait()

	p.mu.Lock()
	fwd, n, handed := p.fwd, p.node, p.handed
	p.fwd, p.node, p.handed = nil, nil, nil
	p.mu.Unlock()
	var errs []error
	if fwd != nil {
		errs = append(errs, fwd.Close())
	}
	if handed != nil {
		if err := handed.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	if n != nil {
		errs = append(errs, n.close())
	}
	return errors.Join(errs...)
}
