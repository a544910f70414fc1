package mcp_test

// Hostile and malformed input on POST /mcp: each bad request gets its JSON-RPC
// error (or acknowledgement), changes no row, and the next good request
// still works.

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/commonroom/ce/internal/mcptest"
	"github.com/commonroom/ce/internal/roomtest"
	"github.com/commonroom/ce/internal/roomtest/apitest"
)

func TestMCPBadInput(t *testing.T) {
	h := apitest.New(t, roomtest.Options{}, nil)
	owner := h.Join("owner", "read", "propose")
	worker := h.Join("worker", "read", "checkout")
	taskID, hid := owner.MCP.CreateTask(t, map[string]any{"summary": "answer me"})
	worker.MCP.ToolOK(t, "handoff_accept", map[string]any{"handoff_id": hid})
	worker.MCP.ToolOK(t, "handoff_request_input", map[string]any{"handoff_id": hid,
		"requests": []any{map[string]any{"key": "q", "message": "which one?"}}})

	metaOK := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	deep := strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)
	huge := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"pad":"` + strings.Repeat("a", 1<<20) + `",` + metaOK + `}}`

	cases := []struct {
		name   string
		req    mcptest.Request
		status int
		codes  []int // any of these JSON-RPC codes
		noID   bool
	}{
		{name: "a batch of one request is 400 -32600", status: 400, codes: []int{mcptest.CodeInvalidRequest}, noID: true,
			req: mcptest.Request{Method: "tools/list", Raw: `[{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + metaOK + `}}]`}},
		{name: "an empty batch is 400 -32600", status: 400, codes: []int{mcptest.CodeInvalidRequest}, noID: true, req: mcptest.Request{Method: "tools/list", Raw: `[]`}},
		{name: "id null is 400 -32600", status: 400, codes: []int{mcptest.CodeInvalidRequest}, noID: true,
			req: mcptest.Request{Method: "tools/list", Raw: `{"jsonrpc":"2.0","id":null,"method":"tools/list","params":{` + metaOK + `}}`}},
		{name: "a fractional id is 400 -32600", status: 400, codes: []int{mcptest.CodeInvalidRequest}, noID: true,
			req: mcptest.Request{Method: "tools/list", Raw: `{"jsonrpc":"2.0","id":1.5,"method":"tools/list","params":{` + metaOK + `}}`}},
		{name: "an object id is 400 -32600", status: 400, codes: []int{mcptest.CodeInvalidRequest}, noID: true,
			req: mcptest.Request{Method: "tools/list", Raw: `{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list","params":{` + metaOK + `}}`}},
		{name: "100k nested arrays in params are refused with 400", status: 400, codes: []int{mcptest.CodeParseError, mcptest.CodeInvalidRequest},
			req: mcptest.Request{Method: "tools/list", Raw: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":` + deep + `,` + metaOK + `}}`}},
		{name: "a body over 1 MiB is 413", status: http.StatusRequestEntityTooLarge, codes: []int{mcptest.CodeInvalidRequest}, noID: true,
			req: mcptest.Request{Method: "tools/list", Raw: huge}},
		{name: "an empty body is 400 -32700", status: 400, codes: []int{mcptest.CodeParseError}, noID: true, req: mcptest.Request{Method: "tools/list", Raw: ``}},
		{name: "a JSON string body is 400 -32600", status: 400, codes: []int{mcptest.CodeInvalidRequest}, noID: true, req: mcptest.Request{Method: "tools/list", Raw: `"tools/list"`}},
		{name: "params as an array is 400 -32600", status: 400, codes: []int{mcptest.CodeInvalidRequest},
			req: mcptest.Request{Method: "tools/list", Raw: `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":[{` + metaOK + `}]}`}},
		{name: "params as null is 400 -32600", status: 400, codes: []int{mcptest.CodeInvalidRequest},
			req: mcptest.Request{Method: "tools/list", Raw: `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":null}`}},
		{name: "method as a number is 400 -32600", status: 400, codes: []int{mcptest.CodeInvalidRequest},
			req: mcptest.Request{Method: "tools/list", Raw: `{"jsonrpc":"2.0","id":3,"method":7,"params":{` + metaOK + `}}`}},
		{name: "_meta as an array is 400 -32602", status: 400, codes: []int{mcptest.CodeInvalidParams},
			req: mcptest.Request{Method: "tools/list", Meta: []any{1}}},
		{name: "_meta as a string is 400 -32602", status: 400, codes: []int{mcptest.CodeInvalidParams},
			req: mcptest.Request{Method: "tools/list", Meta: "2026-07-28"}},
		{name: "clientCapabilities as a string is 400 -32602", status: 400, codes: []int{mcptest.CodeInvalidParams},
			req: mcptest.Request{Method: "tools/list", Meta: map[string]any{mcptest.MetaVersion: mcptest.Version, mcptest.MetaCaps: "tasks"}}},
		{name: "clientCapabilities null is 400 -32602", status: 400, codes: []int{mcptest.CodeInvalidParams},
			req: mcptest.Request{Method: "tools/list", Meta: map[string]any{mcptest.MetaVersion: mcptest.Version, mcptest.MetaCaps: nil}}},
		{name: "protocolVersion as a number is 400 -32602", status: 400, codes: []int{mcptest.CodeInvalidParams},
			req: mcptest.Request{Method: "tools/list", Meta: map[string]any{mcptest.MetaVersion: 20260728, mcptest.MetaCaps: map[string]any{}}}},
		{name: "extensions as a string is 400 -32602", status: 400, codes: []int{mcptest.CodeInvalidParams},
			req: mcptest.Request{Method: "tools/list", Meta: map[string]any{mcptest.MetaVersion: mcptest.Version, mcptest.MetaCaps: map[string]any{"extensions": mcptest.TasksExtension}}}},
		{name: "the tasks extension as true is not a declaration (400)", status: 400, codes: []int{mcptest.CodeMissingCapability, mcptest.CodeInvalidParams},
			req: mcptest.Request{Method: "tasks/get", Params: map[string]any{"taskId": taskID},
				Meta: map[string]any{mcptest.MetaVersion: mcptest.Version, mcptest.MetaCaps: map[string]any{"extensions": map[string]any{mcptest.TasksExtension: true}}}}},
		{name: "a progressToken that is an object is 400 -32602", status: 400, codes: []int{mcptest.CodeInvalidParams},
			req: mcptest.Request{Method: "tools/list", Meta: map[string]any{mcptest.MetaVersion: mcptest.Version, mcptest.MetaCaps: map[string]any{}, "progressToken": map[string]any{}}}},
		{name: "a header value outside visible ASCII is 400 -32020", status: 400, codes: []int{mcptest.CodeHeaderMismatch},
			req: mcptest.Request{Method: "tools/call", Params: map[string]any{"name": "workspace_status"}, Set: map[string]string{"Mcp-Name": "workspace_status\xc3\xa9"}}},
		{name: "two Mcp-Name headers are 400 -32020", status: 400, codes: []int{mcptest.CodeHeaderMismatch},
			req: mcptest.Request{Method: "tools/call", Params: map[string]any{"name": "workspace_status"},
				Opts: []mcptest.ReqOpt{func(r *http.Request) { r.Header.Add("Mcp-Name", "workspace_status") }}}},
		{name: "Mcp-Name on a params name that is a number is 400 -32020", status: 400, codes: []int{mcptest.CodeHeaderMismatch},
			req: mcptest.Request{Method: "tools/call", Params: map[string]any{"name": 5}, Set: map[string]string{"Mcp-Name": "5"}}},
		{name: "a name spelled NAME beside name is 400 -32020", status: 400, codes: []int{mcptest.CodeHeaderMismatch},
			req: mcptest.Request{Method: "tools/call", Params: map[string]any{"name": "workspace_status", "NAME": "workspace_leave"}}},
		{name: "prompts/get with a number argument is -32602", status: 200, codes: []int{mcptest.CodeInvalidParams},
			req: mcptest.Request{Method: "prompts/get", Params: map[string]any{"name": "commonroom_edit_workflow", "arguments": map[string]any{"goal": 5}}}},
		{name: "tools/list with a number cursor is -32602", status: 200, codes: []int{mcptest.CodeInvalidParams},
			req: mcptest.Request{Method: "tools/list", Params: map[string]any{"cursor": 5}}},
		{name: "tasks/update with inputResponses as a string is -32602", status: 200, codes: []int{mcptest.CodeInvalidParams},
			req: mcptest.Request{Method: "tasks/update", Params: map[string]any{"taskId": taskID, "inputResponses": "q"},
				Meta: mcptest.Meta(mcptest.Version, tasksCaps(), "ce-tests")}},
		{name: "listen without notifications is -32602", status: 200, codes: []int{mcptest.CodeInvalidParams},
			req: mcptest.Request{Method: "subscriptions/listen", Params: map[string]any{}, Timeout: 5 * time.Second}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := h.Snapshot()
			r := owner.MCP.Do(t, c.req)
			if r.Status != c.status {
				t.Fatalf("status %d, want %d; body %.300s", r.Status, c.status, r.Raw)
			}
			if r.Error == nil {
				t.Fatalf("no JSON-RPC error in %.300s", r.Raw)
			}
			code := r.Error.Code
			ok := false
			for _, want := range c.codes {
				ok = ok || code == want
			}
			if !ok {
				t.Errorf("code %v, want one of %v; body %.300s", code, c.codes, r.Raw)
			}
			if _, has := r.Top["id"]; has && c.noID {
				t.Errorf("id %s echoed where it could not be read", r.Top["id"])
			}
			h.AssertUnchanged(t, before)
			roomtest.WantResult(t, owner.MCP.Call(t, "tools/list", nil)) // the server keeps serving
		})
	}

	t.Run("tasks/update with only unknown keys acknowledges and changes nothing", func(t *testing.T) {
		before := h.Snapshot()
		roomtest.WantAck(t, owner.Ext.TaskCall(t, "tasks/update", taskID, map[string]any{"inputResponses": map[string]any{
			"nope": map[string]any{"action": "accept", "content": map[string]any{"answer": "x"}},
			"":     map[string]any{"action": "decline"},
		}}))
		roomtest.WantAck(t, owner.Ext.TaskCall(t, "tasks/update", taskID, map[string]any{"inputResponses": map[string]any{}}))
		roomtest.WantAck(t, owner.Ext.TaskCall(t, "tasks/update", taskID, nil))
		h.AssertUnchanged(t, before)
		task := owner.Ext.TaskGet(t, taskID)
		if task["status"] != "input_required" || roomtest.JSONAt(task, "inputRequests", "q") == nil {
			t.Errorf("task = %v", task)
		}
	})
	// An inputResponses value answers an elicitation/create request, so it is
	// an ElicitResult object. null, a number or a bare string is not an answer:
	// accepting one would close the question with nothing the assignee can read.
	// Each case gets its own task waiting on question q, so one wrongly
	// accepted answer cannot hide the next case.
	waiting := func(t *testing.T) string {
		t.Helper()
		tid, hid := owner.MCP.CreateTask(t, map[string]any{"summary": "a question for " + t.Name()})
		worker.MCP.ToolOK(t, "handoff_accept", map[string]any{"handoff_id": hid})
		worker.MCP.ToolOK(t, "handoff_request_input", map[string]any{"handoff_id": hid,
			"requests": []any{map[string]any{"key": "q", "message": "which one?"}}})
		return tid
	}
	for _, c := range []struct {
		name   string
		answer any
	}{{"null", nil}, {"a number", 5}, {"a bare string", "blue"}, {"an array", []any{"blue"}}} {
		t.Run("tasks/update answering with "+c.name+" is -32602 and changes nothing", func(t *testing.T) {
			tid := waiting(t)
			before := h.Snapshot()
			r := owner.Ext.TaskCall(t, "tasks/update", tid, map[string]any{"inputResponses": map[string]any{"q": c.answer}})
			h.AssertUnchanged(t, before)
			if task := owner.Ext.TaskGet(t, tid); task["status"] != "input_required" || roomtest.JSONAt(task, "inputRequests", "q") == nil {
				t.Errorf("task = %v, want q still outstanding", task)
			}
			roomtest.WantRPCError(t, r, http.StatusOK, mcptest.CodeInvalidParams)
		})
	}
	t.Run("tasks/update with an answer over 256 KiB is a limit_exceeded params error, not -32603, and changes nothing", func(t *testing.T) {
		tid := waiting(t)
		before := h.Snapshot()
		r := owner.Ext.TaskCall(t, "tasks/update", tid, map[string]any{"inputResponses": map[string]any{
			"q": map[string]any{"action": "accept", "content": map[string]any{"answer": strings.Repeat("a", 300<<10)}}}})
		h.AssertUnchanged(t, before)
		// The client sent too much: invalid params (or an application code
		// outside the reserved range), never -32603 "internal error", which
		// tells a client the server failed and invites a retry of the same body.
		if r.Error == nil {
			t.Fatalf("no JSON-RPC error: %s", r.Raw)
		}
		if c := r.Error.Code; c != mcptest.CodeInvalidParams && c >= -32768 && c <= -32000 {
			t.Errorf("code %d, want -32602 (or an application code outside -32768..-32000): %s", c, r.Raw)
		}
		if roomtest.JSONAt(r.Body, "error", "data", "error") != "limit_exceeded" {
			t.Errorf("data = %v, want error limit_exceeded", r.Error.Data)
		}
	})
	t.Run("tasks/update on a working task acknowledges and changes nothing", func(t *testing.T) {
		tid2, _ := owner.MCP.CreateTask(t, map[string]any{"summary": "no questions"})
		before := h.Snapshot()
		roomtest.WantAck(t, owner.Ext.TaskCall(t, "tasks/update", tid2, map[string]any{"inputResponses": map[string]any{"q": map[string]any{"action": "accept"}}}))
		h.AssertUnchanged(t, before)
	})
	t.Run("a body just under the limit is served", func(t *testing.T) {
		pad := (1 << 20) - 400
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"pad":"` + strings.Repeat("a", pad) + `",` + metaOK + `}}`
		if len(body) > 1<<20 {
			t.Fatalf("test body is %d bytes", len(body))
		}
		roomtest.WantResult(t, owner.MCP.Do(t, mcptest.Request{Method: "tools/list", Raw: body}))
	})
	t.Run("after the 413 the same connection pool still serves", func(t *testing.T) {
		for range 3 {
			roomtest.WantResult(t, owner.MCP.Call(t, "tools/list", nil))
		}
		if bytes.Contains([]byte(strings.Join(h.ErrorBodies(), "\n")), []byte(owner.SessionToken)) {
			t.Errorf("an error body echoed the session token")
		}
	})
}
