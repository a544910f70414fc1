package cli

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/commonroom/ce/room"
)

// inboxCommand is `ce inbox`: what waits for the host — results to approve,
// proposals to review, questions to answer — from the same engine query as
// the owner page's count (room.Engine.Waiting). While a room serves FILE it
// asks that room through its owner listener with the operator credential
// (GET /workspace/waiting), so it sees exactly what the page sees; with no
// room serving it runs the query in-process on a query-only connection.
func inboxCommand(env Env) *ffcli.Command {
	fs := flag.NewFlagSet("ce inbox", flag.ContinueOnError)
	workspace := fs.String("workspace", "", workspaceUsage)
	asJSON := fs.Bool("json", false, "print JSON (ids, counts and items)")
	return &ffcli.Command{
		Name:       "inbox",
		ShortUsage: "ce inbox --workspace FILE [--json]",
		ShortHelp:  "what waits for the host: results to approve, proposals to review, questions to answer",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageErr("inbox takes no arguments")
			}
			w, err := hostWaiting(ctx, *workspace)
			if err != nil {
				return err
			}
			if *asJSON {
				return printJSON(env.Stdout, w)
			}
			printWaiting(env.Stdout, w)
			return nil
		},
	}
}

// hostWaiting reads what waits for the host: through the running room when
// one serves docPath, in-process otherwise.
func hostWaiting(ctx context.Context, docPath string) (room.Waiting, error) {
	abs, err := room.ExistingDocPath(docPath)
	if err != nil {
		return room.Waiting{}, err
	}
	oc, lock, err := servingRoom(abs)
	if err != nil {
		return room.Waiting{}, err
	}
	var w room.Waiting
	if oc != nil {
		err := (&hostDoor{remote: oc, doc: docPath}).call(ctx, "waiting", nil, &w)
		return w, err
	}
	// Nobody serves: a query-only read needs no writer lock, and holding
	// it would make a `ce serve` started meanwhile fail for no reason.
	lock.Release()
	err = withReader(ctx, abs, func(eng *room.Engine, q room.Querier) error {
		var err error
		w, err = eng.Waiting(ctx, q, room.Operator(eng.HostID), room.Empty{})
		return err
	})
	return w, err
}

// printWaiting says what waits in words, one line per item, oldest first,
// each with the id that acts on it.
func printWaiting(out io.Writer, w room.Waiting) {
	if w.Count == 0 {
		fmt.Fprintln(out, "nothing waits for you")
		return
	}
	fmt.Fprintf(out, "%d waiting for you: %s, %s, %s\n", w.Count,
		countWords(w.Results, "result to approve", "results to approve"),
		countWords(w.Proposals, "proposal to review", "proposals to review"),
		countWords(w.Questions, "handoff with questions", "handoffs with questions"))
	for _, it := range w.Items {
		fmt.Fprintf(out, "%s  %s\n", it.ID, waitingLine(it))
	}
	if w.Truncated {
		fmt.Fprintf(out, "(%d more not listed; the oldest are shown)\n", w.Count-len(w.Items))
	}
}

// waitingLine is one item in words, as the owner page's activity says it.
func waitingLine(it room.WaitingItem) string {
	who := orElse(it.FromName, it.FromID)
	switch it.Kind {
	case room.WaitResult:
		return fmt.Sprintf("%s finished %q — waiting for your approval (since %s)", who, it.Summary, it.Since)
	case room.WaitQuestion:
		return fmt.Sprintf("%s asks %s about %q — waiting for your answer (since %s)", who,
			countWords(it.Questions, "question", "questions"), it.Summary, it.Since)
	default:
		what := "a change to " + it.Target
		if it.Scope == room.ScopeDocument {
			what = "a WHOLE-DOCUMENT replacement"
		}
		stale := ""
		if it.Stale {
			stale = fmt.Sprintf("; the document changed since its base v%d", it.BaseVersion)
		}
		return fmt.Sprintf("%s proposes %s: %q — waiting for your review (since %s%s)", who, what, it.Summary, it.Since, stale)
	}
}

func countWords(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
