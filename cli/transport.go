package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/commonroom/ce/room"
	"github.com/commonroom/ce/transport"
)

// DefaultTransportTimeout bounds how long `ce serve` waits for its
// transport to be up: long enough for a person to open a login URL.
const DefaultTransportTimeout = 5 * time.Minute

// DefaultJoinTimeout bounds how long `ce join` gives each hint (opening its
// plugin, then the join over it) before it tries the next one.
const DefaultJoinTimeout = 2 * time.Minute

// transports is what a command that uses transports holds: the registry,
// and a fresh provider of every registered name with its flags on the
// command's flag set (so `--transport NAME` gets the provider whose flags
// were parsed).
type transports struct {
	reg   *transport.Registry
	provs []transport.Provider
}

// addTransportFlags gives fs every provider's own flags.
func addTransportFlags(env Env, fs *flag.FlagSet) *transports {
	reg := env.Transports
	if reg == nil {
		reg = transport.NewRegistry()
	}
	ts := &transports{reg: reg, provs: reg.Providers()}
	for _, p := range ts.provs {
		p.AddFlags(fs)
	}
	return ts
}

// provider returns the provider of name: the one holding the parsed flags
// when there is one, else a fresh one of a prefix family (exec:NAME). An
// unknown name is an error listing the available ones.
func (ts *transports) provider(name string) (transport.Provider, error) {
	for _, p := range ts.provs {
		if p.Name() == name {
			return p, nil
		}
	}
	return ts.reg.Provider(name)
}

// toRoomHint and fromRoomHint convert between the transport layer's hint
// and the room's copy of it (the room does not import the transports).
func toRoomHint(h transport.Hint) room.Hint {
	return room.Hint{Type: h.Type, Address: h.Address, IPs: h.IPs, Port: h.Port, Encrypted: h.Encrypted, Mode: h.Mode, Params: h.Params}
}

func fromRoomHint(h room.Hint) transport.Hint {
	return transport.Hint{Type: h.Type, Address: h.Address, IPs: h.IPs, Port: h.Port, Encrypted: h.Encrypted, Mode: h.Mode, Params: h.Params}
}

// showHint is the line a person reads about a way in: loopback as it
// always read ("loopback (local, not encrypted)"), any other transport
// with its endpoint.
func showHint(h room.Hint) string {
	if h.Type == transport.LoopbackName {
		return room.Hint{Type: h.Type, Mode: h.Mode, Encrypted: h.Encrypted}.Describe()
	}
	return h.Describe()
}

// stateDirName is a transport's name as a directory name ("exec:relay" →
// "exec-relay"): letters, digits, '.', '_' and '-' only.
func stateDirName(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '-'
	}, name)
}

// makeStateDir creates dir and its parent with mode 0700 (narrowing them
// if they exist): a transport's state may hold its node's keys. Neither
// may be a symlink or a directory another user owns (root's is trusted, as
// for the sidecar): beside the document (FILE.commonroom.transport/NAME)
// both sit in a directory others may be able to write, and a planted link
// would have ce chmod and fill the link's target, a planted directory
// would hand the node's keys to its owner. Each is opened without
// following a link and narrowed through that descriptor, so what was
// checked is what is changed. The grandparent is created if missing and
// not judged: it is the document's directory or the user's configuration.
func makeStateDir(dir string) error {
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(filepath.Dir(parent), 0o700); err != nil {
		return err
	}
	for _, d := range []string{parent, dir} {
		if err := ownStateDir(d); err != nil {
			return err
		}
	}
	return nil
}

// ownStateDir makes d a directory of this user's with mode 0700, creating
// it if missing, and refuses a symlink, anything that is not a directory,
// and another user's directory, saying what to do.
func ownStateDir(d string) error {
	if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	f, err := os.OpenFile(d, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		// A link answers ENOTDIR or ELOOP, whatever it points to: say which.
		switch st, lerr := os.Lstat(d); {
		case lerr == nil && st.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("%s is a symbolic link; ce keeps a transport's state (its keys) only in a directory of its own, "+
				"never through a link: remove the link (or put the directory it points to in its place) and start again", d)
		case lerr == nil && !st.IsDir():
			return fmt.Errorf("%s is not a directory; move it away and start again", d)
		}
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() && st.Uid != 0 {
		return fmt.Errorf("%s is owned by uid %d, and ce runs as uid %d; ce keeps a transport's state (its keys) only in a directory of its own: "+
			"if it is yours, take it over (chown -R %d %s), otherwise move it away and start again", d, st.Uid, os.Geteuid(), os.Geteuid(), d)
	}
	if fi.Mode().Perm() != 0o700 {
		return f.Chmod(0o700)
	}
	return nil
}

// serveStateDir is where `ce serve` keeps a transport's state: beside the
// sidecar (FILE.commonroom.transport/NAME), so a restarted room keeps its
// name on the network; under the temporary directory with --ephemeral.
func serveStateDir(docPath, tmpDir, name string) string {
	if tmpDir != "" {
		return filepath.Join(tmpDir, "transport", stateDirName(name))
	}
	return filepath.Join(docPath+".commonroom.transport", stateDirName(name))
}

// joinStateDir is where `ce join` keeps a transport's state: under the
// user's configuration directory ($XDG_CONFIG_HOME or ~/.config on Linux).
func joinStateDir(env Env, name string) string {
	base := env.Getenv("XDG_CONFIG_HOME")
	if base == "" || !filepath.IsAbs(base) {
		if home := env.Getenv("HOME"); home != "" {
			base = filepath.Join(home, ".config")
		} else if d, err := os.UserConfigDir(); err == nil {
			base = d
		} else {
			base = filepath.Join(os.TempDir(), fmt.Sprintf("commonroom-%d", os.Getuid()))
		}
	}
	return filepath.Join(base, "commonroom", "transport", stateDirName(name))
}

// transportOptions are what a plugin opens with: its state directory, a
// logger naming it, the environment, the room's name (serve), and a notice that reaches the person
// at the terminal (stderr) and the log.
func transportOptions(env Env, log *slog.Logger, name, stateDir, roomName string, joining bool) transport.Options {
	tlog := log.With("transport", name)
	return transport.Options{StateDir: stateDir, Logger: tlog, Getenv: env.Getenv, Joining: joining, Room: roomName,
		Notice: func(msg string) {
			fmt.Fprintf(env.Stderr, "Transport %s: %s\n", name, msg)
			tlog.Info("transport notice", "msg", msg)
		}}
}

// openPlugin opens a plugin of prov, bounded by ctx even if the provider
// ignores it; a plugin that opens after the bound is closed at once.
func openPlugin(ctx context.Context, prov transport.Provider, opts transport.Options) (transport.Plugin, error) {
	type res struct {
		p   transport.Plugin
		err error
	}
	ch := make(chan res, 1)
	go func() {
		p, err := prov.Open(ctx, opts)
		ch <- res{p, err}
	}()
	select {
	case r := <-ch:
		if r.err == nil && r.p == nil {
			r.err = errors.New("the provider opened nothing")
		}
		return r.p, r.err
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.p != nil {
				r.p.Close()
			}
		}()
		return nil, context.Cause(ctx)
	}
}

// exposeWhyGrace is how long exposeBounded waits, once its bound has passed,
// for the plugin to say what it was still waiting for.
const exposeWhyGrace = 3 * time.Second

// exposeBounded runs plugin.Expose bounded by ctx even if the plugin
// ignores it (the caller then closes the plugin, which must end Expose).
// A plugin that can hand over its connections (transport.ConnExposer) is
// asked to: ln is then its listener, for the room to serve its ingress on;
// nil when the plugin forwards to ingressAddr itself.
// When the bound passes, the error is ctx's cause followed by the plugin's
// own reason if it gives one within exposeWhyGrace (a login nobody
// completed, a control server that never answered): the timeout alone does
// not tell the person what to fix.
func exposeBounded(ctx context.Context, p transport.Plugin, ingressAddr string) (h transport.Hint, ln net.Listener, err error) {
	type res struct {
		h   transport.Hint
		ln  net.Listener
		err error
	}
	ch := make(chan res, 1)
	go func() {
		if cx, ok := p.(transport.ConnExposer); ok {
			h, ln, err := cx.ExposeConns(ctx, ingressAddr)
			ch <- res{h, ln, err}
			return
		}
		h, err := p.Expose(ctx, ingressAddr)
		ch <- res{h, nil, err}
	}()
	select {
	case r := <-ch:
		return r.h, r.ln, r.err
	case <-ctx.Done():
	}
	cause := context.Cause(ctx)
	grace := time.NewTimer(exposeWhyGrace)
	defer grace.Stop()
	select {
	case r := <-ch:
		if r.err != nil && !errors.Is(r.err, context.Canceled) && !errors.Is(r.err, context.DeadlineExceeded) {
			return transport.Hint{}, nil, fmt.Errorf("%v: %s", cause, strings.TrimPrefix(r.err.Error(), transport.ErrUnavailable.Error()+": "))
		}
	case <-grace.C:
	}
	return transport.Hint{}, nil, cause
}

// checkExposed refuses a hint the invitations could not carry: it must name
// the plugin's type and a port a Host header can name.
func checkExposed(name string, h transport.Hint) (transport.Hint, error) {
	if h.Type == "" {
		h.Type = name
	}
	if h.Type != name {
		return h, fmt.Errorf("it exposed a hint of type %q, not %q", h.Type, name)
	}
	if h.Address == "" || h.Port < 1 || h.Port > 65535 {
		return h, fmt.Errorf("it exposed a hint without an address and port (%q, %d)", h.Address, h.Port)
	}
	return h, nil
}

// roomName is the document's name without its extension ("notes" for
// notes.md), as a plugin may name itself on its network.
func roomName(docPath string) string {
	base := filepath.Base(docPath)
	return strings.TrimSuffix(base, filepath.Ext(base))
}
