package room

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"testing"
)

// Migration 8 replaces the index of events by handoff with one on the
// handoff id's last 8 hex digits, in place: a sidecar left by schema 7
// keeps every event, loses the wide index, and a handoff's events are
// still exactly its own, in order, even beside a handoff whose id ends in
// the same 8 digits.
func TestMigration8NarrowsTheEventIndexInPlace(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idea.md.commonroom.db")
	if err := MigrateTo(ctx, path, 7); err != nil {
		t.Fatal(err)
	}
	const (
		a     = "handoff_00000000000000000000000012345678"
		twin  = "handoff_ffffffffffffffffffffffff12345678" // same last 8 digits as a
		other = "handoff_0123456789abcdef0123456789abcdef"
	)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	var want []int64 // a's event ids, in order
	for i, h := range []any{a, twin, a, other, nil, twin, a, a} {
		res, err := db.Exec(`INSERT INTO events(event_type, handoff_id, payload_json, created_at) VALUES ('handoff.test', ?, '{}', ?)`, h, i)
		if err != nil {
			t.Fatal(err)
		}
		if h == a {
			id, _ := res.LastInsertId()
			want = append(want, id)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	st := reopenMigrated(t, path, "events", 8)
	indexes := tableIndexes(t, st, "events")
	if !slices.Equal(indexes, []string{"events_by_handoff_tail"}) {
		t.Errorf("the events table's indexes are %v, want only events_by_handoff_tail", indexes)
	}

	ids := func(query string, args ...any) []int64 {
		t.Helper()
		rows, err := st.Reader.Query(query, args...)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := scanEvents(rows)
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, ev := range evs {
			out = append(out, ev.ID)
		}
		return out
	}
	for _, c := range []struct {
		name  string
		query string
		args  []any
		want  []int64
	}{
		{"the newest two, oldest first", handoffEventsNewestQuery(2), []any{a}, want[2:]},
		{"all of them", handoffEventsNewestQuery(50), []any{a}, want},
		{"those after the first", handoffEventsSinceQuery(50), []any{a, want[0]}, want[1:]},
		{"the first after the first", handoffEventsSinceQuery(1), []any{a, want[0]}, want[1:2]},
	} {
		if got := ids(c.query, c.args...); !slices.Equal(got, c.want) {
			t.Errorf("%s: event ids %v, want %v (the handoff's own, not its twin's)", c.name, got, c.want)
		}
	}
}
