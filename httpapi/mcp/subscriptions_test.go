package mcp_test

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
	"github.com/commonroom/ce/internal/roomtest"
	"github.com/commonroom/ce/internal/roomtest/apitest"
	"github.com/commonroom/ce/room"
)

// held lists what the door's legacy registry keeps for a session, sorted.
func held(h *apitest.Harness, session string) []string {
	uris, _ := h.API.MCP().Subscriptions(session)
	return uris
}

// hasSession reports whether the registry has an entry for session at all.
func hasSession(h *apitest.Harness, session string) bool {
	_, ok := h.API.MCP().Subscriptions(session)
	return ok
}

func TestLegacySubscribeBounds(t *testing.T) {
	const maxSubs = 2
	h := apitest.New(t, roomtest.Options{Limits: func(l *room.Limits) { l.MaxSubscriptionsPerSession = maxSubs }}, nil)
	a := h.Join("a", "read")
	b := h.Join("b", "read")
	ref := a.SessionRef
	doc := h.Eng.DocumentURI()
	goals := h.Eng.SectionURI("Idea/Goals")
	plan := h.Eng.SectionURI("Idea/Plan")
	huge := doc + "/section/" + strings.Repeat("a", 512<<10)
	long := doc + "/section/" + strings.Repeat("b", h.Eng.Limits.MaxResourceURIChars)

	refused := func(t *testing.T, p roomtest.Party, uri string) (map[string]any, roomtest.MCPResponse) {
		t.Helper()
		r := p.MCP.Call(t, "resources/subscribe", map[string]any{"uri": uri})
		e := roomtest.WantRPCError(t, r, http.StatusOK, mcptest.CodeInvalidParams)
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
			if got := roomtest.JSONAt(e, "data", "uri"); got != uri {
				t.Errorf("%q: data.uri = %v, want the URI echoed (it is short)", uri, got)
			}
		}
		if hasSession(h, ref) {
			t.Fatalf("refused subscriptions left an entry: %.200q", held(h, ref))
		}
	})

	t.Run("an oversize URI is refused without being echoed or kept", func(t *testing.T) {
		for _, uri := range []string{huge, long} {
			e, r := refused(t, a, uri)
			if len(r.Raw) > 1024 || bytes.Contains(r.Raw, []byte("bbbbbbbbbbbbbbbb")) || bytes.Contains(r.Raw, []byte("aaaaaaaaaaaaaaaa")) {
				t.Errorf("a %d-byte URI came back in a %d-byte answer: %.300s", len(uri), len(r.Raw), r.Raw)
			}
			if roomtest.JSONAt(e, "data", "limit") != float64(h.Eng.Limits.MaxResourceURIChars) {
				t.Errorf("data %v, want the limit", e["data"])
			}
		}
		// resources/read answers the same way.
		r := a.MCP.Call(t, "resources/read", map[string]any{"uri": huge})
		roomtest.WantRPCError(t, r, http.StatusOK, mcptest.CodeInvalidParams)
		if len(r.Raw) > 1024 {
			t.Errorf("resources/read echoed an oversize URI: %d bytes", len(r.Raw))
		}
		if hasSession(h, ref) {
			t.Fatal("an oversize URI was kept")
		}
	})

	t.Run("a section named by its title is kept under its path", func(t *testing.T) {
		a.MCP.OK(t, "resources/subscribe", map[string]any{"uri": doc + "/section/Goals"})
		if got := held(h, ref); !slices.Equal(got, []string{goals}) {
			t.Fatalf("held %.200q, want %q", got, goals)
		}
	})

	t.Run("the per-session cap refuses one more with limit_exceeded and keeps what was held", func(t *testing.T) {
		a.MCP.OK(t, "resources/subscribe", map[string]any{"uri": doc})
		e, _ := refused(t, a, plan)
		if roomtest.JSONAt(e, "data", "error") != "limit_exceeded" || roomtest.JSONAt(e, "data", "limit") != float64(maxSubs) {
			t.Fatalf("error %v, want data.error limit_exceeded and data.limit %d", e, maxSubs)
		}
		if got := held(h, ref); !slices.Equal(got, []string{doc, goals}) {
			t.Fatalf("held %.200q after the refusal", got)
		}
		// What is already held may be subscribed again.
		a.MCP.OK(t, "resources/subscribe", map[string]any{"uri": goals})
		// Another session has its own budget.
		b.MCP.OK(t, "resources/subscribe", map[string]any{"uri": plan})
	})

	t.Run("unsubscribing frees a place; unsubscribing what is not held is harmless", func(t *testing.T) {
		a.MCP.OK(t, "resources/unsubscribe", map[string]any{"uri": doc})
		for _, uri := range []string{doc, doc + "/section/Nowhere", huge, ""} {
			a.MCP.OK(t, "resources/unsubscribe", map[string]any{"uri": uri})
		}
		a.MCP.OK(t, "resources/subscribe", map[string]any{"uri": plan})
		if got := held(h, ref); !slices.Equal(got, []string{goals, plan}) {
			t.Fatalf("held %.200q", got)
		}
		c := h.Join("c", "read")
		c.MCP.OK(t, "resources/unsubscribe", map[string]any{"uri": doc})
		if hasSession(h, c.SessionRef) {
			t.Fatal("an unsubscribe created an entry for a session that had none")
		}
	})
}

func TestLegacySubscriptionsEndWithSession(t *testing.T) {
	tests := []struct {
		name string
		end  func(t *testing.T, h *apitest.Harness, p roomtest.Party)
	}{
		{"leaving drops them", func(t *testing.T, h *apitest.Harness, p roomtest.Party) {
			roomtest.WantOK(t, h.Do(t, "POST", h.IngressURL("/workspace/leave"), p.SessionToken, map[string]any{}))
		}},
		{"expiry drops them", func(t *testing.T, h *apitest.Harness, p roomtest.Party) {
			h.Clock.Advance(h.Eng.Limits.SessionDefault + time.Minute)
			h.Sweep()
		}},
		{"the host ending the session drops them", func(t *testing.T, h *apitest.Harness, p roomtest.Party) {
			roomtest.WantOK(t, h.Do(t, "POST", h.OwnerURL("/workspace/session/end"), h.OpToken, map[string]any{"session_ref": p.SessionRef}))
		}},
		{"the host ending the participant drops them", func(t *testing.T, h *apitest.Harness, p roomtest.Party) {
			roomtest.WantOK(t, h.Do(t, "POST", h.OwnerURL("/workspace/session/end"), h.OpToken, map[string]any{"participant_id": p.ParticipantID}))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := apitest.New(t, roomtest.Options{}, nil)
			c := roomtest.StreamClient()
			p := h.Join("p", "read")
			keep := h.Join("keep", "read")
			ref := p.SessionRef
			for _, uri := range []string{h.Eng.DocumentURI(), h.Eng.SectionURI("Idea/Goals")} {
				p.MCP.OK(t, "resources/subscribe", map[string]any{"uri": uri})
			}
			keep.MCP.OK(t, "resources/subscribe", map[string]any{"uri": h.Eng.DocumentURI()})
			if n := len(held(h, ref)); n != 2 {
				t.Fatalf("held %d before the end", n)
			}
			tt.end(t, h, p)
			// The end was published before the call returned, and the hub
			// handles batches in order: once a later change reaches a
			// stream, the registry has heard of the end.
			h.NewBarrier(t, c).Wait(t)
			if hasSession(h, ref) {
				t.Fatalf("the ended session still holds %.200q", held(h, ref))
			}
			if tt.name == "leaving drops them" {
				if got := held(h, keep.SessionRef); len(got) != 1 {
					t.Fatalf("another session's subscriptions went too: %q", got)
				}
			}
			if r := p.MCP.Call(t, "resources/subscribe", map[string]any{"uri": h.Eng.DocumentURI()}); r.Status != http.StatusUnauthorized {
				t.Fatalf("an ended session subscribed: %d %s", r.Status, r.Raw)
			}
			if hasSession(h, ref) {
				t.Fatal("an ended session's refused subscribe was kept")
			}
		})
	}
}

// GET /mcp counts against the session's rate budget and answers 429 with
// Retry-After once it is spent, like /workspace/observe and listen do.
func TestLegacyGetRateLimited(t *testing.T) {
	const perMinute = 3
	h := apitest.New(t, roomtest.Options{Limits: func(l *room.Limits) { l.RateLimitPerMinute = perMinute }}, nil)
	c := roomtest.StreamClient()
	a := h.Join("a", "read")
	for range perMinute {
		a.MCP.ToolOK(t, "workspace_status", map[string]any{})
	}
	t.Run("the budget spent, GET /mcp is 429 with Retry-After and no stream", func(t *testing.T) {
		s, r := h.LegacyGet(t, c, a.SessionToken, "text/event-stream")
		if s != nil {
			s.Close()
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
		s, r := h.LegacyGet(t, c, a.SessionToken, "text/event-stream")
		if s == nil {
			t.Fatalf("GET /mcp refused: %d %s", r.Status, r.Raw)
		}
		s.Close()
	})
	t.Run("opening it spends the budget", func(t *testing.T) {
		h.Clock.Advance(time.Minute + time.Second)
		for range perMinute {
			s, r := h.LegacyGet(t, c, a.SessionToken, "text/event-stream")
			if s == nil {
				t.Fatalf("GET /mcp refused: %d %s", r.Status, r.Raw)
			}
			s.Close()
		}
		r := a.MCP.Call(t, "tools/call", map[string]any{"name": "workspace_status", "arguments": map[string]any{}})
		roomtest.WantRPCError(t, r, http.StatusTooManyRequests, mcptest.CodeInternalError)
	})
}
