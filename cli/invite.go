package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/commonroom/ce/room"
)

func inviteCommand(env Env) *ffcli.Command {
	fs := flag.NewFlagSet("ce invite", flag.ContinueOnError)
	workspace := fs.String("workspace", "", workspaceUsage)
	caps := fs.String("capabilities", "", "comma-separated capabilities, or * (default: read,observe,propose,checkout,commit)")
	perms := fs.String("permissions", "", "legacy grant word: read_write, read or admin (used when --capabilities is not given)")
	target := fs.String("target", "", "region the invitation is for (recorded, not enforced)")
	expires := fs.Int("expires", 60, "minutes until the invitation expires (max 10080)")
	maxUses := fs.Int("max-uses", 1, "how many joins it admits (0 = unlimited)")
	maxLive := fs.Int("max-live-sessions", 0, "live sessions its joiners may hold at once (default: the room's --max-sessions-per-invite)")
	participant := fs.String("participant", "", "re-admit this existing participant: the joiner gets a new session as it, with at most its capabilities (default: all of them)")
	label := fs.String("label", "", "a short note saying who or what it is for (at most 80 characters), shown on the owner page and in listings")
	asJSON := fs.Bool("json", false, "print JSON")
	return &ffcli.Command{
		Name:       "invite",
		ShortUsage: "ce invite --workspace FILE [--capabilities read,propose,…|*] [--max-uses N] [--max-live-sessions N] [--expires MINUTES] [--participant P] [--label TEXT] [--json]",
		ShortHelp:  "create a commonroom://join/… invitation",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return &exitError{code: exitUsage, err: errors.New("invite takes no arguments")}
			}
			in := room.InviteInput{Target: *target, ExpiresInMinutes: expires, MaxUses: maxUses, ParticipantID: *participant, Label: *label}
			// Only a flag left out takes the default: --capabilities "" is
			// a request for nothing, which the room refuses (issue 13).
			set := flagsSet(fs)
			if set["capabilities"] {
				in.Capabilities = strings.Split(*caps, ",")
			}
			if set["permissions"] {
				in.Permissions = perms
			}
			if set["max-live-sessions"] {
				in.MaxLiveSessions = maxLive
			}
			var g room.InviteGrant
			if err := withHostDoor(ctx, env, *workspace, func(d *hostDoor) error {
				return d.call(ctx, "invite", in, &g)
			}); err != nil {
				return err
			}
			if *asJSON {
				out := map[string]any{"invite_id": g.InviteID, "uri": g.URI,
					"capabilities": g.Capabilities, "expires_at": g.ExpiresAt, "max_uses": g.MaxUses}
				if g.ParticipantID != "" {
					out["participant_id"] = g.ParticipantID
				}
				if g.Label != "" {
					out["label"] = g.Label
				}
				return printJSON(env.Stdout, out)
			}
			fmt.Fprintln(env.Stdout, g.URI)
			return nil
		},
	}
}

// flagsSet names the flags given on the command line (or by CE_* variables
// or --config, which ff applies through the same FlagSet), so a command can
// tell an empty --capabilities from no --capabilities at all.
func flagsSet(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}
