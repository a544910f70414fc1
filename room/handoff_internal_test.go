package room

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// These tests run the engine on the sidecar's write connection directly,
// without the actor, so no sweeper timer can run between a clock change and
// a command. They pin the path where a command itself applies a TTL expiry
// that fell due before the sweeper ran (D39).

type directRoom struct {
	t    *testing.T
	e    *Engine
	conn *sql.Conn
	q    Querier // what commands run on; nil: conn
	mu   sync.Mutex
	now  time.Time
}

// newDirectRoom is a directRoom on a fresh document in t.TempDir(), its
// clock at 2026-08-01 09:00 UTC; the caller opens the sidecar (conn).
func newDirectRoom(t *testing.T) *directRoom {
	t.Helper()
	doc := filepath.Join(t.TempDir(), "idea.md")
	if err := os.WriteFile(doc, []byte("# Idea\n\n## Goals\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := NewEngine(doc, Defaults())
	if err != nil {
		t.Fatal(err)
	}
	d := &directRoom{t: t, e: e, now: time.Date(2026, 8, 1, 9, 0, 0, 0, time.UTC)}
	e.Clock = func() time.Time { d.mu.Lock(); defer d.mu.Unlock(); return d.now }
	return d
}

func openDirect(t *testing.T) *directRoom {
	t.Helper()
	ctx := context.Background()
	d := newDirectRoom(t)
	e := d.e
	st, err := OpenStore(ctx, SidecarPath(e.DocPath), false)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := st.Writer.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); st.Close() })
	d.conn = conn
	if _, err := d.run(func(tx *Tx) error { return e.Bootstrap(tx, "host") }); err != nil {
		t.Fatal(err)
	}
	return d
}

func (d *directRoom) advance(by time.Duration) {
	d.mu.Lock()
	d.now = d.now.Add(by)
	d.mu.Unlock()
}

// run is one command in its own transaction, the way the actor runs it:
// rolled back on error, committed with its outcome otherwise.
func (d *directRoom) run(fn func(tx *Tx) error) (Outcome, error) {
	ctx := context.Background()
	if _, err := d.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		d.t.Fatal(err)
	}
	var q Querier = d.conn
	if d.q != nil {
		q = d.q
	}
	tx := d.e.NewTx(ctx, q, d.e.Now())
	err := fn(tx)
	var out Outcome
	if err == nil {
		out, err = tx.Finish()
	}
	if err == nil {
		err = WriteEvents(ctx, q, []Outcome{out})
	}
	if err != nil {
		if _, rbErr := d.conn.ExecContext(ctx, "ROLLBACK"); rbErr != nil {
			d.t.Fatal(rbErr)
		}
		return Outcome{}, err
	}
	if _, err := d.conn.ExecContext(ctx, "COMMIT"); err != nil {
		d.t.Fatal(err)
	}
	return out, nil
}

func (d *directRoom) join(caps ...string) Principal {
	d.t.Helper()
	var p Principal
	if _, err := d.run(func(tx *Tx) error {
		inv, err := d.e.CreateInvite(tx, Operator(d.e.HostID), InviteInput{Capabilities: caps})
		if err != nil {
			return err
		}
		g, err := d.e.Join(tx, JoinInput{Secret: inv.Token, Name: "p"})
		if err != nil {
			return err
		}
		c, _ := ParseCaps(g.Capabilities)
		p = Principal{ParticipantID: g.ParticipantID, Caps: c}
		return nil
	}); err != nil {
		d.t.Fatal(err)
	}
	return p
}

func (d *directRoom) create(p Principal, in CreateHandoffInput) CreateHandoffResult {
	d.t.Helper()
	var res CreateHandoffResult
	if _, err := d.run(func(tx *Tx) (err error) { res, err = d.e.CreateHandoff(tx, p, in); return }); err != nil {
		d.t.Fatal(err)
	}
	return res
}

func (d *directRoom) status(query, id string) string {
	d.t.Helper()
	var s string
	if err := d.conn.QueryRowContext(context.Background(), query, id).Scan(&s); err != nil {
		d.t.Fatal(err)
	}
	return s
}

func eventTypes(out Outcome) []string {
	var ts []string
	for _, ev := range out.Events {
		ts = append(ts, ev.Type)
	}
	return ts
}

func TestInCommandExpiry_RefusedCommandSeesTheExpiryAndRollsItBack(t *testing.T) {
	d := openDirect(t)
	owner := d.join("read", "propose", "checkout")
	worker := d.join("read", "propose", "checkout")
	res := d.create(owner, CreateHandoffInput{Summary: "x", Assignee: worker.ParticipantID})
	d.advance(d.e.Limits.TaskTTL)
	_, err := d.run(func(tx *Tx) error {
		_, err := d.e.AcceptHandoff(tx, worker, HandoffIDInput{HandoffID: res.Handoff.HandoffID})
		return err
	})
	if ErrorKind(err) != KindHandoffConflict || AsError(err).Fields["status"] != HandoffCancelled {
		t.Fatalf("accept after the TTL: %v, want handoff_conflict with status cancelled", err)
	}
	// The refused command rolled back, expiry included; the sweeper owns it.
	if h, tk := d.status(`SELECT status FROM handoffs WHERE handoff_id = ?`, res.Handoff.HandoffID),
		d.status(`SELECT status FROM tasks WHERE task_id = ?`, res.Task.TaskID); h != HandoffOpen || tk != TaskWorking {
		t.Fatalf("after a refused command: handoff %s task %s, want the unswept open/working", h, tk)
	}
	out, err := d.run(d.e.Sweep)
	if err != nil {
		t.Fatal(err)
	}
	if got := eventTypes(out); !slices.Contains(got, "task.failed") || !slices.Contains(got, "handoff.cancelled") {
		t.Fatalf("sweep events %v", got)
	}
}

func TestInCommandExpiry_SuccessfulCommandCommitsTheExpiry(t *testing.T) {
	d := openDirect(t)
	owner := d.join("read", "propose", "checkout")
	worker := d.join("read", "propose", "checkout")
	cancelled := d.create(owner, CreateHandoffInput{Summary: "to cancel"})
	answered := d.create(owner, CreateHandoffInput{Summary: "to answer", Assignee: worker.ParticipantID})
	if _, err := d.run(func(tx *Tx) error {
		if _, err := d.e.AcceptHandoff(tx, worker, HandoffIDInput{HandoffID: answered.Handoff.HandoffID}); err != nil {
			return err
		}
		_, err := d.e.RequestInput(tx, worker, RequestInputInput{HandoffID: answered.Handoff.HandoffID, Requests: []InputRequestSpec{{Key: "k", Message: "?"}}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	d.advance(d.e.Limits.TaskTTL)

	out, err := d.run(func(tx *Tx) error {
		_, err := d.e.CancelTask(tx, owner, TaskIDInput{TaskID: cancelled.Task.TaskID})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := eventTypes(out); !slices.Equal(got, []string{"task.failed", "handoff.cancelled"}) {
		t.Fatalf("cancel after the TTL wrote %v, want the expiry only", got)
	}
	if len(out.Tasks) != 1 || out.Tasks[0].TaskID != cancelled.Task.TaskID {
		t.Fatalf("task notices %+v", out.Tasks)
	}
	notice := out.Tasks[0].Task
	if notice.TaskID != cancelled.Task.TaskID || notice.Status != TaskFailed || notice.StatusMessage != "task expired" {
		t.Fatalf("published task %+v", notice)
	}
	if got := d.status(`SELECT cancel_reason FROM handoffs WHERE handoff_id = ?`, cancelled.Handoff.HandoffID); got != "task_expired" {
		t.Fatalf("cancel_reason %s, want task_expired (it expired before the cancel)", got)
	}

	out, err = d.run(func(tx *Tx) error {
		_, err := d.e.UpdateTask(tx, owner, UpdateTaskInput{TaskID: answered.Task.TaskID, InputResponses: map[string]json.RawMessage{"k": json.RawMessage(`{"action":"accept"}`)}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := eventTypes(out); !slices.Equal(got, []string{"task.failed", "handoff.cancelled"}) {
		t.Fatalf("answer after the TTL wrote %v, want the expiry only", got)
	}
	if got := d.status(`SELECT close_reason FROM task_inputs WHERE task_id = ?`, answered.Task.TaskID); got != InputCancelled {
		t.Fatalf("input closed as %s, want cancelled (the late answer is not recorded)", got)
	}
}

func TestInCommandExpiry_CreateDoesNotCountExpiredTasksAgainstTheCap(t *testing.T) {
	d := openDirect(t)
	// The host is exempt from the per-participant share, so one principal
	// can fill the whole room.
	owner := Operator(d.e.HostID)
	keyed := d.create(owner, CreateHandoffInput{Summary: "keyed", IdempotencyKey: "k"})
	for range d.e.Limits.MaxActiveTasks - 1 {
		d.create(owner, CreateHandoffInput{Summary: "old"})
	}
	d.advance(d.e.Limits.TaskTTL)
	var res CreateHandoffResult
	out, err := d.run(func(tx *Tx) (err error) {
		res, err = d.e.CreateHandoff(tx, owner, CreateHandoffInput{Summary: "new"})
		return
	})
	if err != nil {
		t.Fatalf("expired tasks held the cap: %v", err)
	}
	var failed int
	for _, ev := range out.Events {
		if ev.Type == "task.failed" {
			failed++
		}
	}
	if failed != 32 || res.Task.Status != TaskWorking {
		t.Fatalf("%d tasks expired in the create, new task %s", failed, res.Task.Status)
	}
	// A replay shows its original as it really is: expired.
	d.advance(time.Millisecond)
	var again CreateHandoffResult
	if _, err := d.run(func(tx *Tx) (err error) {
		again, err = d.e.CreateHandoff(tx, owner, CreateHandoffInput{Summary: "keyed", IdempotencyKey: "k"})
		return
	}); err != nil {
		t.Fatal(err)
	}
	if !again.Replayed || again.Handoff.HandoffID != keyed.Handoff.HandoffID || again.Task.Status != TaskFailed ||
		again.Handoff.Status != HandoffCancelled {
		t.Fatalf("replay of an expired create: %+v %+v", again.Handoff, again.Task)
	}
}
