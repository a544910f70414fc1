package room

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The queries that run after every write batch or on every sweep must be
// answered from indexes: a walk over every finished task made each batch
// slower as the sidecar grew (bench, 100,000 handoffs). These tests read
// SQLite's own plan, so they fail when a query or an index drifts.
func TestDueQueriesUseIndexes(t *testing.T) {
	ctx := context.Background()
	st, err := OpenStore(ctx, filepath.Join(t.TempDir(), "idea.md.commonroom.db"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	cases := []struct {
		name  string
		query string
		args  []any
		want  []string // every one must appear in the plan
	}{
		{"next due uses the purge and expiry indexes", nextDueQuery, nil,
			[]string{"tasks_purge_due", "tasks_expiry_due", "sessions_live", "leases_live_expiry", "invites_lapsing"}},
		{"purge uses the purge index", purgeTasksQuery, []any{int64(1)}, []string{"tasks_purge_due"}},
		{"a task and its open input requests by primary key", taskByIDQuery, []any{"task_x"},
			[]string{"SEARCH tasks USING INDEX sqlite_autoindex_tasks_1", "SEARCH task_inputs USING PRIMARY KEY"}},
		// At most 32 tasks are live, so either live-task index bounds the walk.
		{"expiry walks only live tasks", expireDueTasksQuery, []any{int64(1)}, []string{"USING INDEX tasks_"}},
		// The live-task queries read the live-task partial index (migration 7
		// dropped tasks_active, which only they used).
		{"the cap count reads only live tasks", liveTaskCountQuery, []any{"participant_x"}, []string{"USING INDEX tasks_expiry_due"}},
		{"an owner's live tasks are read through the live-task index", ownerLiveTasksQuery, []any{"participant_x"}, []string{"USING INDEX tasks_expiry_due"}},
		{"the shares read only live tasks", liveTasksByOwnerQuery, nil, []string{"USING INDEX tasks_expiry_due"}},
		{"the writer's set of live tasks reads only live tasks", liveTasksQuery, nil, []string{"USING INDEX tasks_expiry_due"}},
		// Not a due query, but one of the same kind of index: a handoff's
		// events are read through the narrow index of migration 8, in
		// event order, without sorting the ring.
		{"a handoff's newest events use the narrow event index", handoffEventsNewestQuery(50), []any{"handoff_x"},
			[]string{"SEARCH events USING INDEX events_by_handoff_tail (<expr>=?)"}},
		{"a handoff's events since an id use the narrow event index", handoffEventsSinceQuery(50), []any{"handoff_x", int64(1)},
			[]string{"SEARCH events USING INDEX events_by_handoff_tail (<expr>=?"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan := queryPlan(t, st.Writer, c.query, c.args...)
			joined := strings.Join(plan, "\n")
			for _, w := range c.want {
				if !strings.Contains(joined, w) {
					t.Errorf("plan does not use %s:\n%s", w, joined)
				}
			}
			for _, line := range plan {
				// A scan of a subquery's few rows (the newest events, put
				// back in order) is not a walk over a table.
				if strings.HasPrefix(line, "SCAN ") && !strings.Contains(line, "INDEX") && !strings.HasPrefix(line, "SCAN (subquery-") {
					t.Errorf("plan walks a table: %q\n%s", line, joined)
				}
			}
		})
	}
}

// A room back after a long absence may find far more finished task rows due
// than one sweep should delete: each sweep takes at most purgeChunk, says
// the next one is due now, and the rest follow in later sweeps.
func TestPurgeRunsInBoundedChunks(t *testing.T) {
	d := openDirect(t)
	owner := d.join("read", "propose")
	const n = 2*purgeChunk + 500
	if _, err := d.run(func(tx *Tx) error {
		for range n {
			res, err := d.e.CreateHandoff(tx, owner, CreateHandoffInput{Summary: "finished long ago"})
			if err != nil {
				return err
			}
			if _, err := d.e.CancelTask(tx, owner, TaskIDInput{TaskID: res.Task.TaskID}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	rows := func() int {
		var c int
		if err := d.conn.QueryRowContext(context.Background(), `SELECT count(*) FROM tasks`).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	if got := rows(); got != n {
		t.Fatalf("%d task rows before the purge, want %d", got, n)
	}
	d.advance(Defaults().TaskTTL + time.Millisecond)
	for _, want := range []int{n - purgeChunk, n - 2*purgeChunk, 0, 0} {
		before := rows()
		out, err := d.run(d.e.Sweep)
		if err != nil {
			t.Fatal(err)
		}
		if got := rows(); got != want {
			t.Fatalf("after a sweep: %d task rows, want %d", got, want)
		}
		// Purged rows send no notice; the outcome says so for task caches.
		if out.TasksPurged != (want < before) {
			t.Fatalf("sweep from %d to %d rows: TasksPurged = %v", before, want, out.TasksPurged)
		}
		due, ok, err := d.e.NextDue(context.Background(), d.conn)
		if err != nil {
			t.Fatal(err)
		}
		if more := want > 0; more != (ok && !due.After(d.e.Now())) {
			t.Fatalf("with %d rows left NextDue = %v (ok %v), want due now exactly when rows are left", want, due, ok)
		}
	}
	// Handoffs keep their results; only task rows are retention.
	var handoffs int
	if err := d.conn.QueryRowContext(context.Background(), `SELECT count(*) FROM handoffs`).Scan(&handoffs); err != nil || handoffs != n {
		t.Fatalf("%d handoffs after the purge (%v), want %d", handoffs, err, n)
	}
}

// TestCoveredIndexesAreGone: migration 7 drops the four indexes that no query
// reads (each was rewritten on every lifecycle step), and none comes back.
func TestCoveredIndexesAreGone(t *testing.T) {
	ctx := context.Background()
	st, err := OpenStore(ctx, filepath.Join(t.TempDir(), "idea.md.commonroom.db"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, name := range []string{"handoffs_by_status", "handoffs_by_assignee", "tasks_active", "tasks_terminal"} {
		var n int
		if err := st.Writer.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name = ?`, name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("index %s still exists", name)
		}
	}
}
