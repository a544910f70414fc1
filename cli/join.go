package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/commonroom/ce/room"
)

func joinCommand(env Env) *ffcli.Command {
	fs := flag.NewFlagSet("ce join", flag.ContinueOnError)
	name := fs.String("name", "participant", "your display name in the room")
	kind := fs.String("kind", "agent", "agent or human")
	asJSON := fs.Bool("json", false, "print JSON")
	return &ffcli.Command{
		Name:       "join",
		ShortUsage: "ce join URI --name NAME [--kind agent|human] [--json]",
		ShortHelp:  "redeem an invitation for a session (over the invitation's transport hints)",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) != 1 {
				return &exitError{code: exitUsage, err: errors.New("join takes exactly one invitation URI")}
			}
			g, err := joinRemote(ctx, args[0], *name, *kind)
			if err != nil {
				return err
			}
			if *asJSON {
				return printJSON(env.Stdout, map[string]any{"session_token": g.SessionToken, "session_ref": g.SessionRef,
					"participant_id": g.ParticipantID, "workspace_id": g.WorkspaceID, "capabilities": g.Capabilities,
					"expires_at": g.ExpiresAt, "url": g.url})
			}
			fmt.Fprintf(env.Stdout, "Joined %s as %s (%s).\n", g.WorkspaceID, g.ParticipantID, *name)
			fmt.Fprintf(env.Stdout, "Room:    %s\n", g.url)
			fmt.Fprintf(env.Stdout, "Session: %s   (a bearer secret: keep it private; expires %s)\n", g.SessionToken, g.ExpiresAt)
			fmt.Fprintf(env.Stdout, "Try:     curl -H 'Authorization: Bearer %s' %s/workspace/status\n", g.SessionToken, g.url)
			return nil
		},
	}
}

type joined struct {
	room.SessionGrant
	url string
}

// joinRemote dials the invitation's hints in order and joins over the first
// one this build can use. It checks the room it reached is the one the
// invitation names, and leaves again if not.
func joinRemote(ctx context.Context, uri, name, kind string) (joined, error) {
	inv, err := room.DecodeInvitation(uri, room.Defaults().MaxInvitePayload)
	if err != nil {
		return joined{}, err
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	var tried []string
	for _, h := range inv.Transports {
		if h.Type != "loopback" || h.Port <= 0 {
			tried = append(tried, h.Type)
			continue
		}
		base := "http://" + net.JoinHostPort(orLoopback(h.Address), strconv.Itoa(h.Port))
		var g room.SessionGrant
		err := callRoom(ctx, hc, "POST", base+"/session/join", "", map[string]string{
			"invite": uri, "name": name, "kind": kind, "transport": h.Type}, &g)
		if room.ErrorKind(err) == room.KindTransportUnavailable {
			tried = append(tried, h.Type)
			continue
		}
		if err != nil {
			return joined{}, err
		}
		if g.WorkspaceID != inv.WorkspaceID {
			callRoom(ctx, hc, "POST", base+"/workspace/leave", g.SessionToken, nil, nil)
			return joined{}, room.Errorf(room.KindInvalidRequest, "the room at that address is %s, not the invited %s", g.WorkspaceID, inv.WorkspaceID)
		}
		return joined{SessionGrant: g, url: base}, nil
	}
	return joined{}, room.Errorf(room.KindTransportUnavailable, "no transport in the invitation could be reached (tried: %v); is the room being served?", tried)
}

func orLoopback(addr string) string {
	if addr == "" {
		return "127.0.0.1"
	}
	return addr
}
