package cli

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/commonroom/ce/room"
)

// endSessionCommand is `ce end-session`: the host cuts a participant off
// (every session, and it leaves) or ends one session. It goes through the
// running room's owner listener when one serves, so the room's live
// streams close at once, and runs the engine in-process when none does.
func endSessionCommand(env Env) *ffcli.Command {
	fs := flag.NewFlagSet("ce end-session", flag.ContinueOnError)
	workspace := fs.String("workspace", "", workspaceUsage)
	participant := fs.String("participant", "", "end every session of this participant (it leaves the room; its leases are released)")
	session := fs.String("session", "", "end this one session (a session_ref from `ce participants`)")
	asJSON := fs.Bool("json", false, "print JSON")
	return &ffcli.Command{
		Name:       "end-session",
		ShortUsage: "ce end-session --workspace FILE (--participant PARTICIPANT_ID | --session SESSION_REF) [--json]",
		ShortHelp:  "end a participant's sessions (or one session) as the host",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageErr("end-session takes no arguments")
			}
			if (*participant == "") == (*session == "") {
				return usageErr("name exactly one of --participant and --session")
			}
			in := room.EndSessionInput{SessionRef: *session, ParticipantID: *participant}
			var res room.EndSessionResult
			if err := withHostDoor(ctx, env, *workspace, func(d *hostDoor) error {
				return d.call(ctx, "session.end", in, &res)
			}); err != nil {
				return err
			}
			if *asJSON {
				return printJSON(env.Stdout, res)
			}
			switch {
			case len(res.EndedSessions) == 0:
				fmt.Fprintf(env.Stdout, "nothing to end: %s had already ended\n", orElse(*session, *participant))
			case res.ParticipantLeft:
				fmt.Fprintf(env.Stdout, "ended %d session(s) of %s; it has left the room: %s\n",
					len(res.EndedSessions), res.ParticipantID, strings.Join(res.EndedSessions, ", "))
			default:
				fmt.Fprintf(env.Stdout, "ended session %s of %s\n", strings.Join(res.EndedSessions, ", "), res.ParticipantID)
			}
			return nil
		},
	}
}

// revokeCommand is `ce revoke`: the invitation admits nobody else, and with
// --end-sessions everyone it admitted is cut off too.
func revokeCommand(env Env) *ffcli.Command {
	fs := flag.NewFlagSet("ce revoke", flag.ContinueOnError)
	workspace := fs.String("workspace", "", workspaceUsage)
	endSessions := fs.Bool("end-sessions", false, "also end the sessions of everyone it admitted (they leave the room)")
	asJSON := fs.Bool("json", false, "print JSON")
	return &ffcli.Command{
		Name:       "revoke",
		ShortUsage: "ce revoke INVITE_ID --workspace FILE [--end-sessions] [--json]",
		ShortHelp:  "revoke an invitation (see `ce invites`), optionally ending the sessions it admitted",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) != 1 || args[0] == "" {
				return usageErr("revoke takes exactly one INVITE_ID")
			}
			in := room.RevokeInput{InviteID: args[0], EndSessions: *endSessions}
			var res room.RevokeResult
			if err := withHostDoor(ctx, env, *workspace, func(d *hostDoor) error {
				return d.call(ctx, "invite.revoke", in, &res)
			}); err != nil {
				return err
			}
			if *asJSON {
				return printJSON(env.Stdout, res)
			}
			fmt.Fprintf(env.Stdout, "revoked %s", res.InviteID)
			if *endSessions {
				fmt.Fprintf(env.Stdout, "; ended %d session(s)", len(res.EndedSessions))
			}
			fmt.Fprintln(env.Stdout)
			return nil
		},
	}
}

// invitesCommand is `ce invites`: every invitation's handle, who made it,
// its uses and its live sessions; never a secret.
func invitesCommand(env Env) *ffcli.Command {
	return readCommand(env, "invites", "ce invites --workspace FILE [--json]", "invitations, newest first (handles only, never secrets)", nil,
		func(ctx context.Context, eng *room.Engine, q room.Querier, _ []string) (any, func(), error) {
			is, err := eng.ListInvites(ctx, q, room.Operator(eng.HostID), room.Empty{})
			return is, func() {
				printTable(env.Stdout, "no invitations", "INVITE\tLABEL\tCAPABILITIES\tUSED\tLIVE SESSIONS\tUNTIL\tREVOKED", is,
					func(i room.InviteInfo) string {
						uses := fmt.Sprintf("%d", i.UsedCount)
						if i.MaxUses != nil {
							uses += fmt.Sprintf("/%d", *i.MaxUses)
						}
						revoked := "-"
						if i.RevokedAt != nil {
							revoked = *i.RevokedAt
						}
						return fmt.Sprintf("%s\t%s\t%s\t%s\t%d/%d\t%s\t%s", i.InviteID, orElse(i.Label, "-"), strings.Join(i.Capabilities, ","), uses,
							i.LiveSessions, i.MaxLiveSessions, i.ExpiresAt, revoked)
					})
			}, err
		})
}

func orElse(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
