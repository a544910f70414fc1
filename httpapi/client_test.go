package httpapi

// The httpapi tests' MCP client: mcptest's client (which builds requests the
// way a conforming client does and lets a test override any header, the _meta
// object or the raw body) on the harness's real listeners, with the answers
// recorded by the harness and decoded once. A few wire rules that hold for
// every response are checked on the way (id echo, resultType, serverInfo,
// repeated keys, JSON content type on errors).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/commonroom/ce/httpapi/mcp"
	"github.com/commonroom/ce/internal/mcptest"
)

// mcpReq is one request. Zero fields take the conforming default.
type mcpReq = mcptest.Request

// mcpResp is one answer on /mcp (a JSON-RPC answer, a refused stream, or
// an HTTP failure), decoded once: the body as it came, its members, and the
// JSON-RPC envelope typed.
type mcpResp struct {
	Status int
	Header http.Header
	Raw    []byte
	Top    map[string]json.RawMessage // nil when the body is not a JSON object
	Body   map[string]any             // the same, decoded
	ID     json.RawMessage            // the answer's id as sent
	Result map[string]any             // nil when the answer carries none
	Error  *mcptest.RPCError          // nil when the answer carries none
}

// mcpClient speaks MCP as one session (mcptest's client, whose answers the
// harness records and checks).
type mcpClient struct {
	h     *roomHarness
	url   string
	token string
	mc    *mcptest.Client
}

// mcpClient is a client on the ingress listener for token ("" = none).
func newMCPClient(h *roomHarness, token string, tasks bool) *mcpClient {
	url := h.ingressURL("/mcp")
	return &mcpClient{h: h, url: url, token: token, mc: mcptest.New(h.client, url, token, tasks, "")}
}

// withTasks is the same session declaring (or not) the Tasks extension.
func (c *mcpClient) withTasks(on bool) *mcpClient {
	cp := *c
	cp.mc = c.mc.WithTasks(on)
	return &cp
}

// do sends q and decodes the answer.
func (c *mcpClient) do(t testing.TB, q mcpReq) mcpResp {
	t.Helper()
	r, err := c.mc.Do(context.Background(), q)
	if err != nil {
		t.Fatalf("%s %s: %v", q.HTTPMethod, q.Method, err)
	}
	c.h.noteError(r)
	out := decodeMCP(t, r.Status, r.Header, r.Raw)

	// Rules for every answer.
	if out.Status >= 400 && len(out.Raw) > 0 {
		if ct := out.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("%s: error answer %d has Content-Type %q, want application/json", q.Method, out.Status, ct)
		}
	}
	if out.Top != nil {
		if _, isResult := out.Top["result"]; isResult {
			res := out.Result
			switch res["resultType"] {
			case "complete", "task":
			default:
				t.Errorf("%s: result has resultType %v, want complete or task: %s", q.Method, res["resultType"], out.Raw)
			}
			if name, _ := jsonAt(res, "_meta", mcptest.MetaServerInfo, "name").(string); name == "" {
				t.Errorf("%s: result without _meta[%q] (spec §2.3: on every result): %.300s", q.Method, mcptest.MetaServerInfo, out.Raw)
			}
		}
		_, isRPC := out.Top["jsonrpc"]
		if isRPC && r.ID != nil && (q.HTTPMethod == "" || q.HTTPMethod == "POST") {
			if got := out.Top["id"]; !bytes.Equal(bytes.TrimSpace(got), r.ID) {
				t.Errorf("%s: answer id = %s, want %s echoed with the same JSON type; body %s", q.Method, got, r.ID, out.Raw)
			}
		}
	}
	return out
}

// decodeMCP decodes an answer body when it is a JSON object.
func decodeMCP(t testing.TB, status int, h http.Header, body []byte) mcpResp {
	t.Helper()
	out := mcpResp{Status: status, Header: h, Raw: body}
	if len(bytes.TrimSpace(body)) == 0 || bytes.TrimSpace(body)[0] != '{' {
		return out
	}
	if err := json.Unmarshal(body, &out.Top); err != nil {
		t.Fatalf("answer %d is not JSON: %v\n%s", status, err, body)
	}
	if err := json.Unmarshal(body, &out.Body); err != nil {
		t.Fatalf("answer %d is not JSON: %v\n%s", status, err, body)
	}
	if dups := mcptest.DupKeys(body); len(dups) > 0 {
		t.Errorf("answer repeats key %q in one object (a decoder keeps only one): %.300s", dups[0], body)
	}
	out.ID = out.Top["id"]
	out.Result, _ = out.Body["result"].(map[string]any)
	if e := bytes.TrimSpace(out.Top["error"]); len(e) > 0 && e[0] == '{' { // a REST error is {"error":"code"}
		out.Error = &mcptest.RPCError{Status: status}
		if err := json.Unmarshal(e, out.Error); err != nil {
			t.Fatalf("answer %d: the error member is not a JSON-RPC error object: %v\n%s", status, err, body)
		}
	}
	return out
}

// call sends method with params the conforming way.
func (c *mcpClient) call(t testing.TB, method string, params map[string]any) mcpResp {
	t.Helper()
	return c.do(t, mcpReq{Method: method, Params: params})
}

// ok sends method and requires HTTP 200 with a result.
func (c *mcpClient) ok(t testing.TB, method string, params map[string]any) map[string]any {
	t.Helper()
	return wantResult(t, c.call(t, method, params))
}

// wantResult requires HTTP 200 with a JSON-RPC result and returns it.
func wantResult(t testing.TB, r mcpResp) map[string]any {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("status %d, want 200; body %s", r.Status, r.Raw)
	}
	res := r.Result
	if res == nil {
		t.Fatalf("no result in %s", r.Raw)
	}
	return res
}

// wantRPCError requires the status and JSON-RPC error code and returns the
// error object. The error must have a message.
func wantRPCError(t testing.TB, r mcpResp, status, code int) map[string]any {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d (code %d); body %s", r.Status, status, code, r.Raw)
	}
	e, _ := r.Body["error"].(map[string]any)
	if e == nil {
		t.Fatalf("no JSON-RPC error in %s", r.Raw)
	}
	if got, _ := e["code"].(float64); int(got) != code {
		t.Fatalf("error code %v, want %d; body %s", e["code"], code, r.Raw)
	}
	if msg, _ := e["message"].(string); msg == "" {
		t.Errorf("error without message: %s", r.Raw)
	}
	if _, has := r.Top["result"]; has {
		t.Errorf("error answer also carries a result: %s", r.Raw)
	}
	if v := r.Body["jsonrpc"]; v != "2.0" {
		t.Errorf("jsonrpc = %v, want 2.0", v)
	}
	return e
}

// tool calls a tool; args nil sends no arguments member. It returns the result.
func (c *mcpClient) tool(t testing.TB, name string, args map[string]any) map[string]any {
	t.Helper()
	params := map[string]any{"name": name}
	if args != nil {
		params["arguments"] = args
	}
	return wantResult(t, c.call(t, "tools/call", params))
}

// toolOK calls a tool that must succeed and returns its structuredContent.
// The text block must hold the same JSON.
func (c *mcpClient) toolOK(t testing.TB, name string, args map[string]any) map[string]any {
	t.Helper()
	res := c.tool(t, name, args)
	if res["isError"] != false {
		t.Fatalf("%s: isError = %v, want false: %v", name, res["isError"], res)
	}
	if res["resultType"] != "complete" {
		t.Fatalf("%s: resultType = %v, want complete", name, res["resultType"])
	}
	sc, _ := res["structuredContent"].(map[string]any)
	if sc == nil {
		t.Fatalf("%s: no structuredContent object: %v", name, res)
	}
	checkTextBlock(t, name, res, sc)
	return sc
}

// toolErr calls a tool that must fail as a tool (isError) with Commonroom
// error code want, and returns structuredContent.
func (c *mcpClient) toolErr(t testing.TB, name string, args map[string]any, want string) map[string]any {
	t.Helper()
	res := c.tool(t, name, args)
	if res["isError"] != true {
		t.Fatalf("%s: isError = %v, want true: %v", name, res["isError"], res)
	}
	sc, _ := res["structuredContent"].(map[string]any)
	if sc == nil {
		t.Fatalf("%s: no structuredContent: %v", name, res)
	}
	if sc["error"] != want {
		t.Fatalf("%s: structuredContent.error = %v, want %q: %v", name, sc["error"], want, sc)
	}
	if msg, _ := sc["message"].(string); msg == "" {
		t.Errorf("%s: error without message: %v", name, sc)
	}
	checkTextBlock(t, name, res, sc)
	return sc
}

// checkTextBlock: content holds one text block whose text is the
// structuredContent as JSON (spec §3.3: SHOULD).
func checkTextBlock(t testing.TB, name string, res, sc map[string]any) {
	t.Helper()
	content, _ := res["content"].([]any)
	if len(content) == 0 {
		t.Errorf("%s: no content blocks: %v", name, res)
		return
	}
	block, _ := content[0].(map[string]any)
	if block["type"] != "text" {
		t.Errorf("%s: first block is %v, want text", name, block["type"])
		return
	}
	var fromText any
	if err := json.Unmarshal([]byte(fmt.Sprint(block["text"])), &fromText); err != nil {
		t.Errorf("%s: text block is not the JSON of the result: %v", name, err)
		return
	}
	if !reflect.DeepEqual(fromText, any(sc)) {
		t.Errorf("%s: text block %v differs from structuredContent %v", name, fromText, sc)
	}
}

// taskCall sends a tasks/* method with taskId (Mcp-Name = taskId) and extra params.
func (c *mcpClient) taskCall(t testing.TB, method, taskID string, extra map[string]any) mcpResp {
	t.Helper()
	params := map[string]any{"taskId": taskID}
	for k, v := range extra {
		params[k] = v
	}
	return c.call(t, method, params)
}

// taskGet is tasks/get that must succeed; it returns the result.
func (c *mcpClient) taskGet(t testing.TB, taskID string) map[string]any {
	t.Helper()
	res := wantResult(t, c.taskCall(t, "tasks/get", taskID, nil))
	if res["resultType"] != "complete" {
		t.Errorf("tasks/get resultType = %v, want complete", res["resultType"])
	}
	if res["taskId"] != taskID {
		t.Errorf("tasks/get taskId = %v, want %s", res["taskId"], taskID)
	}
	return res
}

// wantAck checks an empty acknowledgement (tasks/update, tasks/cancel):
// resultType complete and none of the task's fields.
func wantAck(t testing.TB, r mcpResp) {
	t.Helper()
	res := wantResult(t, r)
	if res["resultType"] != "complete" {
		t.Errorf("ack resultType = %v", res["resultType"])
	}
	for _, k := range []string{"taskId", "status", "result", "error", "inputRequests"} {
		if _, has := res[k]; has {
			t.Errorf("ack carries %q: %v", k, res)
		}
	}
}

// createTask is handoff_create with the extension declared: it returns the
// task id and the handoff id from the CreateTaskResult.
func (c *mcpClient) createTask(t testing.TB, args map[string]any) (taskID, handoffID string) {
	t.Helper()
	res := c.withTasks(true).tool(t, "handoff_create", args)
	if res["resultType"] != "task" {
		t.Fatalf("handoff_create with the extension: resultType %v, want task: %v", res["resultType"], res)
	}
	taskID, _ = res["taskId"].(string)
	meta, _ := res["_meta"].(map[string]any)
	handoffID, _ = meta[mcptest.HandoffMeta].(string)
	if taskID == "" || handoffID == "" {
		t.Fatalf("CreateTaskResult lacks taskId or _meta[%q]: %v", mcptest.HandoffMeta, res)
	}
	return taskID, handoffID
}

// rawPOST writes one request on a fresh TCP connection byte for byte, for
// what net/http's client would normalise (padded header values).
func rawPOST(t testing.TB, hostport string, headerLines []string, body []byte) mcpResp {
	t.Helper()
	r, err := mcptest.RawPOST(hostport, headerLines, body)
	if err != nil {
		t.Fatal(err)
	}
	return decodeMCP(t, r.Status, r.Header, r.Raw)
}

// hostPort is a test server's host:port.
func hostPort(url string) string { return strings.TrimPrefix(url, "http://") }

// isoTimeRE is the ISO 8601 prefix conformance checks on task times.
var isoTimeRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}`)

// jsonAt walks a decoded JSON value by keys; nil when a step is missing.
func jsonAt(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// withKey is a copy of m with k set to v.
func withKey(m map[string]any, k string, v any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for a, b := range m {
		out[a] = b
	}
	out[k] = v
	return out
}

// withoutKey is a copy of m without k.
func withoutKey(m map[string]any, k string) map[string]any {
	out := withKey(m, k, nil)
	delete(out, k)
	return out
}

// hasKey reports whether any object anywhere inside v has key k.
func hasKey(v any, k string) bool {
	switch x := v.(type) {
	case map[string]any:
		for kk, vv := range x {
			if kk == k || hasKey(vv, k) {
				return true
			}
		}
	case []any:
		for _, vv := range x {
			if hasKey(vv, k) {
				return true
			}
		}
	}
	return false
}

// generic round-trips v through JSON into generic values, so Go structs and
// decoded answers compare with reflect.DeepEqual.
func generic(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// taskRow reads a task's status and last update from the sidecar.
func (h *roomHarness) taskRow(t testing.TB, taskID string) (status string, updated int64) {
	t.Helper()
	if err := h.Store.Reader.QueryRow(`SELECT status, last_updated_at FROM tasks WHERE task_id = ?`, taskID).Scan(&status, &updated); err != nil {
		t.Fatalf("task %s: %v", taskID, err)
	}
	return status, updated
}

// stringsOf turns a decoded []any of strings into []string.
func stringsOf(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, x := range list {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// tool is a tool of the door's catalog as tools/list shows it.
type tool = mcp.Tool

// toolCatalog is the MCP door's tool catalog.
func toolCatalog() []tool { return mcp.Tools() }

// ---- notifications and tasks ----

// rawID is a raw JSON id as mcptest sends it ("" for a notification).
func rawID(id string) any {
	if id == "" {
		return mcptest.NoID
	}
	return json.RawMessage(id)
}

// notify sends a client notification (no id) and requires 202.
func (h *roomHarness) notify(t testing.TB, token, method string, params map[string]any) {
	t.Helper()
	r := newMCPClient(h, token, false).do(t, mcpReq{ID: mcptest.NoID, Method: method, Params: params, Timeout: frameWait})
	if r.Status != http.StatusAccepted {
		t.Fatalf("%s: status %d, want 202; body %s", method, r.Status, r.Raw)
	}
}

// cancelListen sends notifications/cancelled naming requestID (raw JSON).
func (h *roomHarness) cancelListen(t testing.TB, token, requestID string) {
	t.Helper()
	h.notify(t, token, "notifications/cancelled", map[string]any{"requestId": json.RawMessage(requestID), "reason": "done"})
}

// ---- tasks ----

// taskRef is a handoff and its task.
type taskRef struct{ HandoffID, TaskID string }

// newTask creates a handoff with the Tasks extension declared and
// returns the handle's ids.
func (h *roomHarness) newTask(t testing.TB, token, summary string) taskRef {
	t.Helper()
	tid, hid := newMCPClient(h, token, true).createTask(t, map[string]any{"summary": summary})
	return taskRef{HandoffID: hid, TaskID: tid}
}

func (h *roomHarness) acceptTask(t testing.TB, token string, x taskRef) {
	t.Helper()
	newMCPClient(h, token, false).toolOK(t, "handoff_accept", map[string]any{"handoff_id": x.HandoffID})
}

// askInput has the assignee ask the owner one question under key.
func (h *roomHarness) askInput(t testing.TB, token string, x taskRef, key, message string) {
	t.Helper()
	newMCPClient(h, token, false).toolOK(t, "handoff_request_input", map[string]any{"handoff_id": x.HandoffID,
		"requests": []any{map[string]any{"key": key, "message": message}}})

}

// answerInput has the owner answer key with tasks/update.
func (h *roomHarness) answerInput(t testing.TB, token string, x taskRef, key string) {
	t.Helper()
	res := newMCPClient(h, token,
		true).ok(t, "tasks/update", map[string]any{"taskId": x.TaskID, "inputResponses": map[string]any{
		key: map[string]any{"action": "accept", "content": map[string]any{"answer": "yes to " + key}}}})

	if res["resultType"] != "complete" {
		t.Fatalf("tasks/update: %v", res)
	}
}

func (h *roomHarness) completeTask(t testing.TB, token string, x taskRef, text string) {
	t.Helper()
	newMCPClient(h, token, false).toolOK(t, "handoff_complete", map[string]any{"handoff_id": x.HandoffID, "result": map[string]any{"text": text}})
}

func (h *roomHarness) cancelTask(t testing.TB, token string, x taskRef) {
	t.Helper()
	wantAck(t, newMCPClient(h, token, true).taskCall(t, "tasks/cancel", x.TaskID, nil))
}

// getTask is tasks/get's result.
func (h *roomHarness) getTask(t testing.TB, token string, x taskRef) map[string]any {
	t.Helper()
	return newMCPClient(h, token, true).taskGet(t, x.TaskID)
}
