package httpapi

// The HTTP twins of the handoff tools and the Tasks methods
// (routes_handoff.go): the same engine methods, the same representations as
// /mcp (GET /workspace/task is exactly what tasks/get returns, minus
// resultType and serverInfo), and the Commonroom error bodies. Every failing
// call changes no row.

import (
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"testing"

	"github.com/commonroom/ce/internal/mcptest"
)

// TestFlow_HandoffOverHTTP is one handoff's life at the plain door, end to
// end: created, read, accepted, asked, answered, completed, approved, its
// events; a second rejected, a third cancelled. Each step's task is checked
// against tasks/get. The door's refusals are TestHandoffRoutesRefuse.
func TestFlow_HandoffOverHTTP(t *testing.T) {
	h := newHarness(t, "")
	owner := h.join("owner", "read", "propose")
	worker := h.join("worker", "read", "checkout")
	worker2 := h.join("worker2", "read", "checkout")
	approver := h.join("approver", "read", "approve")

	tok := func(p party) string { return p.SessionToken }
	post := func(t *testing.T, p party, path string, body any) apiResp {
		t.Helper()
		return h.Do(t, "POST", h.IngressURL(path), tok(p), body)
	}
	get := func(t *testing.T, p party, path string, q url.Values) apiResp {
		t.Helper()
		return h.Do(t, "GET", h.IngressURL(path+"?"+q.Encode()), tok(p), nil)
	}
	obj := func(t *testing.T, r apiResp) map[string]any {
		t.Helper()
		wantOK(t, r)
		return r.JSON(t)
	}
	// twinTask checks GET /workspace/task against tasks/get for the same session.
	twinTask := func(t *testing.T, p party, taskID string) map[string]any {
		t.Helper()
		httpTask := obj(t, get(t, p, "/workspace/task", url.Values{"task_id": {taskID}}))
		mcpTask := httpTwin(t, p.ext.taskGet(t, taskID))
		if !reflect.DeepEqual(any(httpTask), any(mcpTask)) {
			t.Errorf("GET /workspace/task differs from tasks/get:\nhttp %v\nmcp  %v", httpTask, mcpTask)
		}
		return httpTask
	}
	// failing runs a call that must fail with status and code and change no row.
	failing := func(t *testing.T, status int, code string, call func() apiResp) map[string]any {
		t.Helper()
		before := h.Snapshot()
		body := wantError(t, call(), status, code)
		h.AssertUnchanged(t, before)
		return body
	}

	var hid, taskID string
	t.Run("POST /workspace/handoff creates the handoff and its task", func(t *testing.T) {
		res := obj(t, post(t, owner, "/workspace/handoff", map[string]any{"summary": "write the goals", "idempotency_key": "http-1",
			"artifacts": []any{map[string]any{"uri": "https://example.com/brief", "title": "brief"}}}))
		hid, _ = jsonAt(res, "handoff", "handoff_id").(string)
		taskID, _ = jsonAt(res, "task", "taskId").(string)
		if hid == "" || taskID == "" || jsonAt(res, "handoff", "task_id") != taskID || jsonAt(res, "handoff", "status") != "open" {
			t.Fatalf("answer = %v", res)
		}
		if jsonAt(res, "task", "status") != "working" || jsonAt(res, "task", "_meta", mcptest.HandoffMeta) != hid {
			t.Errorf("task = %v", res["task"])
		}
		if got := twinTask(t, owner, taskID); !reflect.DeepEqual(got, res["task"]) {
			t.Errorf("the created task %v differs from GET /workspace/task %v", res["task"], got)
		}
		again := obj(t, post(t, owner, "/workspace/handoff", map[string]any{"summary": "write the goals", "idempotency_key": "http-1"}))
		if jsonAt(again, "handoff", "handoff_id") != hid || jsonAt(again, "task", "taskId") != taskID || again["replayed"] != true {
			t.Errorf("replay = %v", again)
		}
	})
	if hid == "" {
		t.Fatal("no handoff to work on")
	}
	t.Run("GET /workspace/handoff is handoff_get", func(t *testing.T) {
		hv := obj(t, get(t, owner, "/workspace/handoff", url.Values{"handoff_id": {hid}}))
		mv := owner.mcp.toolOK(t, "handoff_get", map[string]any{"handoff_id": hid})
		if !reflect.DeepEqual(any(hv), any(mv)) {
			t.Errorf("http %v\nmcp  %v", hv, mv)
		}
		if hv["summary"] != "write the goals" || len(hv["artifacts"].([]any)) != 1 {
			t.Errorf("handoff = %v", hv)
		}
	})
	t.Run("POST accept", func(t *testing.T) {
		hv := obj(t, post(t, worker, "/workspace/handoff/accept", map[string]any{"handoff_id": hid}))
		if hv["status"] != "accepted" || hv["assignee_id"] != worker.ParticipantID {
			t.Errorf("handoff = %v", hv)
		}
		if tk := twinTask(t, worker, taskID); tk["status"] != "working" {
			t.Errorf("task = %v", tk)
		}
	})
	t.Run("POST request_input", func(t *testing.T) {
		hv := obj(t, post(t, worker, "/workspace/handoff/request_input", map[string]any{"handoff_id": hid,
			"requests": []any{map[string]any{"key": "k1", "message": "short or long?"}, map[string]any{"key": "k2", "message": "deadline?"}}}))
		if hv["task_status"] != "input_required" {
			t.Errorf("handoff = %v", hv)
		}
		tk := twinTask(t, owner, taskID)
		if tk["status"] != "input_required" || len(tk["inputRequests"].(map[string]any)) != 2 {
			t.Errorf("task = %v", tk)
		}
	})
	t.Run("POST /workspace/task/update answers, partly then fully", func(t *testing.T) {
		r := obj(t, post(t, owner, "/workspace/task/update", map[string]any{"task_id": taskID,
			"input_responses": map[string]any{"k1": map[string]any{"action": "accept", "content": map[string]any{"answer": "short"}}, "zzz": 1}}))
		if len(r) != 0 {
			t.Errorf("update answer = %v, want {}", r)
		}
		tk := twinTask(t, owner, taskID)
		if tk["status"] != "input_required" || len(tk["inputRequests"].(map[string]any)) != 1 || jsonAt(tk, "inputRequests", "k2") == nil {
			t.Errorf("task after a partial answer = %v", tk)
		}
		obj(t, post(t, owner, "/workspace/task/update", map[string]any{"task_id": taskID,
			"input_responses": map[string]any{"k2": map[string]any{"action": "accept", "content": map[string]any{"answer": "friday"}}}}))
		if tk := twinTask(t, worker, taskID); tk["status"] != "working" {
			t.Errorf("task = %v", tk)
		}
	})
	t.Run("POST complete", func(t *testing.T) {
		hv := obj(t, post(t, worker, "/workspace/handoff/complete", map[string]any{"handoff_id": hid,
			"result": map[string]any{"text": "goals written", "is_error": false}}))
		if hv["status"] != "result_ready" || jsonAt(hv, "result", "text") != "goals written" {
			t.Errorf("handoff = %v", hv)
		}
		tk := twinTask(t, owner, taskID)
		if tk["status"] != "completed" || jsonAt(tk, "result", "isError") != false {
			t.Errorf("task = %v", tk)
		}
	})
	t.Run("POST approve leaves the task as it was", func(t *testing.T) {
		before := twinTask(t, owner, taskID)
		hv := obj(t, post(t, approver, "/workspace/handoff/approve", map[string]any{"handoff_id": hid, "note": "fine"}))
		if hv["status"] != "approved" || hv["decided_by"] != approver.ParticipantID {
			t.Errorf("handoff = %v", hv)
		}
		if after := twinTask(t, owner, taskID); !reflect.DeepEqual(after, before) {
			t.Errorf("approval changed the task:\n%v\n%v", before, after)
		}
	})
	t.Run("GET /workspace/handoff/events is handoff_events", func(t *testing.T) {
		ev := obj(t, get(t, owner, "/workspace/handoff/events", url.Values{"handoff_id": {hid}}))
		mv := owner.mcp.toolOK(t, "handoff_events", map[string]any{"handoff_id": hid})
		if !reflect.DeepEqual(any(ev), any(mv)) {
			t.Errorf("http %v\nmcp  %v", ev, mv)
		}
		list, _ := ev["events"].([]any)
		if len(list) < 8 || jsonAt(list[0], "event_type") != "handoff.created" || jsonAt(list[len(list)-1], "event_type") != "handoff.approved" {
			t.Errorf("events = %v", list)
		}
		since := jsonAt(list[len(list)-2], "event_id").(float64)
		page := obj(t, get(t, owner, "/workspace/handoff/events", url.Values{"handoff_id": {hid}, "since_event_id": {strconv.FormatInt(int64(since), 10)}, "limit": {"5"}}))
		if l := page["events"].([]any); len(l) != 1 || jsonAt(l[0], "event_type") != "handoff.approved" {
			t.Errorf("since page = %v", page["events"])
		}
	})
	t.Run("POST reject", func(t *testing.T) {
		res := obj(t, post(t, owner, "/workspace/handoff", map[string]any{"summary": "write the plan", "assignee": worker.ParticipantID}))
		h2, _ := jsonAt(res, "handoff", "handoff_id").(string)
		// Addressed to worker: invisible to worker2 (D2), so not found rather than a conflict.
		failing(t, http.StatusNotFound, "handoff_not_found", func() apiResp {
			return post(t, worker2, "/workspace/handoff/accept", map[string]any{"handoff_id": h2})
		})
		obj(t, post(t, worker, "/workspace/handoff/accept", map[string]any{"handoff_id": h2}))
		obj(t, post(t, worker, "/workspace/handoff/complete", map[string]any{"handoff_id": h2, "result": map[string]any{"text": "plan"}}))
		hv := obj(t, post(t, approver, "/workspace/handoff/reject", map[string]any{"handoff_id": h2, "note": "redo"}))
		if hv["status"] != "rejected" || hv["decision_note"] != "redo" {
			t.Errorf("handoff = %v", hv)
		}
	})
	t.Run("POST /workspace/task/cancel cancels task and handoff", func(t *testing.T) {
		res := obj(t, post(t, owner, "/workspace/handoff", map[string]any{"summary": "maybe later"}))
		h3, _ := jsonAt(res, "handoff", "handoff_id").(string)
		t3, _ := jsonAt(res, "task", "taskId").(string)
		r := obj(t, post(t, owner, "/workspace/task/cancel", map[string]any{"task_id": t3}))
		if len(r) != 0 {
			t.Errorf("cancel answer = %v, want {}", r)
		}
		if tk := twinTask(t, owner, t3); tk["status"] != "cancelled" {
			t.Errorf("task = %v", tk)
		}
		if s := h.Status(t, "handoff", h3); s != "cancelled" {
			t.Errorf("handoff = %s", s)
		}
		before := h.Snapshot()
		obj(t, post(t, owner, "/workspace/task/cancel", map[string]any{"task_id": t3}))
		h.AssertUnchanged(t, before)
	})
}
