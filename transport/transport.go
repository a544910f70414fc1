// Package transport is how another machine reaches a room. A room listens
// on loopback only; a transport plugin makes its session-only ingress
// listener reachable somewhere else (a tailnet, an SSH tunnel, a relay) and
// describes the way in with a Hint that goes into every invitation. A
// joiner walks the invitation's hints in order and dials the first one it
// can use.
//
// A plugin never creates sessions or decides capabilities: admission is the
// invitation, checked by the room behind the ingress. A plugin never
// exposes the owner listener (the owner page and the operator routes stay
// on loopback).
//
// This package is vendor-neutral and imports only the standard library.
// Each plugin lives in its own sub-package (transport/<name>), the only
// place a vendor's name or library appears; the program's main registers
// the built-in ones.
package transport

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Hint says how a joiner may reach a room through one transport. It is
// carried in invitations, so it holds no secret: a hint is an address, the
// invitation's secret is the admission.
type Hint struct {
	// Type names the plugin that can dial it ("loopback", "tailscale",
	// "exec:NAME").
	Type string `json:"type"`
	// Address is a host name or IP literal the plugin dials.
	Address string `json:"address,omitempty"`
	// IPs are further addresses of the same endpoint, tried after Address.
	IPs []string `json:"ips,omitempty"`
	// Port is the TCP port at Address.
	Port int `json:"port,omitempty"`
	// Encrypted says the plugin encrypts the traffic itself; HTTP over it
	// is then not readable on the way.
	Encrypted bool `json:"encrypted"`
	// Mode says who can reach it: "local" (this machine), "private" (the
	// members of a private network), "public".
	Mode string `json:"mode"`
	// Params is what else the plugin needs to dial it (an exec plugin's
	// own fields). Never a secret.
	Params map[string]string `json:"params,omitempty"`
}

// HostPort is the hint's Address and Port joined, as a Host header names it.
func (h Hint) HostPort() string {
	return net.JoinHostPort(h.Address, strconv.Itoa(h.Port))
}

// Describe is the one line a person reads about a way in, as the banner,
// `ce status`, /workspace/diagnostics and the owner page show it:
// "tailscale (private, encrypted) room.tailnet.ts.net:443".
func (h Hint) Describe() string {
	enc := "not encrypted"
	if h.Encrypted {
		enc = "encrypted"
	}
	where := ""
	if h.Address != "" || h.Port != 0 {
		where = " " + h.HostPort()
	}
	return fmt.Sprintf("%s (%s, %s)%s", h.Type, h.Mode, enc, where)
}

// Plugin is one running transport.
type Plugin interface {
	// Name is the plugin's name, the Type of the hints it makes and dials.
	Name() string
	// Expose makes the ingress listener at ingressAddr (host:port on
	// loopback) reachable through the transport and returns the hint
	// joiners use. It returns once the way in works, or with an error
	// naming why it cannot (ctx bounds how long it may wait, e.g. for a
	// login).
	Expose(ctx context.Context, ingressAddr string) (Hint, error)
	// Dial opens a connection to the endpoint a hint of this plugin names.
	// An error says why this hint cannot be used from here; the joiner
	// then tries the next hint.
	Dial(ctx context.Context, h Hint) (net.Conn, error)
	// Close stops exposing and dialling and releases what the plugin holds
	// (child processes, network nodes). It is safe to call more than once.
	Close() error
}

// Options are what every plugin is given when it opens.
type Options struct {
	// StateDir is a directory the plugin may keep state in across restarts
	// (beside the room's sidecar for `ce serve`; under the user's config
	// directory for `ce join`). The plugin creates it, mode 0700.
	StateDir string
	// Logger receives the plugin's log lines. Secrets never go in them.
	Logger *slog.Logger
	// Getenv reads the environment (tests replace it).
	Getenv func(string) string
	// Notice tells the person at the terminal something they must act on
	// (a login URL to open); nil means only the log.
	Notice func(msg string)
	// Joining is set when the plugin opens to dial (`ce join`) rather than
	// to expose (`ce serve`); a plugin may then keep less state.
	Joining bool
	// Room is a short human name for the room being exposed (the
	// document's name without its extension), for a plugin that names
	// itself on its network; empty when joining.
	Room string
}

// Provider makes plugins of one kind. Each command that may use transports
// asks the registry for fresh providers, so a provider may keep its own
// flag values.
type Provider interface {
	// Name is what --transport selects.
	Name() string
	// AddFlags registers the provider's own settings (e.g. --ts-control-url)
	// on a command's flag set.
	AddFlags(fs *flag.FlagSet)
	// Open starts a plugin with the settings parsed from those flags.
	Open(ctx context.Context, opts Options) (Plugin, error)
}

// ErrUnavailable wraps every reason a transport cannot be used, so callers
// can answer transport_unavailable.
var ErrUnavailable = errors.New("transport unavailable")

// Registry holds the providers by name. Loopback is always there.
type Registry struct {
	mu        sync.Mutex
	factories map[string]func() Provider
	prefixes  map[string]func(name string) Provider // "exec:" and the like
}

// NewRegistry returns a registry holding loopback.
func NewRegistry() *Registry {
	r := &Registry{factories: map[string]func() Provider{}, prefixes: map[string]func(string) Provider{}}
	r.Register(LoopbackName, func() Provider { return loopbackProvider{} })
	return r
}

// Register adds a provider under its name; a later registration of the same
// name replaces the earlier one.
func (r *Registry) Register(name string, f func() Provider) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.factories[name] = f
}

// RegisterPrefix adds a family of providers whose names start with prefix
// (e.g. "exec:" for external programs): f gets the whole name.
func (r *Registry) RegisterPrefix(prefix string, f func(name string) Provider) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prefixes[prefix] = f
}

// Names lists what --transport accepts, sorted; a prefix family is shown as
// "exec:NAME".
func (r *Registry) Names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for n := range r.factories {
		out = append(out, n)
	}
	for p := range r.prefixes {
		out = append(out, p+"NAME")
	}
	sort.Strings(out)
	return out
}

// Providers returns a fresh provider of every registered name (prefix
// families excluded), sorted by name, so a command can add all their flags.
func (r *Registry) Providers() []Provider {
	r.mu.Lock()
	names := make([]string, 0, len(r.factories))
	for n := range r.factories {
		names = append(names, n)
	}
	r.mu.Unlock()
	slices.Sort(names)
	out := make([]Provider, 0, len(names))
	for _, n := range names {
		p, _ := r.Provider(n)
		out = append(out, p)
	}
	return out
}

// Provider returns a fresh provider for name; an unknown name is an error
// that lists the available ones.
func (r *Registry) Provider(name string) (Provider, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f, ok := r.factories[name]; ok {
		return f(), nil
	}
	for p, f := range r.prefixes {
		if rest, ok := strings.CutPrefix(name, p); ok && rest != "" {
			return f(name), nil
		}
	}
	var names []string
	for n := range r.factories {
		names = append(names, n)
	}
	for p := range r.prefixes {
		names = append(names, p+"NAME")
	}
	sort.Strings(names)
	return nil, fmt.Errorf("unknown transport %q (available: %s)", name, strings.Join(names, ", "))
}
