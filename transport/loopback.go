package transport

import (
	"context"
	"flag"
	"fmt"
	"net"
	"strconv"
)

// LoopbackName is the built-in transport: this machine only, no encryption.
const LoopbackName = "loopback"

type loopbackProvider struct{}

func (loopbackProvider) Name() string           { return LoopbackName }
func (loopbackProvider) AddFlags(*flag.FlagSet) {}
func (loopbackProvider) Open(context.Context, Options) (Plugin, error) {
	return Loopback{}, nil
}

// Loopback exposes the ingress as it is (it already listens on loopback)
// and dials loopback addresses only: a loopback hint never leads off this
// machine, whatever address an invitation claims.
type Loopback struct{}

// Name is "loopback".
func (Loopback) Name() string { return LoopbackName }

// Expose returns the hint for the ingress address itself, which must be a
// loopback one.
func (Loopback) Expose(_ context.Context, ingressAddr string) (Hint, error) {
	host, port, err := net.SplitHostPort(ingressAddr)
	if err != nil {
		return Hint{}, fmt.Errorf("%w: bad ingress address %q: %v", ErrUnavailable, ingressAddr, err)
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return Hint{}, fmt.Errorf("%w: the ingress %q is not a loopback address", ErrUnavailable, ingressAddr)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= 0 {
		return Hint{}, fmt.Errorf("%w: bad ingress port %q", ErrUnavailable, port)
	}
	return Hint{Type: LoopbackName, Address: host, Port: p, Mode: "local"}, nil
}

// Dial connects to the hint's address if it is a loopback IP (an empty
// address means 127.0.0.1).
func (Loopback) Dial(ctx context.Context, h Hint) (net.Conn, error) {
	host := h.Address
	if host == "" {
		host = "127.0.0.1"
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("%w: a loopback hint names %q, which is not a loopback address", ErrUnavailable, host)
	}
	if h.Port <= 0 || h.Port > 65535 {
		return nil, fmt.Errorf("%w: a loopback hint without a port", ErrUnavailable)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(h.Port)))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return c, nil
}

// Close does nothing: loopback holds nothing.
func (Loopback) Close() error { return nil }
