package httpapi

// The bounds of the legacy resources/subscribe registry (issue 13, item 8):
// only URIs of resources that exist, of bounded length, at most
// MaxSubscriptionsPerSession per session, forgotten when the session ends;
// and GET /mcp spends the session's rate budget like every other route.

import (
	"bytes"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/commonroom/ce/internal/mcptest"
	"github.com/commonroom/ce/room"
)

// held lists what the registry keeps for a session, sorted.
func held(api *Server, session string) []string {
	uris, _ := api.mcp.Subscriptions(session)
	return uris
}

// hasSession reports whether the registry has an entry for session at all.
func hasSession(api *Server, session string) bool {
	_, ok := api.mcp.Subscriptions(session)
	return ok
}

func TestLegacySubscribeBounds(t *testing.T) {
	const maxSubs = 2
	h := newHarness(t, "", harnessOpts{Limits: func(l *room.Limits) { l.MaxSubscriptionsPerSession = maxSubs }})
	a := h.join("a", "read")
	b := h.join("b", "read")
	ref := a.SessionRef
	doc := h.Eng.DocumentURI()
	goals := h.Eng.SectionURI("Idea/Goals")
	plan := h.Eng.SectionURI("Idea/Plan")
	huge := doc + "/section/" + strings.Repeat("a", 512<<10)
	long := doc + "/section/" + strings.Repeat("b", h.Eng.Limits.MaxResourceURIChars)

	refused := func(t *testing.T, p party, uri string) (map[string]any, mcpResp) {
		t.Helper()
		r := p.mcp.call(t, "resources/subscribe", map[string]any{"uri": uri})
		e := wantRPCError(t, r, http.StatusOK, mcptest.CodeInvalidParams)
		return e, r
	}

	t.Run("unknown resources are refused with resource not found and nothing is kept", func(t *testing.T) {
		for _, uri := range []string{
			doc + "/section/Nowhere",
			doc + "/section/Idea%2FNowhere",
			"commonroom://workspace/ws_other/section/Goals",
			"https://example.invalid/",
			"",
		} {
			e, _ := refused(t, a, uri)
			if !strings.HasPrefix(e["message"].(string), "resource not found") {
				t.Errorf("%q: message %v", uri, e["message"])
			}
			if got := jsonAt(e, "data", "uri"); got != uri {
				t.Errorf("%q: data.uri = %v, want the URI echoed (it is short)", uri, got)
			}
		}
		if hasSession(h.API, ref) {
			t.Fatalf("refused subscriptions left an entry: %.200q", held(h.API, ref))
		}
	})

	t.Run("an oversize URI is refused without being echoed or kept", func(t *testing.T) {
		for _, uri := range []string{huge, long} {
			e, r := refused(t, a, uri)
			if len(r.Raw) > 1024 || bytes.Contains(r.Raw, []byte("bbbbbbbbbbbbbbbb")) || bytes.Contains(r.Raw, []byte("aaaaaaaaaaaaaaaa")) {
				t.Errorf("a %d-byte URI came back in a %d-byte answer: %.300s", len(uri), len(r.Raw), r.Raw)
			}
			if jsonAt(e, "data", "limit") != float64(h.Eng.Limits.MaxResourceURIChars) {
				t.Errorf("data %v, want the limit", e["data"])
			}
		}
		// resources/read answers the same way.
		r := a.mcp.call(t, "resources/read", map[string]any{"uri": huge})
		wantRPCError(t, r, http.StatusOK, mcptest.CodeInvalidParams)
		if len(r.Raw) > 1024 {
			t.Errorf("resources/read echoed an oversize URI: %d bytes", len(r.Raw))
		}
		if hasSession(h.API, ref) {
			t.Fatal("an oversize URI was kept")
		}
	})

	t.Run("a section named by its title is kept under its path", func(t *testing.T) {
		a.mcp.ok(t, "resources/subscribe", map[string]any{"uri": doc + "/section/Goals"})
		if got := held(h.API, ref); !slices.Equal(got, []string{goals}) {
			t.Fatalf("held %.200q, want %q", got, goals)
		}
	})

	t.Run("the per-session cap refuses one more with limit_exceeded and keeps what was held", func(t *testing.T) {
		a.mcp.ok(t, "resources/subscribe", map[string]any{"uri": doc})
		e, _ := refused(t, a, plan)
		if jsonAt(e, "data", "error") != "limit_exceeded" || jsonAt(e, "data", "limit") != float64(maxSubs) {
			t.Fatalf("error %v, want data.error limit_exceeded and data.limit %d", e, maxSubs)
		}
		if got := held(h.API, ref); !slices.Equal(got, []string{doc, goals}) {
			t.Fatalf("held %.200q after the refusal", got)
		}
		// What is already held may be subscribed again.
		a.mcp.ok(t, "resources/subscribe", map[string]any{"uri": goals})
		// Another session has its own budget.
		b.mcp.ok(t, "resources/subscribe", map[string]any{"uri": plan})
	})

	t.Run("unsubscribing frees a place; unsubscribing what is not held is harmless", func(t *testing.T) {
		a.mcp.ok(t, "resources/unsubscribe", map[string]any{"uri": doc})
		for _, uri := range []string{doc, doc + "/section/Nowhere", huge, ""} {
			a.mcp.ok(t, "resources/unsubscribe", map[string]any{"uri": uri})
		}
		a.mcp.ok(t, "resources/subscribe", map[string]any{"uri": plan})
		if got := held(h.API, ref); !slices.Equal(got, []string{goals, plan}) {
			t.Fatalf("held %.200q", got)
		}
		c := h.join("c", "read")
		c.mcp.ok(t, "resources/unsubscribe", map[string]any{"uri": doc})
		if hasSession(h.API, c.SessionRef) {
			t.Fatal("an unsubscribe created an entry for a session that had none")
		}
	})
}

func TestLegacySubscriptionsEndWithSession(t *testing.T) {
	tests := []struct {
		name string
		end  func(t *testing.T, h *roomHarness, p party)
	}{
		{"leaving drops them", func(t *testing.T, h *roomHarness, p party) {
			wantOK(t, h.do("POST", h.IngressURL("/workspace/leave"), p.SessionToken, map[string]any{}))
		}},
		{"expiry drops them", func(t *testing.T, h *roomHarness, p party) {
			h.Clock.Advance(h.Eng.Limits.SessionDefault + time.Minute)
			h.Sweep()
		}},
		{"the host ending the session drops them", func(t *testing.T, h *roomHarness, p party) {
			wantOK(t, h.do("POST", h.OwnerURL("/workspace/session/end"), h.OpToken, map[string]any{"session_ref": p.SessionRef}))
		}},
		{"the host ending the participant drops them", func(t *testing.T, h *roomHarness, p party) {
			wantOK(t, h.do("POST", h.OwnerURL("/workspace/session/end"), h.OpToken, map[string]any{"participant_id": p.ParticipantID}))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, "", harnessOpts{})
			c := streamClient()
			p := h.join("p", "read")
			keep := h.join("keep", "read")
			ref := p.SessionRef
			for _, uri := range []string{h.Eng.DocumentURI(), h.Eng.SectionURI("Idea/Goals")} {
				p.mcp.ok(t, "resources/subscribe", map[string]any{"uri": uri})
			}
			keep.mcp.ok(t, "resources/subscribe", map[string]any{"uri": h.Eng.DocumentURI()})
			if n := len(held(h.API, ref)); n != 2 {
				t.Fatalf("held %d before the end", n)
			}
			tt.end(t, h, p)
			// The end was published before the call returned, and the hub
			// handles batches in order: once a later change reaches a
			// stream, the registry has heard of the end.
			newBarrier(t, h, c).wait(t)
			if hasSession(h.API, ref) {
				t.Fatalf("the ended session still holds %.200q", held(h.API, ref))
			}
			if tt.name == "leaving drops them" {
				if got := held(h.API, keep.SessionRef); len(got) != 1 {
					t.Fatalf("another session's subscriptions went too: %q", got)
				}
			}
			if r := p.mcp.call(t, "resources/subscribe", map[string]any{"uri": h.Eng.DocumentURI()}); r.Status != http.StatusUnauthorized {
				t.Fatalf("an ended session subscribed: %d %s", r.Status, r.Raw)
			}
			if hasSession(h.API, ref) {
				t.Fatal("an ended session's refused subscribe was kept")
			}
		})
	}
}

// GET /mcp counts against the session's rate budget and answers 429 with
// Retry-After once it is spent, like /workspace/observe and listen do.
func TestLegacyGetRateLimited(t *testing.T) {
	const perMinute = 3
	h := newHarness(t, "", harnessOpts{Limits: func(l *room.Limits) { l.RateLimitPerMinute = perMinute }})
	c := streamClient()
	a := h.join("a", "read")
	for range perMinute {
		a.mcp.toolOK(t, "workspace_status", map[string]any{})
	}
	t.Run("the budget spent, GET /mcp is 429 with Retry-After and no stream", func(t *testing.T) {
		s, r := h.legacyGet(t, c, a.SessionToken, "text/event-stream")
		if s != nil {
			s.close()
			t.Fatal("GET /mcp opened a stream after the session's budget was spent")
		}
		if r.Status != http.StatusTooManyRequests {
			t.Fatalf("status %d, want 429; body %s", r.Status, r.Raw)
		}
		if r.Header.Get("Retry-After") == "" {
			t.Error("no Retry-After header")
		}
		if !bytes.Contains(r.Raw, []byte(`"limit_exceeded"`)) || !bytes.Contains(r.Raw, []byte(`"retry_after_seconds"`)) {
			t.Errorf("body %s, want data.error limit_exceeded and retry_after_seconds", r.Raw)
		}
	})
	t.Run("a minute later it opens", func(t *testing.T) {
		h.Clock.Advance(time.Minute + time.Second)
		s, r := h.legacyGet(t, c, a.SessionToken, "text/event-stream")
		if s == nil {
			t.Fatalf("GET /mcp refused: %d %s", r.Status, r.Raw)
		}
		s.close()
	})
	t.Run("opening it spends the budget", func(t *testing.T) {
		h.Clock.Advance(time.Minute + time.Second)
		for range perMinute {
			s, r := h.legacyGet(t, c, a.SessionToken, "text/event-stream")
			if s == nil {
				t.Fatalf("GET /mcp refused: %d %s", r.Status, r.Raw)
			}
			s.close()
		}
		r := a.mcp.call(t, "tools/call", map[string]any{"name": "workspace_status", "arguments": map[string]any{}})
		wantRPCError(t, r, http.StatusTooManyRequests, mcptest.CodeInternalError)
	})
}
