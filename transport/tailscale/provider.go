// Package tailscale is the built-in Tailscale transport: it puts a room's
// session-only ingress on a tailnet through an embedded node
// (tailscale.com/tsnet), and dials the tailscale hints of invitations, from
// this machine's own tailnet connection when it has one, else through an
// embedded node of its own.
//
// This package is the only place in the repository that imports or names
// Tailscale; the program's main registers it:
//
//	reg.Register(tailscale.Name, func() transport.Provider { return tailscale.NewProvider() })
//
// Inside the tailnet the room speaks plain HTTP on port 80: WireGuard already
// encrypts it end to end, and admission stays the invitation's job.
package tailscale

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/commonroom/ce/transport"
)

// Name is what --transport selects, and the Type of the hints this plugin
// makes and dials.
const Name = "tailscale"

// TailnetPort is the port the room listens on inside the tailnet. It is
// fixed (not the ingress port, which changes with every start) so that a
// restarted room keeps the hints of the invitations it already gave out.
const TailnetPort = 80

// DefaultLoginTimeout bounds how long a node may take to come up, a person's
// interactive login included; --ts-login-timeout changes it.
const DefaultLoginTimeout = 5 * time.Minute

// Provider holds the --ts-* settings of one command and opens plugins with
// them. Make it with NewProvider.
type Provider struct {
	authKeyFile  string
	controlURL   string
	ephemeral    optBool
	loginTimeout time.Duration
	hostname     string
}

// NewProvider returns a provider with the default settings, ready for
// AddFlags; main registers it under Name.
func NewProvider() *Provider {
	return &Provider{loginTimeout: DefaultLoginTimeout}
}

// Name is "tailscale".
func (p *Provider) Name() string { return Name }

// AddFlags registers the --ts-* settings on the flag set of `ce serve` and
// `ce join`.
func (p *Provider) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&p.authKeyFile, "ts-authkey-file", p.authKeyFile,
		"tailscale: a file holding the auth key that lets the embedded node join the tailnet (default: $TS_AUTHKEY; none: log in through a URL)")
	fs.StringVar(&p.controlURL, "ts-control-url", p.controlURL,
		"tailscale: the control server, for a self-hosted one such as Headscale (default: Tailscale's)")
	fs.Var(&p.ephemeral, "ts-ephemeral",
		"tailscale: a throw-away node that keeps no state and that the control server drops once it is gone (default: false for serve, true for join)")
	fs.DurationVar(&p.loginTimeout, "ts-login-timeout", p.loginTimeout,
		"tailscale: how long to wait for the embedded node to come up, a login through its URL included")
	fs.StringVar(&p.hostname, "ts-hostname", p.hostname,
		"tailscale: the node's name on the tailnet (default: derived from the document's name)")
}

// Open checks the settings and returns a plugin that starts its node on
// the first Expose or Dial that needs one. A bad setting (a missing or
// empty key file, a control URL that is not http(s), a non-positive
// timeout, a hostname that is not a DNS label) is an error naming it.
func (p *Provider) Open(ctx context.Context, opts transport.Options) (transport.Plugin, error) {
	cfg, err := p.config(opts)
	if err != nil {
		return nil, err
	}
	return newPlugin(cfg), nil
}

// config is the checked form of the settings, what a plugin runs on.
type config struct {
	opts         transport.Options
	authKey      string // never logged; redacted from every line and error
	controlURL   string
	ephemeral    bool
	loginTimeout time.Duration
	hostname     string
}

func (p *Provider) config(opts transport.Options) (config, error) {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	cfg := config{opts: opts, controlURL: strings.TrimSpace(p.controlURL), loginTimeout: p.loginTimeout}

	if p.authKeyFile != "" {
		b, err := os.ReadFile(p.authKeyFile)
		if err != nil {
			return config{}, fmt.Errorf("--ts-authkey-file: %w", pathErr(err))
		}
		cfg.authKey = strings.TrimSpace(string(b))
		if cfg.authKey == "" {
			return config{}, fmt.Errorf("--ts-authkey-file: %s is empty", p.authKeyFile)
		}
		if strings.ContainsAny(cfg.authKey, " \t\r\n") {
			return config{}, fmt.Errorf("--ts-authkey-file: %s holds more than one line or word; it must hold the auth key alone", p.authKeyFile)
		}
	} else {
		cfg.authKey = strings.TrimSpace(opts.Getenv("TS_AUTHKEY"))
	}

	if cfg.controlURL != "" {
		u, err := url.Parse(cfg.controlURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return config{}, fmt.Errorf("--ts-control-url: %q is not an http:// or https:// URL of a control server", cfg.controlURL)
		}
		cfg.controlURL = strings.TrimRight(cfg.controlURL, "/")
	}

	if cfg.loginTimeout <= 0 {
		return config{}, fmt.Errorf("--ts-login-timeout: %s is not a positive duration", cfg.loginTimeout)
	}

	cfg.ephemeral = opts.Joining
	if p.ephemeral.set {
		cfg.ephemeral = p.ephemeral.v
	}
	if !cfg.ephemeral && opts.StateDir == "" {
		return config{}, errors.New("tailscale: a node that keeps its identity needs a state directory (or --ts-ephemeral)")
	}

	if p.hostname != "" {
		if !validLabel(p.hostname) {
			return config{}, fmt.Errorf("--ts-hostname: %q is not a DNS label (letters, digits and inner hyphens, at most 63)", p.hostname)
		}
		cfg.hostname = strings.ToLower(p.hostname)
	} else {
		cfg.hostname = defaultHostname(opts)
	}
	return cfg, nil
}

// pathErr drops the Op of a *PathError so a message reads
// "--ts-authkey-file: FILE: no such file or directory".
func pathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Path, pe.Err)
	}
	return err
}

// genericDirNames are state directory names that say nothing about the room;
// defaultHostname looks past them to the directory above.
var genericDirNames = map[string]bool{"tailscale": true, "transport": true, "transports": true, "state": true, "tsnet": true}

// strippedExts are the extensions defaultHostname drops from a state
// directory's name: a document's, and a state directory's own.
var strippedExts = map[string]bool{".md": true, ".markdown": true, ".mdown": true, ".txt": true,
	".tailscale": true, ".tsnet": true, ".state": true, ".d": true}

// defaultHostname is the node's name when --ts-hostname is not given: the
// room's name (Options.Room, the document's stem) for `ce serve`. Without
// one it is read from the state directory, which lives beside the document
// and is named after it: the first directory name (walking up past generic
// ones such as "tailscale") cut at ".commonroom" and stripped of the
// extensions above, so "/docs/notes.md.commonroom.tailscale" and
// "/docs/notes.md.tailscale" give "notes". A joiner is "ce-join-" and this
// machine's name.
func defaultHostname(opts transport.Options) string {
	if opts.Joining {
		h, _ := os.Hostname()
		if s := sanitizeLabel("ce-join-" + h); s != "" {
			return s
		}
		return "ce-join"
	}
	if s := sanitizeLabel(opts.Room); s != "" {
		return s
	}
	dir := filepath.Clean(opts.StateDir)
	for range 4 {
		base := filepath.Base(dir)
		if base == "." || base == string(filepath.Separator) || base == "" {
			break
		}
		if !genericDirNames[strings.ToLower(base)] {
			if i := strings.Index(base, ".commonroom"); i > 0 {
				base = base[:i]
			}
			for {
				ext := filepath.Ext(base)
				if ext == base || !strippedExts[strings.ToLower(ext)] {
					break
				}
				base = strings.TrimSuffix(base, ext)
			}
			if s := sanitizeLabel(base); s != "" {
				return s
			}
			break
		}
		dir = filepath.Dir(dir)
	}
	return "ce-room"
}

// sanitizeLabel turns a name into a DNS label: lower case, every run of
// other characters one hyphen, no hyphen at either end, at most 63 bytes.
func sanitizeLabel(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	out := strings.TrimRight(b.String(), "-")
	if len(out) > 63 {
		out = strings.TrimRight(out[:63], "-")
	}
	return out
}

func validLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// optBool is a boolean flag that remembers whether it was given, so that
// --ts-ephemeral can default differently for serve and for join.
type optBool struct{ v, set bool }

func (o *optBool) String() string {
	if o == nil || !o.set {
		return ""
	}
	return strconv.FormatBool(o.v)
}

func (o *optBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("not a boolean: %q", s)
	}
	o.v, o.set = v, true
	return nil
}

// IsBoolFlag lets "--ts-ephemeral" stand for "--ts-ephemeral=true".
func (o *optBool) IsBoolFlag() bool { return true }
