package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/commonroom/ce/room"
)

// commitCommand is `ce commit PROPOSAL_ID`: the host writes an approved
// proposal into the file, as workspace_commit and POST /workspace/commit do.
// A proposal whose base is no longer current is refused by the engine with
// stale_version (and becomes conflicted); the command shows that answer
// whole — base and current version, the versions since, and the diff —
// because the host has to tell its author what to redo.
func commitCommand(env Env) *ffcli.Command {
	fs := flag.NewFlagSet("ce commit", flag.ContinueOnError)
	workspace := fs.String("workspace", "", workspaceUsage)
	asJSON := fs.Bool("json", false, "print JSON (the route's answer, ids kept)")
	return &ffcli.Command{
		Name:       "commit",
		ShortUsage: "ce commit PROPOSAL_ID --workspace FILE [--json]",
		ShortHelp:  "write an approved proposal into the file as a new version, as the host",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) != 1 || args[0] == "" {
				return usageErr("commit takes exactly one PROPOSAL_ID")
			}
			id := args[0]
			if _, err := kindOf("commit", id, itemProposal); err != nil {
				return err
			}
			var res room.CommitResult
			var p room.Proposal
			err := withHostDoor(ctx, env, *workspace, func(d *hostDoor) error {
				if err := d.call(ctx, "commit", room.CommitInput{ProposalID: id}, &res); err != nil {
					// The proposal as it now stands tells the refusal's
					// story (who proposed it; pending still needs approval).
					if d.call(ctx, "proposal", room.ProposalInput{ProposalID: id}, &p) != nil {
						return err
					}
					return explainCommit(env.Stderr, err, p, func(ids ...string) partyNames { return readNames(ctx, *workspace, ids...) })
				}
				return d.call(ctx, "proposal", room.ProposalInput{ProposalID: id}, &p)
			})
			if err != nil {
				return err
			}
			if *asJSON {
				return printJSON(env.Stdout, res)
			}
			names := readNames(ctx, *workspace, p.ParticipantID)
			fmt.Fprintf(env.Stdout, "committed proposal %s by %s as v%d: %q\n", id, names.of(p.ParticipantID), res.Version, oneLine(termSafe(res.Summary), 120))
			fmt.Fprintf(env.Stdout, "  %s (base v%d)\n", strings.Replace(replacesWords(p), "replaces", "replaced", 1), p.BaseVersion)
			return nil
		},
	}
}

// staleAnswer is the recovery data of stale_version, whichever way the
// error came (the engine's fields in-process, the body's over HTTP).
type staleAnswer struct {
	BaseVersion    int64                `json:"base_version"`
	CurrentVersion int64                `json:"current_version"`
	Diff           string               `json:"diff"`
	DiffTruncated  bool                 `json:"diff_truncated"`
	Changes        []room.VersionChange `json:"changes"`
}

// explainCommit turns the engine's refusal of a commit into what the host
// needs: stale_version is printed with its versions and diff (stderr) and
// ends the command with the conflict exit code; a proposal that is still
// pending says to approve it first. Other errors pass through.
func explainCommit(w io.Writer, err error, p room.Proposal, lookup func(ids ...string) partyNames) error {
	var re *room.Error
	if !errors.As(err, &re) {
		return err
	}
	switch re.Kind {
	case room.KindStaleVersion:
		var s staleAnswer
		if roundTrip(re.Fields, &s) != nil {
			return err
		}
		ids := []string{p.ParticipantID}
		for _, c := range s.Changes {
			if c.ParticipantID != nil {
				ids = append(ids, *c.ParticipantID)
			}
		}
		names := lookup(ids...)
		fmt.Fprintf(w, "ce: %s: %s\n", re.Kind, re.Message)
		fmt.Fprintf(w, "the document changed since proposal %s by %s was made: base v%d, now v%d.\n"+
			"It is conflicted now and cannot be committed; ask %s to read the document again and propose anew.\n",
			p.ProposalID, names.of(p.ParticipantID), s.BaseVersion, s.CurrentVersion, names.of(p.ParticipantID))
		if len(s.Changes) > 0 {
			fmt.Fprintf(w, "versions since v%d:\n", s.BaseVersion)
			for _, c := range s.Changes {
				fmt.Fprintf(w, "  v%d  %s  %s\n", c.Version, names.ofPtr(c.ParticipantID, "(an edit of the file)"), oneLine(termSafe(c.Summary), 80))
			}
		}
		if s.Diff != "" {
			fmt.Fprintf(w, "what committing it would have changed in v%d:\n", s.CurrentVersion)
			fmt.Fprint(w, termSafe(s.Diff))
			if !strings.HasSuffix(s.Diff, "\n") {
				fmt.Fprintln(w)
			}
			if s.DiffTruncated {
				fmt.Fprintln(w, "(diff truncated)")
			}
		}
		return &exitError{code: exitConflict, err: errReported}
	case room.KindProposalConflict:
		if p.Status == room.ProposalPending {
			out := room.Errorf(re.Kind, "%s: approve it first (ce approve %s)", re.Message, p.ProposalID)
			for k, v := range re.Fields {
				out.With(k, v)
			}
			return out
		}
	}
	return err
}
