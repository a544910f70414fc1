package httpapi

// An MCP 2026-07-28 test client for POST /mcp on the harness's real
// listeners. It builds requests the way a conforming client does (the routing
// headers, params._meta with protocolVersion and clientCapabilities, with or
// without the Tasks extension) and lets a test override any header, the
// _meta object or the raw body. Every answer is decoded once; a few wire rules
// that hold for every response are checked on the way (id echo, resultType,
// JSON content type on errors).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const (
	mtVersion      = "2026-07-28"
	mtTasksExt     = "io.modelcontextprotocol/tasks"
	mtMetaVersion  = "io.modelcontextprotocol/protocolVersion"
	mtMetaCaps     = "io.modelcontextprotocol/clientCapabilities"
	mtMetaInfo     = "io.modelcontextprotocol/clientInfo"
	mtServerInfo   = "io.modelcontextprotocol/serverInfo"
	mtHandoffMeta  = "commonroom/handoff_id"
	mtErrUnauth    = -31001
	mtParseError   = -32700
	mtInvalidReq   = -32600
	mtNoMethod     = -32601
	mtInvalidPar   = -32602
	mtHeaderMism   = -32020
	mtMissingCap   = -32021
	mtUnsupVersion = -32022
)

// mtNoID as mtReq.ID sends a notification (no id member).
var mtNoID = &struct{ noID bool }{true}

// mtDrop as mtReq.Meta sends params without a _meta member.
var mtDrop = &struct{ drop bool }{true}

// mtNameField is the params field Mcp-Name carries, per method (spec §1.3).
var mtNameField = map[string]string{
	"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
	"tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId",
}

// mtReq is one request. Zero fields take the conforming default.
type mtReq struct {
	ID         any            // nil: the client's next integer; mtNoID: a notification
	Method     string         // the body method, and Mcp-Method unless overridden
	Params     map[string]any // params without _meta
	Meta       any            // replaces the whole _meta; mtDrop leaves it out
	Version    string         // protocol version in the header and _meta ("" = 2026-07-28)
	NoAuth     bool           // send no Authorization header
	Token      string         // a bearer other than the client's
	Set        map[string]string
	Del        []string
	Raw        any    // exact body (string or []byte); the id echo is then not checked
	URL        string // "" = the client's /mcp URL
	HTTPMethod string // "" = POST
	Timeout    time.Duration
	Opts       []reqOpt
}

// mtResp is one answer.
type mtResp struct {
	Status int
	Header http.Header
	Raw    []byte
	Top    map[string]json.RawMessage // nil when the body is not a JSON object
	Body   map[string]any             // the same, decoded
}

// mtClient speaks MCP as one session.
type mtClient struct {
	h     *roomHarness
	url   string
	token string
	tasks bool // declare io.modelcontextprotocol/tasks in clientCapabilities
	next  *atomic.Int64
}

// mcpClient is a client on the ingress listener for token ("" = none).
func mcpClient(h *roomHarness, token string, tasks bool) *mtClient {
	return &mtClient{h: h, url: h.ingressURL("/mcp"), token: token, tasks: tasks, next: new(atomic.Int64)}
}

// withTasks is the same session declaring (or not) the Tasks extension.
func (c *mtClient) withTasks(on bool) *mtClient {
	cp := *c
	cp.tasks = on
	return &cp
}

// caps is the clientCapabilities object the client declares.
func (c *mtClient) caps() map[string]any {
	if c.tasks {
		return map[string]any{"extensions": map[string]any{mtTasksExt: map[string]any{}}}
	}
	return map[string]any{}
}

func mtMeta(version string, caps map[string]any) map[string]any {
	return map[string]any{
		mtMetaVersion: version,
		mtMetaCaps:    caps,
		mtMetaInfo:    map[string]any{"name": "ce-tests", "version": "0.0.1"},
	}
}

// do sends q and decodes the answer.
func (c *mtClient) do(t testing.TB, q mtReq) mtResp {
	t.Helper()
	version := q.Version
	if version == "" {
		version = mtVersion
	}
	var id any = q.ID
	if id == nil {
		id = c.next.Add(1)
	}
	params := map[string]any{}
	for k, v := range q.Params {
		params[k] = v
	}
	switch {
	case q.Meta == nil:
		params["_meta"] = mtMeta(version, c.caps())
	case q.Meta == mtDrop:
	default:
		params["_meta"] = q.Meta
	}
	msg := map[string]any{"jsonrpc": "2.0", "method": q.Method, "params": params}
	if id != mtNoID {
		msg["id"] = id
	}
	var body []byte
	switch raw := q.Raw.(type) {
	case nil:
		b, err := json.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		body = b
	case string:
		body = []byte(raw)
	case []byte:
		body = raw
	default:
		t.Fatalf("mtReq.Raw must be a string or []byte, not %T", q.Raw)
	}

	opts := []reqOpt{func(r *http.Request) {
		r.Header.Set("Accept", "application/json, text/event-stream")
		r.Header.Set("MCP-Protocol-Version", version)
		if q.Method != "" {
			r.Header.Set("Mcp-Method", q.Method)
		}
		if f := mtNameField[q.Method]; f != "" {
			if v, ok := q.Params[f].(string); ok {
				r.Header.Set("Mcp-Name", v)
			}
		}
		for k, v := range q.Set {
			r.Header.Set(k, v)
		}
		for _, k := range q.Del {
			r.Header.Del(k)
		}
	}}
	if q.Timeout > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), q.Timeout)
		t.Cleanup(cancel)
		opts = append(opts, func(r *http.Request) { *r = *r.WithContext(ctx) })
	}
	opts = append(opts, q.Opts...)
	token := c.token
	if q.Token != "" {
		token = q.Token
	}
	if q.NoAuth {
		token = ""
	}
	url := q.URL
	if url == "" {
		url = c.url
	}
	method := q.HTTPMethod
	if method == "" {
		method = "POST"
	}
	var sendBody any = body
	if method == "GET" || method == "DELETE" {
		sendBody = nil
	}
	r := c.h.doT(t, method, url, token, sendBody, opts...)
	out := mtDecode(t, r.Status, r.Header, r.Body)

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
			if name, _ := mtGet(res, "_meta", mtServerInfo, "name").(string); name == "" {
				t.Errorf("%s: result without _meta[%q] (spec §2.3: on every result): %.300s", q.Method, mtServerInfo, out.Raw)
			}
		}
		_, isRPC := out.Top["jsonrpc"]
		if isRPC && q.Raw == nil && id != mtNoID && method == "POST" {
			want, _ := json.Marshal(id)
			if got := out.Top["id"]; !bytes.Equal(bytes.TrimSpace(got), want) {
				t.Errorf("%s: answer id = %s, want %s echoed with the same JSON type; body %s", q.Method, got, want, out.Raw)
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
	if dup := mtDupKey(body); dup != "" {
		t.Errorf("answer repeats key %q in one object (a decoder keeps only one): %.300s", dup, body)
	}
	return out
}

// mtDupKey returns a key that appears twice in one JSON object of doc, or "".
func mtDupKey(doc []byte) string {
	dec := json.NewDecoder(bytes.NewReader(doc))
	type frame struct {
		obj  bool
		keys map[string]bool
		key  bool // the next string token in this object is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				if top != nil && top.obj {
					top.key = true
				}
				stack = append(stack, &frame{obj: true, keys: map[string]bool{}, key: true})
			case '[':
				if top != nil && top.obj {
					top.key = true
				}
				stack = append(stack, &frame{})
			default:
				stack = stack[:len(stack)-1]
			}
		case string:
			if top != nil && top.obj && top.key {
				if top.keys[v] {
					return v
				}
				top.keys[v] = true
				top.key = false
				continue
			}
			if top != nil && top.obj {
				top.key = true
			}
		default:
			if top != nil && top.obj {
				top.key = true
			}
		}
	}
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
	handoffID, _ = meta[mtHandoffMeta].(string)
	if taskID == "" || handoffID == "" {
		t.Fatalf("CreateTaskResult lacks taskId or _meta[%q]: %v", mtHandoffMeta, res)
	}
	return taskID, handoffID
}

// mtRawPOST writes one request on a fresh TCP connection byte for byte, for
// what net/http's client would normalise (padded header values).
func mtRawPOST(t testing.TB, hostport string, headerLines []string, body []byte) mtResp {
	t.Helper()
	conn, err := net.DialTimeout("tcp", hostport, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nConnection: close\r\nContent-Length: %d\r\n", hostport, len(body))
	for _, l := range headerLines {
		b.WriteString(l + "\r\n")
	}
	b.WriteString("\r\n")
	b.Write(body)
	if _, err := conn.Write(b.Bytes()); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	rb, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return mtDecode(t, res.StatusCode, res.Header, rb)
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

// The helper's duplicate-key detector itself.
func TestMCPHelperDupKey(t *testing.T) {
	for doc, want := range map[string]string{
		`{"a":1,"b":{"a":2},"c":[{"a":1},{"a":2}]}`: "",
		`{"a":1,"a":2}`: "a",
		`{"p":{"_meta":{},"x":"_meta","_meta":{}}}`: "_meta",
		`{"l":[{"k":"v","k":"w"}]}`:                 "k",
		`{"s":"k","k":["k","k"],"t":{"k":{"k":1}}}`: "",
	} {
		if got := mtDupKey([]byte(doc)); got != want {
			t.Errorf("mtDupKey(%s) = %q, want %q", doc, got, want)
		}
	}
}
