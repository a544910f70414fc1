package room_test

// Issue 25, item 3: an event about a handoff or its task names the
// handoff's id, owner, assignee and every transition, so it is shown only
// to whoever may see that handoff (handoff_get's rule, D2): live (the
// events the writer publishes carry what Event.VisibleTo needs) and in the
// history (filtered in SQL, before the LIMIT). Every other event is
// unchanged.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/room"
)

// visibilityRoom is a room with four handoffs between owner and worker and
// the observers who may or may not see them.
type visibilityRoom struct {
	*env
	owner, worker, third, reader, approver, admin, op room.Principal
	// addressed: owner → worker, the whole lifecycle, approved.
	// called: an open call worker accepted, then owner cancelled.
	// expired: an open call nobody took, expired by the sweeper.
	// open: an open call still open at the end.
	addressed, called, expired, open string
	nonHandoff                       int // events about no handoff, live
}

func newVisibilityRoom(t *testing.T) *visibilityRoom {
	t.Helper()
	e := newEnv(t, withLimits(func(l *room.Limits) { l.TaskTTL = time.Hour }))
	v := &visibilityRoom{env: e, op: e.op()}
	v.owner = e.join("owner", agent()...)
	v.worker = e.join("worker", agent()...)
	v.third = e.join("third", agent()...) // holds checkout
	v.reader = e.join("reader", room.CapRead, room.CapObserve)
	v.approver = e.join("approver", room.CapRead, room.CapObserve, room.CapApprove)
	v.admin = e.join("admin", room.CapRead, room.CapAdmin)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	made, err := e.create(v.owner, room.CreateHandoffInput{Summary: "addressed", Assignee: v.worker.ParticipantID})
	must(err)
	v.addressed = made.Handoff.HandoffID
	_, err = e.accept(v.worker, v.addressed)
	must(err)
	_, err = e.requestInput(v.worker, v.addressed, room.InputRequestSpec{Key: "q1", Message: "which way?"})
	must(err)
	must(e.answer(v.owner, made.Task.TaskID, map[string]json.RawMessage{"q1": raw(`{"action":"accept","content":{"answer":"left"}}`)}))
	_, err = e.complete(v.worker, v.addressed, room.ResultInput{Text: "done"})
	must(err)
	_, err = e.approve(v.approver, v.addressed, "good")
	must(err)

	made, err = e.create(v.owner, room.CreateHandoffInput{Summary: "called"})
	must(err)
	v.called = made.Handoff.HandoffID
	_, err = e.accept(v.worker, v.called)
	must(err)
	must(e.cancel(v.owner, made.Task.TaskID))

	made, err = e.create(v.owner, room.CreateHandoffInput{Summary: "expires"})
	must(err)
	v.expired = made.Handoff.HandoffID
	e.clock.Advance(time.Hour + time.Millisecond)
	e.sweep()

	made, err = e.create(v.owner, room.CreateHandoffInput{Summary: "still open"})
	must(err)
	v.open = made.Handoff.HandoffID
	d := docRoom{e}
	d.mustCheckout(v.third, "Goals", nil) // an event about no handoff
	e.barrier()
	return v
}

// liveEvents is every event the writer published, in order.
func (v *visibilityRoom) liveEvents() []room.Event {
	v.pub.mu.Lock()
	defer v.pub.mu.Unlock()
	var out []room.Event
	for _, b := range v.pub.batches {
		for _, m := range b.Messages {
			if m.Topic == actor.EventsTopic {
				out = append(out, m.Change.(room.Event))
			}
		}
	}
	return out
}

// handoffsShown maps each handoff id named by evs to the event types shown,
// and counts the events about no handoff.
func handoffsShown(evs []room.Event) (map[string][]string, int) {
	out := map[string][]string{}
	others := 0
	for _, ev := range evs {
		if ev.HandoffID == "" {
			others++
			continue
		}
		out[ev.HandoffID] = append(out[ev.HandoffID], ev.Type)
	}
	return out, others
}

var (
	created    = []string{"handoff.created", "task.created"}
	afterOpen  = []string{"handoff.accepted", "task.cancelled", "handoff.cancelled"}
	allCalled  = append(slices.Clone(created), afterOpen...)
	allExpired = []string{"handoff.created", "task.created", "task.failed", "handoff.cancelled"}
	allAddr    = []string{"handoff.created", "task.created", "handoff.accepted", "handoff.input_requested", "task.input_required",
		"task.working", "handoff.input_received", "task.completed", "handoff.result_ready", "handoff.approved"}
)

func TestLiveEvents_ShownOnlyToWhoMaySeeTheirHandoff(t *testing.T) {
	v := newVisibilityRoom(t)
	live := v.liveEvents()
	all, others := handoffsShown(live)
	if others == 0 || len(all) != 4 {
		t.Fatalf("the workload published %d handoffs' events and %d others", len(all), others)
	}
	for id, want := range map[string][]string{v.addressed: allAddr, v.called: allCalled, v.expired: allExpired, v.open: created} {
		if got := all[id]; !slices.Equal(got, want) {
			t.Fatalf("handoff %s published %v, want %v", id, got, want)
		}
	}
	everything := map[string][]string{v.addressed: allAddr, v.called: allCalled, v.expired: allExpired, v.open: created}
	for _, tc := range []struct {
		name string
		p    room.Principal
		want map[string][]string
	}{
		{"the owner is shown every event of its handoffs", v.owner, everything},
		{"the assignee is shown its handoffs' events, and open calls while they are open", v.worker,
			map[string][]string{v.addressed: allAddr, v.called: allCalled, v.expired: created, v.open: created}},
		{"a third participant with checkout is shown open calls while they are open and nothing after", v.third,
			map[string][]string{v.called: created, v.expired: created, v.open: created}},
		{"a participant without checkout is shown no handoff's event", v.reader, map[string][]string{}},
		{"an approver is shown every handoff's events", v.approver, everything},
		{"an admin is shown every handoff's events", v.admin, everything},
		{"the host is shown every handoff's events", v.op, everything},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var shown []room.Event
			for _, ev := range live {
				if ev.VisibleTo(tc.p) {
					shown = append(shown, ev)
				}
			}
			got, n := handoffsShown(shown)
			if n != others {
				t.Errorf("shown %d events about no handoff, want all %d", n, others)
			}
			if !maps.EqualFunc(got, tc.want, slices.Equal) {
				t.Errorf("shown %v, want %v", got, tc.want)
			}
		})
	}
}

// history reads the whole ring as p, oldest first, in pages of limit.
func (v *visibilityRoom) history(t *testing.T, p room.Principal, limit int) ([]room.Event, []room.History) {
	t.Helper()
	var evs []room.Event
	var pages []room.History
	since := int64(0)
	for {
		h, err := read(v.env, func(eng *room.Engine, q room.Querier) (room.History, error) {
			return eng.History(context.Background(), q, p, room.HistoryInput{SinceEventID: &since, Limit: limit})
		})
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, h)
		evs = append(evs, h.Events...)
		if len(h.Events) < limit {
			return evs, pages
		}
		since = h.Events[len(h.Events)-1].ID
		if len(pages) > 1000 {
			t.Fatal("the history never ends")
		}
	}
}

// handoffIDsIn lists the handoff ids that occur anywhere in evs' payloads.
func (v *visibilityRoom) handoffIDsIn(evs []room.Event) []string {
	var out []string
	for _, id := range []string{v.addressed, v.called, v.expired, v.open} {
		for _, ev := range evs {
			if strings.Contains(string(ev.Payload), id) {
				out = append(out, id)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

func TestHistory_ShowsOnlyTheHandoffsTheCallerMaySee(t *testing.T) {
	v := newVisibilityRoom(t)
	ring := v.eventsAfter(0)
	everyID := []string{v.addressed, v.called, v.expired, v.open}
	slices.Sort(everyID)
	others := 0
	for _, ev := range ring {
		if !ev.HandoffID.Valid {
			others++
		}
	}
	for _, tc := range []struct {
		name string
		p    room.Principal
		want []string // handoff ids whose events the history holds
	}{
		{"the owner reads every event of its handoffs", v.owner, everyID},
		{"the assignee reads its handoffs and the open call still open", v.worker, sorted(v.addressed, v.called, v.open)},
		{"a third participant with checkout reads only the open call still open", v.third, []string{v.open}},
		{"a participant without checkout reads no handoff's event", v.reader, nil},
		{"an approver reads everything", v.approver, everyID},
		{"an admin reads everything", v.admin, everyID},
		{"the host reads everything", v.op, everyID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, limit := range []int{1, 3, 50} {
				evs, pages := v.history(t, tc.p, limit)
				if got := v.handoffIDsIn(evs); !slices.Equal(got, tc.want) {
					t.Fatalf("limit %d: the history names handoffs %v, want %v", limit, got, tc.want)
				}
				n := 0
				for _, ev := range evs {
					if !strings.Contains(string(ev.Payload), "handoff_id") {
						n++
					}
				}
				if n != others {
					t.Errorf("limit %d: %d events about no handoff, want all %d", limit, n, others)
				}
				for i, h := range pages {
					if i < len(pages)-1 && len(h.Events) != limit {
						t.Errorf("limit %d: page %d of %d holds %d events; only the last may hold fewer", limit, i, len(pages), len(h.Events))
					}
					if h.OldestEventID != ring[0].ID || h.NewestEventID != ring[len(ring)-1].ID {
						t.Errorf("limit %d: page %d gives the ring as %d..%d, want %d..%d", limit, i,
							h.OldestEventID, h.NewestEventID, ring[0].ID, ring[len(ring)-1].ID)
					}
				}
				if !slices.IsSortedFunc(evs, func(a, b room.Event) int { return int(a.ID - b.ID) }) {
					t.Errorf("limit %d: ids out of order", limit)
				}
			}
			t.Run("newest first, the page holds the newest events the caller may see", func(t *testing.T) {
				all, _ := v.history(t, tc.p, 1000)
				slices.Reverse(all)
				h, err := read(v.env, func(eng *room.Engine, q room.Querier) (room.History, error) {
					return eng.History(context.Background(), q, tc.p, room.HistoryInput{Limit: 3})
				})
				if err != nil {
					t.Fatal(err)
				}
				if got, want := eventIDs(h.Events), eventIDs(all[:min(3, len(all))]); !slices.Equal(got, want) {
					t.Errorf("newest page %v, want %v", got, want)
				}
			})
		})
	}
}

func sorted(s ...string) []string {
	slices.Sort(s)
	return s
}

// The history's visibility join searches the handoffs primary key for each
// event; it never walks handoffs, whatever the variant.
func TestHistory_VisibilityJoinSearchesThePrimaryKey(t *testing.T) {
	v := newVisibilityRoom(t)
	for _, tc := range []struct {
		name string
		p    room.Principal
	}{
		{"with checkout", v.third},
		{"without checkout", v.reader},
	} {
		for _, since := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, since %v", tc.name, since), func(t *testing.T) {
				q, args := room.VisibleHistoryQuery(tc.p, since)
				plan := room.QueryPlan(t, v.store.Reader, q, args...)
				joined := strings.Join(plan, "\n")
				if !strings.Contains(joined, "SEARCH h USING INDEX sqlite_autoindex_handoffs_1 (handoff_id=?)") ||
					strings.Contains(joined, "SCAN h") || strings.Contains(joined, "AUTOMATIC") {
					t.Errorf("plan:\n%s", joined)
				}
				if !since && !strings.Contains(joined, "SCAN e") || since && !strings.Contains(joined, "SEARCH e USING INTEGER PRIMARY KEY (rowid>?)") {
					t.Errorf("the ring is not read by its key: plan:\n%s", joined)
				}
			})
		}
	}
}
