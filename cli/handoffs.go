package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/commonroom/ce/httpapi/present"
	"io"
	"strings"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/commonroom/ce/room"
)

// The handoff commands are the local operator's view of the room file
// (listing, like `ce proposals`) plus `ce task` / `ce task-cancel`, which act
// as one participant because a task id alone is not authorization.

func handoffsCommand(env Env) *ffcli.Command {
	fs := flag.NewFlagSet("ce handoffs", flag.ContinueOnError)
	workspace := fs.String("workspace", "", workspaceUsage)
	status := fs.String("status", "", "only handoffs in this status (open, accepted, result_ready, approved, rejected, cancelled)")
	participant := fs.String("participant", "", "list what this participant may see, with its own capabilities (the inbox)")
	session := fs.String("session", "", "list what this session may see (a session token; the inbox)")
	role := fs.String("role", "", "with --participant or --session: assigned_to_me, created_by_me or open_to_accept")
	limit := fs.Int("limit", 0, "at most this many (default 50 with --participant or --session, else 200; max 200)")
	cursor := fs.String("cursor", "", "next_cursor of the previous page (the one printed after \"more:\")")
	asJSON := fs.Bool("json", false, "print JSON")
	return &ffcli.Command{
		Name: "handoffs",
		ShortUsage: "ce handoffs --workspace FILE [--status S] [--limit N] [--cursor C] [--json]\n" +
			"  ce handoffs --workspace FILE (--participant P | --session TOKEN) [--role R] [--status S] [--limit N] [--cursor C] [--json]",
		ShortHelp: "list the room's handoffs (or one participant's inbox), newest first",
		FlagSet:   fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageErr("handoffs takes no arguments")
			}
			scoped := *participant != "" || *session != ""
			if *participant != "" && *session != "" {
				return usageErr("give --participant or --session, not both")
			}
			if !scoped && *role != "" {
				return usageErr("--role lists one participant's inbox: add --participant P or --session TOKEN (without them, ce handoffs lists the whole room)")
			}
			return withReader(ctx, *workspace, func(eng *room.Engine, q room.Querier) error {
				if !scoped {
					// The operator's listing: the whole room, a page of up
					// to 200 at a time. Without --limit or --cursor, --json
					// prints the first page's array as it always did; with
					// either it prints the page, next_cursor included.
					paged := *limit != 0 || *cursor != ""
					n := *limit
					if n == 0 {
						n = eng.Limits.MaxListItems
					}
					page, err := eng.ListHandoffs(ctx, q, room.Operator(eng.HostID),
						room.ListHandoffsInput{Status: *status, Limit: n, Cursor: *cursor})
					if err != nil {
						return err
					}
					switch {
					case *asJSON && paged:
						return printJSON(env.Stdout, page)
					case *asJSON:
						return printJSON(env.Stdout, page.Handoffs)
					}
					printHandoffPage(env.Stdout, page, namesFrom(ctx, eng, q, handoffParties(page.Handoffs...)...))
					return nil
				}
				var p room.Principal
				var err error
				if *session != "" {
					p, err = eng.Authenticate(ctx, q, *session)
				} else {
					p, err = eng.PrincipalFor(ctx, q, *participant)
				}
				if err != nil {
					return err
				}
				page, err := eng.ListHandoffs(ctx, q, p, room.ListHandoffsInput{Role: *role, Status: *status, Limit: *limit, Cursor: *cursor})
				if err != nil {
					return err
				}
				if *asJSON {
					return printJSON(env.Stdout, page)
				}
				printHandoffPage(env.Stdout, page, namesFrom(ctx, eng, q, handoffParties(page.Handoffs...)...))
				return nil
			})
		},
	}
}

// printHandoffPage prints a page's table and, when older handoffs follow,
// the cursor that lists them.
func printHandoffPage(w io.Writer, page room.HandoffPage, names partyNames) {
	printHandoffTable(w, page.Handoffs, names)
	if page.NextCursor != "" {
		fmt.Fprintf(w, "more: --cursor %s\n", page.NextCursor)
	}
}

// printHandoffTable lists handoffs with their parties by name ("planner →
// writer"); --json keeps the ids.
func printHandoffTable(w io.Writer, hs []room.Handoff, names partyNames) {
	printTable(w, "no handoffs", "HANDOFF\tSTATUS\tTASK\tFROM → TO\tSUMMARY", hs, func(h room.Handoff) string {
		task := "purged"
		if h.TaskStatus != nil {
			task = *h.TaskStatus
		}
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%s", h.HandoffID, h.Status, task, names.arrow(h), oneLine(termSafe(h.Summary), 60))
	})
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func handoffCommand(env Env) *ffcli.Command {
	fs := flag.NewFlagSet("ce handoff", flag.ContinueOnError)
	workspace := fs.String("workspace", "", workspaceUsage)
	asJSON := fs.Bool("json", false, "print JSON")
	return &ffcli.Command{
		Name:       "handoff",
		ShortUsage: "ce handoff HANDOFF_ID --workspace FILE [--json]",
		ShortHelp:  "show one handoff with its result and input requests",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) != 1 {
				return usageErr("handoff takes exactly one HANDOFF_ID")
			}
			return withReader(ctx, *workspace, func(eng *room.Engine, q room.Querier) error {
				h, err := eng.GetHandoff(ctx, q, room.Operator(eng.HostID), room.HandoffIDInput{HandoffID: args[0]})
				if err != nil {
					return err
				}
				if *asJSON {
					return printJSON(env.Stdout, h)
				}
				printHandoff(env.Stdout, h, namesFrom(ctx, eng, q, handoffParties(h)...))
				return nil
			})
		},
	}
}

// printHandoff shows one handoff; its parties by name and id (the id is
// what the other commands take).
func printHandoff(w io.Writer, h room.Handoff, names partyNames) {
	deref := func(p *string) string {
		if p == nil {
			return "-"
		}
		return *p
	}
	task := "purged"
	if h.TaskStatus != nil {
		task = *h.TaskStatus
	}
	fmt.Fprintf(w, "handoff   %s (%s)\n", h.HandoffID, h.Status)
	fmt.Fprintf(w, "task      %s (%s)\n", h.TaskID, task)
	party := func(id *string) string {
		if id == nil {
			return "-"
		}
		return names.withID(*id)
	}
	fmt.Fprintf(w, "owner     %s\nassignee  %s\n", party(&h.OwnerID), party(h.AssigneeID))
	fmt.Fprintf(w, "summary   %s\n", termSafe(h.Summary))
	if h.Constraints != nil {
		fmt.Fprintf(w, "constraints\n  %s\n", strings.ReplaceAll(termSafe(*h.Constraints), "\n", "\n  "))
	}
	for _, in := range h.Inputs {
		fmt.Fprintf(w, "input %s [%s] %s\n", termSafe(in.Key), in.Status, termSafe(in.Message))
		if len(in.Response) > 0 && string(in.Response) != "null" {
			fmt.Fprintf(w, "  answer: %s\n", in.Response)
		}
	}
	if h.Result != nil {
		fmt.Fprintf(w, "result (is_error=%v)\n  %s\n", h.Result.IsError, strings.ReplaceAll(termSafe(h.Result.Text), "\n", "\n  "))
	}
	if h.DecidedBy != nil {
		fmt.Fprintf(w, "decided   %s by %s: %s\n", h.Status, party(h.DecidedBy), termSafe(deref(h.DecisionNote)))
	}
}

func handoffEventsCommand(env Env) *ffcli.Command {
	fs := flag.NewFlagSet("ce handoff-events", flag.ContinueOnError)
	workspace := fs.String("workspace", "", workspaceUsage)
	since := fs.Int64("since", 0, "only events after this event id")
	limit := fs.Int("limit", 0, "at most this many events (default 50, max 200)")
	asJSON := fs.Bool("json", false, "print JSON")
	return &ffcli.Command{
		Name:       "handoff-events",
		ShortUsage: "ce handoff-events HANDOFF_ID --workspace FILE [--since ID] [--limit N] [--json]",
		ShortHelp:  "the handoff's and its task's events still in the ring",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) != 1 {
				return usageErr("handoff-events takes exactly one HANDOFF_ID")
			}
			var sincePtr *int64
			if *since > 0 {
				sincePtr = since
			}
			return withReader(ctx, *workspace, func(eng *room.Engine, q room.Querier) error {
				evs, err := eng.HandoffEvents(ctx, q, room.Operator(eng.HostID), room.HandoffEventsInput{HandoffID: args[0], SinceEventID: sincePtr, Limit: *limit})
				if err != nil {
					return err
				}
				if *asJSON {
					return printJSON(env.Stdout, evs)
				}
				printEvents(env.Stdout, evs.Events)
				return nil
			})
		},
	}
}

func printEvents(w io.Writer, evs []room.Event) {
	printTable(w, "no events", "", evs, func(ev room.Event) string {
		return fmt.Sprintf("%d\t%s\t%s\t%s", ev.ID, ev.CreatedAt, ev.Type, ev.Payload)
	})
}

func taskCommand(env Env) *ffcli.Command {
	fs := flag.NewFlagSet("ce task", flag.ContinueOnError)
	workspace := fs.String("workspace", "", workspaceUsage)
	participant := fs.String("participant", "", "act as this participant (required: a task id alone is not authorization)")
	asJSON := fs.Bool("json", false, "print JSON")
	return &ffcli.Command{
		Name:       "task",
		ShortUsage: "ce task TASK_ID --participant PARTICIPANT_ID --workspace FILE [--json]",
		ShortHelp:  "show a task as tasks/get would, for one of its parties",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) != 1 {
				return usageErr("task takes exactly one TASK_ID")
			}
			if *participant == "" {
				return usageErr("--participant is required: a task id is not authorization")
			}
			return withReader(ctx, *workspace, func(eng *room.Engine, q room.Querier) error {
				p, err := eng.PrincipalFor(ctx, q, *participant)
				if err != nil {
					return err
				}
				t, err := eng.GetTask(ctx, q, p, room.TaskIDInput{TaskID: args[0]})
				if err != nil {
					return err
				}
				t = present.Task(t) // as tasks/get shows it
				if *asJSON {
					return printJSON(env.Stdout, t)
				}
				fmt.Fprintf(env.Stdout, "task     %s\nstatus   %s\nhandoff  %v\ncreated  %s\nupdated  %s\n",
					t.TaskID, t.Status, t.Meta[room.HandoffMetaKey], t.CreatedAt, t.LastUpdatedAt)
				if t.StatusMessage != "" {
					fmt.Fprintf(env.Stdout, "message  %s\n", t.StatusMessage)
				}
				for k := range t.InputRequests {
					fmt.Fprintf(env.Stdout, "waiting for input %q\n", k)
				}
				return nil
			})
		},
	}
}

func taskCancelCommand(env Env) *ffcli.Command {
	fs := flag.NewFlagSet("ce task-cancel", flag.ContinueOnError)
	workspace := fs.String("workspace", "", workspaceUsage)
	participant := fs.String("participant", "", "act as this participant: the task's owner, or one with admin (required)")
	asJSON := fs.Bool("json", false, "print JSON")
	return &ffcli.Command{
		Name:       "task-cancel",
		ShortUsage: "ce task-cancel TASK_ID --participant PARTICIPANT_ID --workspace FILE [--json]",
		ShortHelp:  "cancel a live task and its handoff (a finished task stays as it is)",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) != 1 {
				return usageErr("task-cancel takes exactly one TASK_ID")
			}
			if *participant == "" {
				return usageErr("--participant is required: a task id is not authorization")
			}
			taskID := args[0]
			if err := withHostDoor(ctx, env, *workspace, func(d *hostDoor) error {
				return d.callAs(ctx, *participant, "task.cancel", room.TaskIDInput{TaskID: taskID}, nil)
			}); err != nil {
				return err
			}
			if *asJSON {
				return printJSON(env.Stdout, map[string]string{"task_id": taskID, "status": "acknowledged"})
			}
			fmt.Fprintf(env.Stdout, "cancel acknowledged for %s (a task that had already finished is unchanged)\n", taskID)
			return nil
		},
	}
}

func usageErr(msg string) error { return &exitError{code: exitUsage, err: errors.New(msg)} }

// withReader opens the sidecar read-only as the local operator.
func withReader(ctx context.Context, workspace string, fn func(eng *room.Engine, q room.Querier) error) error {
	eng, st, err := readOnly(ctx, workspace)
	if err != nil {
		return err
	}
	defer st.Close()
	tx, err := st.Reader.BeginTx(ctx, nil)
	if err != nil {
		return room.Internal(err)
	}
	defer tx.Rollback()
	return fn(eng, tx)
}
