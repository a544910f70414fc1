package cli

import (
	"context"
	"flag"
	"fmt"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/commonroom/ce/room"
)

// cancelHandoffsCommand is the local operator's answer to a participant that
// holds the room's active tasks (issue 13 item 10): every live handoff it
// created is cancelled in one command, as tasks/cancel would cancel each. It
// acts as the host, through the running room's owner listener when the room
// serves and in-process when it does not (D21), like ce task-cancel.
func cancelHandoffsCommand(env Env) *ffcli.Command {
	fs := flag.NewFlagSet("ce cancel-handoffs", flag.ContinueOnError)
	workspace := fs.String("workspace", "", workspaceUsage)
	participant := fs.String("participant", "", "the participant whose open handoffs to cancel (required; ce participants lists ids)")
	asJSON := fs.Bool("json", false, "print JSON")
	return &ffcli.Command{
		Name:       "cancel-handoffs",
		ShortUsage: "ce cancel-handoffs --participant PARTICIPANT_ID --workspace FILE [--json]",
		ShortHelp:  "cancel every open or accepted handoff one participant created (frees its tasks)",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageErr("cancel-handoffs takes no arguments; name the participant with --participant")
			}
			if *participant == "" {
				return usageErr("--participant is required: whose handoffs to cancel")
			}
			var res room.CancelHandoffsResult
			if err := withHostDoor(ctx, env, *workspace, func(d *hostDoor) error {
				return d.call(ctx, "participant.cancel_handoffs", room.CancelHandoffsInput{ParticipantID: *participant}, &res)
			}); err != nil {
				return err
			}
			if *asJSON {
				return printJSON(env.Stdout, res)
			}
			plural := "s"
			if res.Cancelled == 1 {
				plural = ""
			}
			fmt.Fprintf(env.Stdout, "cancelled %d handoff%s of %s\n", res.Cancelled, plural, res.ParticipantID)
			for _, id := range res.HandoffIDs {
				fmt.Fprintf(env.Stdout, "  %s\n", id)
			}
			return nil
		},
	}
}
