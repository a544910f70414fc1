package room

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// Migration 10 dropped the UNIQUE constraints on handoffs.task_id and
// tasks.correlation_id, and with them the two indexes SQLite kept for them.
// These tests stand in for what the constraints guaranteed: every lookup
// between a handoff and its task goes through a primary key, and the two
// rows name each other one to one.

// recordingQuerier is a Querier that keeps every statement run through it
// with the arguments of its first run, so a test can ask SQLite for the
// plan of each statement a workload used.
type recordingQuerier struct {
	Querier
	args map[string][]any
}

func newRecordingQuerier(q Querier) *recordingQuerier {
	return &recordingQuerier{Querier: q, args: map[string][]any{}}
}

func (r *recordingQuerier) note(query string, args []any) {
	if _, ok := r.args[query]; !ok {
		r.args[query] = args
	}
}

func (r *recordingQuerier) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	r.note(query, args)
	return r.Querier.ExecContext(ctx, query, args...)
}

func (r *recordingQuerier) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	r.note(query, args)
	return r.Querier.QueryContext(ctx, query, args...)
}

func (r *recordingQuerier) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	r.note(query, args)
	return r.Querier.QueryRowContext(ctx, query, args...)
}

// pairingWorkload is what a room did to its handoffs and tasks: the ids of
// handoffs left in each state, keyed by name.
type pairingWorkload struct {
	handoff, task map[string]string
	owner, worker Principal // the owner of every handoff but one, and their assignee
}

// runPairingWorkload drives d through every command that writes handoffs or
// tasks (create, with and without an idempotency key and its replay, a
// follow-up, accept, input requests and answers, complete, approve, reject,
// task cancel, an admin's cancel of a participant's handoffs, TTL expiry of
// an open and an accepted handoff, purge of terminal tasks) and, when reads
// is not nil, every read of them through reads. It leaves handoffs whose
// task was purged, terminal tasks not yet purged, and live tasks, one of
// them with an open input request and one a follow-up. phase, when not
// nil, is called after each of its four phases.
func runPairingWorkload(t *testing.T, d *directRoom, reads Querier, phase func(name string)) pairingWorkload {
	t.Helper()
	ctx := context.Background()
	w := pairingWorkload{handoff: map[string]string{}, task: map[string]string{}}
	owner := d.join("read", "observe", "propose", "checkout", "approve")
	worker := d.join("read", "observe", "propose", "checkout")
	leaver := d.join("read", "observe", "propose")
	op := Operator(d.e.HostID)
	w.owner, w.worker = owner, worker
	step := func(fn func(tx *Tx) error) {
		t.Helper()
		if _, err := d.run(fn); err != nil {
			t.Fatal(err)
		}
	}
	create := func(name string, p Principal, in CreateHandoffInput) {
		t.Helper()
		res := d.create(p, in)
		w.handoff[name], w.task[name] = res.Handoff.HandoffID, res.Task.TaskID
	}
	accept := func(name string) {
		step(func(tx *Tx) error {
			_, err := d.e.AcceptHandoff(tx, worker, HandoffIDInput{HandoffID: w.handoff[name]})
			return err
		})
	}
	complete := func(name string) {
		step(func(tx *Tx) error {
			_, err := d.e.CompleteHandoff(tx, worker, CompleteInput{HandoffID: w.handoff[name],
				Result: ResultInput{Text: name + " done", Artifacts: []Artifact{}}})
			return err
		})
	}
	ask := func(name, key string) {
		step(func(tx *Tx) error {
			_, err := d.e.RequestInput(tx, worker, RequestInputInput{HandoffID: w.handoff[name],
				Requests: []InputRequestSpec{{Key: key, Message: "which way?"}}})
			return err
		})
	}
	answer := func(name, key string) {
		step(func(tx *Tx) error {
			_, err := d.e.UpdateTask(tx, owner, UpdateTaskInput{TaskID: w.task[name], InputResponses: map[string]json.RawMessage{
				key: json.RawMessage(`{"action":"accept","content":{"answer":"left"}}`)}})
			return err
		})
	}
	read := func(name string) {
		t.Helper()
		if phase != nil {
			phase(name)
		}
		if reads == nil {
			return
		}
		for name, id := range w.handoff {
			if _, err := d.e.GetHandoff(ctx, reads, owner, HandoffIDInput{HandoffID: id}); err != nil {
				t.Fatalf("reading %s: %v", name, err)
			}
			if _, err := d.e.HandoffEvents(ctx, reads, owner, HandoffEventsInput{HandoffID: id}); err != nil {
				t.Fatal(err)
			}
			since := int64(1)
			if _, err := d.e.HandoffEvents(ctx, reads, owner, HandoffEventsInput{HandoffID: id, SinceEventID: &since}); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range w.task {
			// A purged task is unknown: the error is the answer.
			d.e.GetTask(ctx, reads, owner, TaskIDInput{TaskID: id})
			d.e.TaskRecord(ctx, reads, id)
		}
		for _, p := range []Principal{owner, worker, op} {
			for _, role := range append([]string{""}, handoffRoles...) {
				for _, status := range append([]string{""}, handoffStatuses...) {
					page, err := d.e.ListHandoffs(ctx, reads, p, ListHandoffsInput{Role: role, Status: status, Limit: 2})
					if err != nil {
						t.Fatal(err)
					}
					if page.NextCursor != "" {
						if _, err := d.e.ListHandoffs(ctx, reads, p, ListHandoffsInput{Role: role, Status: status, Limit: 2, Cursor: page.NextCursor}); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
		}
		if _, err := d.e.ActiveTaskShares(ctx, reads, op); err != nil {
			t.Fatal(err)
		}
		if _, err := d.e.Status(ctx, reads, op, Empty{}); err != nil {
			t.Fatal(err)
		}
		if _, err := d.e.Diagnostics(ctx, reads, op, Empty{}); err != nil {
			t.Fatal(err)
		}
		if _, err := d.e.Counts(ctx, reads); err != nil {
			t.Fatal(err)
		}
		if _, err := d.e.Totals(ctx, reads); err != nil {
			t.Fatal(err)
		}
		since := int64(0)
		for _, p := range []Principal{op, worker, leaver} { // every handoff; parties and open calls; parties only
			if _, err := d.e.History(ctx, reads, p, HistoryInput{}); err != nil {
				t.Fatal(err)
			}
			if _, err := d.e.History(ctx, reads, p, HistoryInput{SinceEventID: &since}); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := d.e.NextDue(ctx, reads); err != nil {
			t.Fatal(err)
		}
	}
	ttl := d.e.Limits.TaskTTL

	// Finished at the start, purged one TTL later.
	create("rejected", owner, CreateHandoffInput{Summary: "first try", Assignee: worker.ParticipantID, IdempotencyKey: "key-first"})
	accept("rejected")
	ask("rejected", "q1")
	answer("rejected", "q1")
	complete("rejected")
	step(func(tx *Tx) error {
		_, err := d.e.RejectHandoff(tx, owner, DecideInput{HandoffID: w.handoff["rejected"], Note: "not quite"})
		return err
	})
	create("followup", owner, CreateHandoffInput{Summary: "second try", FollowsHandoffID: w.handoff["rejected"], IdempotencyKey: "key-second"})
	if again := d.create(owner, CreateHandoffInput{Summary: "second try", FollowsHandoffID: w.handoff["rejected"], IdempotencyKey: "key-second"}); again.Handoff.HandoffID != w.handoff["followup"] || again.Task.TaskID != w.task["followup"] {
		t.Fatalf("the replayed create answered %s/%s, want %s/%s", again.Handoff.HandoffID, again.Task.TaskID, w.handoff["followup"], w.task["followup"])
	}
	accept("followup")
	complete("followup")
	step(func(tx *Tx) error {
		_, err := d.e.ApproveHandoff(tx, owner, DecideInput{HandoffID: w.handoff["followup"]})
		return err
	})
	create("cancelled", owner, CreateHandoffInput{Summary: "never mind"})
	step(func(tx *Tx) error {
		_, err := d.e.CancelTask(tx, owner, TaskIDInput{TaskID: w.task["cancelled"]})
		return err
	})
	create("cut_off", leaver, CreateHandoffInput{Summary: "from someone who leaves"})
	step(func(tx *Tx) error {
		_, err := d.e.CancelParticipantHandoffs(tx, op, CancelHandoffsInput{ParticipantID: leaver.ParticipantID})
		return err
	})
	read("finished")

	// Live at half a TTL, expired one TTL later.
	d.advance(ttl / 2)
	create("expired_open", owner, CreateHandoffInput{Summary: "nobody came"})
	create("expired_accepted", owner, CreateHandoffInput{Summary: "taken, never done"})
	accept("expired_accepted")
	d.advance(ttl/2 + time.Millisecond)
	step(d.e.Sweep) // purges the four finished at the start
	read("purged")

	// Finished, not yet purged.
	create("completed", owner, CreateHandoffInput{Summary: "done, awaiting review"})
	accept("completed")
	complete("completed")
	create("cancelled_late", owner, CreateHandoffInput{Summary: "changed my mind"})
	step(func(tx *Tx) error {
		_, err := d.e.CancelTask(tx, owner, TaskIDInput{TaskID: w.task["cancelled_late"]})
		return err
	})
	d.advance(ttl / 2)
	step(d.e.Sweep) // expires the two live ones
	read("expired")

	// Live.
	create("asking", owner, CreateHandoffInput{Summary: "needs an answer", Assignee: worker.ParticipantID, IdempotencyKey: "key-asking"})
	accept("asking")
	ask("asking", "q1")
	create("open", owner, CreateHandoffInput{Summary: "still open, redoes the cancelled one", FollowsHandoffID: w.handoff["cancelled_late"]})
	read("live")

	for name, want := range map[string]string{"rejected": "", "followup": "", "cancelled": "", "cut_off": "",
		"expired_open": TaskFailed, "expired_accepted": TaskFailed, "completed": TaskCompleted,
		"cancelled_late": TaskCancelled, "asking": TaskInputRequired, "open": TaskWorking} {
		var got string
		d.conn.QueryRowContext(ctx, `SELECT status FROM tasks WHERE task_id = ?`, w.task[name]).Scan(&got)
		if got != want {
			t.Fatalf("after the workload task %s is %q, want %q (empty: purged)", name, got, want)
		}
	}
	return w
}

// pairingProblems says how the sidecar's handoffs and tasks fail to pair
// one to one (nothing when they do): every task's correlation_id names a
// handoff whose task_id is that task, no two handoffs name the same task,
// and no two tasks the same handoff. (A handoff whose task was purged
// names a task that is gone.)
func pairingProblems(q Querier) ([]string, error) {
	var out []string
	for _, c := range []struct{ what, query string }{
		{"tasks whose correlation_id names no handoff, or a handoff that names another task",
			`SELECT count(*) FROM tasks t LEFT JOIN handoffs h ON h.handoff_id = t.correlation_id
			 WHERE h.handoff_id IS NULL OR h.task_id IS NOT t.task_id`},
		{"handoffs whose task names another handoff",
			`SELECT count(*) FROM handoffs h JOIN tasks t ON t.task_id = h.task_id WHERE t.correlation_id IS NOT h.handoff_id`},
		{"task ids named by more than one handoff",
			`SELECT count(*) FROM (SELECT task_id FROM handoffs GROUP BY task_id HAVING count(*) > 1)`},
		{"handoff ids named by more than one task",
			`SELECT count(*) FROM (SELECT correlation_id FROM tasks GROUP BY correlation_id HAVING count(*) > 1)`},
	} {
		var n int
		if err := q.QueryRowContext(context.Background(), c.query).Scan(&n); err != nil {
			return nil, err
		}
		if n != 0 {
			out = append(out, fmt.Sprintf("%d %s", n, c.what))
		}
	}
	return out, nil
}

// checkPairing fails t unless the handoffs and tasks pair one to one.
func checkPairing(t *testing.T, q Querier) {
	t.Helper()
	problems, err := pairingProblems(q)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestHandoffsAndTasksPairOneToOne: the pairing the UNIQUE constraints of
// schema 1 kept is made by the create, which mints both ids and writes both
// rows in one command; after every kind of command that touches them, each
// task and its handoff still name each other and nothing else.
func TestHandoffsAndTasksPairOneToOne(t *testing.T) {
	d := openDirect(t)
	w := runPairingWorkload(t, d, nil, func(phase string) {
		t.Helper()
		problems, err := pairingProblems(d.conn)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("after the %s phase: %s", phase, p)
		}
	})
	var handoffs, tasks int
	if err := d.conn.QueryRowContext(context.Background(), `SELECT (SELECT count(*) FROM handoffs), (SELECT count(*) FROM tasks)`).Scan(&handoffs, &tasks); err != nil {
		t.Fatal(err)
	}
	if handoffs != len(w.handoff) || tasks != len(w.handoff)-4 {
		t.Fatalf("%d handoffs and %d tasks, want %d and %d (four purged)", handoffs, tasks, len(w.handoff), len(w.handoff)-4)
	}
}

// TestCheckPairingCatchesAWrongID: the check above fails on each way a
// create could pair wrongly, which no constraint refuses any more.
func TestCheckPairingCatchesAWrongID(t *testing.T) {
	cases := []struct{ name, mutation string }{
		{"a task naming another handoff", `UPDATE tasks SET correlation_id = (SELECT handoff_id FROM handoffs WHERE handoff_id <> tasks.correlation_id LIMIT 1) WHERE rowid = (SELECT max(rowid) FROM tasks)`},
		{"a handoff naming another task", `UPDATE handoffs SET task_id = (SELECT task_id FROM tasks WHERE task_id <> handoffs.task_id LIMIT 1) WHERE rowid = (SELECT max(rowid) FROM handoffs)`},
		{"a handoff naming a purged handoff's task", `UPDATE handoffs SET task_id = (SELECT task_id FROM handoffs WHERE rowid = 1) WHERE rowid = 2`},
	}
	for _, c := range cases {
		t.Run(c.name+" is reported", func(t *testing.T) {
			d := openDirect(t)
			runPairingWorkload(t, d, nil, nil)
			if _, err := d.conn.ExecContext(context.Background(), c.mutation); err != nil {
				t.Fatal(err)
			}
			problems, err := pairingProblems(d.conn)
			if err != nil {
				t.Fatal(err)
			}
			if len(problems) == 0 {
				t.Fatal("a sidecar with a wrong pairing passed the check")
			}
		})
	}
}

// tableWalk matches a plan step that walks handoffs or tasks (by name or by
// the aliases the engine's queries give them) instead of searching them, or
// that builds a throwaway index because none fits. boundedWalk matches the
// walks that are not over the table: those of a partial index that holds
// only live work (at most 32 live tasks; the live handoffs), whose size
// does not grow with the sidecar.
var (
	tableWalk   = regexp.MustCompile(`^SCAN (handoffs|tasks|h|t)\b|AUTOMATIC`)
	boundedWalk = regexp.MustCompile(`^SCAN (handoffs|tasks|h|t) USING (COVERING )?INDEX (tasks_expiry_due|handoffs_by_(owner|assignee|requested)_live)$`)
)

// walksAllowed are the statements that read every row of handoffs or tasks
// by design: the room's totals (ce status, diagnostics).
var walksAllowed = []string{"SELECT (SELECT count(*) FROM tasks), (SELECT count(*) FROM handoffs)"}

// touchesHandoffsOrTasks says whether query reads or writes either table.
var touchesHandoffsOrTasks = regexp.MustCompile(`\b(handoffs|tasks)\b`)

// TestEveryHandoffAndTaskStatementSearches runs every command and read of
// handoffs and tasks through a recording querier and asks SQLite for the
// plan of each statement that touches either table: none may walk it. A
// lookup by handoffs.task_id or tasks.correlation_id (which lost their
// indexes in migration 10) would show as a SCAN and fail here.
func TestEveryHandoffAndTaskStatementSearches(t *testing.T) {
	d := openDirect(t)
	rec := newRecordingQuerier(d.conn)
	d.q = rec
	runPairingWorkload(t, d, rec, nil)
	var queries []string
	for q := range rec.args {
		if touchesHandoffsOrTasks.MatchString(q) {
			queries = append(queries, q)
		}
	}
	sort.Strings(queries)
	if len(queries) < 30 {
		t.Fatalf("the workload ran only %d statements on handoffs or tasks; the recording is broken", len(queries))
	}
	for _, q := range queries {
		plan := queryPlan(t, d.conn, q, rec.args[q]...)
		allowed := false
		for _, a := range walksAllowed {
			allowed = allowed || strings.Contains(q, a)
		}
		for _, line := range plan {
			if tableWalk.MatchString(line) && !boundedWalk.MatchString(line) && !allowed {
				t.Errorf("%q walks a table:\n%s\nquery: %s", line, strings.Join(plan, "\n"), q)
			}
		}
	}
}
