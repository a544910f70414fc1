package room

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// inboxIndex is the index a participant-led inbox range must read: the
// live or the settled half of the participant's index (migration 9).
func inboxIndex(who, status string) string {
	switch status {
	case HandoffOpen, HandoffAccepted, HandoffResultReady:
		return "handoffs_by_" + who + "_live"
	}
	return "handoffs_by_" + who + "_settled"
}

// queryPlan is SQLite's plan for query, one detail line per step.
func queryPlan(t *testing.T, q Querier, query string, args ...any) []string {
	t.Helper()
	rows, err := q.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}

// Every range of the inbox is read from an index that holds exactly it, in
// order: a participant's range from the live or settled half of its index,
// the room's and the open calls' from the status index. A range that fell
// back to another index (a bound status cannot select a partial index) or
// to a scan would make a page cost grow with the sidecar.
func TestInboxRangesReadTheirIndexes(t *testing.T) {
	st, err := OpenStore(context.Background(), filepath.Join(t.TempDir(), "idea.md.commonroom.db"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p := Principal{ParticipantID: "participant_x"}
	cases := []struct {
		src  handoffSource
		want func(status string) string
	}{
		{srcOwner, func(s string) string { return inboxIndex("owner", s) }},
		{srcAssignee, func(s string) string { return inboxIndex("assignee", s) }},
		{srcRequested, func(s string) string { return inboxIndex("requested", s) }},
		{srcAll, func(string) string { return "handoffs_by_status_recent" }},
		{srcOpenCall, func(string) string { return "handoffs_by_status_recent" }},
		{srcOpenCallNotMine, func(string) string { return "handoffs_by_status_recent" }},
	}
	for _, c := range cases {
		statuses := handoffStatuses
		if c.src == srcOpenCall || c.src == srcOpenCallNotMine {
			statuses = []string{HandoffOpen}
		}
		for _, status := range statuses {
			t.Run(fmt.Sprintf("source_%d_%s_reads_%s", c.src, status, c.want(status)), func(t *testing.T) {
				query, args := handoffCandidatesQuery(p, []handoffSource{c.src}, status, listStart, 51)
				plan := queryPlan(t, st.Reader, query, args...)
				var ranges []string
				for _, line := range plan {
					if strings.Contains(line, "SEARCH handoffs USING") || strings.HasPrefix(line, "SCAN handoffs") {
						ranges = append(ranges, line)
					}
				}
				if len(ranges) != 1 || !strings.Contains(ranges[0], "INDEX "+c.want(status)+" (") {
					t.Errorf("the range is read by %q, want one search of %s\nplan: %q", ranges, c.want(status), plan)
				}
			})
		}
	}
}

// Migration 9 replaces the participant-led inbox indexes with live and
// settled halves in place: a sidecar left by schema 8 keeps every handoff,
// has exactly the new indexes, and each inbox range still finds exactly
// its handoffs, newest first.
func TestMigration9SplitsTheInboxIndexesInPlace(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idea.md.commonroom.db")
	if err := MigrateTo(ctx, path, 8); err != nil {
		t.Fatal(err)
	}
	// Foreign keys on, as ce writes: migration 10 checks them before it
	// commits, so the handoffs' participants must exist.
	db, err := sql.Open("sqlite", dsn(path, "foreign_keys(ON)"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"participant_a", "participant_b", "participant_c"} {
		if _, err := db.Exec(`INSERT INTO participants(participant_id, kind, name, capabilities, joined_at, last_seen_at)
			VALUES (?, 'agent', ?, '[]', 1000, 1000)`, p, p); err != nil {
			t.Fatal(err)
		}
	}
	type row struct {
		id, owner, assignee, requested, status string
		created                                int64
	}
	var rows []row
	people := []string{"participant_a", "participant_b", "participant_c"}
	for i := range 60 {
		r := row{id: fmt.Sprintf("handoff_%032x", i), owner: people[i%3], status: handoffStatuses[i%len(handoffStatuses)], created: int64(1000 + i/4)}
		if r.status != HandoffOpen && !(r.status == HandoffCancelled && i%2 == 0) {
			r.assignee = people[(i+1)%3]
		}
		if i%5 == 0 {
			r.requested = people[(i+2)%3]
		}
		rows = append(rows, r)
		var result, decided, cancelled, reason any
		if slices.Contains([]string{HandoffResultReady, HandoffApproved, HandoffRejected}, r.status) {
			result = `{"text":"done"}`
		}
		if r.status == HandoffApproved || r.status == HandoffRejected {
			decided = r.created
		}
		if r.status == HandoffCancelled {
			cancelled, reason = r.created, "requested"
		}
		if _, err := db.Exec(`INSERT INTO handoffs(handoff_id, owner_id, requested_assignee_id, assignee_id, status, summary,
			task_id, result_json, created_at, updated_at, decided_at, cancelled_at, cancel_reason)
			VALUES (?, ?, ?, ?, ?, 'work', ?, ?, ?, ?, ?, ?, ?)`,
			r.id, r.owner, nullStr(r.requested), nullStr(r.assignee), r.status, fmt.Sprintf("task_%032x", i),
			result, r.created, r.created, decided, cancelled, reason); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	st := reopenMigrated(t, path, "handoffs", len(rows))
	indexes := tableIndexes(t, st, "handoffs")
	wantIndexes := []string{"handoffs_by_assignee_live", "handoffs_by_assignee_settled", "handoffs_by_owner_live", "handoffs_by_owner_settled",
		"handoffs_by_requested_live", "handoffs_by_requested_settled", "handoffs_by_status_recent", "handoffs_followed", "handoffs_idempotency"}
	if !slices.Equal(indexes, wantIndexes) {
		t.Errorf("the handoffs table's indexes are %v, want %v", indexes, wantIndexes)
	}
	var check string
	if err := st.Reader.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check: %q, %v", check, err)
	}

	for _, src := range []handoffSource{srcOwner, srcAssignee, srcRequested} {
		for _, who := range people {
			for _, status := range handoffStatuses {
				var want []string
				for i := len(rows) - 1; i >= 0; i-- { // newest first; created_at ties go to the higher rowid
					r := rows[i]
					col := map[handoffSource]string{srcOwner: r.owner, srcAssignee: r.assignee, srcRequested: r.requested}[src]
					if col == who && r.status == status {
						want = append(want, r.id)
					}
				}
				got, _, err := handoffCandidates(ctx, st.Reader, Principal{ParticipantID: who}, []handoffSource{src}, status, listStart, 100)
				if err != nil {
					t.Fatal(err)
				}
				var ids []string
				for _, h := range got {
					ids = append(ids, h.id)
				}
				if !slices.Equal(ids, want) {
					t.Errorf("source %d, %s, %s: %v, want %v", src, who, status, ids, want)
				}
			}
		}
	}
}
