package httpapi

// Issue 25, item 3, at the HTTP and MCP doors: what a session may see ends
// when the session ends, and never shows what it may not see.
//
// An observe stream ends when its credential does, as subscriptions/listen
// and GET /mcp do: a session's when the room ends it (the host, the page's
// button, leaving, idle expiry, the session's lifetime), the owner cookie's
// at the cookie's own expiry (it is no session of the room), and one whose
// session ended while it was being opened at once. And an event about a
// handoff or its task reaches a stream, a backlog, /workspace/history or
// workspace_history only if the caller may see that handoff.

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/commonroom/ce/room"
)

// observeCookie opens GET /workspace/observe?query on the owner listener
// with the owner page's cookie, as the page's EventSource does.
func (h *roomHarness) observeCookie(t testing.TB, cookie *http.Cookie, query string) (*stream, apiResp) {
	t.Helper()
	return h.observeAt(t, h.OwnerURL("/workspace/observe"), "", query, "owner page observe "+query, withCookie(cookie))
}

// untilInvite reads s until the frame of invite.created naming id, and
// returns every frame read on the way, that one included.
func untilInvite(t testing.TB, s *stream, id string) []frame {
	t.Helper()
	var out []frame
	for {
		f := s.Next(t)
		out = append(out, f)
		if f.EventType() == "invite.created" && jsonAt(f.Params(), "payload", "invite_id") == id {
			return out
		}
	}
}

func TestObserve_EndsWithItsCredential(t *testing.T) {
	type opened struct {
		s      *stream
		victim party
		cookie *http.Cookie
	}
	for _, tc := range []struct {
		name   string
		opts   harnessOpts
		cookie bool // the stream is the owner page's
		end    func(t *testing.T, h *roomHarness, o opened)
	}{
		{name: "a session the host ends with the operator token ends its stream", end: func(t *testing.T, h *roomHarness, o opened) {
			wantOK(t, h.do("POST", h.OwnerURL("/workspace/session/end"), h.OpToken, map[string]any{"session_ref": o.victim.SessionRef}))
		}},
		{name: "a participant the owner page's button ends ends its stream", end: func(t *testing.T, h *roomHarness, o opened) {
			_, cookie := h.pageCookie(t)
			wantOK(t, h.do("POST", h.OwnerURL("/workspace/session/end"), "", map[string]any{"participant_id": o.victim.ParticipantID},
				withCookie(cookie), withHeader("Origin", h.Owner.URL)))
		}},
		{name: "a participant that leaves ends its stream", end: func(t *testing.T, h *roomHarness, o opened) {
			wantOK(t, h.do("POST", h.IngressURL("/workspace/leave"), o.victim.SessionToken, nil))
		}},
		{name: "a session idle for its whole window ends its stream at the sweep", end: func(t *testing.T, h *roomHarness, o opened) {
			h.Clock.Advance(8 * time.Hour)
			h.Sweep()
		}},
		{name: "a session in use that reaches its lifetime ends its stream at the sweep",
			opts: harnessOpts{Limits: func(l *room.Limits) { l.SessionMaxLifetime = 3 * time.Hour }},
			end: func(t *testing.T, h *roomHarness, o opened) {
				for range 2 {
					h.Clock.Advance(80 * time.Minute)
					h.Sweep()
					wantOK(t, h.do("GET", h.IngressURL("/workspace/status"), o.victim.SessionToken, nil))
				}
				h.Clock.Advance(20 * time.Minute) // three hours since it was issued, 20 minutes since its last use
				h.Sweep()
			}},
		{name: "the owner page's stream ends when its cookie expires", cookie: true, end: func(t *testing.T, h *roomHarness, o opened) {
			h.Clock.Advance(ownerCookieLife)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "", tc.opts)
			var o opened
			var r apiResp
			if tc.cookie {
				_, o.cookie = h.pageCookie(t)
				o.s, r = h.observeCookie(t, o.cookie, "")
			} else {
				o.victim = h.join("victim", "read", "observe")
				o.s, r = h.observe(t, o.victim.SessionToken, "")
			}
			if o.s == nil {
				t.Fatalf("observe: %d %s", r.Status, r.Body)
			}
			// The stream is live: an event before the end arrives.
			untilInvite(t, o.s, h.InviteCaps("read").InviteID)
			before := h.Hub.Stats()

			tc.end(t, h, o)
			after := h.InviteCaps("read").InviteID
			rest := o.s.End(t) // fails unless the server ends the stream within frameWait
			for _, f := range append(parseFrames(o.s.Frames()), rest...) {
				if strings.Contains(string(f.Data), after) {
					t.Fatalf("the stream carried an event made after its credential ended: %s", f)
				}
			}
			st := h.Hub.Stats()
			if st.Ended <= before.Ended || st.Dropped != before.Dropped {
				t.Errorf("hub stats before %+v, after %+v: want the stream ended gracefully, none dropped", before, st)
			}
			t.Run("opening it again is refused", func(t *testing.T) {
				var s *stream
				if tc.cookie {
					s, r = h.observeCookie(t, o.cookie, "")
				} else {
					s, r = h.observe(t, o.victim.SessionToken, "")
				}
				if s != nil {
					t.Fatal("observe opened a stream for a credential that has ended")
				}
				if r.Status != http.StatusUnauthorized {
					t.Errorf("observe = %d %s, want 401", r.Status, r.Body)
				}
			})
		})
	}
	t.Run("a minute before the owner cookie expires its stream still gets events", func(t *testing.T) {
		h := newHarness(t, "")
		_, cookie := h.pageCookie(t)
		s, r := h.observeCookie(t, cookie, "")
		if s == nil {
			t.Fatalf("observe: %d %s", r.Status, r.Body)
		}
		h.Clock.Advance(ownerCookieLife - time.Minute)
		untilInvite(t, s, h.InviteCaps("read").InviteID)
		if s.Ended() {
			t.Fatal("the stream ended before its cookie expired")
		}
	})
}

// A session that ends between the moment observe authenticated it and the
// moment its stream registered told the hub before the stream was there:
// the stream must still not outlive it.
func TestObserve_ASessionEndedWhileItsStreamOpensGetsNoStream(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(h *roomHarness, victim party) apiResp
	}{
		{"ended by the host", func(h *roomHarness, victim party) apiResp {
			return h.do("POST", h.OwnerURL("/workspace/session/end"), h.OpToken, map[string]any{"session_ref": victim.SessionRef})
		}},
		{"left", func(h *roomHarness, victim party) apiResp {
			return h.do("POST", h.IngressURL("/workspace/leave"), victim.SessionToken, nil)
		}},
	} {
		t.Run(tc.name+": the stream is refused or ends, and carries nothing after", func(t *testing.T) {
			h := newHarness(t, "")
			victim := h.join("victim", "read", "observe")
			var ended apiResp
			h.API.beforeSubscribe = func() {
				h.API.beforeSubscribe = nil
				ended = tc.end(h, victim)
			}
			s, r := h.observe(t, victim.SessionToken, "")
			wantOK(t, ended)
			if s == nil {
				wantUnauthorized(t, r, "unauthorized")
				return
			}
			after := h.InviteCaps("read").InviteID
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			rest, err := s.EndCtx(ctx)
			if err != nil {
				t.Fatalf("the stream of an ended session stays open: %v", err)
			}
			for _, f := range rest {
				if strings.Contains(string(f.Data), after) {
					t.Fatalf("the stream carried an event made after its session ended: %s", f)
				}
			}
		})
	}
}

// handoffScope is a room with a handoff between owner and worker, and the
// observers who may (worker, approver, the host) or may not (third, an
// agent with checkout; reader, without) see it.
type handoffScope struct {
	h                                     *roomHarness
	owner, worker, third, reader, approve party
	x                                     taskRef
}

func newHandoffScope(t *testing.T) *handoffScope {
	t.Helper()
	h := newHarness(t, "")
	sc := &handoffScope{h: h,
		owner: h.join("owner", agentCaps...), worker: h.join("worker", agentCaps...),
		third: h.join("third", agentCaps...), reader: h.join("reader", "read", "observe"),
		approve: h.join("approver", "read", "observe", "approve")}
	return sc
}

// lifecycle runs the handoff from create to approval (every transition a
// third party must not learn of), then a lease: an event about no handoff.
func (sc *handoffScope) lifecycle(t *testing.T) string {
	t.Helper()
	h := sc.h
	tid, hid := sc.owner.mcp.createTask(t, map[string]any{"summary": "between two", "assignee": sc.worker.ParticipantID})
	sc.x = taskRef{HandoffID: hid, TaskID: tid}
	h.acceptTask(t, sc.worker.SessionToken, sc.x)
	h.askInput(t, sc.worker.SessionToken, sc.x, "q1", "which way?")
	h.answerInput(t, sc.owner.SessionToken, sc.x, "q1")
	h.completeTask(t, sc.worker.SessionToken, sc.x, "done")
	sc.approve.mcp.toolOK(t, "handoff_approve", map[string]any{"handoff_id": hid, "note": "ok"})
	return h.checkout(t, sc.third.SessionToken, "Goals")["lease_id"].(string)
}

// wantNames fails t unless raw names the handoff and its task exactly when
// it should.
func (sc *handoffScope) wantNames(t *testing.T, what string, raw []byte, shown bool) {
	t.Helper()
	for _, id := range []string{sc.x.HandoffID, sc.x.TaskID} {
		if got := strings.Contains(string(raw), id); got != shown {
			t.Errorf("%s names %s: %v, want %v", what, id, got, shown)
		}
	}
}

func TestObserve_HandoffEventsOnlyToWhoMaySeeTheHandoff(t *testing.T) {
	sc := newHandoffScope(t)
	h := sc.h
	_, cookie := h.pageCookie(t)
	type watcher struct {
		name  string
		s     *stream
		shown bool
	}
	observers := []struct {
		name  string
		p     party
		shown bool
	}{
		{"a third participant (with checkout)", sc.third, false},
		{"a participant without checkout", sc.reader, false},
		{"the assignee", sc.worker, true},
		{"the owner", sc.owner, true},
		{"an approver", sc.approve, true},
	}
	var watchers []watcher
	for _, w := range observers {
		s, r := h.observe(t, w.p.SessionToken, "")
		if s == nil {
			t.Fatalf("observe as %s: %d %s", w.name, r.Status, r.Body)
		}
		watchers = append(watchers, watcher{w.name, s, w.shown})
	}
	hostStream, r := h.observeCookie(t, cookie, "")
	if hostStream == nil {
		t.Fatalf("observe as the host: %d %s", r.Status, r.Body)
	}
	watchers = append(watchers, watcher{"the host (owner page)", hostStream, true})
	start := h.maxEvent(t)
	lease := sc.lifecycle(t)
	marker := h.InviteCaps("read").InviteID

	for _, w := range watchers {
		t.Run(fmt.Sprintf("the live stream of %s shows the handoff: %v", w.name, w.shown), func(t *testing.T) {
			var raw []byte
			sawLease := false
			for _, f := range untilInvite(t, w.s, marker) {
				raw = append(raw, f.Data...)
				sawLease = sawLease || jsonAt(f.Params(), "payload", "lease_id") == lease
			}
			sc.wantNames(t, "the live stream", raw, w.shown)
			if !sawLease {
				t.Error("an event about no handoff (the lease) did not arrive")
			}
		})
	}

	backlog := func(t *testing.T, p party) []byte {
		t.Helper()
		s, r := h.observe(t, p.SessionToken, fmt.Sprintf("since_event_id=%d", start))
		if s == nil {
			t.Fatalf("observe: %d %s", r.Status, r.Body)
		}
		defer s.Close()
		var raw []byte
		for _, f := range untilInvite(t, s, h.InviteCaps("read").InviteID) {
			raw = append(raw, f.Data...)
		}
		return raw
	}
	history := func(t *testing.T, p party) ([]byte, []byte) {
		t.Helper()
		r := h.do("GET", h.IngressURL(fmt.Sprintf("/workspace/history?since_event_id=%d&limit=200", start)), p.SessionToken, nil)
		wantOK(t, r)
		res := p.mcp.call(t, "tools/call", map[string]any{"name": "workspace_history", "arguments": map[string]any{"since_event_id": start, "limit": 200}})
		if res.Status != http.StatusOK || res.Result == nil || res.Result["isError"] == true {
			t.Fatalf("workspace_history: %d %s", res.Status, res.Raw)
		}
		return r.Body, res.Raw
	}
	for _, w := range observers {
		t.Run(fmt.Sprintf("the backlog of %s shows the handoff: %v", w.name, w.shown), func(t *testing.T) {
			sc.wantNames(t, "the backlog", backlog(t, w.p), w.shown)
		})
		t.Run(fmt.Sprintf("the history of %s shows the handoff: %v", w.name, w.shown), func(t *testing.T) {
			body, tool := history(t, w.p)
			sc.wantNames(t, "/workspace/history", body, w.shown)
			sc.wantNames(t, "workspace_history", tool, w.shown)
			if !strings.Contains(string(body), lease) || !strings.Contains(string(tool), lease) {
				t.Error("the history lacks the event about no handoff (the lease)")
			}
		})
	}
	t.Run("handoff_events answers a third participant handoff_not_found, as an unknown handoff", func(t *testing.T) {
		r := h.do("GET", h.IngressURL("/workspace/handoff/events?handoff_id="+sc.x.HandoffID), sc.third.SessionToken, nil)
		wantError(t, r, http.StatusNotFound, "handoff_not_found")
		wantOK(t, h.do("GET", h.IngressURL("/workspace/handoff/events?handoff_id="+sc.x.HandoffID), sc.worker.SessionToken, nil))
	})
	t.Run("a page of the history holds limit events the caller may see unless it is the last", func(t *testing.T) {
		var pages []int
		since := start
		for {
			var got struct {
				Events []struct {
					ID int64 `json:"event_id"`
				} `json:"events"`
				Oldest int64 `json:"oldest_event_id"`
				Newest int64 `json:"newest_event_id"`
			}
			r := h.do("GET", h.IngressURL(fmt.Sprintf("/workspace/history?since_event_id=%d&limit=2", since)), sc.third.SessionToken, nil)
			wantOK(t, r)
			r.Into(t, &got)
			sc.wantNames(t, "a page of the history", r.Body, false)
			if got.Newest != h.maxEvent(t) {
				t.Errorf("newest_event_id %d, want the ring's %d", got.Newest, h.maxEvent(t))
			}
			pages = append(pages, len(got.Events))
			if len(got.Events) < 2 {
				break
			}
			since = got.Events[len(got.Events)-1].ID
		}
		for i, n := range pages[:len(pages)-1] {
			if n != 2 {
				t.Errorf("page %d holds %d events, want 2 (pages %v)", i, n, pages)
			}
		}
	})
}

// TestMCPStreamOfASessionEndedWhileItOpensIsRefused is the observe test
// above for the MCP door's two streams: a session that ends between its
// authentication and its stream's registration gets no stream.
func TestMCPStreamOfASessionEndedWhileItOpensIsRefused(t *testing.T) {
	for _, kind := range []string{"subscriptions/listen", "GET /mcp"} {
		t.Run(kind+": refused with 401", func(t *testing.T) {
			h := newHarness(t, "")
			victim := h.join("victim", "read", "observe")
			var ended apiResp
			h.API.beforeSubscribe = func() {
				h.API.beforeSubscribe = nil
				ended = h.do("POST", h.OwnerURL("/workspace/session/end"), h.OpToken, map[string]any{"session_ref": victim.SessionRef})
			}
			var s *stream
			var r *mcpResp
			if kind == "GET /mcp" {
				s, r = h.LegacyGet(t, streamClient(), victim.SessionToken, "text/event-stream")
			} else {
				s, r = h.ListenReq(t, streamClient(), victim.SessionToken, `"l1"`, map[string]any{"resourceSubscriptions": []string{h.Eng.DocumentURI()}}, false)
			}
			wantOK(t, ended)
			if s != nil {
				s.Close()
				t.Fatal("the stream of a session ended while it opened was served")
			}
			if r.Status != http.StatusUnauthorized || r.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("%d %v %s, want 401 with WWW-Authenticate", r.Status, r.Header, r.Raw)
			}
			if n := h.API.hub.Stats().Subscribers; n != 0 {
				t.Errorf("%d subscribers left registered", n)
			}
		})
	}
}
