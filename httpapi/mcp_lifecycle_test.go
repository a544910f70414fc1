package httpapi

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
)

// TestFlow_MCPHandoffLifecycle is one handoff's life at the MCP door, end
// to end, as three agents live it: created as a task, accepted, asked,
// answered, completed, approved, with the task checked at each step.
func TestFlow_MCPHandoffLifecycle(t *testing.T) {
	h := newHarness(t, "")
	owner := h.join("owner-agent", "read", "propose")
	worker := h.join("worker-agent", "read", "checkout")
	approver := h.join("approver", "read", "approve")

	taskID, hid := owner.mcp.createTask(t, map[string]any{
		"summary":     "draft the risks section",
		"constraints": "at most five bullets",
		"target":      "Plan",
	})
	created := owner.ext.taskGet(t, taskID)

	t.Run("the worker accepts; the task stays working and records the assignee", func(t *testing.T) {
		acc := worker.mcp.toolOK(t, "handoff_accept", map[string]any{"handoff_id": hid})
		if acc["status"] != "accepted" || acc["assignee_id"] != worker.ParticipantID || acc["task_status"] != "working" {
			t.Errorf("handoff after accept = %v", acc)
		}
		got := owner.ext.taskGet(t, taskID)
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
		if w := worker.ext.taskGet(t, taskID); w["status"] != "working" {
			t.Errorf("the assignee's tasks/get = %v", w)
		}
	})

	schema := map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}, "required": []any{"n"}}
	t.Run("the worker asks two questions; the task is input_required with both", func(t *testing.T) {
		got := worker.mcp.toolOK(t, "handoff_request_input", map[string]any{"handoff_id": hid, "requests": []any{
			map[string]any{"key": "tone", "message": "Formal or casual?"},
			map[string]any{"key": "count", "message": "How many bullets?", "requested_schema": schema},
		}})
		if got["status"] != "accepted" || got["task_status"] != "input_required" {
			t.Errorf("handoff after request_input = %v", got)
		}
		task := owner.ext.taskGet(t, taskID)
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
		if !reflect.DeepEqual(generic(t, reqs), generic(t, want)) {
			t.Errorf("inputRequests = %v\nwant %v", reqs, want)
		}
	})

	toneAnswer := map[string]any{"action": "accept", "content": map[string]any{"answer": "formal"}}
	countAnswer := map[string]any{"action": "accept", "content": map[string]any{"n": 3}}
	t.Run("answering one key (and an unknown one) leaves only the other outstanding at once", func(t *testing.T) {
		wantAck(t, owner.ext.taskCall(t, "tasks/update", taskID, map[string]any{"inputResponses": map[string]any{
			"tone": toneAnswer, "never-asked": map[string]any{"action": "accept", "content": map[string]any{"x": 1}},
		}}))
		task := owner.ext.taskGet(t, taskID)
		reqs, _ := task["inputRequests"].(map[string]any)
		if task["status"] != "input_required" || len(reqs) != 1 || reqs["count"] == nil {
			t.Errorf("after a partial answer: status %v inputRequests %v, want input_required with only count", task["status"], task["inputRequests"])
		}
		if n := h.count(`SELECT count(*) FROM task_inputs WHERE task_id = ?`, taskID); n != 2 {
			t.Errorf("%d input rows, want 2 (the unknown key is ignored)", n)
		}
	})
	t.Run("answering the second key returns the task to working", func(t *testing.T) {
		wantAck(t, owner.ext.taskCall(t, "tasks/update", taskID, map[string]any{"inputResponses": map[string]any{"count": countAnswer}}))
		task := owner.ext.taskGet(t, taskID)
		if task["status"] != "working" {
			t.Errorf("status = %v, want working", task["status"])
		}
		if _, has := task["inputRequests"]; has {
			t.Errorf("a working task lists inputRequests: %v", task)
		}
	})
	t.Run("the worker reads both answers with handoff_get", func(t *testing.T) {
		got := worker.mcp.toolOK(t, "handoff_get", map[string]any{"handoff_id": hid})
		ins, _ := got["inputs"].([]any)
		if len(ins) != 2 {
			t.Fatalf("inputs = %v", got["inputs"])
		}
		answers := map[string]any{}
		for _, in := range ins {
			key, _ := jsonAt(in, "key").(string)
			if jsonAt(in, "status") != "answered" || jsonAt(in, "answered_at") == nil {
				t.Errorf("input %s = %v", key, in)
			}
			answers[key] = jsonAt(in, "response")
		}
		want := generic(t, map[string]any{"tone": toneAnswer, "count": countAnswer})
		if !reflect.DeepEqual(any(answers), want) {
			t.Errorf("answers = %v, want %v", answers, want)
		}
	})

	var completed map[string]any
	t.Run("the worker completes; tasks/get is completed with a CallToolResult", func(t *testing.T) {
		art := []any{map[string]any{"uri": h.Eng.DocumentURI() + "/section/Idea%2FPlan", "title": "Plan"}}
		got := worker.mcp.toolOK(t, "handoff_complete", map[string]any{"handoff_id": hid,
			"result": map[string]any{"text": "five formal bullets", "artifacts": art}, "status_message": "done"})
		if got["status"] != "result_ready" || jsonAt(got, "result", "text") != "five formal bullets" {
			t.Errorf("handoff after complete = %v", got)
		}
		completed = owner.ext.taskGet(t, taskID)
		if completed["status"] != "completed" {
			t.Fatalf("task = %v", completed)
		}
		res, _ := completed["result"].(map[string]any)
		content, _ := res["content"].([]any)
		if len(content) != 1 || jsonAt(content[0], "type") != "text" || jsonAt(content[0], "text") != "five formal bullets" {
			t.Errorf("result.content = %v", res["content"])
		}
		if res["isError"] != false {
			t.Errorf("result.isError = %v, want false", res["isError"])
		}
		if jsonAt(res, "structuredContent", "handoff_id") != hid {
			t.Errorf("result.structuredContent = %v", res["structuredContent"])
		}
		for _, k := range []string{"error", "inputRequests"} {
			if _, has := completed[k]; has {
				t.Errorf("a completed task carries %q", k)
			}
		}
		if jsonAt(completed, "_meta", mcptest.HandoffMeta) != hid {
			t.Errorf("_meta = %v", completed["_meta"])
		}
	})
	t.Run("a second completion keeps the first result", func(t *testing.T) {
		again := worker.mcp.toolOK(t, "handoff_complete", map[string]any{"handoff_id": hid, "result": map[string]any{"text": "other"}})
		if again["already_completed"] != true || jsonAt(again, "result", "text") != "five formal bullets" {
			t.Errorf("second completion = %v", again)
		}
		if got := owner.ext.taskGet(t, taskID); !reflect.DeepEqual(got, completed) {
			t.Errorf("task changed:\n%v\nwant %v", got, completed)
		}
	})
	t.Run("tasks/cancel on the completed task acknowledges and changes nothing", func(t *testing.T) {
		before := h.snapshot()
		wantAck(t, owner.ext.taskCall(t, "tasks/cancel", taskID, nil))
		h.assertUnchanged(t, before)
		if got := owner.ext.taskGet(t, taskID); !reflect.DeepEqual(got, completed) {
			t.Errorf("task after cancel:\n%v\nwant %v", got, completed)
		}
	})
	t.Run("the approver approves; the task is untouched", func(t *testing.T) {
		h.Clock.Advance(time.Second) // a later instant, so a rewrite would show in lastUpdatedAt
		got := approver.mcp.toolOK(t, "handoff_approve", map[string]any{"handoff_id": hid, "note": "ship it"})
		if got["status"] != "approved" || got["decided_by"] != approver.ParticipantID || got["decision_note"] != "ship it" {
			t.Errorf("handoff after approve = %v", got)
		}
		if _, has := got["inputs"]; has {
			t.Errorf("the approver sees the owner/worker inputs: %v", got["inputs"])
		}
		after := owner.ext.taskGet(t, taskID)
		if !reflect.DeepEqual(after, completed) {
			t.Errorf("approval rewrote the task:\n%v\nwant %v", after, completed)
		}
	})
	t.Run("handoff_events lists the events in order", func(t *testing.T) {
		evs := owner.mcp.toolOK(t, "handoff_events", map[string]any{"handoff_id": hid})
		list, _ := evs["events"].([]any)
		var types []string
		var last float64
		for _, e := range list {
			types = append(types, jsonAt(e, "event_type").(string))
			id, _ := jsonAt(e, "event_id").(float64)
			if id <= last {
				t.Errorf("event ids not ascending: %v after %v", id, last)
			}
			last = id
			if p, _ := jsonAt(e, "payload").(map[string]any); p["handoff_id"] != hid {
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
		since := jsonAt(list[2], "event_id")
		tail := owner.mcp.toolOK(t, "handoff_events", map[string]any{"handoff_id": hid, "since_event_id": since, "limit": 2})
		if got := tail["events"].([]any); len(got) != 2 || jsonAt(got[0], "event_type") != want[3] {
			t.Errorf("since_event_id page = %v", got)
		}
	})

	t.Run("tasks/cancel on a live task cancels task and handoff before the ack", func(t *testing.T) {
		tid2, hid2 := owner.mcp.createTask(t, map[string]any{"summary": "to be cancelled"})
		worker.mcp.toolOK(t, "handoff_accept", map[string]any{"handoff_id": hid2})
		worker.mcp.toolOK(t, "handoff_request_input", map[string]any{"handoff_id": hid2,
			"requests": []any{map[string]any{"key": "q", "message": "still wanted?"}}})
		wantAck(t, owner.ext.taskCall(t, "tasks/cancel", tid2, nil))
		// Read the sidecar right after the ack: no waiting, nothing eventual.
		if s, _ := h.taskRow(t, tid2); s != "cancelled" {
			t.Errorf("task row = %s, want cancelled", s)
		}
		if s := h.status(t, "handoff", hid2); s != "cancelled" {
			t.Errorf("handoff row = %s, want cancelled", s)
		}
		got := owner.ext.taskGet(t, tid2)
		if got["status"] != "cancelled" {
			t.Errorf("tasks/get = %v", got)
		}
		for _, k := range []string{"result", "error", "inputRequests"} {
			if _, has := got[k]; has {
				t.Errorf("a cancelled task carries %q: %v", k, got)
			}
		}
		hv := owner.mcp.toolOK(t, "handoff_get", map[string]any{"handoff_id": hid2})
		if hv["status"] != "cancelled" || hv["cancel_reason"] != "requested" || hv["cancelled_by"] != owner.ParticipantID {
			t.Errorf("handoff = %v", hv)
		}
		if n := h.count(`SELECT count(*) FROM events WHERE handoff_id = ? AND event_type IN ('task.cancelled','handoff.cancelled')`, hid2); n != 2 {
			t.Errorf("%d cancel events, want task.cancelled and handoff.cancelled", n)
		}
		before := h.snapshot()
		wantAck(t, owner.ext.taskCall(t, "tasks/cancel", tid2, nil))
		h.assertUnchanged(t, before)
		// The worker cannot deliver into a cancelled handoff.
		worker.mcp.toolErr(t, "handoff_complete", map[string]any{"handoff_id": hid2, "result": map[string]any{"text": "late"}}, "handoff_conflict")
	})

	t.Run("the worker cannot cancel or answer the owner's task", func(t *testing.T) {
		tid3, hid3 := owner.mcp.createTask(t, map[string]any{"summary": "owner decides"})
		worker.mcp.toolOK(t, "handoff_accept", map[string]any{"handoff_id": hid3})
		before := h.snapshot()
		for _, m := range []string{"tasks/cancel", "tasks/update"} {
			r := worker.ext.taskCall(t, m, tid3, map[string]any{"inputResponses": map[string]any{}})
			if r.Result != nil {
				t.Errorf("%s by the assignee succeeded: %s", m, r.Raw)
			}
		}
		h.assertUnchanged(t, before)
	})

	t.Run("unknown and foreign task ids give the identical -32602 unknown task", func(t *testing.T) {
		outsider := h.join("outsider", "read", "propose", "checkout", "approve")
		for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
			extra := map[string]any{}
			if m == "tasks/update" {
				extra["inputResponses"] = map[string]any{"tone": toneAnswer}
			}
			before := h.snapshot()
			foreign := outsider.ext.do(t, mcpReq{Method: m, ID: "same", Params: withKey(extra, "taskId", taskID)})
			unknown := outsider.ext.do(t, mcpReq{Method: m, ID: "same", Params: withKey(extra, "taskId", "task_00000000000000000000000000000000")})
			h.assertUnchanged(t, before)
			fe := wantRPCError(t, foreign, http.StatusOK, mcptest.CodeInvalidParams)
			ue := wantRPCError(t, unknown, http.StatusOK, mcptest.CodeInvalidParams)
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
			r := owner.ext.do(t, mcpReq{Method: m, Params: map[string]any{"taskId": taskID}, Set: map[string]string{"Mcp-Name": hid}})
			wantRPCError(t, r, http.StatusBadRequest, mcptest.CodeHeaderMismatch)
		}
	})
	t.Run("a missing or non-string taskId is 400 -32020", func(t *testing.T) {
		// Mcp-Name cannot equal a field that is not there: 400 -32020.
		r := owner.ext.do(t, mcpReq{Method: "tasks/get", Params: map[string]any{}, Set: map[string]string{"Mcp-Name": "x"}})
		wantRPCError(t, r, http.StatusBadRequest, mcptest.CodeHeaderMismatch)
		r = owner.ext.do(t, mcpReq{Method: "tasks/get", Params: map[string]any{"taskId": 5}, Set: map[string]string{"Mcp-Name": "5"}})
		wantRPCError(t, r, http.StatusBadRequest, mcptest.CodeHeaderMismatch)
	})
}

// with copies m and sets k to v.
func TestMCPTaskExpiry(t *testing.T) {
	h := newHarness(t, "")
	owner := h.join("owner", "read", "propose")
	worker := h.join("worker", "read", "checkout")
	taskID, hid := owner.mcp.createTask(t, map[string]any{"summary": "never finished"})
	worker.mcp.toolOK(t, "handoff_accept", map[string]any{"handoff_id": hid})

	h.Clock.Advance(24*time.Hour + time.Millisecond)
	h.sweep()
	admin := h.join("admin", "admin") // the old sessions expired with the clock

	t.Run("a task past its TTL is failed with a JSON-RPC error and no result", func(t *testing.T) {
		got := admin.ext.taskGet(t, taskID)
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
		if twin := obj2(t, h, admin, taskID); !reflect.DeepEqual(any(twin), any(httpTwin(t, got))) {
			t.Errorf("GET /workspace/task %v differs from tasks/get %v", twin, got)
		}
	})
	t.Run("its accepted handoff is cancelled as task_expired", func(t *testing.T) {
		hv := admin.mcp.toolOK(t, "handoff_get", map[string]any{"handoff_id": hid})
		if hv["status"] != "cancelled" || hv["cancel_reason"] != "task_expired" {
			t.Errorf("handoff = %v", hv)
		}
	})
	t.Run("cancel on the failed task acknowledges and changes nothing", func(t *testing.T) {
		before := h.snapshot()
		wantAck(t, admin.ext.taskCall(t, "tasks/cancel", taskID, nil))
		h.assertUnchanged(t, before)
	})
	t.Run("one TTL after its last update the row is gone: -32602, the handoff keeps its record", func(t *testing.T) {
		h.Clock.Advance(24*time.Hour + time.Millisecond)
		h.sweep()
		admin = h.join("admin2", "admin")
		wantRPCError(t, admin.ext.taskCall(t, "tasks/get", taskID, nil), http.StatusOK, mcptest.CodeInvalidParams)
		hv := admin.mcp.toolOK(t, "handoff_get", map[string]any{"handoff_id": hid})
		if hv["task_id"] != taskID || hv["task_status"] != nil {
			t.Errorf("handoff after the purge = %v", hv)
		}
	})
}

// obj2 is GET /workspace/task for a party, decoded.
func obj2(t *testing.T, h *roomHarness, p party, taskID string) map[string]any {
	t.Helper()
	r := h.doT(t, "GET", h.ingressURL("/workspace/task?task_id="+taskID), p.SessionToken, nil)
	wantOK(t, r)
	return r.JSON(t)
}

// Many sessions at once over real connections: the first accept wins;
// concurrent creates with one idempotency key make one handoff.
func TestMCPConcurrentHandoffs(t *testing.T) {
	h := newHarness(t, "")
	owner := h.join("owner", "read", "propose")
	const n = 8
	workers := make([]party, n)
	for i := range workers {
		workers[i] = h.join("worker", "read", "checkout")
	}

	// The losers saw the open call, so they learn it was taken (D3):
	// handoff_conflict, as the engine's transition table pins it for "other
	// agent" on an accepted handoff.
	t.Run("the first accept wins, the others get handoff_conflict", func(t *testing.T) {
		_, hid := owner.mcp.createTask(t, map[string]any{"summary": "first come"})
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
				r, err := w.mcp.mc.Do(context.Background(), mcpReq{ID: 1, Method: "tools/call",
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
		got := owner.mcp.toolOK(t, "handoff_get", map[string]any{"handoff_id": hid})
		if got["assignee_id"] != winners[0] || got["status"] != "accepted" {
			t.Errorf("handoff = %v, want accepted by %s", got, winners[0])
		}
		if c := h.count(`SELECT count(*) FROM events WHERE handoff_id = ? AND event_type = 'handoff.accepted'`, hid); c != 1 {
			t.Errorf("%d handoff.accepted events, want 1", c)
		}
	})

	t.Run("concurrent creates with one key make one handoff and one task", func(t *testing.T) {
		ids := make(chan string, n)
		for range n {
			go func() {
				r, err := owner.ext.mc.Do(context.Background(), mcpReq{ID: 1, Method: "tools/call", Params: map[string]any{
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
		if c := h.count(`SELECT count(*) FROM handoffs WHERE idempotency_key = 'same-key'`); c != 1 {
			t.Errorf("%d handoffs for the key, want 1", c)
		}
	})
}
