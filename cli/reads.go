package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/commonroom/ce/room"
)

// The local operator's reads of the room file: the same engine read methods
// as GET /workspace/participants|leases|proposals|history|diff, on a
// query-only connection, whether or not a room is serving.

// readCommand builds one read subcommand: name, usage, and what to print.
func readCommand(env Env, name, usage, help string, extra func(fs *flag.FlagSet) func(args []string) error,
	run func(ctx context.Context, eng *room.Engine, q room.Querier, args []string) (any, func(), error)) *ffcli.Command {
	fs := flag.NewFlagSet("ce "+name, flag.ContinueOnError)
	workspace := fs.String("workspace", "", workspaceUsage)
	asJSON := fs.Bool("json", false, "print JSON")
	check := func(args []string) error {
		if len(args) > 0 {
			return usageErr(name + " takes no arguments")
		}
		return nil
	}
	if extra != nil {
		check = extra(fs)
	}
	return &ffcli.Command{
		Name: name, ShortUsage: usage, ShortHelp: help, FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			if err := check(args); err != nil {
				return err
			}
			return withReader(ctx, *workspace, func(eng *room.Engine, q room.Querier) error {
				v, text, err := run(ctx, eng, q, args)
				if err != nil {
					return err
				}
				if *asJSON {
					return printJSON(env.Stdout, v)
				}
				text()
				return nil
			})
		},
	}
}

func participantsCommand(env Env) *ffcli.Command {
	return readCommand(env, "participants", "ce participants --workspace FILE [--json]", "who is in the room", nil,
		func(ctx context.Context, eng *room.Engine, q room.Querier, _ []string) (any, func(), error) {
			r, err := eng.Participants(ctx, q, room.Operator(eng.HostID), room.Empty{})
			ps := r.Participants
			return ps, func() {
				printTable(env.Stdout, "no participants", "PARTICIPANT\tKIND\tNAME\tCAPABILITIES\tTRANSPORT\tLAST SEEN\tSESSIONS", ps,
					func(p room.Participant) string {
						tr := "-"
						if p.Transport != nil {
							tr = *p.Transport
						}
						return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s", p.ParticipantID, p.Kind, p.Name, strings.Join(p.Capabilities, ","), tr, p.LastSeen, sessionRefs(p))
					})
			}, err
		})
}

func leasesCommand(env Env) *ffcli.Command {
	return readCommand(env, "leases", "ce leases --workspace FILE [--json]", "who works on which section now", nil,
		func(ctx context.Context, eng *room.Engine, q room.Querier, _ []string) (any, func(), error) {
			r, err := eng.Leases(ctx, q, room.Operator(eng.HostID), room.Empty{})
			ls := r.Leases
			return ls, func() {
				printTable(env.Stdout, "no live leases", "LEASE\tTARGET\tHOLDER\tUNTIL", ls, func(l room.Lease) string {
					return fmt.Sprintf("%s\t%s\t%s\t%s", l.LeaseID, l.Target, l.ParticipantID, l.ExpiresAt)
				})
			}, err
		})
}

func proposalsCommand(env Env) *ffcli.Command {
	var status, cursor *string
	var limit *int
	return readCommand(env, "proposals", "ce proposals --workspace FILE [--status S] [--limit N] [--cursor C] [--json]",
		"proposed changes, newest first, a page at a time (ce proposal ID shows one with its text)",
		func(fs *flag.FlagSet) func([]string) error {
			status = fs.String("status", "", "only this status (pending, approved, rejected, committed, conflicted, superseded)")
			limit = fs.Int("limit", 0, "how many (default 50, max 200)")
			cursor = fs.String("cursor", "", "continue after the previous page (the cursor it printed)")
			return func(args []string) error {
				if len(args) > 0 {
					return usageErr("proposals takes no arguments (ce proposal ID shows one)")
				}
				return nil
			}
		},
		func(ctx context.Context, eng *room.Engine, q room.Querier, _ []string) (any, func(), error) {
			pg, err := eng.Proposals(ctx, q, room.Operator(eng.HostID), room.ProposalsInput{Status: *status, Limit: *limit, Cursor: *cursor})
			return pg, func() {
				ids := make([]string, len(pg.Proposals))
				for i, p := range pg.Proposals {
					ids[i] = p.ParticipantID
				}
				names := namesFrom(ctx, eng, q, ids...)
				printTable(env.Stdout, "no proposals", "PROPOSAL\tSTATUS\tBASE\tTARGET\tREPLACES\tBY\tSIZE\tSUMMARY", pg.Proposals, func(p room.ProposalInfo) string {
					return fmt.Sprintf("%s\t%s\tv%d\t%s\t%s\t%s\t%s\t%s", p.ProposalID, p.Status, p.BaseVersion, termSafe(p.Target), scopeWords(p.Scope),
						names.of(p.ParticipantID), byteSize(p.Change.ContentBytes), oneLine(termSafe(p.Summary), 50))
				})
				if pg.NextCursor != "" {
					fmt.Fprintf(env.Stdout, "more: ce proposals --cursor %s", pg.NextCursor)
					if *status != "" {
						fmt.Fprintf(env.Stdout, " --status %s", *status)
					}
					fmt.Fprintln(env.Stdout)
				}
			}, err
		})
}

func historyCommand(env Env) *ffcli.Command {
	var limit *int
	var since *int64
	return readCommand(env, "history", "ce history --workspace FILE [--limit N] [--since EVENT_ID] [--json]", "the room's events, newest first (or after --since, oldest first)",
		func(fs *flag.FlagSet) func([]string) error {
			limit = fs.Int("limit", 0, "how many events (default 50, max 200)")
			since = fs.Int64("since", -1, "events after this event id, oldest first")
			return func(args []string) error {
				if len(args) > 0 {
					return usageErr("history takes no arguments")
				}
				return nil
			}
		},
		func(ctx context.Context, eng *room.Engine, q room.Querier, _ []string) (any, func(), error) {
			in := room.HistoryInput{Limit: *limit}
			if *since >= 0 {
				in.SinceEventID = since
			}
			h, err := eng.History(ctx, q, room.Operator(eng.HostID), in)
			return h, func() { printEvents(env.Stdout, h.Events) }, err
		})
}

func diffCommand(env Env) *ffcli.Command {
	var base *int64
	return readCommand(env, "diff", "ce diff --workspace FILE --base N [--json]", "unified diff from version N to the current one",
		func(fs *flag.FlagSet) func([]string) error {
			base = fs.Int64("base", 0, "the version to diff from (required)")
			return func(args []string) error {
				if len(args) > 0 {
					return usageErr("diff takes no arguments")
				}
				if *base <= 0 {
					return usageErr("--base N is required (a version number, 1 or more)")
				}
				return nil
			}
		},
		func(ctx context.Context, eng *room.Engine, q room.Querier, _ []string) (any, func(), error) {
			d, err := eng.Diff(ctx, q, room.Operator(eng.HostID), room.DiffInput{BaseVersion: *base})
			return d, func() {
				if d.Diff == "" {
					fmt.Fprintf(env.Stdout, "no changes between v%d and v%d\n", d.BaseVersion, d.CurrentVersion)
					return
				}
				fmt.Fprint(env.Stdout, d.Diff)
			}, err
		})
}

// printTable writes one aligned line per row under header (none when header
// is empty), or the empty message when there are no rows: every ce listing
// reads the same way.
func printTable[T any](w io.Writer, empty, header string, rows []T, line func(T) string) {
	if len(rows) == 0 {
		fmt.Fprintln(w, empty)
		return
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	if header != "" {
		fmt.Fprintln(tw, header)
	}
	for _, r := range rows {
		fmt.Fprintln(tw, line(r))
	}
	tw.Flush()
}

// sessionRefs lists a participant's live sessions for `ce participants`:
// the handles `ce end-session --session` takes ("-" for none).
func sessionRefs(p room.Participant) string {
	if len(p.Sessions) == 0 {
		return "-"
	}
	refs := make([]string, len(p.Sessions))
	for i, s := range p.Sessions {
		refs[i] = s.SessionRef
	}
	return strings.Join(refs, ",")
}
