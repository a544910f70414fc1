package cli

import (
	"fmt"
	"net"
	"net/netip"
)

// overlayPrefixes are the private overlay networks a transport puts a
// machine on (the shared address space of RFC 6598, and the IPv6 ULA block
// the mesh VPNs ce's transports use): a metrics listener there is reached
// only by the network's own members.
var overlayPrefixes = []netip.Prefix{
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("fd7a:115c:a1e0::/48"),
}

// checkMetricsAddr refuses a --metrics-addr anyone could reach: /metrics
// there needs no credential, so it must be loopback or a transport's
// private overlay address. The error names why the address is refused.
// "" (the default) turns the listener off.
func checkMetricsAddr(addr string) error {
	if addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--metrics-addr: bad address %q: %v", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	why := func(reason string) error {
		return fmt.Errorf("--metrics-addr %s refused: %s; the metrics listener needs no credential, so it must be loopback (127.0.0.1:9464) or a transport's private address (in 100.64.0.0/10 or fd7a:115c:a1e0::/48)", addr, reason)
	}
	if host == "" {
		return why("no host means every interface, public ones included")
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return why("a host name may resolve to any address; give an IP address")
	}
	ip = ip.Unmap()
	switch {
	case ip.IsUnspecified():
		return why(host + " means every interface, public ones included")
	case ip.IsLoopback():
		return nil
	}
	for _, p := range overlayPrefixes {
		if p.Contains(ip) {
			return nil
		}
	}
	if ip.IsLinkLocalUnicast() {
		return why(host + " is a link-local address every machine on the link could read")
	}
	if ip.IsPrivate() {
		return why(host + " is on a local network whose every machine could read it, not a transport's private network")
	}
	return why(host + " is a public address")
}
