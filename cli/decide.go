package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/commonroom/ce/room"
)

// The host decides from the terminal (issue 27 item 4): ce approve and
// ce reject take a proposal id or a handoff id, ce commit an approved
// proposal, ce answer a handoff's open questions. Each runs the operation
// the owner page and the HTTP routes run (proposal.review, commit,
// handoff.approve|reject|answer) as the host, through the serving room or
// in-process (hostDoor), and names participants in its text output.

// approveCommand is `ce approve ID`.
func approveCommand(env Env) *ffcli.Command { return decideCommand(env, true) }

// rejectCommand is `ce reject ID [--note TEXT]`.
func rejectCommand(env Env) *ffcli.Command { return decideCommand(env, false) }

func decideCommand(env Env, approve bool) *ffcli.Command {
	name, verb := "approve", "approved"
	help := "approve a pending proposal or a handoff's delivered result, as the host"
	noteHelp := "why (a handoff only: a proposal's review carries no note)"
	if !approve {
		name, verb = "reject", "rejected"
		help = "reject a pending proposal or a handoff's delivered result, as the host"
	}
	fs := flag.NewFlagSet("ce "+name, flag.ContinueOnError)
	workspace := fs.String("workspace", "", workspaceUsage)
	note := fs.String("note", "", noteHelp)
	asJSON := fs.Bool("json", false, "print JSON (the route's answer, ids kept)")
	return &ffcli.Command{
		Name:       name,
		ShortUsage: "ce " + name + " (PROPOSAL_ID | HANDOFF_ID) --workspace FILE [--note TEXT] [--json]",
		ShortHelp:  help,
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) != 1 || args[0] == "" {
				return usageErr(name + " takes exactly one PROPOSAL_ID or HANDOFF_ID")
			}
			id := args[0]
			kind, err := kindOf(name, id, itemProposal, itemHandoff)
			if err != nil {
				return err
			}
			if kind == itemProposal && *note != "" {
				return usageErr("--note is for a handoff's result: a proposal's review carries no note (nothing was " + verb + ")")
			}
			var out any
			var print func(w io.Writer, names partyNames)
			var parties []string
			err = withHostDoor(ctx, env, *workspace, func(d *hostDoor) error {
				if kind == itemProposal {
					var res room.ReviewResult
					if err := d.call(ctx, "proposal.review", room.ReviewInput{ProposalID: id, Approve: &approve}, &res); err != nil {
						return explainDecided(ctx, d, kind, id, err)
					}
					// What was decided, for the text: the proposal and
					// whether the document moved since its base.
					var p room.Proposal
					var st room.Status
					if err := d.call(ctx, "proposal", room.ProposalInput{ProposalID: id}, &p); err != nil {
						return err
					}
					if err := d.call(ctx, "status", room.Empty{}, &st); err != nil {
						return err
					}
					out, parties = res, []string{p.ParticipantID}
					print = func(w io.Writer, names partyNames) { printReviewed(w, verb, p, st.Version, *workspace, names) }
					return nil
				}
				op := "handoff.approve"
				if !approve {
					op = "handoff.reject"
				}
				var h room.Handoff
				if err := d.call(ctx, op, room.DecideInput{HandoffID: id, Note: *note}, &h); err != nil {
					return explainDecided(ctx, d, kind, id, err)
				}
				out, parties = h, handoffParties(h)
				print = func(w io.Writer, names partyNames) { printDecidedHandoff(w, verb, h, names) }
				return nil
			})
			if err != nil {
				return err
			}
			if *asJSON {
				return printJSON(env.Stdout, out)
			}
			print(env.Stdout, readNames(ctx, *workspace, parties...))
			return nil
		},
	}
}

// printReviewed says what the host decided on a proposal and what comes
// next: an approved proposal still has to be committed, and one whose base
// is no longer the current version will answer stale_version when it is.
func printReviewed(w io.Writer, verb string, p room.Proposal, current int64, workspace string, names partyNames) {
	fmt.Fprintf(w, "%s proposal %s by %s: %q\n", verb, p.ProposalID, names.of(p.ParticipantID), oneLine(termSafe(p.Summary), 120))
	fmt.Fprintf(w, "  %s (base v%d)\n", replacesWords(p), p.BaseVersion)
	if p.Status != room.ProposalApproved {
		return
	}
	if p.BaseVersion != current {
		fmt.Fprintf(w, "warning: the document changed since this was proposed (base v%d, now v%d): committing it will answer stale_version;\n"+
			"  see what changed with `ce diff --base %d --workspace %s`, and ask %s to propose again\n",
			p.BaseVersion, current, p.BaseVersion, workspace, names.of(p.ParticipantID))
		return
	}
	fmt.Fprintf(w, "next: commit it with `ce commit %s --workspace %s` (or a participant holding commit does)\n", p.ProposalID, workspace)
}

// replacesWords is what a proposal replaces, a whole-document replacement
// in capitals so it is never read as a section edit.
func replacesWords(p room.Proposal) string {
	if p.Scope == room.ScopeDocument {
		return "replaces THE WHOLE DOCUMENT"
	}
	return fmt.Sprintf("replaces the section %q", p.Change.Section)
}

// printDecidedHandoff says what the host decided on a handoff's result.
func printDecidedHandoff(w io.Writer, verb string, h room.Handoff, names partyNames) {
	fmt.Fprintf(w, "%s handoff %s: %s %q\n", verb, h.HandoffID, names.arrow(h), oneLine(termSafe(h.Summary), 120))
	if h.DecisionNote != nil {
		fmt.Fprintf(w, "  note: %s\n", oneLine(termSafe(*h.DecisionNote), 200))
	}
	if h.Status == room.HandoffRejected {
		fmt.Fprintf(w, "  rejected is final: re-work is a new handoff that names this one in follows_handoff_id\n")
	}
}

// explainDecided adds to a refusal because the item was already decided
// (proposal_conflict, handoff_conflict) who decided it and when, so a host
// who lost a race to another tab or terminal sees why. Any other error, or
// one the item cannot be read for, is returned as it is.
func explainDecided(ctx context.Context, d *hostDoor, kind itemKind, id string, err error) error {
	var re *room.Error
	if !errors.As(err, &re) || (re.Kind != room.KindProposalConflict && re.Kind != room.KindHandoffConflict) {
		return err
	}
	var by *string
	var at *string
	var status string
	if kind == itemProposal {
		var p room.Proposal
		if d.call(ctx, "proposal", room.ProposalInput{ProposalID: id}, &p) != nil {
			return err
		}
		by, at, status = p.ReviewedBy, p.ReviewedAt, p.Status
	} else {
		var h room.Handoff
		if d.call(ctx, "handoff.get", room.HandoffIDInput{HandoffID: id}, &h) != nil {
			return err
		}
		by, at, status = h.DecidedBy, h.DecidedAt, h.Status
		if h.CancelledBy != nil {
			by, at = h.CancelledBy, h.CancelledAt
		}
	}
	if by == nil || at == nil {
		return err
	}
	who := *by
	if n := readNames(ctx, d.workspace(), *by).of(*by); n != "" {
		who = n
	}
	out := room.Errorf(re.Kind, "%s (%s by %s at %s)", re.Message, status, who, *at)
	for k, v := range re.Fields {
		out.With(k, v)
	}
	return out
}
