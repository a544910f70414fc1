package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/commonroom/ce/room"
	"github.com/commonroom/ce/transport"
)

// DefaultMCPRequestTimeout bounds one request through `ce mcp` (a listen:
// until its stream starts), so a room that is gone answers the host with
// an error instead of leaving it waiting.
const DefaultMCPRequestTimeout = 30 * time.Second

type mcpFlags struct {
	name, kind       string
	state            string
	transportTimeout time.Duration
	requestTimeout   time.Duration
	log              logFlags // --log-level, --log-format
}

// mcpCommand is `ce mcp`: the room as a stdio MCP server, so a host that
// launches its servers as processes (most desktop and coding hosts) can
// join a room with one line of configuration.
func mcpCommand(env Env) *ffcli.Command {
	var f mcpFlags
	fs := flag.NewFlagSet("ce mcp", flag.ContinueOnError)
	fs.StringVar(&f.name, "name", "agent", "your display name in the room (on the first start, when it joins)")
	fs.StringVar(&f.kind, "kind", "agent", "agent or human (on the first start)")
	fs.StringVar(&f.state, "state", "", "the session file (default $XDG_CONFIG_HOME/commonroom/sessions/WORKSPACE.json)")
	fs.DurationVar(&f.transportTimeout, "transport-timeout", DefaultJoinTimeout, "how long each of the invitation's hints may take to answer")
	fs.DurationVar(&f.requestTimeout, "request-timeout", DefaultMCPRequestTimeout, "how long one request may wait for the room before the host gets an unavailable error")
	f.log.add(fs, "warn")
	ts := addTransportFlags(env, fs)
	return &ffcli.Command{
		Name:       "mcp",
		ShortUsage: "ce mcp URI [--name NAME] [--state FILE]",
		ShortHelp:  "be the room as a stdio MCP server (newline-delimited JSON-RPC on stdin/stdout)",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) != 1 {
				return &exitError{code: exitUsage, err: errors.New("mcp takes exactly one invitation URI")}
			}
			if f.transportTimeout <= 0 || f.requestTimeout <= 0 {
				return &exitError{code: exitUsage, err: errors.New("--transport-timeout and --request-timeout must be positive")}
			}
			log, err := f.log.logger(env.Stderr)
			if err != nil {
				return err
			}
			return runMCP(ctx, env, log, f, ts, args[0])
		},
	}
}

func runMCP(ctx context.Context, env Env, log *slog.Logger, f mcpFlags, ts *transports, uri string) error {
	inv, err := room.DecodeInvitation(uri, room.Defaults().MaxInvitePayload)
	if err != nil {
		return err
	}
	path := f.state
	if path == "" {
		path = defaultMCPStatePath(env, inv.WorkspaceID)
	}
	// One ce mcp at a time reads, joins and saves this state file: a second
	// started at once waits and reuses the first's session (issue 25).
	unlock, err := lockMCPState(ctx, log, path, f.transportTimeout)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := loadMCPState(path, inv.WorkspaceID)
	var plug transport.Plugin
	justJoined := errors.Is(err, errNoState)
	switch {
	case justJoined:
		g, err := joinRemote(ctx, env, log, ts, uri, f.name, f.kind, f.transportTimeout, false)
		if err != nil {
			return err
		}
		st = sessionState{WorkspaceID: g.WorkspaceID, SessionToken: g.SessionToken, ParticipantID: g.ParticipantID,
			Hint: g.hint, ExpiresAt: g.ExpiresAt}
		if g.hint.Type == transport.LoopbackName {
			st.URL = g.url
		}
		if err := saveMCPState(path, st); err != nil {
			callRoom(ctx, pluginClient(g.plugin, fromRoomHint(g.hint), f.transportTimeout), "POST", g.url+"/workspace/leave", g.SessionToken, nil, nil)
			g.plugin.Close()
			return room.Errorf(room.KindInternal, "cannot keep the session in %s (left the room again): %v", path, err)
		}
		if g.hint.Type == transport.LoopbackName {
			g.plugin.Close()
		} else {
			plug = g.plugin
		}
		log.Info("joined the room", "workspace", st.WorkspaceID, "participant", st.ParticipantID, "state", path)
	case err != nil:
		return err
	default:
		log.Info("reusing the stored session", "workspace", st.WorkspaceID, "participant", st.ParticipantID, "state", path)
		if st.Hint.Type != transport.LoopbackName {
			if plug, err = reopenPlugin(ctx, env, log, ts, st.Hint, f.transportTimeout); err != nil {
				return err
			}
		}
	}
	unlock() // the session is kept: another ce mcp on this file may reuse it now
	url := st.URL
	if plug != nil {
		defer plug.Close()
		fwd, err := startForward(plug, fromRoomHint(st.Hint), f.transportTimeout, log)
		if err != nil {
			return err
		}
		defer fwd.Close()
		url = fwd.url
	}
	if url == "" {
		return usageError("the state file %s names no way to the room (remove it to join again)", path)
	}
	if inv.ParticipantID != "" && inv.ParticipantID == st.ParticipantID && !justJoined {
		if st, err = readmitIfEnded(ctx, env, log, ts, f, uri, url, path, st); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-env.Signals:
			cancel()
		case <-ctx.Done():
		}
	}()
	newBridge(url, st.SessionToken, f.requestTimeout, env.Stdout, log).run(ctx, env.Stdin)
	return nil
}

// reopenPlugin opens the plugin of a stored hint again (a restarted host
// whose session came through a transport other than loopback).
func reopenPlugin(ctx context.Context, env Env, log *slog.Logger, ts *transports, h room.Hint, timeout time.Duration) (transport.Plugin, error) {
	prov, err := ts.provider(h.Type)
	if err != nil {
		return nil, room.Errorf(room.KindTransportUnavailable, "the stored session came through %s: %v", h.Type, err)
	}
	dir := joinStateDir(env, h.Type)
	if err := makeStateDir(dir); err != nil {
		return nil, room.Errorf(room.KindTransportUnavailable, "the state directory of %s: %v", h.Type, err)
	}
	octx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("not open within --transport-timeout (%s)", timeout))
	defer cancel()
	plug, err := openPlugin(octx, prov, transportOptions(env, log, h.Type, dir, "", true))
	if err != nil {
		return nil, room.Errorf(room.KindTransportUnavailable, "%s: %s", hintLabel(h), transport.Redact(err.Error()))
	}
	return plug, nil
}

// readmitIfEnded redeems a re-admission invitation for the stored session's
// own participant when that session has ended (the room answers 401 on an
// authenticated method), so an agent whose session ran out comes back as
// itself: same participant, its tasks and idempotency keys its own again.
// A live session is kept and the invitation is not spent.
func readmitIfEnded(ctx context.Context, env Env, log *slog.Logger, ts *transports, f mcpFlags, uri, url, path string, st sessionState) (sessionState, error) {
	ended, err := sessionEnded(ctx, url, st.SessionToken, f.requestTimeout)
	if err != nil || !ended {
		return st, err
	}
	g, err := joinRemote(ctx, env, log, ts, uri, f.name, f.kind, f.transportTimeout, false)
	if err != nil {
		return st, err
	}
	g.plugin.Close() // the bridge already holds its own way to the room
	if g.ParticipantID != st.ParticipantID {
		return st, room.Errorf(room.KindInternal, "the re-admission invitation brought back %s, not %s", g.ParticipantID, st.ParticipantID)
	}
	st.SessionToken, st.ExpiresAt = g.SessionToken, g.ExpiresAt
	if err := saveMCPState(path, st); err != nil {
		return st, room.Errorf(room.KindInternal, "cannot keep the session in %s: %v", path, err)
	}
	log.Info("re-admitted: the stored session had ended", "workspace", st.WorkspaceID, "participant", st.ParticipantID, "state", path)
	return st, nil
}

// sessionEnded asks the room whether token is still a session: tools/list
// needs a session and no capability, and changes nothing. It goes through
// the bridge's own post, so it carries exactly the headers the bridge sends.
func sessionEnded(ctx context.Context, url, token string, timeout time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	params := `{"_meta":{"io.modelcontextprotocol/protocolVersion":"` + mcpProtocolVersion + `",` +
		`"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"ce-mcp","version":"1"}}}`
	body := `{"jsonrpc":"2.0","id":0,"method":"tools/list","params":` + params + `}`
	b := newBridge(url, token, timeout, io.Discard, nil)
	defer b.hc.CloseIdleConnections()
	resp, err := b.post(ctx, []byte(body), "tools/list", json.RawMessage(params))
	if err != nil {
		return false, room.Errorf(room.KindUnavailable, "the room is unreachable: %v", transport.Redact(err.Error()))
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	// Anything but 401 (a live session, or a busy room's 429/503) keeps the
	// stored session: the invitation is spent only for a session that ended.
	return resp.StatusCode == http.StatusUnauthorized, nil
}
