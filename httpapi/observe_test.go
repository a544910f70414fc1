package httpapi

// GET /workspace/observe (ARCHITECTURE.md D2, D13): the room's events as
// server-sent events, frames notifications/commonroom/event, with an
// optional backlog after since_event_id. The live part starts before the
// backlog is read, so an event committed in between may be sent twice (the
// documented duplicate at the join); otherwise event ids only go up.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
)

// eventFrame checks that f is an event notification and returns its id.
func eventFrame(t testing.TB, f frame) int64 {
	t.Helper()
	if f.Msg.Method != "notifications/commonroom/event" || f.Msg.ID != nil {
		t.Fatalf("frame %.300s, want a notifications/commonroom/event notification", string(f.Data))
	}
	id := f.EventID()
	if id <= 0 || f.EventType() == "" || f.Params()["created_at"] == nil {
		t.Fatalf("event frame without event_id, event_type or created_at: %.300s", string(f.Data))
	}
	if _, ok := f.Params()["payload"].(map[string]any); !ok {
		t.Fatalf("event frame without a payload object: %.300s", string(f.Data))
	}
	return id
}

// checkOrder applies the ordering rule to the event ids a stream sent
// after since: no id at or below since (the actor publishes a write's
// events before it answers, so what the client was answered for before it
// opened the stream is never sent live); an id at or below the highest one
// seen so far must be a duplicate of one already sent (the join of backlog
// and live: an event committed between the subscription and the backlog
// read); such duplicates form one run, increase within it, and no id is sent
// more than twice. Every other id is higher than all before it.
func checkOrder(since int64, ids []int64) error {
	high := since
	count := map[int64]int{}
	runs, inRun := 0, false
	var lastDup int64
	for i, id := range ids {
		count[id]++
		if id <= since {
			return fmt.Errorf("frame %d: event %d is not after since_event_id %d: %v", i, id, since, ids)
		}
		if id > high {
			high, inRun = id, false
			continue
		}
		if count[id] == 1 {
			return fmt.Errorf("frame %d: event %d arrives after event %d and was never sent before: out of order %v", i, id, high, ids)
		}
		if count[id] > 2 {
			return fmt.Errorf("frame %d: event %d sent %d times: %v", i, id, count[id], ids)
		}
		if !inRun {
			runs++
			inRun, lastDup = true, 0
		}
		if id <= lastDup {
			return fmt.Errorf("frame %d: duplicate %d after duplicate %d goes backwards: %v", i, id, lastDup, ids)
		}
		lastDup = id
	}
	if runs > 1 {
		return fmt.Errorf("duplicates in %d separate runs, want at most one (the join of backlog and live): %v", runs, ids)
	}
	return nil
}

func TestObserveOrderRule(t *testing.T) {
	for _, tc := range []struct {
		name string
		ids  []int64
		ok   bool
	}{
		{name: "increasing ids pass", ids: []int64{11, 12, 15}, ok: true},
		{name: "a duplicate run at the join passes", ids: []int64{11, 12, 13, 12, 13, 14}, ok: true},
		{name: "an id that goes backwards without being a duplicate fails", ids: []int64{11, 13, 12}},
		{name: "an id at or before since fails", ids: []int64{10, 11}},
		{name: "a triple fails", ids: []int64{11, 12, 12, 12}},
		{name: "a duplicate run that goes backwards fails", ids: []int64{11, 12, 13, 13, 12}},
		{name: "two duplicate runs fail", ids: []int64{11, 12, 12, 13, 14, 14}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := checkOrder(10, tc.ids); (err == nil) != tc.ok {
				t.Errorf("checkOrder(%v) = %v, want ok=%v", tc.ids, err, tc.ok)
			}
		})
	}
}

func TestObserveNeedsObserve(t *testing.T) {
	h := newHarness(t, "")
	observer := h.join("observer", "read", "observe")
	reader := h.join("reader", "read")
	for _, tc := range []struct {
		name   string
		token  string
		query  string
		status int
		code   string
		field  string
	}{
		{name: "no bearer is 401 unauthorized", status: 401, code: "unauthorized"},
		{name: "an unknown bearer is 401 unauthorized", token: "ses_not_a_session", status: 401, code: "unauthorized"},
		{name: "a session without observe is 403 permission_denied", token: reader.SessionToken, status: 403, code: "permission_denied"},
		{name: "a since_event_id that is not a number is 400 naming it", token: observer.SessionToken, query: "since_event_id=first",
			status: 400, code: "invalid_request", field: "since_event_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := h.Snapshot()
			s, r := h.observe(t, tc.token, tc.query)
			if s != nil {
				s.Close()
				t.Fatalf("observe opened a stream, want %d %s", tc.status, tc.code)
			}
			m := wantError(t, r, tc.status, tc.code)
			if tc.field != "" && m["field"] != tc.field {
				t.Errorf("field = %v, want %s", m["field"], tc.field)
			}
			if tc.code == "permission_denied" && m["required"] != "observe" {
				t.Errorf("required = %v, want observe", m["required"])
			}
			h.AssertUnchanged(t, before)
		})
	}
	t.Run("a session with observe gets a text/event-stream", func(t *testing.T) {
		s, r := h.observe(t, observer.SessionToken, "")
		if s == nil {
			t.Fatalf("observe = %d %s", r.Status, r.Body)
		}
		defer s.Close()
		if ct := s.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
			t.Errorf("Content-Type = %q", ct)
		}
	})
}

func TestObserveStreamsNewEvents(t *testing.T) {
	h := newHarness(t, "")
	agent := h.join("agent", agentCaps...)
	observer := h.join("observer", "read", "observe")
	start := h.maxEvent(t)
	s, r := h.observe(t, observer.SessionToken, "")
	if s == nil {
		t.Fatalf("observe = %d %s", r.Status, r.Body)
	}
	defer s.Close()

	lease := h.checkout(t, agent.SessionToken, "Goals")
	wantOK(t, h.post(t, agent.SessionToken, "/workspace/release", map[string]any{"lease_id": lease["lease_id"]}))
	rows := h.Events("")
	var want []eventRow
	for _, ev := range rows {
		if ev.ID > start {
			want = append(want, ev)
		}
	}
	if len(want) != 2 {
		t.Fatalf("events after %d: %v, want lease.acquired and lease.released", start, want)
	}

	// The actor publishes a write's events before it answers, so the
	// events of the joins above were published before the stream subscribed.
	t.Run("without since_event_id the stream starts with the next event, no backlog", func(t *testing.T) {
		f := s.Next(t)
		if id := eventFrame(t, f); id != want[0].ID || f.EventType() != "lease.acquired" {
			t.Fatalf("first frame is event %d %s, want %d lease.acquired", id, f.EventType(), want[0].ID)
		}
		if jsonAt(f.Params(), "payload", "lease_id") != lease["lease_id"] {
			t.Errorf("payload = %v", f.Params()["payload"])
		}
	})
	t.Run("the next event follows with a higher id", func(t *testing.T) {
		f := s.Next(t)
		if id := eventFrame(t, f); id != want[1].ID || f.EventType() != "lease.released" {
			t.Fatalf("second frame is event %d %s, want %d lease.released", id, f.EventType(), want[1].ID)
		}
	})
	t.Run("frames carry no session token or invitation secret", func(t *testing.T) {
		h.InviteCaps("read")
		f := s.Next(t)
		if eventFrame(t, f); f.EventType() != "invite.created" {
			t.Fatalf("frame %s, want invite.created", f.EventType())
		}
		for _, secret := range []string{agent.SessionToken, observer.SessionToken, h.OpToken} {
			if strings.Contains(string(f.Data), secret) {
				t.Errorf("an event frame carries a secret: %s", string(f.Data))
			}
		}
	})
}

func TestObserveBacklogThenLive(t *testing.T) {
	h := newHarness(t, "")
	agent := h.join("agent", agentCaps...)
	observer := h.join("observer", "read", "observe")
	for _, target := range []string{"Goals", "Plan"} {
		l := h.checkout(t, agent.SessionToken, target)
		wantOK(t, h.post(t, agent.SessionToken, "/workspace/release", map[string]any{"lease_id": l["lease_id"]}))
	}
	all := h.Events("")
	since := all[len(all)-4].ID // the backlog is the last three events
	s, r := h.observe(t, observer.SessionToken, fmt.Sprintf("since_event_id=%d", since))
	if s == nil {
		t.Fatalf("observe = %d %s", r.Status, r.Body)
	}
	defer s.Close()

	var got []int64
	t.Run("the backlog after since_event_id comes first, in order", func(t *testing.T) {
		for _, ev := range all[len(all)-3:] {
			f := s.Next(t)
			id := eventFrame(t, f)
			got = append(got, id)
			if id != ev.ID || f.EventType() != ev.Type {
				t.Fatalf("backlog frame is event %d %s, want %d %s", id, f.EventType(), ev.ID, ev.Type)
			}
		}
	})
	t.Run("then live events follow, strictly increasing", func(t *testing.T) {
		l := h.checkout(t, agent.SessionToken, "Idea")
		f := s.Next(t)
		got = append(got, eventFrame(t, f))
		if f.EventType() != "lease.acquired" || jsonAt(f.Params(), "payload", "lease_id") != l["lease_id"] {
			t.Fatalf("live frame %.300s, want the new lease", string(f.Data))
		}
		// Nothing was written while the stream opened, and what was
		// answered before was published before: not even the join's
		// duplicate may appear.
		if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Errorf("event ids %v, want strictly increasing", got)
		}
	})
	t.Run("since_event_id at the newest event sends no backlog", func(t *testing.T) {
		newest := h.maxEvent(t)
		s2, r := h.observe(t, observer.SessionToken, fmt.Sprintf("since_event_id=%d", newest))
		if s2 == nil {
			t.Fatalf("observe = %d %s", r.Status, r.Body)
		}
		defer s2.Close()
		h.InviteCaps("read")
		f := s2.Next(t)
		if id := eventFrame(t, f); id != newest+1 || f.EventType() != "invite.created" {
			t.Errorf("first frame is event %d %s, want %d invite.created", id, f.EventType(), newest+1)
		}
	})
}

// TestObserveOrderUnderConcurrentWrites opens observe with a backlog while
// another session keeps writing, and checks every event after since_event_id
// arrives, ids never go backwards except for the documented duplicates at
// the join of backlog and live.
func TestObserveOrderUnderConcurrentWrites(t *testing.T) {
	h := newHarness(t, "")
	for round := range 6 {
		t.Run(fmt.Sprintf("round %d: every event arrives once or in the join's duplicate run, never backwards", round), func(t *testing.T) {
			writer := h.join(fmt.Sprintf("writer%d", round), agentCaps...)
			observer := h.join(fmt.Sprintf("observer%d", round), "read", "observe")
			for range 3 {
				l := h.checkout(t, writer.SessionToken, "Goals")
				wantOK(t, h.post(t, writer.SessionToken, "/workspace/release", map[string]any{"lease_id": l["lease_id"]}))
			}
			since := h.maxEvent(t) - 5
			const pairs = 30
			errs := collect(t)
			var wg sync.WaitGroup
			begin := make(chan struct{})
			wg.Go(func() {
				<-begin
				for range pairs {
					r1, err := h.Send("POST", h.IngressURL("/workspace/checkout"), writer.SessionToken, map[string]any{"target": "Plan"})
					if err != nil || r1.Status != http.StatusOK {
						errs.Errorf("checkout: %v %d %s", err, r1.Status, r1.Body)
						return
					}
					var l struct {
						LeaseID string `json:"lease_id"`
					}
					if err := json.Unmarshal(r1.Body, &l); err != nil {
						errs.Errorf("checkout answer: %v", err)
						return
					}
					r2, err := h.Send("POST", h.IngressURL("/workspace/release"), writer.SessionToken, map[string]any{"lease_id": l.LeaseID})
					if err != nil || r2.Status != http.StatusOK {
						errs.Errorf("release: %v %d %s", err, r2.Status, r2.Body)
						return
					}
				}
			})
			close(begin)
			s, r := h.observe(t, observer.SessionToken, fmt.Sprintf("since_event_id=%d", since))
			wg.Wait()
			errs.report(t)
			if s == nil {
				t.Fatalf("observe = %d %s", r.Status, r.Body)
			}
			defer s.Close()
			last := h.maxEvent(t)
			var ids []int64
			seen := map[int64]bool{}
			for !seen[last] {
				id := eventFrame(t, s.Next(t))
				ids = append(ids, id)
				seen[id] = true
			}
			if err := checkOrder(since, ids); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d frames for %d events after since_event_id %d (%d duplicates at the join)", len(ids), last-since, since, int64(len(ids))-(last-since))
			for id := since + 1; id <= last; id++ {
				if !seen[id] {
					t.Errorf("event %d (after since_event_id %d, at most %d) never arrived: %v", id, since, last, ids)
				}
			}
			if last-since < 2*pairs {
				t.Errorf("only %d events after since_event_id, want at least %d", last-since, 2*pairs)
			}
		})
	}
}
