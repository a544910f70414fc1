package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/commonroom/ce/room"
	"github.com/commonroom/ce/transport"
)

type joinFlags struct {
	name, kind       string
	json             bool
	hold, noHold     bool
	transportTimeout time.Duration
	log              logFlags // --log-level, --log-format
}

func joinCommand(env Env) *ffcli.Command {
	var f joinFlags
	fs := flag.NewFlagSet("ce join", flag.ContinueOnError)
	fs.StringVar(&f.name, "name", "participant", "your display name in the room")
	fs.StringVar(&f.kind, "kind", "agent", "agent or human")
	fs.BoolVar(&f.json, "json", false, "print JSON")
	fs.BoolVar(&f.hold, "hold", false, "keep a local forward to the room open until interrupted (the default when the hint used is not loopback)")
	fs.BoolVar(&f.noHold, "no-hold", false, "join and exit, whatever the transport")
	fs.DurationVar(&f.transportTimeout, "transport-timeout", DefaultJoinTimeout, "how long each of the invitation's hints may take to answer")
	f.log.add(fs, "warn")
	ts := addTransportFlags(env, fs)
	return &ffcli.Command{
		Name:       "join",
		ShortUsage: "ce join URI --name NAME [--kind agent|human] [--hold|--no-hold] [--json]",
		ShortHelp:  "redeem an invitation for a session (over the invitation's transport hints)",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) != 1 {
				return &exitError{code: exitUsage, err: errors.New("join takes exactly one invitation URI")}
			}
			if f.hold && f.noHold {
				return &exitError{code: exitUsage, err: errors.New("--hold and --no-hold contradict each other")}
			}
			if f.transportTimeout <= 0 {
				return &exitError{code: exitUsage, err: fmt.Errorf("--transport-timeout must be positive (got %s)", f.transportTimeout)}
			}
			log, err := f.log.logger(env.Stderr)
			if err != nil {
				return err
			}
			return runJoin(ctx, env, log, f, ts, args[0])
		},
	}
}

func runJoin(ctx context.Context, env Env, log *slog.Logger, f joinFlags, ts *transports, uri string) error {
	g, err := joinRemote(ctx, env, log, ts, uri, f.name, f.kind, f.transportTimeout, true)
	if err != nil {
		return err
	}
	defer g.plugin.Close()
	hold := f.hold || (!f.noHold && g.hint.Type != transport.LoopbackName)
	var fwd *forward
	if hold {
		if fwd, err = startForward(g.plugin, fromRoomHint(g.hint), f.transportTimeout, log); err != nil {
			return err
		}
		defer fwd.Close()
		g.url = fwd.url
	}
	// The person who joined gets a page for this session (issue 28): the
	// key came sealed in the join's answer, so nothing more was sent. A
	// room older than the page gives none.
	var pageURL string
	if g.pageKey != "" {
		pageURL = g.url + "/?key=" + url.QueryEscape(g.pageKey)
	}
	if f.json {
		out := map[string]any{"session_token": g.SessionToken, "session_ref": g.SessionRef,
			"participant_id": g.ParticipantID, "workspace_id": g.WorkspaceID, "capabilities": g.Capabilities,
			"expires_at": g.ExpiresAt, "url": g.url, "transport": g.hint.Type}
		if fwd != nil {
			out["local_url"] = fwd.url
		}
		if pageURL != "" {
			out["page_url"] = pageURL
		}
		if err := printJSON(env.Stdout, out); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(env.Stdout, "Joined %s as %s (%s).\n", g.WorkspaceID, g.ParticipantID, f.name)
		fmt.Fprintf(env.Stdout, "Transport: %s\n", showHint(g.hint))
		if fwd != nil {
			fmt.Fprintf(env.Stdout, "Local:   %s\n", fwd.url)
		} else {
			fmt.Fprintf(env.Stdout, "Room:    %s\n", g.url)
		}
		fmt.Fprintf(env.Stdout, "Session: %s   (a bearer secret: keep it private; expires %s)\n", g.SessionToken, g.ExpiresAt)
		fmt.Fprintf(env.Stdout, "Try:     curl -H 'Authorization: Bearer %s' %s/workspace/status\n", g.SessionToken, g.url)
		fmt.Fprintf(env.Stdout, "MCP:     %s/mcp\n", g.url)
		if pageURL != "" {
			fmt.Fprintf(env.Stdout, "Page:    %s   (your page in a browser; the link works once)\n", pageURL)
		}
		if fwd != nil {
			fmt.Fprintf(env.Stdout, "Holding the forward open; press Ctrl-C to stop.\n")
		}
	}
	if fwd == nil {
		return nil
	}
	select {
	case <-ctx.Done():
	case <-env.Signals:
	case err := <-fwd.Failed():
		return room.Errorf(room.KindTransportUnavailable, "the local forward stopped: %v", err)
	}
	return nil
}

// joined is a session and the way in it came through.
type joined struct {
	room.SessionGrant
	url     string
	hint    room.Hint
	plugin  transport.Plugin // open until the caller closes it
	pageKey string           // the one-time key to the joiner's page, when asked for and given
}

// joinRemote walks the invitation's hints in order and joins over the first
// one that works: the provider its type names opens a plugin, which dials;
// the join goes over that connection with the hint's address as Host. A
// hint that cannot be used is skipped with its reason; when none can,
// the answer is transport_unavailable naming each, and the invitation is
// not spent. The join is the proven one (provenJoin): nothing that redeems
// the invitation is sent to what a hint leads to before it has proved it
// is the invited room, and the secret itself is never sent at all.
// With page, the room is asked for a one-time key to the joiner's page,
// sealed in its answer (provenJoin).
func joinRemote(ctx context.Context, env Env, log *slog.Logger, ts *transports, uri, name, kind string, timeout time.Duration, page bool) (joined, error) {
	inv, err := room.DecodeInvitation(uri, room.Defaults().MaxInvitePayload)
	if err != nil {
		return joined{}, err
	}
	key, err := keyOf(inv)
	if err != nil {
		return joined{}, err
	}
	var g room.SessionGrant
	var pageKey string
	w, tried, err := walkHints(ctx, env, log, ts, inv.WorkspaceID, inv.Transports, timeout, func(w wayIn) error {
		var err error
		if g, pageKey, err = joinOver(ctx, w.plug, w.th, key, name, kind, timeout, page); err != nil {
			return err
		}
		if g.WorkspaceID != inv.WorkspaceID {
			hc := pluginClient(w.plug, w.th, timeout)
			callRoom(ctx, hc, "POST", w.url()+"/workspace/leave", g.SessionToken, nil, nil)
			return room.Errorf(room.KindInvalidRequest, "the room at that address is %s, not the invited %s", g.WorkspaceID, inv.WorkspaceID)
		}
		return nil
	})
	if err != nil {
		return joined{}, err
	}
	if w.plug != nil {
		return joined{SessionGrant: g, url: w.url(), hint: w.hint, plugin: w.plug, pageKey: pageKey}, nil
	}
	return joined{}, room.Errorf(room.KindTransportUnavailable,
		"no transport in the invitation could be used, and the invitation was not spent; tried: %s", strings.Join(tried, "; ")).
		With("tried", tried)
}

// hintLabel names a hint in an error: its type and endpoint.
func hintLabel(h room.Hint) string {
	if h.Address == "" && h.Port == 0 {
		return h.Type
	}
	return h.Type + " " + net.JoinHostPort(h.Address, fmt.Sprint(h.Port))
}

// pluginClient is an HTTP client whose every connection is plug.Dial(h):
// the URL's host only names the room in the Host header.
func pluginClient(plug transport.Plugin, h transport.Hint, timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return plug.Dial(ctx, h) },
		DisableKeepAlives: true,
	}}
}

// joinOver runs the proven join through plug with the room the hint names.
// A dial that fails is reported as the plugin's own reason.
func joinOver(ctx context.Context, plug transport.Plugin, h transport.Hint, key joinKey, name, kind string, timeout time.Duration, page bool) (room.SessionGrant, string, error) {
	hc, dialFailure := dialClient(func(ctx context.Context, _, _ string) (net.Conn, error) { return plug.Dial(ctx, h) }, timeout)
	g, pageKey, err := provenJoin(ctx, hc, "http://"+h.HostPort(), key, name, kind, h.Type, page)
	if de := dialFailure(); de != nil && room.ErrorKind(err) == room.KindTransportUnavailable {
		return g, "", room.Errorf(room.KindTransportUnavailable, "%s", strings.TrimPrefix(de.Error(), transport.ErrUnavailable.Error()+": "))
	}
	return g, pageKey, err
}
