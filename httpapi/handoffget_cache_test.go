package httpapi

import (
	"net/http"
	"testing"
)

// TestHandoffGet_CachedAnswersFollowCommitsAndReaders: handoff_get and GET
// /workspace/handoff keep an answer until the room's next commit, per
// reader: a reader who may not see a handoff is refused after another's
// answer was kept, an approver is not shown the inputs the owner's kept
// answer holds, and a change (accept, a question, a cancel, which also
// takes the poll interval away) shows on the next read on both doors.
func TestHandoffGet_CachedAnswersFollowCommitsAndReaders(t *testing.T) {
	h := newHarness(t, "")
	owner := h.join("owner", "read", "propose")
	worker := h.join("worker", "read", "checkout")
	approver := h.join("approver", "read", "approve")
	stranger := h.join("stranger", "read")
	_, hid := owner.mcp.createTask(t, map[string]any{"summary": "cache me", "assignee": worker.ParticipantID})
	get := func(p party) map[string]any { return p.mcp.toolOK(t, "handoff_get", map[string]any{"handoff_id": hid}) }
	plain := func(p party) apiResp {
		return h.Do(t, http.MethodGet, h.IngressURL("/workspace/handoff?handoff_id="+hid), p.SessionToken, nil)
	}
	t.Run("open, read twice on both doors", func(t *testing.T) {
		for range 2 {
			if got := get(owner); got["status"] != "open" {
				t.Fatalf("owner: %v", got)
			}
			if r := plain(owner); r.Status != http.StatusOK || r.JSON(t)["status"] != "open" {
				t.Fatalf("plain: %d %s", r.Status, r.Body)
			}
		}
	})
	t.Run("a kept answer is sent with the bytes of the first", func(t *testing.T) {
		call := func(c *mcpClient) []byte {
			r := c.do(t, mcpReq{ID: 9, Method: "tools/call", Params: map[string]any{"name": "handoff_get", "arguments": map[string]any{"handoff_id": hid}}})
			if r.Status != http.StatusOK || r.Result == nil {
				t.Fatalf("%d %s", r.Status, r.Raw)
			}
			return r.Raw
		}
		first := call(owner.mcp)
		for range 3 {
			if again := call(owner.mcp); string(again) != string(first) {
				t.Fatalf("again:\n%s\nfirst:\n%s", again, first)
			}
		}
		if other := call(approver.mcp); string(other) == string(first) {
			t.Fatal("the approver was sent the owner's answer")
		}
	})
	t.Run("a stranger is refused after the owner's answer was kept", func(t *testing.T) {
		stranger.mcp.toolErr(t, "handoff_get", map[string]any{"handoff_id": hid}, "handoff_not_found")
		wantError(t, plain(stranger), http.StatusNotFound, "handoff_not_found")
	})
	worker.mcp.toolOK(t, "handoff_accept", map[string]any{"handoff_id": hid})
	t.Run("accepted on the next read after the accept", func(t *testing.T) {
		if got := get(owner); got["status"] != "accepted" || got["assignee_id"] != worker.ParticipantID {
			t.Fatalf("owner after accept: %v", got)
		}
		if r := plain(owner); r.JSON(t)["status"] != "accepted" {
			t.Fatalf("plain after accept: %s", r.Body)
		}
	})
	worker.mcp.toolOK(t, "handoff_request_input", map[string]any{"handoff_id": hid, "requests": []any{
		map[string]any{"key": "tone", "message": "Formal?"}}})
	t.Run("the owner sees the question; the approver after the owner does not", func(t *testing.T) {
		for range 2 {
			if in, _ := get(owner)["inputs"].([]any); len(in) != 1 {
				t.Fatalf("owner's inputs: %v", in)
			}
			got := get(approver)
			if _, has := got["inputs"]; has || got["status"] != "accepted" {
				t.Fatalf("approver: %v", got)
			}
		}
	})
	t.Run("a live task's poll interval is kept with the answer", func(t *testing.T) {
		for range 2 {
			if got := get(owner); got["poll_interval_ms"] != float64(5000) {
				t.Fatalf("owner: poll_interval_ms = %v", got["poll_interval_ms"])
			}
			if got := plain(approver).JSON(t); got["poll_interval_ms"] != float64(5000) {
				t.Fatalf("approver: poll_interval_ms = %v", got["poll_interval_ms"])
			}
		}
	})
	owner.mcp.toolOK(t, "handoff_cancel", map[string]any{"handoff_id": hid})
	t.Run("no poll interval on the next read after the cancel", func(t *testing.T) {
		for range 2 {
			if got := get(owner); !hasKey(got, "poll_interval_ms") || got["poll_interval_ms"] != nil || got["status"] != "cancelled" {
				t.Fatalf("owner after the cancel: %v", got)
			}
			if got := plain(approver).JSON(t); !hasKey(got, "poll_interval_ms") || got["poll_interval_ms"] != nil {
				t.Fatalf("approver after the cancel: %v", got)
			}
		}
	})
}
