package httpapi

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/room"
)

// TestStorageShareRefusalAtBothDoors: a participant past its daily
// storage share is refused with limit_exceeded naming the scope and when
// it frees, the same at the plain HTTP door (429) and at MCP (an isError
// tool result), and nothing is written.
func TestStorageShareRefusalAtBothDoors(t *testing.T) {
	h := newHarness(t, "", harnessOpts{Limits: func(l *room.Limits) { l.MaxStoredBytesPerDay = 4096 }})
	now := h.Clock.Now().UTC()
	frees := room.WireTime(time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC).UnixMilli())
	big := strings.Repeat("x", 2000) // 2000 + 1024 bytes a create: one fits in 4096, two do not
	wantShape := func(t *testing.T, body map[string]any) {
		t.Helper()
		if body["scope"] != room.ScopeStorage || body["frees_at"] != frees || body["limit"] != float64(4096) ||
			body["retry_after_seconds"] == nil || !strings.Contains(body["message"].(string), "frees at "+frees) {
			t.Fatalf("refusal body %v, want scope %s, frees_at %s, limit 4096", body, room.ScopeStorage, frees)
		}
	}

	t.Run("plain HTTP answers 429 limit_exceeded", func(t *testing.T) {
		p := h.join("http-flooder", "read", "propose")
		r := h.Do(t, "POST", h.IngressURL("/workspace/handoff"), p.SessionToken, map[string]any{"summary": big})
		wantOK(t, r)
		before := h.Snapshot()
		r = h.Do(t, "POST", h.IngressURL("/workspace/handoff"), p.SessionToken, map[string]any{"summary": big})
		wantShape(t, wantError(t, r, http.StatusTooManyRequests, "limit_exceeded"))
		h.AssertUnchanged(t, before)
	})
	t.Run("MCP answers an isError result with the same body", func(t *testing.T) {
		p := h.join("mcp-flooder", "read", "propose")
		p.mcp.toolOK(t, "handoff_create", map[string]any{"summary": big})
		before := h.Snapshot()
		wantShape(t, p.mcp.toolErr(t, "handoff_create", map[string]any{"summary": big}, "limit_exceeded"))
		h.AssertUnchanged(t, before)
	})
	t.Run("a proposal counts too", func(t *testing.T) {
		p := h.join("proposer", "read", "propose")
		wantOK(t, h.Do(t, "POST", h.IngressURL("/workspace/handoff"), p.SessionToken, map[string]any{"summary": big}))
		body := p.mcp.toolErr(t, "workspace_propose", map[string]any{"target": "workspace", "base_version": 1,
			"summary": "s", "change": map[string]any{"content": big}}, "limit_exceeded")
		wantShape(t, body)
	})
}

// TestPrunedReadsAtBothDoors: a handoff retention pruned reads as
// handoff_not_found with pruned: true (and a message saying so) at both
// doors; an id that never existed reads as plain handoff_not_found; and
// /debug/metrics counts it under storage.pruned.
func TestPrunedReadsAtBothDoors(t *testing.T) {
	h := newHarness(t, "", harnessOpts{Actor: func(c *actor.Config) {
		c.Engine.Retention = room.Retention{Handoffs: 24 * time.Hour}
		c.PruneEvery = 1000 * 24 * time.Hour
	}})
	p := h.join("owner", "read", "propose")
	created := p.mcp.toolOK(t, "handoff_create", map[string]any{"summary": "old work"})
	hid, _ := created["handoff_id"].(string)
	if hid == "" {
		hid, _ = jsonAt(created, "handoff", "handoff_id").(string)
	}
	p.mcp.toolOK(t, "handoff_cancel", map[string]any{"handoff_id": hid})
	h.Clock.Advance(25 * time.Hour)
	got, err := h.Room.Prune(context.Background())
	if err != nil || got.Handoffs != 1 {
		t.Fatalf("prune: %+v, %v", got, err)
	}
	m := h.do("GET", h.OwnerURL("/debug/metrics"), h.OpToken, nil)
	if m.Status != http.StatusOK || jsonAt(m.JSON(t), "storage", "pruned", "handoffs") != float64(1) {
		t.Fatalf("/debug/metrics storage.pruned after the prune: %d %v", m.Status, jsonAt(m.JSON(t), "storage", "pruned"))
	}
	p = h.join("reader", "read") // the first session has expired meanwhile
	r := h.Do(t, "GET", h.IngressURL("/workspace/handoff?"+url.Values{"handoff_id": {hid}}.Encode()), p.SessionToken, nil)
	body := wantError(t, r, http.StatusNotFound, "handoff_not_found")
	if body["pruned"] != true || !strings.Contains(body["message"].(string), "pruned") || body["pruned_at"] == nil {
		t.Fatalf("HTTP body %v, want pruned: true", body)
	}
	sc := p.mcp.toolErr(t, "handoff_get", map[string]any{"handoff_id": hid}, "handoff_not_found")
	if sc["pruned"] != true {
		t.Fatalf("MCP body %v, want pruned: true", sc)
	}
	sc = p.mcp.toolErr(t, "handoff_get", map[string]any{"handoff_id": "handoff_0123456789abcdef0123456789abcdef"}, "handoff_not_found")
	if _, has := sc["pruned"]; has {
		t.Fatalf("an id that never existed reads as pruned: %v", sc)
	}
}
