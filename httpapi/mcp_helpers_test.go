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

	"github.com/commonroom/ce/internal/mcptest"
)

const (
	mtErrUnauth    = -31001
	mtParseError   = -32700
	mtInvalidReq   = -32600
	mtNoMethod     = -32601
	mtInvalidPar   = -32602
	mtHeaderMism   = -32020
	mtMissingCap   = -32021
	mtUnsupVersion = -32022
)

// mtReq is one request. Zero fields take the conforming default.
type mtReq = mcptest.Request

// mtResp is one answer.
type mtResp struct {
	Status int
	Header http.Header
	Raw    []byte
	Top    map[string]json.RawMessage // nil when the body is not a JSON object
	Body   map[string]any             // the same, decoded
}

// mtClient speaks MCP as one session (mcptest's client, whose answers the
// harness records and checks).
type mtClient struct {
	h     *roomHarness
	url   string
	token string
	mc    *mcptest.Client
}

// mcpClient is a client on the ingress listener for token ("" = none).
func mcpClient(h *roomHarness, token string, tasks bool) *mtClient {
	url := h.ingressURL("/mcp")
	return &mtClient{h: h, url: url, token: token, mc: mcptest.New(h.client, url, token, tasks, "")}
}

// withTasks is the same session declaring (or not) the Tasks extension.
func (c *mtClient) withTasks(on bool) *mtClient {
	cp := *c
	cp.mc = c.mc.WithTasks(on)
	return &cp
}

func mtMeta(version string, caps map[string]any) map[string]any {
	return mcptest.Meta(version, caps, "ce-tests")
}

// do sends q and decodes the answer.
func (c *mtClient) do(t testing.TB, q mtReq) mtResp {
	t.Helper()
	r, err := c.mc.Do(context.Background(), q)
	if err != nil {
		t.Fatalf("%s %s: %v", q.HTTPMethod, q.Method, err)
	}
	c.h.noteError(r)
	out := mtDecode(t, r.Status, r.Header, r.Raw)

	// Rules for every answer.
	if out.Status >= 400 && len(out.Raw) > 0 {
		if ct := out.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("%s: error answer %d has Content-Type %q, want application/json", q.Method, out.Status, ct)
		}
	}
	if out.Top != nil {
		if _, isResult := out.Top["result"]; isResult {
			res := out.result()
			switch res["resultType"] {
			case "complete", "task":
			default:
				t.Errorf("%s: result has resultType %v, want complete or task: %s", q.Method, res["resultType"], out.Raw)
			}
			if name, _ := mtGet(res, "_meta", mcptest.MetaServerInfo, "name").(string); name == "" {
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

// mtDecode decodes an answer body when it is a JSON object.
func mtDecode(t testing.TB, status int, h http.Header, body []byte) mtResp {
	t.Helper()
	out := mtResp{Status: status, Header: h, Raw: body}
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
	return out
}

func (r mtResp) result() map[string]any {
	m, _ := r.Body["result"].(map[string]any)
	return m
}

func (r mtResp) rpcError() map[string]any {
	m, _ := r.Body["error"].(map[string]any)
	return m
}

// call sends method with params the conforming way.
func (c *mtClient) call(t testing.TB, method string, params map[string]any) mtResp {
	t.Helper()
	return c.do(t, mtReq{Method: method, Params: params})
}

// ok sends method and requires HTTP 200 with a result.
func (c *mtClient) ok(t testing.TB, method string, params map[string]any) map[string]any {
	t.Helper()
	return mtWantResult(t, c.call(t, method, params))
}

// mtWantResult requires HTTP 200 with a JSON-RPC result and returns it.
func mtWantResult(t testing.TB, r mtResp) map[string]any {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("status %d, want 200; body %s", r.Status, r.Raw)
	}
	res := r.result()
	if res == nil {
		t.Fatalf("no result in %s", r.Raw)
	}
	return res
}

// mtWantError requires the status and JSON-RPC error code and returns the
// error object. The error must have a message.
func mtWantError(t testing.TB, r mtResp, status, code int) map[string]any {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d (code %d); body %s", r.Status, status, code, r.Raw)
	}
	e := r.rpcError()
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
func (c *mtClient) tool(t testing.TB, name string, args map[string]any) map[string]any {
	t.Helper()
	params := map[string]any{"name": name}
	if args != nil {
		params["arguments"] = args
	}
	return mtWantResult(t, c.call(t, "tools/call", params))
}

// toolOK calls a tool that must succeed and returns its structuredContent.
// The text block must hold the same JSON.
func (c *mtClient) toolOK(t testing.TB, name string, args map[string]any) map[string]any {
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
	mtCheckTextBlock(t, name, res, sc)
	return sc
}

// toolErr calls a tool that must fail as a tool (isError) with Commonroom
// error code want, and returns structuredContent.
func (c *mtClient) toolErr(t testing.TB, name string, args map[string]any, want string) map[string]any {
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
	mtCheckTextBlock(t, name, res, sc)
	return sc
}

// mtCheckTextBlock: content holds one text block whose text is the
// structuredContent as JSON (spec §3.3: SHOULD).
func mtCheckTextBlock(t testing.TB, name string, res, sc map[string]any) {
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
func (c *mtClient) taskCall(t testing.TB, method, taskID string, extra map[string]any) mtResp {
	t.Helper()
	params := map[string]any{"taskId": taskID}
	for k, v := range extra {
		params[k] = v
	}
	return c.call(t, method, params)
}

// taskGet is tasks/get that must succeed; it returns the result.
func (c *mtClient) taskGet(t testing.TB, taskID string) map[string]any {
	t.Helper()
	res := mtWantResult(t, c.taskCall(t, "tasks/get", taskID, nil))
	if res["resultType"] != "complete" {
		t.Errorf("tasks/get resultType = %v, want complete", res["resultType"])
	}
	if res["taskId"] != taskID {
		t.Errorf("tasks/get taskId = %v, want %s", res["taskId"], taskID)
	}
	return res
}

// mtWantAck checks an empty acknowledgement (tasks/update, tasks/cancel):
// resultType complete and none of the task's fields.
func mtWantAck(t testing.TB, r mtResp) {
	t.Helper()
	res := mtWantResult(t, r)
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
func (c *mtClient) createTask(t testing.TB, args map[string]any) (taskID, handoffID string) {
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

// mtRawPOST writes one request on a fresh TCP connection byte for byte, for
// what net/http's client would normalise (padded header values).
func mtRawPOST(t testing.TB, hostport string, headerLines []string, body []byte) mtResp {
	t.Helper()
	r, err := mcptest.RawPOST(hostport, headerLines, body)
	if err != nil {
		t.Fatal(err)
	}
	return mtDecode(t, r.Status, r.Header, r.Raw)
}

// mtHostPort is a test server's host:port.
func mtHostPort(url string) string { return strings.TrimPrefix(url, "http://") }

// mtTimeRE is the ISO 8601 prefix conformance checks on task times.
var mtTimeRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}`)

// mtGet walks a decoded JSON value by keys; nil when a step is missing.
func mtGet(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// mtHasKey reports whether any object anywhere inside v has key k.
func mtHasKey(v any, k string) bool {
	switch x := v.(type) {
	case map[string]any:
		for kk, vv := range x {
			if kk == k || mtHasKey(vv, k) {
				return true
			}
		}
	case []any:
		for _, vv := range x {
			if mtHasKey(vv, k) {
				return true
			}
		}
	}
	return false
}

// mtJSON round-trips v through JSON into generic values, so Go structs and
// decoded answers compare with reflect.DeepEqual.
func mtJSON(t testing.TB, v any) any {
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

// mtParty is one participant of a test room with its MCP client.
type mtParty struct {
	grant sessionGrant
	mcp   *mtClient // without the Tasks extension
	ext   *mtClient // declaring it
}

// mtJoin creates an invitation with caps on the owner listener (operator
// token) and joins with it.
func mtJoin(h *roomHarness, name string, caps ...string) mtParty {
	h.t.Helper()
	g := h.session(name, caps...)
	c := mcpClient(h, g.SessionToken, false)
	return mtParty{grant: g, mcp: c, ext: c.withTasks(true)}
}

// mtID is the participant id of a party.
func (p mtParty) id() string { return p.grant.ParticipantID }

// mtTaskRow reads a task's status and last update from the sidecar.
func mtTaskRow(t testing.TB, h *roomHarness, taskID string) (status string, updated int64) {
	t.Helper()
	if err := h.Store.Reader.QueryRow(`SELECT status, last_updated_at FROM tasks WHERE task_id = ?`, taskID).Scan(&status, &updated); err != nil {
		t.Fatalf("task %s: %v", taskID, err)
	}
	return status, updated
}

// mtHandoffStatus reads a handoff's status from the sidecar.
func mtHandoffStatus(t testing.TB, h *roomHarness, handoffID string) string {
	t.Helper()
	var s string
	if err := h.Store.Reader.QueryRow(`SELECT status FROM handoffs WHERE handoff_id = ?`, handoffID).Scan(&s); err != nil {
		t.Fatalf("handoff %s: %v", handoffID, err)
	}
	return s
}

// mtStrings turns a decoded []any of strings into []string.
func mtStrings(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, x := range list {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
