package tailscale

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/commonroom/ce/transport"
)

const (
	// directBudget bounds trying this machine's own tailnet connection
	// before starting an embedded node: on the tailnet it answers at once.
	directBudget = 2 * time.Second
	// dialTimeout bounds one dial through the embedded node when ctx has
	// no earlier deadline: a peer that is gone never answers.
	dialTimeout = 15 * time.Second
)

// Tailnet address ranges (Tailscale's and Headscale's): a tailscale hint
// never leads anywhere else.
var (
	tailnetV4 = netip.MustParsePrefix("100.64.0.0/10")
	tailnetV6 = netip.MustParsePrefix("fd7a:115c:a1e0::/48")
)

func inTailnet(ip netip.Addr) bool {
	ip = ip.Unmap()
	return tailnetV4.Contains(ip) || tailnetV6.Contains(ip)
}

// Dial connects to the room a tailscale hint names. When this machine is on
// a tailnet itself (one of its interfaces has a tailnet address) it first
// dials directly, briefly; otherwise, or when that fails, it dials through
// the plugin's embedded node, starting it once (an ephemeral node for a
// joiner unless --ts-ephemeral=false). Only tailnet addresses are dialled.
// Every failure wraps transport.ErrUnavailable and says why.
func (p *Plugin) Dial(ctx context.Context, h transport.Hint) (net.Conn, error) {
	if h.Type != Name {
		return nil, fmt.Errorf("%w: tailscale: a %q hint is not a tailscale one", transport.ErrUnavailable, h.Type)
	}
	if h.Port <= 0 || h.Port > 65535 {
		return nil, fmt.Errorf("%w: tailscale: the hint has no port", transport.ErrUnavailable)
	}
	if h.Address == "" && len(h.IPs) == 0 {
		return nil, fmt.Errorf("%w: tailscale: the hint names no address", transport.ErrUnavailable)
	}
	for _, s := range append([]string{h.Address}, h.IPs...) {
		if ip, err := netip.ParseAddr(s); err == nil && !inTailnet(ip) {
			return nil, fmt.Errorf("%w: tailscale: the hint names %s, which is not a tailnet address", transport.ErrUnavailable, s)
		}
	}
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.busy.Done()

	var why []string
	if local := p.tailnetAddrs(); len(local) > 0 {
		c, err := p.dialDirect(ctx, h)
		if err == nil {
			p.cfg.logger().Debug("tailscale: dialled through this machine's tailnet connection", "remote", c.RemoteAddr().String())
			return c, nil
		}
		why = append(why, "directly: "+err.Error())
	} else {
		why = append(why, "directly: this machine is not on a tailnet")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: tailscale: %s; %v", transport.ErrUnavailable, strings.Join(why, "; "), err)
	}

	role := "joiner"
	if !p.cfg.opts.Joining {
		role = "room"
	}
	n, err := p.ensureNode(ctx, role)
	if err != nil {
		return nil, err
	}
	c, err := p.dialThrough(ctx, n, h)
	if err != nil {
		why = append(why, "through the embedded node: "+err.Error())
		return nil, fmt.Errorf("%w: tailscale: cannot reach %s (%s)", transport.ErrUnavailable, hintName(h), strings.Join(why, "; "))
	}
	return c, nil
}

func hintName(h transport.Hint) string {
	if h.Address != "" {
		return h.HostPort()
	}
	return net.JoinHostPort(h.IPs[0], strconv.Itoa(h.Port))
}

// tailnetAddrs lists this machine's own tailnet addresses (none when it is
// not on a tailnet).
func (p *Plugin) tailnetAddrs() []netip.Addr {
	if p.localTailnetAddrs != nil {
		return p.localTailnetAddrs()
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range addrs {
		if pfx, err := netip.ParsePrefix(a.String()); err == nil && inTailnet(pfx.Addr()) {
			out = append(out, pfx.Addr())
		}
	}
	return out
}

// dialDirect races dials to the hint's addresses over this machine's own
// network, within directBudget. A connection counts only if both its ends
// are tailnet addresses, so a name that resolves elsewhere, or a 100.64/10
// network that is not a tailnet, is refused.
func (p *Plugin) dialDirect(ctx context.Context, h transport.Hint) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, directBudget)
	defer cancel()
	dial := p.directDial
	if dial == nil {
		d := net.Dialer{ControlContext: func(_ context.Context, _, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil || !inTailnet(ap.Addr()) {
				return fmt.Errorf("%s is not a tailnet address", address)
			}
			return nil
		}}
		dial = d.DialContext
	}
	targets := dedupe(append([]string{h.Address}, h.IPs...))
	type result struct {
		c   net.Conn
		err error
	}
	results := make(chan result, len(targets))
	for _, t := range targets {
		go func() {
			c, err := dial(ctx, "tcp", net.JoinHostPort(t, strconv.Itoa(h.Port)))
			if err == nil && !(tailnetEnd(c.LocalAddr()) && tailnetEnd(c.RemoteAddr())) {
				err = fmt.Errorf("%s led off the tailnet (%s → %s)", t, c.LocalAddr(), c.RemoteAddr())
				c.Close()
				c = nil
			}
			results <- result{c, err}
		}()
	}
	var errs []error
	var won net.Conn
	for range targets {
		r := <-results
		switch {
		case r.err != nil:
			errs = append(errs, r.err)
		case won == nil:
			won = r.c
			cancel() // the others stop trying
		default:
			r.c.Close()
		}
	}
	if won != nil {
		return won, nil
	}
	return nil, errors.Join(errs...)
}

func tailnetEnd(a net.Addr) bool {
	if a == nil {
		return false
	}
	ap, err := netip.ParseAddrPort(a.String())
	return err == nil && inTailnet(ap.Addr())
}

// dialThrough dials the hint through an embedded node: only the tailnet
// addresses of peers the node knows (by the hint's IPs, or by its name),
// so nothing leaves through the node's fallback to the system network.
func (p *Plugin) dialThrough(ctx context.Context, n *node, h transport.Hint) (net.Conn, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, dialTimeout)
		defer cancel()
	}
	st, err := n.lc.Status(ctx)
	if err != nil {
		return nil, err
	}
	known := map[netip.Addr]bool{}
	var byName []netip.Addr
	name := strings.TrimSuffix(strings.ToLower(h.Address), ".")
	for _, peer := range st.Peer {
		for _, ip := range peer.TailscaleIPs {
			known[ip] = true
		}
		if name != "" && strings.TrimSuffix(strings.ToLower(peer.DNSName), ".") == name {
			byName = append(byName, sortIPs(peer.TailscaleIPs)...)
		}
	}
	var targets []netip.Addr
	for _, s := range append([]string{h.Address}, h.IPs...) {
		if ip, err := netip.ParseAddr(s); err == nil && known[ip] {
			targets = append(targets, ip)
		}
	}
	targets = dedupeIPs(append(targets, byName...))
	if len(targets) == 0 {
		return nil, fmt.Errorf("no node on the tailnet of %s is named %q or has the addresses %v (another tailnet? or the room's node is gone)",
			n.dnsName, h.Address, h.IPs)
	}
	var errs []error
	for _, ip := range targets {
		c, err := n.srv.Dial(ctx, "tcp", netip.AddrPortFrom(ip, uint16(h.Port)).String())
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

func dedupe(ss []string) []string {
	var out []string
	for _, s := range ss {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func dedupeIPs(ips []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, ip := range ips {
		if !slices.Contains(out, ip) {
			out = append(out, ip)
		}
	}
	return out
}
