package room

import (
	"context"
	"testing"
)

// TestExpiredTaskStoresTheReason pins what a task failed by its TTL keeps:
// the reason (a domain fact), not a protocol's error object, and that rows
// written before issue 15 — which stored D34's JSON-RPC error object — still
// read as expired.
func TestExpiredTaskStoresTheReason(t *testing.T) {
	ctx := context.Background()
	d := openDirect(t)
	owner := d.join("read", "propose", "checkout")
	res := d.create(owner, CreateHandoffInput{Summary: "never finished"})
	other := d.create(owner, CreateHandoffInput{Summary: "also never finished"})
	d.advance(d.e.Limits.TaskTTL)
	if _, err := d.run(func(tx *Tx) error { return d.e.sweepTasks(tx) }); err != nil {
		t.Fatal(err)
	}
	var stored string
	if err := d.conn.QueryRowContext(ctx, `SELECT error_json FROM tasks WHERE task_id = ?`, res.Task.TaskID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != `{"reason":"task_expired"}` {
		t.Fatalf("error_json = %s, want the reason only", stored)
	}

	// An old-form row, as a sidecar written before the reason was stored
	// holds it.
	if _, err := d.conn.ExecContext(ctx, `UPDATE tasks SET error_json = '{"code":-32603,"message":"task expired"}' WHERE task_id = ?`,
		other.Task.TaskID); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{res.Task.TaskID, other.Task.TaskID} {
		task, err := d.e.GetTask(ctx, d.conn, owner, TaskIDInput{TaskID: id})
		if err != nil {
			t.Fatal(err)
		}
		if task.Status != TaskFailed || task.StatusMessage != "task expired" || task.Failure != TaskFailureExpired || task.Error != nil {
			t.Fatalf("task %s = %+v, want failed, expired, with no rendered error", id, task)
		}
	}
}

func TestFailureOf(t *testing.T) {
	for stored, want := range map[string]string{
		`{"reason":"task_expired"}`:                TaskFailureExpired,
		`{"reason":"something_else"}`:              "something_else",
		`{"code":-32603,"message":"task expired"}`: TaskFailureExpired,
		`{}`: TaskFailureExpired,
	} {
		if got := failureOf(stored); got != want {
			t.Errorf("failureOf(%s) = %q, want %q", stored, got, want)
		}
	}
}
