package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/commonroom/ce/room"
)

// proposalCommand is `ce proposal ID`: one proposal with the text it
// proposes, which the listing leaves out. Like the other reads it opens the
// sidecar read-only as the local operator.
func proposalCommand(env Env) *ffcli.Command {
	fs := flag.NewFlagSet("ce proposal", flag.ContinueOnError)
	workspace := fs.String("workspace", "", workspaceUsage)
	asJSON := fs.Bool("json", false, "print JSON")
	return &ffcli.Command{
		Name:       "proposal",
		ShortUsage: "ce proposal PROPOSAL_ID --workspace FILE [--json]",
		ShortHelp:  "show one proposal with its proposed text",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) != 1 {
				return usageErr("proposal takes exactly one PROPOSAL_ID")
			}
			return withReader(ctx, *workspace, func(eng *room.Engine, q room.Querier) error {
				p, err := eng.GetProposal(ctx, q, room.Operator(eng.HostID), room.ProposalInput{ProposalID: args[0]})
				if err != nil {
					return err
				}
				if *asJSON {
					return printJSON(env.Stdout, p)
				}
				ids := []string{p.ParticipantID}
				if p.ReviewedBy != nil {
					ids = append(ids, *p.ReviewedBy)
				}
				printProposal(env.Stdout, p, namesFrom(ctx, eng, q, ids...))
				return nil
			})
		},
	}
}

func printProposal(w io.Writer, p room.Proposal, names partyNames) {
	fmt.Fprintf(w, "proposal  %s (%s)\n", p.ProposalID, p.Status)
	fmt.Fprintf(w, "by        %s at %s\n", names.withID(p.ParticipantID), p.CreatedAt)
	fmt.Fprintf(w, "base      v%d\n", p.BaseVersion)
	fmt.Fprintf(w, "target    %s\n", termSafe(p.Target))
	if p.Scope == room.ScopeDocument {
		fmt.Fprintf(w, "replaces  THE WHOLE DOCUMENT: approving and committing it replaces every section\n")
	} else {
		fmt.Fprintf(w, "replaces  the section %s only\n", p.Change.Section)
	}
	if p.ReviewedBy != nil && p.ReviewedAt != nil {
		fmt.Fprintf(w, "reviewed  by %s at %s\n", names.of(*p.ReviewedBy), *p.ReviewedAt)
	}
	if p.CommittedVersion != nil {
		fmt.Fprintf(w, "committed v%d\n", *p.CommittedVersion)
	}
	if p.Summary != "" {
		fmt.Fprintf(w, "summary   %s\n", oneLine(termSafe(p.Summary), 200))
	}
	section := "the whole document"
	if p.Change.Section != "" {
		section = p.Change.Section
	}
	fmt.Fprintf(w, "\nproposed text for %s (%s):\n", section, byteSize(int64(len(p.Change.Content))))
	fmt.Fprint(w, termSafe(p.Change.Content)) // an agent wrote it: inert on the host's terminal
	if !strings.HasSuffix(p.Change.Content, "\n") {
		fmt.Fprintln(w)
	}
}

// scopeWords is what a proposal replaces, as the proposal listing shows
// it: a whole-document replacement in capitals, so it cannot be read as a
// section edit.
func scopeWords(scope string) string {
	if scope == room.ScopeDocument {
		return "WHOLE DOCUMENT"
	}
	return "its section"
}

// byteSize writes a size the way people read it: 812 B, 4.1 KiB, 1.2 MiB.
func byteSize(n int64) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	default:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
}
