package roomtest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// SidecarTables are the tables a "nothing changed" check covers: every
// table of the sidecar that holds room state.
var SidecarTables = []string{"meta", "participants", "sessions", "invites", "versions", "events",
	"leases", "proposals", "handoffs", "tasks", "task_inputs"}

// TableState is a table's row count and a digest of every row.
type TableState struct {
	Rows   int
	Digest string
}

// Snapshot is every sidecar table's state at one moment.
type Snapshot map[string]TableState

// Diff lists the tables whose rows differ between two snapshots.
func (a Snapshot) Diff(b Snapshot) []string {
	var out []string
	for _, table := range SidecarTables {
		if a[table] != b[table] {
			out = append(out, fmt.Sprintf("%s: %d rows -> %d rows (digest %s -> %s)",
				table, a[table].Rows, b[table].Rows, a[table].Digest, b[table].Digest))
		}
	}
	return out
}

// QueryRows runs a query on the read pool and returns its column names and
// every row's values, whatever the columns are.
func (h *Harness) QueryRows(t testing.TB, query string, args ...any) (cols []string, rows [][]any) {
	t.Helper()
	rs, err := h.Store.Reader.Query(query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rs.Close()
	cols, _ = rs.Columns()
	for rs.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		rows = append(rows, vals)
	}
	if err := rs.Err(); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return cols, rows
}

// Snapshot reads every table through the store's read pool: row counts and
// a digest of all values, so an assertion sees changed rows, not only new ones.
func (h *Harness) Snapshot() Snapshot {
	h.T.Helper()
	return h.SnapshotT(h.T)
}

// SnapshotT is Snapshot reporting to t (a subtest of a shared room).
func (h *Harness) SnapshotT(t testing.TB) Snapshot {
	t.Helper()
	snap := Snapshot{}
	for _, table := range SidecarTables {
		_, rows := h.QueryRows(t, "SELECT * FROM "+table)
		lines := make([]string, 0, len(rows))
		for _, vals := range rows {
			lines = append(lines, fmt.Sprintf("%#v", vals))
		}
		slices.Sort(lines)
		sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
		snap[table] = TableState{Rows: len(lines), Digest: hex.EncodeToString(sum[:8])}
	}
	return snap
}

// AssertUnchanged fails t when any row of any table changed since before:
// the check that a refusal changed nothing.
func (h *Harness) AssertUnchanged(t testing.TB, before Snapshot) {
	t.Helper()
	if d := before.Diff(h.SnapshotT(t)); len(d) > 0 {
		t.Errorf("rows changed, want none:\n  %s", strings.Join(d, "\n  "))
	}
}

// Count runs a count query on the read pool.
func (h *Harness) Count(query string, args ...any) int {
	h.T.Helper()
	var n int
	if err := h.Store.Reader.QueryRow(query, args...).Scan(&n); err != nil {
		h.T.Fatalf("%s: %v", query, err)
	}
	return n
}

// Status reads the status column of one row of a table whose key is
// kind_id (kind "proposal", "handoff"): the state a test expects a record
// to be left in.
func (h *Harness) Status(t testing.TB, kind, id string) string {
	t.Helper()
	var s string
	if err := h.Store.Reader.QueryRow(`SELECT status FROM `+kind+`s WHERE `+kind+`_id = ?`, id).Scan(&s); err != nil {
		t.Fatalf("%s %s: %v", kind, id, err)
	}
	return s
}

// EventRow is one row of the events table.
type EventRow struct {
	ID      int64
	Type    string
	Actor   *string
	Payload map[string]any
	Raw     string
}

// Events returns the event rows of type typ ("" for all), oldest first.
func (h *Harness) Events(typ string) []EventRow {
	h.T.Helper()
	rows, err := h.Store.Reader.Query(`SELECT event_id, event_type, actor_id, payload_json FROM events
		WHERE ? = '' OR event_type = ? ORDER BY event_id`, typ, typ)
	if err != nil {
		h.T.Fatal(err)
	}
	defer rows.Close()
	var out []EventRow
	for rows.Next() {
		var ev EventRow
		if err := rows.Scan(&ev.ID, &ev.Type, &ev.Actor, &ev.Raw); err != nil {
			h.T.Fatal(err)
		}
		if err := json.Unmarshal([]byte(ev.Raw), &ev.Payload); err != nil {
			h.T.Fatalf("event %d payload is not JSON: %v", ev.ID, err)
		}
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		h.T.Fatal(err)
	}
	return out
}
