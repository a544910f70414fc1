package mcp_test

// A whole handoff driven only through POST /mcp by three sessions: an owner
// agent (propose), a worker agent (checkout) and a host-like approver
// (approve). The handoff, its task, the events and the approval stay separate
// records (the brief): approval never rewrites the task.

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/commonroom/ce/internal/mcptest"
	"github.com/commonroom/ce/internal/roomtest"
	"github.com/commonroom/ce/internal/roomtest/apitest"
)

// TestFlow_MCPHandoffLifecycle is one handoff's life at the MCP door, end
// to end, as three agents live it: created as a task, accepted, asked,
// answered, completed, approved, with the task checked at each step.
func TestFlow_MCPHandoffLifecycle(t *testing.T) {
	h := apitest.New(t, roomtest.Options{}, nil)
	owner := h.Join("owner-agent", "read", "propose")
	worker := h.Join("worker-agent", "read", "checkout")
	approver := h.Join("approver", "read", "approve")

	taskID, hid := owner.MCP.CreateTask(t, map[string]any{
		"summary":     "draft the risks section",
		"constraints": "at most five bullets",
		"target":      "Plan",
	})
	created := owner.Ext.TaskGet(t, taskID)

	t.Run("the worker accepts; the task stays working and records the assignee", func(t *testing.T) {
		acc := worker.MCP.ToolOK(t, "handoff_accept", map[string]any{"handoff_id": hid})
		if acc["status"] != "accepted" || acc["assignee_id"] != worker.ParticipantID || acc["task_status"] != "working" {
			t.Errorf("handoff after accept = %v", acc)
		}
		got := owner.Ext.TaskGet(t, taskID)
		if got["status"] != "working" {
			t.Errorf("task status after accept = %v, want working (there is no accepted task status)", got["status"])
		}
		if got["createdAt"] != created["createdAt"] || got["ttlMs"] != created["ttlMs"] || got["pollIntervalMs"] != float64(5000) {
			t.Errorf("task after accept = %v, created %v", got, created)
		}
		if _, has := got["inputRequests"]; has {
			t.Errorf("a working task lists inputRequests: %v", got)
		}
		// The assignee is now a party of the task.
		if w := worker.Ext.TaskGet(t, taskID); w["status"] != "working" {
			t.Errorf("the assignee's tasks/get = %v", w)
		}
	})

	schema := map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}, "required": []any{"n"}}
	t.Run("the worker asks two questions; the task is input_required with both", func(t *testing.T) {
		got := worker.MCP.ToolOK(t, "handoff_request_input", map[string]any{"handoff_id": hid, "requests": []any{
			map[string]any{"key": "tone", "message": "Formal or casual?"},
			map[string]any{"key": "count", "message": "How many bullets?", "requested_schema": schema},
		}})
		if got["status"] != "accepted" || got["task_status"] != "input_required" {
			t.Errorf("handoff after request_input = %v", got)
		}
		task := owner.Ext.TaskGet(t, taskID)
		if task["status"] != "input_required" {
			t.Fatalf("task status = %v", task["status"])
		}
		reqs, _ := task["inputRequests"].(map[string]any)
		if len(reqs) != 2 {
			t.Fatalf("inputRequests = %v, want tone and count", task["inputRequests"])
		}
		want := map[string]any{
			"tone": map[string]any{"method": "elicitation/create", "params": map[string]any{"mode": "form", "message": "Formal or casual?",
				"requestedSchema": map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}}, "required": []any{"answer"}}}},
			"count": map[string]any{"method": "elicitation/create", "params": map[string]any{"mode": "form", "message": "How many bullets?",
				"requestedSchema": schema}},
		}
		if !reflect.DeepEqual(roomtest.Generic(t, reqs), roomtest.Generic(t, want)) {
			t.Errorf("inputRequests = %v\nwant %v", reqs, want)
		}
	})

	toneAnswer := map[string]any{"action": "accept", "content": map[string]any{"answer": "formal"}}
	countAnswer := map[string]any{"action": "accept", "content": map[string]any{"n": 3}}
	t.Run("answering one key (and an unknown one) leaves only the other outstanding at once", func(t *testing.T) {
		roomtest.WantAck(t, owner.Ext.TaskCall(t, "tasks/update", taskID, map[string]any{"inputResponses": map[string]any{
			"tone": toneAnswer, "never-asked": map[string]any{"action": "accept", "content": map[string]any{"x": 1}},
		}}))
		task := owner.Ext.TaskGet(t, taskID)
		reqs, _ := task["inputRequests"].(map[string]any)
		if task["status"] != "input_required" || len(reqs) != 1 || reqs["count"] == nil {
			t.Errorf("after a partial answer: status %v inputRequests %v, want input_required with only count", task["status"], task["inputRequests"])
		}
		if n := h.Count(`SELECT count(*) FROM task_inputs WHERE task_id = ?`, taskID); n != 2 {
			t.Errorf("%d input rows, want 2 (the unknown key is ignored)", n)
		}
	})
	t.Run("answering the second key returns the task to working", func(t *testing.T) {
		roomtest.WantAck(t, owner.Ext.TaskCall(t, "tasks/update", taskID, map[string]any{"inputResponses": map[string]any{"count": countAnswer}}))
		task := owner.Ext.TaskGet(t, taskID)
		if task["status"] != "working" {
			t.Errorf("status = %v, want working", task["status"])
		}
		if _, has := task["inputRequests"]; has {
			t.Errorf("a working task lists inputRequests: %v", task)
		}
	})
	t.Run("the worker reads both answers with handoff_get", func(t *testing.T) {
		got := worker.MCP.ToolOK(t, "handoff_get", map[string]any{"handoff_id": hid})
		ins, _ := got["inputs"].([]any)
		if len(ins) != 2 {
			t.Fatalf("inputs = %v", got["inputs"])
		}
		answers := map[string]any{}
		for _, in := range ins {
			key, _ := roomtest.JSONAt(in, "key").(string)
			if roomtest.JSONAt(in, "status") != "answered" || roomtest.JSONAt(in, "answered_at") == nil {
				t.Errorf("input %s = %v", key, in)
			}
			answers[key] = roomtest.JSONAt(in, "response")
		}
		want := roomtest.Generic(t, map[string]any{"tone": toneAnswer, "count": countAnswer})
		if !reflect.DeepEqual(any(answers), want) {
			t.Errorf("answers = %v, want %v", answers, want)
		}
	})

	var completed map[string]any
	t.Run("the worker completes; tasks/get is completed with a CallToolResult", func(t *testing.T) {
		art := []any{map[string]any{"uri": h.Eng.DocumentURI() + "/section/Idea%2FPlan", "title": "Plan"}}
		got := worker.MCP.ToolOK(t, "handoff_complete", map[string]any{"handoff_id": hid,
			"result": map[string]any{"text": "five formal bullets", "artifacts": art}, "status_message": "done"})
		if got["status"] != "result_ready" || roomtest.JSONAt(got, "result", "text") != "five formal bullets" {
			t.Errorf("handoff after complete = %v", got)
		}
		completed = owner.Ext.TaskGet(t, taskID)
		if completed["status"] != "completed" {
			t.Fatalf("task = %v", completed)
		}
		res, _ := completed["result"].(map[string]any)
		content, _ := res["content"].([]any)
		if len(content) != 1 || roomtest.JSONAt(content[0], "type") != "text" || roomtest.JSONAt(content[0], "text") != "five formal bullets" {
			t.Errorf("result.content = %v", res["content"])
		}
		if res["isError"] != false {
			t.Errorf("result.isError = %v, want false", res["isError"])
		}
		if roomtest.JSONAt(res, "structuredContent", "handoff_id") != hid {
			t.Errorf("result.structuredContent = %v", res["structuredContent"])
		}
		for _, k := range []string{"error", "inputRequests"} {
			if _, has := completed[k]; has {
				t.Errorf("a completed task carries %q", k)
			}
		}
		if roomtest.JSONAt(completed, "_meta", mcptest.HandoffMeta) != hid {
			t.Errorf("_meta = %v", completed["_meta"])
		}
	})
	t.Run("a second completion keeps the first result", func(t *testing.T) {
		again := worker.MCP.ToolOK(t, "handoff_complete", map[string]any{"handoff_id": hid, "result": map[string]any{"text": "other"}})
		if again["already_completed"] != true || roomtest.JSONAt(again, "result", "text") != "five formal bullets" {
			t.Errorf("second completion = %v", again)
		}
		if got := owner.Ext.TaskGet(t, taskID); !reflect.DeepEqual(got, completed) {
			t.Errorf("task changed:\n%v\nwant %v", got, completed)
		}
	})
	t.Run("tasks/cancel on the completed task acknowledges and changes nothing", func(t *testing.T) {
		before := h.Snapshot()
		roomtest.WantAck(t, owner.Ext.TaskCall(t, "tasks/cancel", taskID, nil))
		h.AssertUnchanged(t, before)
		if got := owner.Ext.TaskGet(t, taskID); !reflect.DeepEqual(got, completed) {
			t.Errorf("task after cancel:\n%v\nwant %v", got, completed)
		}
	})
	t.Run("the approver approves; the task is untouched", func(t *testing.T) {
		h.Clock.Advance(time.Second) // a later instant, so a rewrite would show in lastUpdatedAt
		got := approver.MCP.ToolOK(t, "handoff_approve", map[string]any{"handoff_id": hid, "note": "ship it"})
		if got["status"] != "approved" || got["decided_by"] != approver.ParticipantID || got["decision_note"] != "ship it" {
			t.Errorf("handoff after approve = %v", got)
		}
		if _, has := got["inputs"]; has {
			t.Errorf("the approver sees the owner/worker inputs: %v", got["inputs"])
		}
		after := owner.Ext.TaskGet(t, taskID)
		if !reflect.DeepEqual(after, completed) {
			t.Errorf("approval rewrote the task:\n%v\nwant %v", after, completed)
		}
	})
	t.Run("handoff_events lists the events in order", func(t *testing.T) {
		evs := owner.MCP.ToolOK(t, "handoff_events", map[string]any{"handoff_id": hid})
		list, _ := evs["events"].([]any)
		var types []string
		var last float64
		for _, e := range list {
			types = append(types, roomtest.JSONAt(e, "event_type").(string))
			id, _ := roomtest.JSONAt(e, "event_id").(float64)
			if id <= last {
				t.Errorf("event ids not ascending: %v after %v", id, last)
			}
			last = id
			if p, _ := roomtest.JSONAt(e, "payload").(map[string]any); p["handoff_id"] != hid {
				t.Errorf("event %v does not name the handoff", e)
			}
		}
		want := []string{
			"handoff.created", "task.created", "handoff.accepted",
			"handoff.input_requested", "task.input_required",
			"handoff.input_received", "task.working", "handoff.input_received",
			"task.completed", "handoff.result_ready", "handoff.approved",
		}
		if !slices.Equal(types, want) {
			t.Errorf("events = %v\nwant     %v", types, want)
		}
		since := roomtest.JSONAt(list[2], "event_id")
		tail := owner.MCP.ToolOK(t, "handoff_events", map[string]any{"handoff_id": hid, "since_event_id": since, "limit": 2})
		if got := tail["events"].([]any); len(got) != 2 || roomtest.JSONAt(got[0], "event_type") != want[3] {
			t.Errorf("since_event_id page = %v", got)
		}
	})

	t.Run("tasks/cancel on a live task cancels task and handoff before the ack", func(t *testing.T) {
		tid2, hid2 := owner.MCP.CreateTask(t, map[string]any{"summary": "to be cancelled"})
		worker.MCP.ToolOK(t, "handoff_accept", map[string]any{"handoff_id": hid2})
		worker.MCP.ToolOK(t, "handoff_request_input", map[string]any{"handoff_id": hid2,
			"requests": []any{map[string]any{"key": "q", "message": "still wanted?"}}})
		roomtest.WantAck(t, owner.Ext.TaskCall(t, "tasks/cancel", tid2, nil))
		// Read the sidecar right after the ack: no waiting, nothing eventual.
		if s, _ := h.TaskRow(t, tid2); s != "cancelled" {
			t.Errorf("task row = %s, want cancelled", s)
		}
		if s := h.Status(t, "handoff", hid2); s != "cancelled" {
			t.Errorf("handoff row = %s, want cancelled", s)
		}
		got := owner.Ext.TaskGet(t, tid2)
		if got["status"] != "cancelled" {
			t.Errorf("tasks/get = %v", got)
		}
		for _, k := range []string{"result", "error", "inputRequests"} {
			if _, has := got[k]; has {
				t.Errorf("a cancelled task carries %q: %v", k, got)
			}
		}
		hv := owner.MCP.ToolOK(t, "handoff_get", map[string]any{"handoff_id": hid2})
		if hv["status"] != "cancelled" || hv["cancel_reason"] != "requested" || hv["cancelled_by"] != owner.ParticipantID {
			t.Errorf("handoff = %v", hv)
		}
		if n := h.Count(`SELECT count(*) FROM events WHERE handoff_id = ? AND event_type IN ('task.cancelled','handoff.cancelled')`, hid2); n != 2 {
			t.Errorf("%d cancel events, want task.cancelled and handoff.cancelled", n)
		}
		before := h.Snapshot()
		roomtest.WantAck(t, owner.Ext.TaskCall(t, "tasks/cancel", tid2, nil))
		h.AssertUnchanged(t, before)
		// The worker cannot deliver into a cancelled handoff.
		worker.MCP.ToolErr(t, "handoff_complete", map[string]any{"handoff_id": hid2, "result": map[string]any{"text": "late"}}, "handoff_conflict")
	})

	t.Run("the worker cannot cancel or answer the owner's task", func(t *testing.T) {
		tid3, hid3 := owner.MCP.CreateTask(t, map[string]any{"summary": "owner decides"})
		worker.MCP.ToolOK(t, "handoff_accept", map[string]any{"handoff_id": hid3})
		before := h.Snapshot()
		for _, m := range []string{"tasks/cancel", "tasks/update"} {
			r := worker.Ext.TaskCall(t, m, tid3, map[string]any{"inputResponses": map[string]any{}})
			if r.Result != nil {
				t.Errorf("%s by the assignee succeeded: %s", m, r.Raw)
			}
		}
		h.AssertUnchanged(t, before)
	})

	t.Run("unknown and foreign task ids give the identical -32602 unknown task", func(t *testing.T) {
		outsider := h.Join("outsider", "read", "propose", "checkout", "approve")
		for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
			extra := map[string]any{}
			if m == "tasks/update" {
				extra["inputResponses"] = map[string]any{"tone": toneAnswer}
			}
			before := h.Snapshot()
			foreign := outsider.Ext.Do(t, mcptest.Request{Method: m, ID: "same", Params: roomtest.WithKey(extra, "taskId", taskID)})
			unknown := outsider.Ext.Do(t, mcptest.Request{Method: m, ID: "same", Params: roomtest.WithKey(extra, "taskId", "task_00000000000000000000000000000000")})
			h.AssertUnchanged(t, before)
			fe := roomtest.WantRPCError(t, foreign, http.StatusOK, mcptest.CodeInvalidParams)
			ue := roomtest.WantRPCError(t, unknown, http.StatusOK, mcptest.CodeInvalidParams)
			if fe["message"] != "unknown task" {
				t.Errorf("%s: message = %v, want \"unknown task\"", m, fe["message"])
			}
			if !reflect.DeepEqual(fe, ue) || foreign.Status != unknown.Status {
				t.Errorf("%s: foreign %d %v\nunknown %d %v\nwant identical", m, foreign.Status, fe, unknown.Status, ue)
			}
		}
	})

	t.Run("Mcp-Name must equal taskId", func(t *testing.T) {
		for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
			r := owner.Ext.Do(t, mcptest.Request{Method: m, Params: map[string]any{"taskId": taskID}, Set: map[string]string{"Mcp-Name": hid}})
			roomtest.WantRPCError(t, r, http.StatusBadRequest, mcptest.CodeHeaderMismatch)
		}
	})
	t.Run("a missing or non-string taskId is 400 -32020", func(t *testing.T) {
		// Mcp-Name cannot equal a field that is not there: 400 -32020.
		r := owner.Ext.Do(t, mcptest.Request{Method: "tasks/get", Params: map[string]any{}, Set: map[string]string{"Mcp-Name": "x"}})
		roomtest.WantRPCError(t, r, http.StatusBadRequest, mcptest.CodeHeaderMismatch)
		r = owner.Ext.Do(t, mcptest.Request{Method: "tasks/get", Params: map[string]any{"taskId": 5}, Set: map[string]string{"Mcp-Name": "5"}})
		roomtest.WantRPCError(t, r, http.StatusBadRequest, mcptest.CodeHeaderMismatch)
	})
}

// with copies m and sets k to v.
func TestMCPTaskExpiry(t *testing.T) {
	h := apitest.New(t, roomtest.Options{}, nil)
	owner := h.Join("owner", "read", "propose")
	worker := h.Join("worker", "read", "checkout")
	taskID, hid := owner.MCP.CreateTask(t, map[string]any{"summary": "never finished"})
	worker.MCP.ToolOK(t, "handoff_accept", map[string]any{"handoff_id": hid})

	h.Clock.Advance(24*time.Hour + time.Millisecond)
	h.Sweep()
	admin := h.Join("admin", "admin") // the old sessions expired with the clock

	t.Run("a task past its TTL is failed with a JSON-RPC error and no result", func(t *testing.T) {
		got := admin.Ext.TaskGet(t, taskID)
		if got["status"] != "failed" {
			t.Fatalf("task = %v", got)
		}
		e, _ := got["error"].(map[string]any)
		if code, _ := e["code"].(float64); code != -32603 || e["message"] != "task expired" {
			t.Errorf("error = %v", got["error"])
		}
		for _, k := range []string{"result", "inputRequests"} {
			if _, has := got[k]; has {
				t.Errorf("a failed task carries %q", k)
			}
		}
		if twin := obj2(t, h, admin, taskID); !reflect.DeepEqual(any(twin), any(roomtest.HTTPTwin(t, got))) {
			t.Errorf("GET /workspace/task %v differs from tasks/get %v", twin, got)
		}
	})
	t.Run("its accepted handoff is cancelled as task_expired", func(t *testing.T) {
		hv := admin.MCP.ToolOK(t, "handoff_get", map[string]any{"handoff_id": hid})
		if hv["status"] != "cancelled" || hv["cancel_reason"] != "task_expired" {
			t.Errorf("handoff = %v", hv)
		}
	})
	t.Run("cancel on the failed task acknowledges and changes nothing", func(t *testing.T) {
		before := h.Snapshot()
		roomtest.WantAck(t, admin.Ext.TaskCall(t, "tasks/cancel", taskID, nil))
		h.AssertUnchanged(t, before)
	})
	t.Run("one TTL after its last update the row is gone: -32602, the handoff keeps its record", func(t *testing.T) {
		h.Clock.Advance(24*time.Hour + time.Millisecond)
		h.Sweep()
		admin = h.Join("admin2", "admin")
		roomtest.WantRPCError(t, admin.Ext.TaskCall(t, "tasks/get", taskID, nil), http.StatusOK, mcptest.CodeInvalidParams)
		hv := admin.MCP.ToolOK(t, "handoff_get", map[string]any{"handoff_id": hid})
		if hv["task_id"] != taskID || hv["task_status"] != nil {
			t.Errorf("handoff after the purge = %v", hv)
		}
	})
}

// obj2 is GET /workspace/task for a party, decoded.
func obj2(t *testing.T, h *apitest.Harness, p roomtest.Party, taskID string) map[string]any {
	t.Helper()
	r := h.Do(t, "GET", h.IngressURL("/workspace/task?task_id="+taskID), p.SessionToken, nil)
	roomtest.WantOK(t, r)
	return r.JSON(t)
}

// Many sessions at once over real connections: the first accept wins;
// concurrent creates with one idempotency key make one handoff.
func TestMCPConcurrentHandoffs(t *testing.T) {
	h := apitest.New(t, roomtest.Options{}, nil)
	owner := h.Join("owner", "read", "propose")
	const n = 8
	workers := make([]roomtest.Party, n)
	for i := range workers {
		workers[i] = h.Join("worker", "read", "checkout")
	}

	// The losers saw the open call, so they learn it was taken (D3):
	// handoff_conflict, as the engine's transition table pins it for "other
	// agent" on an accepted handoff.
	t.Run("the first accept wins, the others get handoff_conflict", func(t *testing.T) {
		_, hid := owner.MCP.CreateTask(t, map[string]any{"summary": "first come"})
		type outcome struct {
			who string
			sc  map[string]any
			err bool
		}
		out := make(chan outcome, n)
		start := make(chan struct{})
		for _, w := range workers {
			go func() {
				<-start
				r, err := w.MCP.Client().Do(context.Background(), mcptest.Request{ID: 1, Method: "tools/call",
					Params: map[string]any{"name": "handoff_accept", "arguments": map[string]any{"handoff_id": hid}}})
				if err != nil || r.Status != http.StatusOK {
					out <- outcome{who: w.ParticipantID, err: true}
					return
				}
				var body struct {
					Result struct {
						IsError           bool           `json:"isError"`
						StructuredContent map[string]any `json:"structuredContent"`
					} `json:"result"`
				}
				if json.Unmarshal(r.Raw, &body) != nil {
					out <- outcome{who: w.ParticipantID, err: true}
					return
				}
				sc := body.Result.StructuredContent
				if body.Result.IsError {
					sc = map[string]any{"failed": sc["error"]}
				}
				out <- outcome{who: w.ParticipantID, sc: sc}
			}()
		}
		close(start)
		var winners []string
		for range n {
			o := <-out
			switch {
			case o.err:
				t.Errorf("worker %s: transport or HTTP failure", o.who)
			case o.sc["failed"] != nil:
				if o.sc["failed"] != "handoff_conflict" {
					t.Errorf("worker %s lost with %v, want handoff_not_found", o.who, o.sc["failed"])
				}
			default:
				if o.sc["assignee_id"] != o.who {
					t.Errorf("winner %s sees assignee %v", o.who, o.sc["assignee_id"])
				}
				winners = append(winners, o.who)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("%d accepts succeeded, want exactly 1", len(winners))
		}
		got := owner.MCP.ToolOK(t, "handoff_get", map[string]any{"handoff_id": hid})
		if got["assignee_id"] != winners[0] || got["status"] != "accepted" {
			t.Errorf("handoff = %v, want accepted by %s", got, winners[0])
		}
		if c := h.Count(`SELECT count(*) FROM events WHERE handoff_id = ? AND event_type = 'handoff.accepted'`, hid); c != 1 {
			t.Errorf("%d handoff.accepted events, want 1", c)
		}
	})

	t.Run("concurrent creates with one key make one handoff and one task", func(t *testing.T) {
		ids := make(chan string, n)
		for range n {
			go func() {
				r, err := owner.Ext.Client().Do(context.Background(), mcptest.Request{ID: 1, Method: "tools/call", Params: map[string]any{
					"name": "handoff_create", "arguments": map[string]any{"summary": "once only", "idempotency_key": "same-key"}}})
				if err != nil || r.Status != http.StatusOK {
					ids <- "error"
					return
				}
				var body struct {
					Result struct {
						TaskID string `json:"taskId"`
					} `json:"result"`
				}
				_ = json.Unmarshal(r.Raw, &body)
				ids <- body.Result.TaskID
			}()
		}
		seen := map[string]int{}
		for range n {
			seen[<-ids]++
		}
		if len(seen) != 1 || seen[""] != 0 || seen["error"] != 0 {
			t.Errorf("task ids = %v, want one id %d times", seen, n)
		}
		if c := h.Count(`SELECT count(*) FROM handoffs WHERE idempotency_key = 'same-key'`); c != 1 {
			t.Errorf("%d handoffs for the key, want 1", c)
		}
	})
}
