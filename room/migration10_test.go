package room

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// dropLaterSchema leaves out of the dumps what the migrations after 10
// add or change (12: storage_usage and pruned_ids; 13: handoffs_followed
// and version_chunks.refs), which their own tests check; 11's label is
// taken out where the dumps are compared.
func dropLaterSchema(maps ...map[string]string) {
	for _, m := range maps {
		for _, name := range []string{"storage_usage", "pruned_ids", "pruned_ids_age", "handoffs_followed", "version_chunks"} {
			delete(m, name)
		}
	}
}

// sidecarDump is every row of every table (rowids included) and every
// schema entry but its root page, as text, keyed by table or entry name.
func sidecarDump(t *testing.T, q Querier) (rows, schema map[string]string) {
	t.Helper()
	ctx := context.Background()
	rows, schema = map[string]string{}, map[string]string{}
	r, err := q.QueryContext(ctx, `SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_schema`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for r.Next() {
		var typ, name, tbl, text string
		if err := r.Scan(&typ, &name, &tbl, &text); err != nil {
			t.Fatal(err)
		}
		schema[name] = typ + " on " + tbl + ": " + text
		if typ == "table" {
			tables = append(tables, name)
		}
	}
	r.Close()
	for _, table := range tables {
		var withoutRowid bool
		if err := q.QueryRowContext(ctx, `SELECT sql LIKE '%WITHOUT ROWID%' FROM sqlite_schema WHERE name = ?`, table).Scan(&withoutRowid); err != nil {
			t.Fatal(err)
		}
		query := `SELECT rowid, * FROM "` + table + `" ORDER BY rowid`
		if withoutRowid {
			query = `SELECT * FROM "` + table + `" ORDER BY 1, 2`
		}
		r, err := q.QueryContext(ctx, query)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := r.Columns()
		var b strings.Builder
		fmt.Fprintln(&b, cols)
		for r.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := r.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for i, v := range vals {
				fmt.Fprintf(&b, "%s=%T:%v|", cols[i], v, v)
			}
			b.WriteByte('\n')
		}
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		r.Close()
		rows[table] = b.String()
	}
	return rows, schema
}

// roomReads is what the operator reads of each handoff and task of w, as
// the wire would carry it.
func roomReads(t *testing.T, d *directRoom, q Querier, w pairingWorkload) map[string]string {
	t.Helper()
	ctx := context.Background()
	op := Operator(d.e.HostID)
	out := map[string]string{}
	for name, id := range w.handoff {
		h, err := d.e.GetHandoff(ctx, q, op, HandoffIDInput{HandoffID: id})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(h)
		out["handoff "+name] = string(b)
		task, err := d.e.GetTask(ctx, q, w.owner, TaskIDInput{TaskID: w.task[name]})
		b, _ = json.Marshal(task)
		out["task "+name] = fmt.Sprintf("%s %v", b, err)
	}
	page, err := d.e.ListHandoffs(ctx, q, w.owner, ListHandoffsInput{Limit: 200})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(page)
	out["owner's inbox"] = string(b)
	return out
}

// TestMigration10RebuildsHandoffsAndTasksInPlace: a sidecar a schema-9 ce
// left (handoffs and tasks live, finished, purged; input requests; a
// follow-up; idempotency keys) is migrated in place to schema 10 with every
// row, rowid and column as it was, the same schema but for the two UNIQUE
// constraints, clean foreign keys and integrity, foreign keys enforced
// again on the writer, and the room goes on serving it: the same reads,
// an old task carried to its end, a replayed create, a new lifecycle.
func TestMigration10RebuildsHandoffsAndTasksInPlace(t *testing.T) {
	ctx := context.Background()
	d := newDirectRoom(t)
	e := d.e
	path := SidecarPath(e.DocPath)
	if err := MigrateTo(ctx, path, unpairedIDsSchema-1); err != nil {
		t.Fatal(err)
	}

	// Schema 9, written by this engine (whose statements schema 10 does
	// not change) on a connection as ce's writer has it.
	db, err := sql.Open("sqlite", dsn(path, "journal_mode(WAL)", "synchronous(FULL)", "foreign_keys(ON)"))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d.conn = conn
	// This engine's statements need what migrations 12 and 13 add (the
	// storage share's table, the chunks' refs); they are made for the
	// workload and taken away before the schema-9 sidecar is read.
	for _, q := range []string{`CREATE TABLE storage_usage (participant_id TEXT PRIMARY KEY, day INTEGER NOT NULL, bytes INTEGER NOT NULL) STRICT, WITHOUT ROWID`,
		`ALTER TABLE version_chunks ADD COLUMN refs INTEGER NOT NULL DEFAULT 0`} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.run(func(tx *Tx) error { return e.Bootstrap(tx, "host") }); err != nil {
		t.Fatal(err)
	}
	w := runPairingWorkload(t, d, nil, nil)
	for _, q := range []string{`DROP TABLE storage_usage`, `ALTER TABLE version_chunks DROP COLUMN refs`} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	rows9, schema9 := sidecarDump(t, conn)
	reads9 := roomReads(t, d, conn, w)
	if !strings.Contains(rows9["task_inputs"], "q1") || !strings.Contains(rows9["handoffs"], "key-asking") ||
		!strings.Contains(rows9["handoffs"], "follows_handoff_id=string:handoff_") {
		t.Fatal("the schema-9 sidecar lacks input requests, idempotency keys or a follow-up")
	}
	conn.Close()
	db.Close()

	st := reopenMigrated(t, path, "handoffs", len(w.handoff))
	rows10, schema10 := sidecarDump(t, st.Reader)
	dropLaterSchema(rows9, schema9, rows10, schema10)
	// Later migrations change other tables: take their changes back out so
	// what is compared is migration 10's alone (11 adds invites.label).
	rows10["invites"] = strings.ReplaceAll(strings.Replace(rows10["invites"], " label]", "]", 1), "|label=<nil>:<nil>|", "|")
	schema10["invites"] = strings.Replace(schema10["invites"], " label TEXT CHECK (label IS NULL OR length(label) BETWEEN 1 AND 80),", "", 1)
	for table, want := range rows9 {
		if got := rows10[table]; got != want {
			t.Errorf("table %s changed:\nschema 9:\n%s\nschema 10:\n%s", table, want, got)
		}
	}
	if len(rows10) != len(rows9) {
		t.Errorf("tables %v, want %v", slices.Sorted(maps.Keys(rows10)), slices.Sorted(maps.Keys(rows9)))
	}

	// The schema is schema 9's without the two constraints and their
	// indexes; the rebuilt tables' text differs only there (and in the
	// quotes ALTER TABLE RENAME puts around the name).
	want := maps.Clone(schema9)
	for _, gone := range []string{"sqlite_autoindex_handoffs_2", "sqlite_autoindex_tasks_2"} {
		if _, ok := want[gone]; !ok {
			t.Fatalf("schema 9 has no %s: %v", gone, slices.Sorted(maps.Keys(schema9)))
		}
		delete(want, gone)
	}
	for table, edit := range map[string][2]string{
		"handoffs": {"task_id               TEXT NOT NULL UNIQUE,", "task_id               TEXT NOT NULL,"},
		"tasks":    {"correlation_id   TEXT NOT NULL UNIQUE REFERENCES", "correlation_id   TEXT NOT NULL REFERENCES"},
	} {
		if !strings.Contains(want[table], edit[0]) {
			t.Fatalf("schema 9's %s has no %q", table, edit[0])
		}
		want[table] = strings.Replace(strings.Replace(want[table], edit[0], edit[1], 1),
			"CREATE TABLE "+table+" (", `CREATE TABLE "`+table+`" (`, 1)
	}
	if !maps.Equal(schema10, want) {
		for _, name := range slices.Sorted(maps.Keys(want)) {
			if schema10[name] != want[name] {
				t.Errorf("%s:\n got  %q\n want %q", name, schema10[name], want[name])
			}
		}
		for name := range schema10 {
			if _, ok := want[name]; !ok {
				t.Errorf("%s is new: %q", name, schema10[name])
			}
		}
	}

	var fkViolations int
	var integrity string
	var fkOn int
	if err := st.Reader.QueryRow(`SELECT count(*) FROM pragma_foreign_key_check`).Scan(&fkViolations); err != nil || fkViolations != 0 {
		t.Errorf("foreign_key_check: %d rows (%v)", fkViolations, err)
	}
	if err := st.Reader.QueryRow(`PRAGMA integrity_check`).Scan(&integrity); err != nil || integrity != "ok" {
		t.Errorf("integrity_check: %q (%v)", integrity, err)
	}
	wconn, err := st.Writer.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer wconn.Close()
	if err := wconn.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fkOn); err != nil || fkOn != 1 {
		t.Fatalf("the writer's foreign_keys is %d after the migration (%v), want 1", fkOn, err)
	}

	// The room serves the migrated sidecar.
	e2, err := NewEngine(e.DocPath, Defaults())
	if err != nil {
		t.Fatal(err)
	}
	d2 := &directRoom{t: t, e: e2, conn: wconn, now: d.now}
	e2.Clock = func() time.Time { d2.mu.Lock(); defer d2.mu.Unlock(); return d2.now }
	if _, err := d2.run(func(tx *Tx) error { return e2.Bootstrap(tx, "host") }); err != nil {
		t.Fatal(err)
	}
	reads10 := roomReads(t, d2, st.Reader, w)
	for k, v := range reads9 {
		if reads10[k] != v {
			t.Errorf("%s reads differently after the migration:\nschema 9:  %s\nschema 10: %s", k, v, reads10[k])
		}
	}
	step := func(fn func(tx *Tx) error) {
		t.Helper()
		if _, err := d2.run(fn); err != nil {
			t.Fatal(err)
		}
	}
	// The old task waiting for an answer is carried to its end.
	step(func(tx *Tx) error {
		_, err := e2.UpdateTask(tx, w.owner, UpdateTaskInput{TaskID: w.task["asking"], InputResponses: map[string]json.RawMessage{
			"q1": json.RawMessage(`{"action":"accept","content":{"answer":"right"}}`)}})
		return err
	})
	for _, id := range []string{w.handoff["asking"], w.handoff["open"]} {
		if id == w.handoff["open"] {
			step(func(tx *Tx) error {
				_, err := e2.AcceptHandoff(tx, w.worker, HandoffIDInput{HandoffID: id})
				return err
			})
		}
		step(func(tx *Tx) error {
			_, err := e2.CompleteHandoff(tx, w.worker, CompleteInput{HandoffID: id, Result: ResultInput{Text: "done after the upgrade", Artifacts: []Artifact{}}})
			return err
		})
		step(func(tx *Tx) error { _, err := e2.ApproveHandoff(tx, w.owner, DecideInput{HandoffID: id}); return err })
	}
	// An old idempotency key still answers its handoff and task.
	again := d2.create(w.owner, CreateHandoffInput{Summary: "needs an answer", Assignee: w.worker.ParticipantID, IdempotencyKey: "key-asking"})
	if again.Handoff.HandoffID != w.handoff["asking"] || again.Task.TaskID != w.task["asking"] {
		t.Errorf("the old key answered %s/%s, want %s/%s", again.Handoff.HandoffID, again.Task.TaskID, w.handoff["asking"], w.task["asking"])
	}
	// A new handoff follows an old one through its whole lifecycle.
	fresh := d2.create(w.owner, CreateHandoffInput{Summary: "after the upgrade", FollowsHandoffID: w.handoff["completed"], IdempotencyKey: "key-new"})
	step(func(tx *Tx) error {
		_, err := e2.AcceptHandoff(tx, w.worker, HandoffIDInput{HandoffID: fresh.Handoff.HandoffID})
		return err
	})
	step(func(tx *Tx) error {
		_, err := e2.CompleteHandoff(tx, w.worker, CompleteInput{HandoffID: fresh.Handoff.HandoffID, Result: ResultInput{Text: "new", Artifacts: []Artifact{}}})
		return err
	})
	step(func(tx *Tx) error {
		_, err := e2.RejectHandoff(tx, w.owner, DecideInput{HandoffID: fresh.Handoff.HandoffID})
		return err
	})
	for name, want := range map[string]string{"asking": TaskCompleted, "open": TaskCompleted, "completed": TaskCompleted, "cancelled_late": TaskCancelled} {
		task, err := e2.GetTask(ctx, st.Reader, w.owner, TaskIDInput{TaskID: w.task[name]})
		if err != nil || task.Status != want {
			t.Errorf("tasks/get of the old task %s: %s (%v), want %s", name, task.Status, err, want)
		}
	}
	h, err := e2.GetHandoff(ctx, st.Reader, w.owner, HandoffIDInput{HandoffID: fresh.Handoff.HandoffID})
	if err != nil || h.Status != HandoffRejected || h.FollowsHandoffID == nil || *h.FollowsHandoffID != w.handoff["completed"] || h.TaskID != fresh.Task.TaskID {
		t.Errorf("the new handoff reads %+v (%v)", h, err)
	}
	checkPairing(t, st.Reader)
	if err := st.Reader.QueryRow(`SELECT count(*) FROM pragma_foreign_key_check`).Scan(&fkViolations); err != nil || fkViolations != 0 {
		t.Errorf("foreign_key_check after serving: %d rows (%v)", fkViolations, err)
	}
}

// TestMigration10RefusesBrokenForeignKeys: foreign keys are off while
// migration 10 rebuilds the tables, so it checks them itself. A sidecar
// whose rows break one (which ce, writing with them on, never leaves) is
// not migrated: the open fails saying so, the file stays at schema 9 with
// its rows, and the migration connection has foreign keys on again.
func TestMigration10RefusesBrokenForeignKeys(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idea.md.commonroom.db")
	if err := MigrateTo(ctx, path, unpairedIDsSchema-1); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path) // foreign keys off: the broken row goes in
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO handoffs(handoff_id, owner_id, status, summary, task_id, created_at, updated_at)
		VALUES ('handoff_x', 'participant_gone', 'open', 'orphan', 'task_x', 1, 1)`); err != nil {
		t.Fatal(err)
	}

	t.Run("the open fails and the sidecar stays at schema 9", func(t *testing.T) {
		_, err := OpenStore(ctx, path, false)
		if err == nil || !strings.Contains(err.Error(), "foreign keys do not hold") || !strings.Contains(err.Error(), "handoffs row 1") {
			t.Fatalf("opening: %v, want the broken foreign key named", err)
		}
		var version, n int
		if err := db.QueryRow(`SELECT (SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM handoffs WHERE handoff_id = 'handoff_x')`).Scan(&version, &n); err != nil {
			t.Fatal(err)
		}
		if version != unpairedIDsSchema-1 || n != 1 {
			t.Fatalf("after the failed open: schema %d, %d rows, want %d and 1", version, n, unpairedIDsSchema-1)
		}
		if idx := tableIndexes(t, &Store{Reader: db}, "handoffs"); !slices.Contains(idx, "handoffs_by_status_recent") {
			t.Fatalf("the handoffs indexes after the failed open: %v", idx)
		}
	})
	t.Run("the migration connection has foreign keys on again", func(t *testing.T) {
		wdb, err := sql.Open("sqlite", dsn(path, "foreign_keys(ON)"))
		if err != nil {
			t.Fatal(err)
		}
		defer wdb.Close()
		conn, err := wdb.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if err := applyMigration(ctx, conn, migrations()[unpairedIDsSchema-1]); err == nil {
			t.Fatal("migration 10 applied over a broken foreign key")
		}
		var on int
		if err := conn.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&on); err != nil || on != 1 {
			t.Fatalf("foreign_keys is %d (%v) after the failed migration, want 1", on, err)
		}
	})
}
