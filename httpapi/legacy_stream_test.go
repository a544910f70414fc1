package httpapi

// The legacy path kept for clients that already use it (D19, DESIGN §5):
// resources/subscribe and resources/unsubscribe register URIs per session in
// memory, and GET /mcp streams notifications/resources/updated for them,
// without subscriptionId and never task notifications.

import (
	"net/http"
	"strings"
	"testing"
)

func TestLegacyStream(t *testing.T) {
	h := newHarness(t, "")
	c := streamClient()
	r := h.join("legacy", "read", "propose", "approve")
	a := h.join("assignee", "read", "checkout")
	tok := r.SessionToken
	doc := h.Eng.DocumentURI()
	goals := h.Eng.SectionURI("Idea/Goals")
	plan := h.Eng.SectionURI("Idea/Plan")
	subscribe := func(t *testing.T, method, uri string) {
		t.Helper()
		res := newMCPClient(h, tok, false).ok(t, method, map[string]any{"uri": uri})
		if res["resultType"] != "complete" {
			t.Fatalf("%s: %v", method, res)
		}
	}
	n := 0
	edit := func(t *testing.T, goalsText, planText string) {
		t.Helper()
		n++
		h.editFile(t, tok, threeSections("hello world"+strings.Repeat(".", n), goalsText, planText))
	}

	t.Run("GET /mcp without Accept text/event-stream is 405", func(t *testing.T) {
		for _, accept := range []string{"", "application/json"} {
			s, res := h.legacyGet(t, c, tok, accept)
			if s != nil {
				t.Fatalf("Accept %q opened a stream", accept)
			}
			if res.Status != http.StatusMethodNotAllowed {
				t.Fatalf("Accept %q: status %d, want 405; body %s", accept, res.Status, res.Raw)
			}
		}
	})

	t.Run("GET /mcp without a session is 401", func(t *testing.T) {
		s, res := h.legacyGet(t, c, "", "text/event-stream")
		if s != nil || res.Status != http.StatusUnauthorized {
			t.Fatalf("no bearer: stream %v, status %d; want 401", s != nil, res.Status)
		}
	})

	var g *stream
	outer := t // the stream outlives the subtest that opens it
	t.Run("subscribe then GET receives resources/updated without subscriptionId", func(t *testing.T) {
		subscribe(t, "resources/subscribe", doc)
		var res *mcpResp
		g, res = h.legacyGet(outer, c, tok, "text/event-stream")
		if g == nil {
			t.Fatalf("GET /mcp refused: %d %s", res.Status, res.Raw)
		}
		if ct := g.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
			t.Errorf("Content-Type %q", ct)
		}
		g.read()
		edit(t, "ship it", "step one")
		f := g.expectRes(t, doc)
		if len(f.Msg.Params) != 1 {
			t.Errorf("legacy frame params %v, want only uri", f.Msg.Params)
		}
	})
	if g == nil {
		t.Fatal("no legacy stream")
	}

	t.Run("task changes of this session never reach the legacy stream", func(t *testing.T) {
		x := h.newTask(t, tok, "legacy owner's task")
		h.acceptTask(t, a.SessionToken, x)
		h.askInput(t, a.SessionToken, x, "q", "ok?")
		h.answerInput(t, tok, x, "q")
		h.completeTask(t, a.SessionToken, x, "done")
		edit(t, "ship it!", "step one")
		// Had any task frame been sent, it would come before this one.
		g.expectRes(t, doc)
	})

	t.Run("a subscribe made while the stream is open reaches it", func(t *testing.T) {
		subscribe(t, "resources/subscribe", goals)
		edit(t, "ship it!!", "step one")
		g.expectRes(t, doc)
		g.expectRes(t, goals)
	})

	t.Run("unsubscribe stops delivery for that URI", func(t *testing.T) {
		subscribe(t, "resources/unsubscribe", doc)
		edit(t, "ship it!!!", "step one")
		// The document changed too; only Goals may arrive.
		g.expectRes(t, goals)
		subscribe(t, "resources/unsubscribe", goals)
		edit(t, "ship it!!!!", "step one") // nothing subscribed changes
		subscribe(t, "resources/subscribe", plan)
		edit(t, "ship it!!!!", "step one, two")
		// A stray frame from the edit before would come first.
		g.expectRes(t, plan)
	})

	t.Run("a listen stream of the same session does not get legacy subscriptions", func(t *testing.T) {
		s, ack := h.listen(t, c, tok, "1", map[string]any{"resourceSubscriptions": []string{goals}}, false)
		if got := decodeStrings(t, ack["resourceSubscriptions"]); len(got) != 1 || got[0] != goals {
			t.Fatalf("acknowledged %v", got)
		}
		edit(t, "ship it now", "step one, two, three")
		// Not the document nor Plan, which only the legacy registry holds.
		s.expectRes(t, goals)
		g.expectRes(t, plan)
		h.cancelListen(t, tok, "1")
		s.expectFinal(t)
	})
}
