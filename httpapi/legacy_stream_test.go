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
	c := lsClient()
	r := h.session("legacy", "read", "propose", "approve")
	a := h.session("assignee", "read", "checkout")
	tok := r.SessionToken
	doc := h.Eng.DocumentURI()
	goals := h.Eng.SectionURI("Idea/Goals")
	plan := h.Eng.SectionURI("Idea/Plan")
	subscribe := func(t *testing.T, method, uri string) {
		t.Helper()
		res := lsOK(t, h, tok, method, map[string]any{"uri": uri}, false)
		if res["resultType"] != "complete" {
			t.Fatalf("%s: %v", method, res)
		}
	}
	n := 0
	edit := func(t *testing.T, goalsText, planText string) {
		t.Helper()
		n++
		lsEdit(t, h, tok, lsDoc("hello world"+strings.Repeat(".", n), goalsText, planText))
	}

	t.Run("GET /mcp without Accept text/event-stream is 405", func(t *testing.T) {
		for _, accept := range []string{"", "application/json"} {
			s, res := lsLegacyGet(t, h, c, tok, accept)
			if s != nil {
				t.Fatalf("Accept %q opened a stream", accept)
			}
			if res.Status != http.StatusMethodNotAllowed {
				t.Fatalf("Accept %q: status %d, want 405; body %s", accept, res.Status, res.Body)
			}
		}
	})

	t.Run("GET /mcp without a session is 401", func(t *testing.T) {
		s, res := lsLegacyGet(t, h, c, "", "text/event-stream")
		if s != nil || res.Status != http.StatusUnauthorized {
			t.Fatalf("no bearer: stream %v, status %d; want 401", s != nil, res.Status)
		}
	})

	var g *lsStream
	outer := t // the stream outlives the subtest that opens it
	t.Run("subscribe then GET receives resources/updated without subscriptionId", func(t *testing.T) {
		subscribe(t, "resources/subscribe", doc)
		var res *lsReply
		g, res = lsLegacyGet(outer, h, c, tok, "text/event-stream")
		if g == nil {
			t.Fatalf("GET /mcp refused: %d %s", res.Status, res.Body)
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
		x := lsCreateTask(t, h, tok, "legacy owner's task")
		lsAccept(t, h, a.SessionToken, x)
		lsAsk(t, h, a.SessionToken, x, "q", "ok?")
		lsAnswer(t, h, tok, x, "q")
		lsComplete(t, h, a.SessionToken, x, "done")
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
		s, ack := lsListen(t, h, c, tok, "1", map[string]any{"resourceSubscriptions": []string{goals}}, false)
		if got := lsStrings(t, ack["resourceSubscriptions"]); len(got) != 1 || got[0] != goals {
			t.Fatalf("acknowledged %v", got)
		}
		edit(t, "ship it now", "step one, two, three")
		// Not the document nor Plan, which only the legacy registry holds.
		s.expectRes(t, goals)
		g.expectRes(t, plan)
		lsCancelListen(t, h, tok, "1")
		s.expectFinal(t)
	})
}
