package mcp_test

// The legacy path kept for clients that already use it (D19, DESIGN §5):
// resources/subscribe and resources/unsubscribe register URIs per session in
// memory, and GET /mcp streams notifications/resources/updated for them,
// without subscriptionId and never task notifications.

import (
	"net/http"
	"strings"
	"testing"

	"github.com/commonroom/ce/internal/roomtest"
	"github.com/commonroom/ce/internal/roomtest/apitest"
)

func TestLegacyStream(t *testing.T) {
	h := apitest.New(t, roomtest.Options{}, nil)
	c := roomtest.StreamClient()
	r := h.Join("legacy", "read", "propose", "approve")
	a := h.Join("assignee", "read", "checkout")
	tok := r.SessionToken
	doc := h.Eng.DocumentURI()
	goals := h.Eng.SectionURI("Idea/Goals")
	plan := h.Eng.SectionURI("Idea/Plan")
	subscribe := func(t *testing.T, method, uri string) {
		t.Helper()
		res := r.MCP.OK(t, method, map[string]any{"uri": uri})
		if res["resultType"] != "complete" {
			t.Fatalf("%s: %v", method, res)
		}
	}
	n := 0
	edit := func(t *testing.T, goalsText, planText string) {
		t.Helper()
		n++
		h.EditFile(t, tok, threeSections("hello world"+strings.Repeat(".", n), goalsText, planText))
	}

	t.Run("GET /mcp without Accept text/event-stream is 405", func(t *testing.T) {
		for _, accept := range []string{"", "application/json"} {
			s, res := h.LegacyGet(t, c, tok, accept)
			if s != nil {
				t.Fatalf("Accept %q opened a stream", accept)
			}
			if res.Status != http.StatusMethodNotAllowed {
				t.Fatalf("Accept %q: status %d, want 405; body %s", accept, res.Status, res.Raw)
			}
		}
	})

	t.Run("GET /mcp without a session is 401", func(t *testing.T) {
		s, res := h.LegacyGet(t, c, "", "text/event-stream")
		if s != nil || res.Status != http.StatusUnauthorized {
			t.Fatalf("no bearer: stream %v, status %d; want 401", s != nil, res.Status)
		}
	})

	var g *roomtest.Stream
	outer := t // the stream outlives the subtest that opens it
	t.Run("subscribe then GET receives resources/updated without subscriptionId", func(t *testing.T) {
		subscribe(t, "resources/subscribe", doc)
		var res *roomtest.MCPResponse
		g, res = h.LegacyGet(outer, c, tok, "text/event-stream")
		if g == nil {
			t.Fatalf("GET /mcp refused: %d %s", res.Status, res.Raw)
		}
		if ct := g.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
			t.Errorf("Content-Type %q", ct)
		}
		g.Start()
		edit(t, "ship it", "step one")
		f := g.ExpectRes(t, doc)
		if len(f.Msg.Params) != 1 {
			t.Errorf("legacy frame params %v, want only uri", f.Msg.Params)
		}
	})
	if g == nil {
		t.Fatal("no legacy stream")
	}

	t.Run("task changes of this session never reach the legacy stream", func(t *testing.T) {
		// A task of the legacy session's own, through every change: accepted,
		// input asked and answered, completed.
		taskID, hid := r.MCP.CreateTask(t, map[string]any{"summary": "legacy owner's task"})
		a.MCP.ToolOK(t, "handoff_accept", map[string]any{"handoff_id": hid})
		a.MCP.ToolOK(t, "handoff_request_input", map[string]any{"handoff_id": hid,
			"requests": []any{map[string]any{"key": "q", "message": "ok?"}}})
		answered := r.Ext.OK(t, "tasks/update", map[string]any{"taskId": taskID, "inputResponses": map[string]any{
			"q": map[string]any{"action": "accept", "content": map[string]any{"answer": "yes to q"}}}})
		if answered["resultType"] != "complete" {
			t.Fatalf("tasks/update: %v", answered)
		}
		a.MCP.ToolOK(t, "handoff_complete", map[string]any{"handoff_id": hid, "result": map[string]any{"text": "done"}})
		edit(t, "ship it!", "step one")
		// Had any task frame been sent, it would come before this one.
		g.ExpectRes(t, doc)
	})

	t.Run("a subscribe made while the stream is open reaches it", func(t *testing.T) {
		subscribe(t, "resources/subscribe", goals)
		edit(t, "ship it!!", "step one")
		g.ExpectRes(t, doc)
		g.ExpectRes(t, goals)
	})

	t.Run("unsubscribe stops delivery for that URI", func(t *testing.T) {
		subscribe(t, "resources/unsubscribe", doc)
		edit(t, "ship it!!!", "step one")
		// The document changed too; only Goals may arrive.
		g.ExpectRes(t, goals)
		subscribe(t, "resources/unsubscribe", goals)
		edit(t, "ship it!!!!", "step one") // nothing subscribed changes
		subscribe(t, "resources/subscribe", plan)
		edit(t, "ship it!!!!", "step one, two")
		// A stray frame from the edit before would come first.
		g.ExpectRes(t, plan)
	})

	t.Run("a listen stream of the same session does not get legacy subscriptions", func(t *testing.T) {
		s, ack := h.Listen(t, c, tok, "1", map[string]any{"resourceSubscriptions": []string{goals}}, false)
		if got := roomtest.DecodeStrings(t, ack["resourceSubscriptions"]); len(got) != 1 || got[0] != goals {
			t.Fatalf("acknowledged %v", got)
		}
		edit(t, "ship it now", "step one, two, three")
		// Not the document nor Plan, which only the legacy registry holds.
		s.ExpectRes(t, goals)
		g.ExpectRes(t, plan)
		h.CancelListen(t, tok, "1")
		s.ExpectFinal(t)
	})
}
