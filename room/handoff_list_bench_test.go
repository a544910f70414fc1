package room_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/commonroom/ce/room"
)

// BenchmarkInbox measures the inbox query (ListHandoffs, through the real
// actor's read path) on a sidecar holding 1,000 and one holding 1,000,000
// handoffs, for the figure: its p99 at a million beside a thousand
// must stay within 1.5×. The rows are written in bulk, as the bench's
// preload does (bench/preload_bulk.go): what is measured is a sidecar of that
// size, not how it got there. Each iteration runs one of the listings an
// agent or the page makes (every handoff it may see, each role, a page deep
// in a walk, an approver's whole room) on both rooms, one right after the
// other, so whatever else the machine is doing falls on both alike. Run it
// with
//
//	go test -run '^$' -bench BenchmarkInbox -benchtime 3000x ./room
func BenchmarkInbox(b *testing.B) {
	if testing.Short() {
		b.Skip("the million-row fill takes minutes")
	}
	sizes := []int{1_000, 1_000_000}
	type inboxRun struct {
		e       *env
		queries []inboxQuery
		lat     []time.Duration
	}
	runs := make([]*inboxRun, len(sizes))
	for i, n := range sizes {
		e, qs := inboxBenchRoom(b, n)
		runs[i] = &inboxRun{e: e, queries: qs, lat: make([]time.Duration, 0, b.N)}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, r := range runs {
			q := r.queries[i%len(r.queries)]
			t0 := time.Now()
			page, err := r.e.list(q.p, q.in)
			r.lat = append(r.lat, time.Since(t0))
			if err != nil {
				b.Fatal(err)
			}
			if q.in.Role != room.RoleOpenToAccept && len(page.Handoffs) == 0 {
				b.Fatalf("an empty page for %+v", q.in)
			}
		}
	}
	b.StopTimer()
	var p99s []float64
	for i, r := range runs {
		slices.Sort(r.lat)
		pct := func(p float64) float64 { return float64(r.lat[int(p*float64(len(r.lat)-1))].Microseconds()) }
		b.ReportMetric(pct(0.50), fmt.Sprintf("p50-µs@%d", sizes[i]))
		b.ReportMetric(pct(0.99), fmt.Sprintf("p99-µs@%d", sizes[i]))
		p99s = append(p99s, pct(0.99))
	}
	b.ReportMetric(p99s[1]/p99s[0], "p99-ratio")
}

type inboxQuery struct {
	p  room.Principal
	in room.ListHandoffsInput
}

// inboxBenchRoom is a room of ten agents and an approver with n handoffs
// among the agents, and the listings the benchmark makes in it.
func inboxBenchRoom(b *testing.B, n int) (*env, []inboxQuery) {
	e := newEnv(b, withRealClock())
	var agents []room.Principal
	for i := range 10 {
		agents = append(agents, e.join(fmt.Sprintf("agent-%d", i), agentCaps...))
	}
	approver := e.join("approver", room.CapRead, room.CapApprove)
	e.close()
	fillHandoffs(b, room.SidecarPath(e.doc), agents, n)
	e.open()

	me := agents[0]
	// A cursor deep in me's created_by_me walk (up to 10 pages of 50 in; me
	// owns a tenth of the handoffs).
	deep := room.ListHandoffsInput{Role: room.RoleCreatedByMe}
	for range min(10, n/len(agents)/50-1) {
		page, err := e.list(me, deep)
		if err != nil || page.NextCursor == "" {
			b.Fatalf("walking to a deep page: %v", err)
		}
		deep.Cursor = page.NextCursor
	}
	return e, []inboxQuery{
		{me, room.ListHandoffsInput{}},
		{me, room.ListHandoffsInput{Role: room.RoleAssignedToMe}},
		{me, room.ListHandoffsInput{Role: room.RoleCreatedByMe, Status: room.HandoffApproved}},
		{me, room.ListHandoffsInput{Role: room.RoleOpenToAccept}},
		{me, deep},
		{approver, room.ListHandoffsInput{}},
		{approver, room.ListHandoffsInput{Status: room.HandoffCancelled}},
	}
}

// fillHandoffs writes n finished handoffs with their tasks straight into the
// sidecar, as ce leaves them: half approved (owner → an assignee, a result,
// a completed task), half cancelled by their owner (some addressed to an
// agent), created 50 ms apart with every tenth pair in the same millisecond.
func fillHandoffs(b *testing.B, path string, agents []room.Principal, n int) {
	b.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=cache_size(-262144)&_pragma=synchronous(OFF)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	const batch = 20000
	base := time.Now().Add(-time.Duration(n) * 50 * time.Millisecond).UnixMilli()
	id := func(prefix string) string {
		r := make([]byte, 16)
		rand.Read(r)
		return prefix + "_" + hex.EncodeToString(r)
	}
	for start := 0; start < n; start += batch {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		hIns, err := tx.Prepare(`INSERT INTO handoffs(handoff_id, owner_id, requested_assignee_id, assignee_id, status, summary,
			task_id, result_json, created_at, updated_at, accepted_at, result_at, decided_at, decided_by,
			cancelled_at, cancelled_by, cancel_reason) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`)
		if err != nil {
			b.Fatal(err)
		}
		tIns, err := tx.Prepare(`INSERT INTO tasks(task_id, owner_id, assignee_id, correlation_id, status, status_message,
			created_at, last_updated_at, result_json) VALUES (?,?,?,?,?,?,?,?,?)`)
		if err != nil {
			b.Fatal(err)
		}
		for i := start; i < min(start+batch, n); i++ {
			hid, tid := id("handoff"), id("task")
			owner := agents[i%len(agents)].ParticipantID
			other := agents[(i+1+i/len(agents))%len(agents)].ParticipantID
			if other == owner {
				other = agents[(i+1)%len(agents)].ParticipantID
			}
			created := base + int64(i)*50
			if i%10 == 1 {
				created -= 50 // the same millisecond as the one before
			}
			ended := created + 1000
			var requested, assignee, result, decided, decidedBy, cancelled, cancelledBy, reason any
			status, taskStatus, msg := room.HandoffCancelled, "cancelled", "cancelled on request"
			var taskResult, taskAssignee any
			if i%2 == 0 {
				status, taskStatus, msg = room.HandoffApproved, "completed", ""
				assignee, result, decided, decidedBy = other, `{"text":"done","artifacts":[],"is_error":false}`, ended, owner
				taskResult, taskAssignee = `{"content":[{"type":"text","text":"done"}],"isError":false}`, other
				if i%4 == 0 {
					requested = other
				}
			} else {
				cancelled, cancelledBy, reason = ended, owner, "requested"
				if i%3 == 0 {
					requested = other
				}
			}
			var accepted, resultAt any
			if assignee != nil {
				accepted, resultAt = created+100, created+500
			}
			if _, err := hIns.Exec(hid, owner, requested, assignee, status, "bulk work", tid, result, created, ended,
				accepted, resultAt, decided, decidedBy, cancelled, cancelledBy, reason); err != nil {
				b.Fatal(err)
			}
			var m any = msg
			if msg == "" {
				m = nil
			}
			if _, err := tIns.Exec(tid, owner, taskAssignee, hid, taskStatus, m, created, ended, taskResult); err != nil {
				b.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		b.Fatal(err)
	}
}
