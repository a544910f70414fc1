package rpc

import (
	"github.com/commonroom/ce/httpapi/present"

	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

// testMethods is the kind of table the /mcp handler passes: the name-bearing
// methods of spec §1.3 and §5.9, and a few plain ones. ping, initialize,
// logging/setLevel, tasks/list and tasks/result are absent on purpose.
var testMethods = NewMethods(map[string]MethodInfo{
	"server/discover":          {},
	"tools/list":               {},
	"tools/call":               {NameField: "name"},
	"prompts/list":             {},
	"prompts/get":              {NameField: "name"},
	"resources/list":           {},
	"resources/templates/list": {},
	"resources/read":           {NameField: "uri"},
	"subscriptions/listen":     {},
	"tasks/get":                {NameField: "taskId"},
	"tasks/update":             {NameField: "taskId"},
	"tasks/cancel":             {NameField: "taskId"},
})

const (
	metaOK   = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	metaV999 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"v999.0.0","io.modelcontextprotocol/clientCapabilities":{}}`
)

// rpc builds a request body. id is raw JSON ("" = no id member); params is the
// inside of the params object ("-" = no params member).
func rpc(id, method, params string) string {
	var b strings.Builder
	b.WriteString(`{"jsonrpc":"2.0"`)
	if id != "" {
		b.WriteString(`,"id":` + id)
	}
	b.WriteString(`,"method":` + mustJSON(method))
	if params != "-" {
		b.WriteString(`,"params":{` + params + `}`)
	}
	b.WriteString(`}`)
	return b.String()
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// hdr builds canonical headers from "Name", "value" pairs.
func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// std is the full set of routing headers for method (and Mcp-Name when name != "").
func std(method, name string) http.Header {
	h := hdr("MCP-Protocol-Version", present.ProtocolVersion, "Mcp-Method", method)
	if name != "" {
		h.Set("Mcp-Name", name)
	}
	return h
}

type errWant struct {
	status int
	code   int
	id     string // exact JSON echoed; "" = the id member must be absent
	data   string // JSON the error data must equal; "" = data must be absent
	msg    string // substring of the message; "" = not checked
}

// checkError sends rerr through WriteError with req.ID and checks the wire
// form: status, content type, the id member (exact bytes, or absent, never
// null), the code, data and message.
func checkError(t *testing.T, req *Request, notification bool, rerr *Error, want errWant) {
	t.Helper()
	if rerr == nil {
		t.Fatalf("got no error (notification=%v, req=%+v); want %d %d", notification, req, want.status, want.code)
	}
	if notification {
		t.Errorf("notification = true alongside an error")
	}
	if req == nil {
		t.Fatalf("req is nil alongside an error; it must carry the id")
	}
	if req.Method != "" || req.Params != nil {
		t.Errorf("req on error carries more than the id: %+v", req)
	}
	rec := httptest.NewRecorder()
	WriteError(rec, req.ID, rerr)
	if rec.Code != want.status {
		t.Errorf("status = %d, want %d (error %d %q)", rec.Code, want.status, rerr.Code, rerr.Message)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(rec.Body.Bytes(), &top); err != nil {
		t.Fatalf("error body is not a JSON object: %v: %s", err, rec.Body.Bytes())
	}
	if string(top["jsonrpc"]) != `"2.0"` {
		t.Errorf("jsonrpc = %s", top["jsonrpc"])
	}
	gotID, hasID := top["id"]
	switch {
	case want.id == "" && hasID:
		t.Errorf("id = %s, want the member omitted", gotID)
	case want.id != "" && !hasID:
		t.Errorf("id omitted, want %s", want.id)
	case want.id != "" && string(gotID) != want.id:
		t.Errorf("id = %s, want %s", gotID, want.id)
	}
	var eobj struct {
		Code    *int            `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(top["error"], &eobj); err != nil || eobj.Code == nil {
		t.Fatalf("error member = %s (%v)", top["error"], err)
	}
	if *eobj.Code != want.code {
		t.Errorf("code = %d, want %d (message %q)", *eobj.Code, want.code, eobj.Message)
	}
	if want.msg != "" && !strings.Contains(eobj.Message, want.msg) {
		t.Errorf("message = %q, want it to contain %q", eobj.Message, want.msg)
	}
	switch {
	case want.data == "" && eobj.Data != nil:
		t.Errorf("data = %s, want it omitted", eobj.Data)
	case want.data != "":
		if !jsonEqual(eobj.Data, []byte(want.data)) {
			t.Errorf("data = %s, want %s", eobj.Data, want.data)
		}
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func TestDecodeRPCErrors(t *testing.T) {
	e400 := func(code int, id string) errWant { return errWant{status: 400, code: code, id: id} }
	withMsg := func(w errWant, msg string) errWant { w.msg = msg; return w }
	notFound := func(id, method string) errWant {
		return errWant{status: 404, code: -32601, id: id, data: `{"method":` + mustJSON(method) + `}`, msg: "method not found"}
	}
	v999 := `{"supported":["2026-07-28"],"requested":"v999.0.0"}`
	tasksGet := func(id, taskID string) string { return rpc(id, "tasks/get", `"taskId":`+mustJSON(taskID)+`,`+metaOK) }
	toolsCall := func(name string) string {
		return rpc("7", "tools/call", `"name":`+mustJSON(name)+`,"arguments":{},`+metaOK)
	}

	cases := []struct {
		name string
		body string
		h    http.Header
		want errWant
	}{
		// Step 3: parse.
		{"parse error/truncated object/no id", `{"jsonrpc":"2.0","id":7,`, std("tools/list", ""), e400(-32700, "")},
		{"parse error/empty body/no id", ``, std("tools/list", ""), e400(-32700, "")},
		{"parse error/trailing data/no id", rpc("7", "tools/list", metaOK) + ` {}`, std("tools/list", ""), e400(-32700, "")},
		{"parse error/not json/no id", `jsonrpc=2.0&id=7`, std("tools/list", ""), e400(-32700, "")},
		{"parse error/100k open brackets/no id", strings.Repeat("[", 100_000), nil, e400(-32700, "")},
		{"parse error/100k brackets in params/no id", `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"x":` + strings.Repeat("[", 100_000) + `}}`, nil, e400(-32700, "")},

		// Step 3: shape.
		{"invalid request/batch/no id", `[` + rpc("7", "tools/list", metaOK) + `]`, std("tools/list", ""), withMsg(e400(-32600, ""), "batch")},
		{"invalid request/empty batch/no id", `[]`, nil, e400(-32600, "")},
		{"invalid request/string body/no id", `"tools/list"`, nil, e400(-32600, "")},
		{"invalid request/null body/no id", `null`, nil, e400(-32600, "")},
		{"invalid request/result response/echoes 7", `{"jsonrpc":"2.0","id":7,"result":{}}`, nil, withMsg(e400(-32600, "7"), "response")},
		{"invalid request/error response/echoes a", `{"jsonrpc":"2.0","id":"a","error":{"code":-1,"message":"x"}}`, nil, withMsg(e400(-32600, `"a"`), "response")},
		{"invalid request/id null/no id", rpc("null", "tools/list", metaOK), std("tools/list", ""), e400(-32600, "")},
		{"invalid request/id float/no id", rpc("1.5", "tools/list", metaOK), std("tools/list", ""), e400(-32600, "")},
		{"invalid request/id 1.0/no id", rpc("1.0", "tools/list", metaOK), std("tools/list", ""), e400(-32600, "")},
		{"invalid request/id exponent/no id", rpc("1e3", "tools/list", metaOK), std("tools/list", ""), e400(-32600, "")},
		{"invalid request/id object/no id", rpc(`{"n":7}`, "tools/list", metaOK), std("tools/list", ""), e400(-32600, "")},
		{"invalid request/id array/no id", rpc(`[7]`, "tools/list", metaOK), std("tools/list", ""), e400(-32600, "")},
		{"invalid request/id bool/no id", rpc("true", "tools/list", metaOK), std("tools/list", ""), e400(-32600, "")},
		{"invalid request/bad id beats bad jsonrpc/no id", `{"jsonrpc":"1.0","id":false,"method":"tools/list"}`, nil, e400(-32600, "")},
		{"invalid request/jsonrpc missing/echoes 7", `{"id":7,"method":"tools/list","params":{` + metaOK + `}}`, std("tools/list", ""), e400(-32600, "7")},
		{"invalid request/jsonrpc 1.0/echoes a", `{"jsonrpc":"1.0","id":"a","method":"tools/list"}`, nil, e400(-32600, `"a"`)},
		{"invalid request/jsonrpc number/echoes 7", `{"jsonrpc":2.0,"id":7,"method":"tools/list"}`, nil, e400(-32600, "7")},
		{"invalid request/method missing/echoes 7", `{"jsonrpc":"2.0","id":7,"params":{}}`, nil, e400(-32600, "7")},
		{"invalid request/method key in caps/echoes 7", `{"jsonrpc":"2.0","id":7,"METHOD":"tools/list"}`, nil, e400(-32600, "7")},
		{"invalid request/method number/echoes 7", `{"jsonrpc":"2.0","id":7,"method":42}`, nil, e400(-32600, "7")},
		{"invalid request/method null/echoes 7", `{"jsonrpc":"2.0","id":7,"method":null}`, nil, e400(-32600, "7")},
		{"invalid request/params array/echoes 7", `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":[1]}`, std("tools/list", ""), withMsg(e400(-32600, "7"), "params")},
		{"invalid request/params string/echoes a", `{"jsonrpc":"2.0","id":"a","method":"tools/list","params":"x"}`, std("tools/list", ""), e400(-32600, `"a"`)},
		{"invalid request/params null/echoes 7", `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":null}`, std("tools/list", ""), e400(-32600, "7")},
		{"invalid request/notification with array params/no id", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":[]}`, nil, e400(-32600, "")},

		// Step 5: MCP-Protocol-Version present.
		{"header mismatch/protocol header missing/echoes 7", rpc("7", "tools/list", metaOK), hdr("Mcp-Method", "tools/list"), withMsg(e400(-32020, "7"), "MCP-Protocol-Version")},
		{"header mismatch/protocol header missing beats missing _meta/echoes 7", rpc("7", "tools/list", "-"), hdr("Mcp-Method", "tools/list"), e400(-32020, "7")},
		{"header mismatch/protocol header empty/echoes a", rpc(`"a"`, "tools/list", metaOK), hdr("MCP-Protocol-Version", "  ", "Mcp-Method", "tools/list"), e400(-32020, `"a"`)},
		{"header mismatch/protocol header repeated/echoes 7", rpc("7", "tools/list", metaOK), hdr("MCP-Protocol-Version", present.ProtocolVersion, "MCP-Protocol-Version", present.ProtocolVersion, "Mcp-Method", "tools/list"), withMsg(e400(-32020, "7"), "repeated")},
		{"header mismatch/protocol header control char/echoes 7", rpc("7", "tools/list", metaOK), hdr("MCP-Protocol-Version", "2026-07-28\x00", "Mcp-Method", "tools/list"), e400(-32020, "7")},

		// Step 6: _meta.
		{"invalid params/params absent/echoes 7", rpc("7", "tools/list", "-"), std("tools/list", ""), withMsg(e400(-32602, "7"), "_meta is missing")},
		{"invalid params/_meta missing/echoes a", rpc(`"a"`, "tools/list", `"cursor":"x"`), std("tools/list", ""), withMsg(e400(-32602, `"a"`), "_meta is missing")},
		{"invalid params/_meta array/echoes 7", rpc("7", "tools/list", `"_meta":[]`), std("tools/list", ""), withMsg(e400(-32602, "7"), "_meta must be an object")},
		{"invalid params/_meta null/echoes 7", rpc("7", "tools/list", `"_meta":null`), std("tools/list", ""), withMsg(e400(-32602, "7"), "_meta must be an object")},
		{"invalid params/protocolVersion missing/echoes 7", rpc("7", "tools/list", `"_meta":{"io.modelcontextprotocol/clientCapabilities":{}}`), std("tools/list", ""), withMsg(e400(-32602, "7"), "protocolVersion\"] is missing")},
		{"invalid params/protocolVersion number/echoes 7", rpc("7", "tools/list", `"_meta":{"io.modelcontextprotocol/protocolVersion":20260728,"io.modelcontextprotocol/clientCapabilities":{}}`), std("tools/list", ""), withMsg(e400(-32602, "7"), "protocolVersion\"] must be a string")},
		{"invalid params/protocolVersion null/echoes 7", rpc("7", "tools/list", `"_meta":{"io.modelcontextprotocol/protocolVersion":null,"io.modelcontextprotocol/clientCapabilities":{}}`), std("tools/list", ""), withMsg(e400(-32602, "7"), "must be a string")},
		{"invalid params/clientCapabilities missing/echoes 7", rpc("7", "tools/list", `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`), std("tools/list", ""), withMsg(e400(-32602, "7"), "clientCapabilities\"] is missing")},
		{"invalid params/clientCapabilities array/echoes 7", rpc("7", "tools/list", `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":[]}`), std("tools/list", ""), withMsg(e400(-32602, "7"), "clientCapabilities\"] must be an object")},
		{"invalid params/clientCapabilities null/echoes 7", rpc("7", "tools/list", `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":null}`), std("tools/list", ""), withMsg(e400(-32602, "7"), "must be an object")},
		{"invalid params/extensions not object/echoes 7", rpc("7", "tools/list", `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":["io.modelcontextprotocol/tasks"]}}`), std("tools/list", ""), withMsg(e400(-32602, "7"), "extensions must be an object")},
		{"invalid params/progressToken float/echoes 7", rpc("7", "tools/list", `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":1.5}`), std("tools/list", ""), withMsg(e400(-32602, "7"), "progressToken")},
		{"invalid params/_meta beats Mcp-Method/echoes 7", rpc("7", "tools/list", "-"), hdr("MCP-Protocol-Version", present.ProtocolVersion, "Mcp-Method", "tools/call"), e400(-32602, "7")},
		{"invalid params/_meta beats header version mismatch/echoes 7", rpc("7", "tools/list", `"cursor":"c"`), hdr("MCP-Protocol-Version", "v999.0.0", "Mcp-Method", "tools/list"), e400(-32602, "7")},
		{"invalid params/_meta beats unknown method/echoes 7", rpc("7", "ping", "-"), std("ping", ""), e400(-32602, "7")},

		// Step 7: header version = _meta version, before the support check.
		{"header mismatch/header 2026 body v999 not -32022/echoes 7", rpc("7", "tools/list", metaV999), std("tools/list", ""), withMsg(e400(-32020, "7"), "does not match")},
		{"header mismatch/header v999 body 2026/echoes 7", rpc("7", "tools/list", metaOK), hdr("MCP-Protocol-Version", "v999.0.0", "Mcp-Method", "tools/list"), e400(-32020, "7")},
		{"header mismatch/_meta version with a trailing space/echoes 7", rpc("7", "tools/list", strings.Replace(metaOK, "2026-07-28", "2026-07-28 ", 1)), std("tools/list", ""), e400(-32020, "7")},

		// Step 8: Mcp-Method.
		{"header mismatch/Mcp-Method missing/echoes 7", rpc("7", "tools/list", metaOK), hdr("MCP-Protocol-Version", present.ProtocolVersion), withMsg(e400(-32020, "7"), "Mcp-Method header is missing")},
		{"header mismatch/Mcp-Method differs/echoes 7", rpc("7", "tools/list", metaOK), std("prompts/list", ""), e400(-32020, "7")},
		{"header mismatch/Mcp-Method upper case/echoes 7", rpc("7", "tools/list", metaOK), std("TOOLS/LIST", ""), e400(-32020, "7")},
		{"header mismatch/Mcp-Method non-ASCII/echoes 7", rpc("7", "tools/list", metaOK), std("tools/list\u00e9", ""), withMsg(e400(-32020, "7"), "outside visible ASCII")},
		{"header mismatch/Mcp-Method on unknown method/echoes 7", rpc("7", "ping", metaOK), std("tools/list", ""), e400(-32020, "7")},
		{"header mismatch/Mcp-Method missing beats v999/echoes 7", rpc("7", "tools/list", metaV999), hdr("MCP-Protocol-Version", "v999.0.0"), e400(-32020, "7")},

		// Step 8: Mcp-Name.
		{"header mismatch/tools/call Mcp-Name missing/echoes 7", toolsCall("lookup"), std("tools/call", ""), withMsg(e400(-32020, "7"), "Mcp-Name header is missing")},
		{"header mismatch/tools/call Mcp-Name differs/echoes 7", toolsCall("lookup"), std("tools/call", "other"), e400(-32020, "7")},
		{"header mismatch/tools/call Mcp-Name case differs/echoes 7", toolsCall("lookup"), std("tools/call", "Lookup"), e400(-32020, "7")},
		{"header mismatch/tools/call name missing/echoes 7", rpc("7", "tools/call", `"arguments":{},`+metaOK), std("tools/call", "lookup"), e400(-32020, "7")},
		{"header mismatch/tools/call name not string/echoes 7", rpc("7", "tools/call", `"name":7,`+metaOK), std("tools/call", "7"), e400(-32020, "7")},
		{"header mismatch/tools/call name and NAME/echoes 7", rpc("7", "tools/call", `"name":"lookup","NAME":"drop_all",`+metaOK), std("tools/call", "lookup"), withMsg(e400(-32020, "7"), "ambiguous")},
		{"header mismatch/tools/call Mcp-Name raw UTF-8/echoes 7", toolsCall("h\u00e9llo"), std("tools/call", "h\u00e9llo"), withMsg(e400(-32020, "7"), "outside visible ASCII")},
		{"header mismatch/Mcp-Name repeated/echoes 7", toolsCall("lookup"), hdr("MCP-Protocol-Version", present.ProtocolVersion, "Mcp-Method", "tools/call", "Mcp-Name", "lookup", "Mcp-Name", "lookup"), e400(-32020, "7")},
		{"header mismatch/resources/read uri differs/echoes a", rpc(`"a"`, "resources/read", `"uri":"commonroom://workspace/w1",`+metaOK), std("resources/read", "commonroom://workspace/w2"), e400(-32020, `"a"`)},
		{"header mismatch/tasks/get Mcp-Name missing/echoes 7", tasksGet("7", "t1"), std("tasks/get", ""), e400(-32020, "7")},
		{"header mismatch/tasks/cancel taskId differs/echoes 7", rpc("7", "tasks/cancel", `"taskId":"t1",`+metaOK), std("tasks/cancel", "t2"), e400(-32020, "7")},
		{"header mismatch/Mcp-Name beats v999/echoes 7", rpc("7", "tools/call", `"name":"lookup",`+metaV999), hdr("MCP-Protocol-Version", "v999.0.0", "Mcp-Method", "tools/call"), e400(-32020, "7")},

		// Step 8: the Base64 sentinel.
		{"header mismatch/sentinel without padding/echoes 7", toolsCall("Hello"), std("tools/call", "=?base64?SGVsbG8?="), withMsg(e400(-32020, "7"), "Base64")},
		{"header mismatch/sentinel without padding even if literal matches/echoes 7", toolsCall("=?base64?SGVsbG8?="), std("tools/call", "=?base64?SGVsbG8?="), e400(-32020, "7")},
		{"header mismatch/sentinel bad alphabet/echoes 7", toolsCall("Hello"), std("tools/call", "=?base64?SGV*bG8=?="), e400(-32020, "7")},
		{"header mismatch/sentinel url alphabet/echoes 7", toolsCall("\xfb\xff"), std("tools/call", "=?base64?-_8=?="), e400(-32020, "7")},
		{"header mismatch/sentinel non-canonical padding bits/echoes 7", toolsCall("Hello"), std("tools/call", "=?base64?SGVsbG9=?="), e400(-32020, "7")},
		{"header mismatch/sentinel inner space/echoes 7", toolsCall("Hello"), std("tools/call", "=?base64?SGVs bG8=?="), e400(-32020, "7")},
		{"header mismatch/literal SGVsbG8= is not decoded/echoes 7", toolsCall("Hello"), std("tools/call", "SGVsbG8="), e400(-32020, "7")},
		{"header mismatch/no closing marker is literal/echoes 7", toolsCall("Hello"), std("tools/call", "=?base64?SGVsbG8="), e400(-32020, "7")},
		{"header mismatch/upper-case marker is literal/echoes 7", toolsCall("Hello"), std("tools/call", "=?BASE64?SGVsbG8=?="), e400(-32020, "7")},
		{"header mismatch/decoded value differs/echoes 7", toolsCall("Hello"), std("tools/call", "=?base64?SGVsbG8h?="), e400(-32020, "7")},

		// Step 9: the supported version.
		{"unsupported version/v999 both/echoes 7", rpc("7", "tools/list", metaV999), hdr("MCP-Protocol-Version", "v999.0.0", "Mcp-Method", "tools/list"), errWant{status: 400, code: -32022, id: "7", data: v999}},
		{"unsupported version/2025-06-18 both/echoes a", rpc(`"a"`, "tools/list", strings.Replace(metaOK, "2026-07-28", "2025-06-18", 1)), hdr("MCP-Protocol-Version", "2025-06-18", "Mcp-Method", "tools/list"), errWant{status: 400, code: -32022, id: `"a"`, data: `{"supported":["2026-07-28"],"requested":"2025-06-18"}`}},
		{"unsupported version/beats unknown method/echoes 7", rpc("7", "ping", metaV999), hdr("MCP-Protocol-Version", "v999.0.0", "Mcp-Method", "ping"), errWant{status: 400, code: -32022, id: "7", data: v999}},

		// Step 10: unknown methods.
		{"method not found/ping/echoes 7", rpc("7", "ping", metaOK), std("ping", ""), notFound("7", "ping")},
		{"method not found/initialize/echoes a", rpc(`"a"`, "initialize", metaOK), std("initialize", ""), notFound(`"a"`, "initialize")},
		{"method not found/logging/setLevel/echoes 7", rpc("7", "logging/setLevel", `"level":"info",`+metaOK), std("logging/setLevel", ""), notFound("7", "logging/setLevel")},
		{"method not found/tasks/list/echoes 7", rpc("7", "tasks/list", metaOK), std("tasks/list", ""), notFound("7", "tasks/list")},
		{"method not found/tasks/result without Mcp-Name/echoes 7", rpc("7", "tasks/result", `"taskId":"t1",`+metaOK), std("tasks/result", ""), notFound("7", "tasks/result")},
		{"method not found/unknown method without Mcp-Name/echoes 7", rpc("7", "tools/frobnicate", `"name":"x",`+metaOK), std("tools/frobnicate", ""), notFound("7", "tools/frobnicate")},
		{"method not found/unknown method with bad sentinel/echoes 7", rpc("7", "tools/frobnicate", `"name":"x",`+metaOK), std("tools/frobnicate", "=?base64?!!?="), notFound("7", "tools/frobnicate")},
		{"header mismatch/empty method cannot match an empty Mcp-Method/echoes 7", rpc("7", "", metaOK), hdr("MCP-Protocol-Version", present.ProtocolVersion, "Mcp-Method", ""), e400(-32020, "7")},
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, notification, rerr := Decode(tc.h, []byte(tc.body), testMethods, nil)
			checkError(t, req, notification, rerr, tc.want)
		})
	}
}

func TestDecodeRPCAccepts(t *testing.T) {
	b64 := func(s string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=" }
	toolsCall := func(id, name string) string {
		return rpc(id, "tools/call", `"name":`+mustJSON(name)+`,"arguments":{"q":"go"},`+metaOK)
	}
	withCaps := func(caps string) string {
		return `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}`
	}
	cases := []struct {
		name      string
		body      string
		h         http.Header
		wantID    string
		wantTasks bool
		wantToken string
	}{
		{"accepted/tools/list numeric id 7", rpc("7", "tools/list", metaOK), std("tools/list", ""), "7", false, ""},
		{"accepted/tools/list string id a", rpc(`"a"`, "tools/list", metaOK), std("tools/list", ""), `"a"`, false, ""},
		{"accepted/negative id", rpc("-3", "tools/list", metaOK), std("tools/list", ""), "-3", false, ""},
		{"accepted/id beyond int64 kept as sent", rpc("123456789012345678901234567890", "tools/list", metaOK), std("tools/list", ""), "123456789012345678901234567890", false, ""},
		{"accepted/string id with escapes kept byte for byte", rpc(`"\u0061<&>"`, "tools/list", metaOK), std("tools/list", ""), `"\u0061<&>"`, false, ""},
		{"accepted/empty string id", rpc(`""`, "server/discover", metaOK), std("server/discover", ""), `""`, false, ""},
		{"accepted/white space around body and values", "\n\t " + strings.ReplaceAll(rpc("7", "tools/list", metaOK), ":", " : ") + " \r\n", std("tools/list", ""), "7", false, ""},
		{"accepted/clientInfo and unknown _meta keys ignored", rpc("7", "tools/list", `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/clientInfo":"not even an object","x/y":1}`), std("tools/list", ""), "7", false, ""},
		{"accepted/tasks extension declared", rpc("7", "tools/list", withCaps(`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`)), std("tools/list", ""), "7", true, ""},
		{"accepted/tasks extension with settings", rpc("7", "tools/list", withCaps(`{"extensions":{"io.modelcontextprotocol/tasks":{"x":1}}}`)), std("tools/list", ""), "7", true, ""},
		{"accepted/tasks extension not an object is not declared", rpc("7", "tools/list", withCaps(`{"extensions":{"io.modelcontextprotocol/tasks":true}}`)), std("tools/list", ""), "7", false, ""},
		{"accepted/other extension only", rpc("7", "tools/list", withCaps(`{"extensions":{"example.com/x":{}}}`)), std("tools/list", ""), "7", false, ""},
		{"accepted/tasks as top-level capability is not the extension", rpc("7", "tools/list", withCaps(`{"tasks":{}}`)), std("tools/list", ""), "7", false, ""},
		{"accepted/progressToken string", rpc("7", "tools/list", `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":"p1"}`), std("tools/list", ""), "7", false, `"p1"`},
		{"accepted/progressToken integer", rpc("7", "tools/list", `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":42}`), std("tools/list", ""), "7", false, "42"},
		{"accepted/tools/call literal Mcp-Name", toolsCall("7", "lookup"), std("tools/call", "lookup"), "7", false, ""},
		{"accepted/tools/call Mcp-Name padded with spaces and tabs", toolsCall("7", "lookup"), std("tools/call", " \t lookup \t "), "7", false, ""},
		{"accepted/sentinel SGVsbG8= decodes to Hello", toolsCall("7", "Hello"), std("tools/call", "=?base64?SGVsbG8=?="), "7", false, ""},
		{"accepted/sentinel padded with spaces", toolsCall("7", "Hello"), std("tools/call", "  =?base64?SGVsbG8=?=  "), "7", false, ""},
		{"accepted/sentinel carries non-ASCII", toolsCall("7", "h\u00e9llo \u4e16\u754c"), std("tools/call", b64("h\u00e9llo \u4e16\u754c")), "7", false, ""},
		{"accepted/sentinel carries surrounding spaces", toolsCall("7", "  padded  "), std("tools/call", b64("  padded  ")), "7", false, ""},
		{"accepted/literal SGVsbG8= compared as is", toolsCall("7", "SGVsbG8="), std("tools/call", "SGVsbG8="), "7", false, ""},
		{"accepted/missing closing marker compared as is", toolsCall("7", "=?base64?SGVsbG8="), std("tools/call", "=?base64?SGVsbG8="), "7", false, ""},
		{"accepted/upper-case markers compared as is", toolsCall("7", "=?BASE64?SGVsbG8=?="), std("tools/call", "=?BASE64?SGVsbG8=?="), "7", false, ""},
		{"accepted/overlapping markers compared as is", toolsCall("7", "=?base64?="), std("tools/call", "=?base64?="), "7", false, ""},
		{"accepted/prompts/get name", rpc("7", "prompts/get", `"name":"guide",`+metaOK), std("prompts/get", "guide"), "7", false, ""},
		{"accepted/resources/read uri", rpc("7", "resources/read", `"uri":"commonroom://workspace/w1",`+metaOK), std("resources/read", "commonroom://workspace/w1"), "7", false, ""},
		{"accepted/tasks/get taskId", rpc(`"a"`, "tasks/get", `"taskId":"7f3c2a9e",`+metaOK), std("tasks/get", "7f3c2a9e"), `"a"`, false, ""},
		{"accepted/tasks/update taskId via sentinel", rpc("7", "tasks/update", `"taskId":"t-1","inputResponses":{},`+metaOK), std("tasks/update", b64("t-1")), "7", false, ""},
		{"accepted/Mcp-Name ignored where no name field", rpc("7", "tools/list", metaOK), std("tools/list", "=?base64?!!?="), "7", false, ""},
		{"accepted/header names in any case", toolsCall("7", "lookup"), http.Header{"mcp-protocol-version": {present.ProtocolVersion}, "MCP-METHOD": {"tools/call"}, "mcp-NAME": {"lookup"}}, "7", false, ""},
		{"accepted/escaped method and jsonrpc read as their text", `{"jsonrpc":"2\u002e0","id":7,"method":"tools\u002flist","params":{` + metaOK + `}}`, std("tools/list", ""), "7", false, ""},
		{"accepted/escaped tool name matches its Mcp-Name", rpc("7", "tools/call", `"name":"look\u0075p",`+metaOK), std("tools/call", "lookup"), "7", false, ""},
		{"accepted/progressToken after extensions (three layers split apart)", rpc("7", "tools/list", `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"a":1,"b":2,"c":3,"extensions":{"x/1":{},"x/2":{},"io.modelcontextprotocol/tasks":{}}},"progressToken":"tok","k1":1}`), std("tools/list", ""), "7", true, `"tok"`},
		{"accepted/params of more members than the request holds inline", rpc("7", "tools/call", `"name":"lookup",`+manyParams(12)+metaOK), std("tools/call", "lookup"), "7", false, ""},
		{"accepted/params of more members than are searched in order", rpc("7", "tools/call", `"name":"lookup",`+manyParams(40)+metaOK), std("tools/call", "lookup"), "7", false, ""},
		{"accepted/params nested 9000 deep", rpc("7", "tools/list", `"x":`+strings.Repeat("[", 9000)+strings.Repeat("]", 9000)+`,`+metaOK), std("tools/list", ""), "7", false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, notification, rerr := Decode(tc.h, []byte(tc.body), testMethods, nil)
			if rerr != nil {
				t.Fatalf("error %d %d %q, want a request", rerr.Status, rerr.Code, rerr.Message)
			}
			if notification {
				t.Fatalf("notification = true, want a request")
			}
			if string(req.ID) != tc.wantID {
				t.Errorf("ID = %s, want %s", req.ID, tc.wantID)
			}
			var top map[string]json.RawMessage
			if err := json.Unmarshal([]byte(tc.body), &top); err != nil {
				t.Fatal(err)
			}
			var method string
			_ = json.Unmarshal(top["method"], &method)
			if req.Method != method {
				t.Errorf("Method = %q, want %q", req.Method, method)
			}
			if !bytes.Equal(bytes.TrimSpace(req.Params), bytes.TrimSpace(top["params"])) {
				t.Errorf("Params = %s, want %s", req.Params, top["params"])
			}
			// The params members the request holds are params as
			// encoding/json reads it.
			var params map[string]json.RawMessage
			if err := json.Unmarshal(top["params"], &params); err != nil {
				t.Fatal(err)
			}
			if req.members == nil || req.members.len() != len(params) {
				t.Fatalf("members = %+v, want the %d members of params", req.members, len(params))
			}
			for k, v := range params {
				if got, ok := req.members.get(k); !ok || !bytes.Equal(got, v) {
					t.Errorf("members[%q] = %s (%v), want %s", k, got, ok, v)
				}
			}
			if req.Meta.ProtocolVersion != present.ProtocolVersion {
				t.Errorf("Meta.ProtocolVersion = %q", req.Meta.ProtocolVersion)
			}
			if kindOf(req.Meta.ClientCaps) != '{' {
				t.Errorf("Meta.ClientCaps = %s, want an object", req.Meta.ClientCaps)
			}
			if req.Meta.Tasks != tc.wantTasks {
				t.Errorf("Meta.Tasks = %v, want %v", req.Meta.Tasks, tc.wantTasks)
			}
			if string(req.Meta.ProgressToken) != tc.wantToken {
				t.Errorf("Meta.ProgressToken = %s, want %s", req.Meta.ProgressToken, tc.wantToken)
			}
			// The id goes back on a result exactly as it came.
			rec := httptest.NewRecorder()
			WriteResult(rec, req.ID, map[string]string{"resultType": "complete"})
			var resp map[string]json.RawMessage
			if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
				t.Fatal(err)
			}
			if string(resp["id"]) != tc.wantID {
				t.Errorf("result id = %s, want %s", resp["id"], tc.wantID)
			}
		})
	}
}

func TestDecodeRPCNotifications(t *testing.T) {
	cases := []struct {
		name       string
		body       string
		h          http.Header
		wantMethod string
		wantParams string
	}{
		{"notification/cancelled before any header check", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user"}}`, nil, "notifications/cancelled", `{"requestId":7,"reason":"user"}`},
		{"notification/wrong headers are not checked", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`, hdr("MCP-Protocol-Version", "v999.0.0", "Mcp-Method", "TOOLS/LIST"), "notifications/cancelled", `{"requestId":7}`},
		{"notification/no params gives {}", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil, "notifications/initialized", `{}`},
		{"notification/unknown method is still a notification", `{"jsonrpc":"2.0","method":"ping","params":{}}`, nil, "ping", `{}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, notification, rerr := Decode(tc.h, []byte(tc.body), testMethods, nil)
			if rerr != nil {
				t.Fatalf("error %d %d %q, want a notification", rerr.Status, rerr.Code, rerr.Message)
			}
			if !notification {
				t.Fatalf("notification = false")
			}
			if req.ID != nil {
				t.Errorf("ID = %s, want nil", req.ID)
			}
			if req.Method != tc.wantMethod {
				t.Errorf("Method = %q, want %q", req.Method, tc.wantMethod)
			}
			if string(req.Params) != tc.wantParams {
				t.Errorf("Params = %s, want %s", req.Params, tc.wantParams)
			}
		})
	}
}

func TestDecodeRPCDeepInputDoesNotPanic(t *testing.T) {
	deep := []string{
		strings.Repeat("[", 100_000),
		strings.Repeat("{\"a\":", 100_000),
		`{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":` + strings.Repeat(`{"x":`, 200_000) + `}}`,
		strings.Repeat("[", 1<<20),
		strings.Repeat("[", 9_999) + strings.Repeat("]", 9_999),
	}
	for i, body := range deep {
		t.Run(fmt.Sprintf("deep input %d is a 400", i), func(t *testing.T) {
			req, _, rerr := Decode(std("tools/list", ""), []byte(body), testMethods, nil)
			if rerr == nil || rerr.Status != http.StatusBadRequest {
				t.Fatalf("got %+v, want a 400 error", rerr)
			}
			if req == nil || req.ID != nil {
				t.Errorf("req = %+v, want a nil id", req)
			}
		})
	}
}

func TestWriteRPCError(t *testing.T) {
	cases := []struct {
		name   string
		id     json.RawMessage
		err    *Error
		status int
		want   string
	}{
		{"error body/no id omits the member", nil, &Error{Status: 400, Code: -32700, Message: "parse error"}, 400,
			`{"jsonrpc":"2.0","error":{"code":-32700,"message":"parse error"}}`},
		{"error body/numeric id", json.RawMessage("7"), &Error{Status: 404, Code: -32601, Message: "method not found", Data: map[string]string{"method": "ping"}}, 404,
			`{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"method not found","data":{"method":"ping"}}}`},
		{"error body/string id not HTML-escaped", json.RawMessage(`"<a&b>"`), &Error{Status: 400, Code: -32020, Message: "x"}, 400,
			`{"jsonrpc":"2.0","id":"<a&b>","error":{"code":-32020,"message":"x"}}`},
		{"error body/missing capability", json.RawMessage("9"), MissingCapability(map[string]any{"extensions": map[string]any{present.TasksExtension: struct{}{}}}), 400,
			`{"jsonrpc":"2.0","id":9,"error":{"code":-32021,"message":"missing required client capability","data":{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`},
		{"error body/invalid params is 200", json.RawMessage(`"a"`), InvalidParams("unknown task", nil), 200,
			`{"jsonrpc":"2.0","id":"a","error":{"code":-32602,"message":"unknown task"}}`},
		{"error body/invalid params with data", json.RawMessage(`1`), InvalidParams("resource not found", map[string]string{"uri": "commonroom://x"}), 200,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"resource not found","data":{"uri":"commonroom://x"}}}`},
		{"error body/data that cannot be encoded is dropped", json.RawMessage(`1`), &Error{Status: 400, Code: -32020, Message: "x", Data: func() {}}, 400,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32020,"message":"x"}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			WriteError(rec, tc.id, tc.err)
			if rec.Code != tc.status {
				t.Errorf("status = %d, want %d", rec.Code, tc.status)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			if got := strings.TrimSpace(rec.Body.String()); got != tc.want {
				t.Errorf("body =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestWriteRPCResult(t *testing.T) {
	t.Run("result body/200 application/json with id", func(t *testing.T) {
		rec := httptest.NewRecorder()
		WriteResult(rec, json.RawMessage(`"a"`), map[string]any{"resultType": "complete", "tools": []any{}})
		if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("status %d, Content-Type %q", rec.Code, rec.Header().Get("Content-Type"))
		}
		want := `{"jsonrpc":"2.0","id":"a","result":{"resultType":"complete","tools":[]}}`
		if got := strings.TrimSpace(rec.Body.String()); got != want {
			t.Errorf("body = %s, want %s", got, want)
		}
	})
	t.Run("result body/unencodable result is -32603", func(t *testing.T) {
		rec := httptest.NewRecorder()
		WriteResult(rec, json.RawMessage(`7`), map[string]any{"f": func() {}})
		want := `{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"internal error: the result could not be encoded"}}`
		if got := strings.TrimSpace(rec.Body.String()); got != want || rec.Code != 200 {
			t.Errorf("status %d body %s, want 200 %s", rec.Code, got, want)
		}
	})
}

// mcpTestHandler is a minimal /mcp handler built on the envelope layer.
func mcpTestHandler(seen chan<- http.Header) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen != nil {
			seen <- r.Header.Clone()
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		req, notification, rerr := Decode(r.Header, body, testMethods, nil)
		switch {
		case rerr != nil:
			WriteError(w, req.ID, rerr)
		case notification:
			w.WriteHeader(http.StatusAccepted)
		default:
			WriteResult(w, req.ID, map[string]any{"resultType": "complete", "method": req.Method})
		}
	})
}

// rawPOST writes one HTTP/1.1 request byte for byte (so header white space is
// really on the wire) and returns the response.
func rawPOST(t *testing.T, addr string, headerLines []string, body string) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	var b strings.Builder
	b.WriteString("POST /mcp HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nConnection: close\r\n")
	for _, l := range headerLines {
		b.WriteString(l + "\r\n")
	}
	fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n%s", len(body), body)
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, rb
}

func TestMCPEnvelopeOverHTTP(t *testing.T) {
	seen := make(chan http.Header, 1)
	srv := httptest.NewServer(mcpTestHandler(seen))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("test server on %s, want 127.0.0.1", addr)
	}
	callBody := rpc("7", "tools/call", `"name":"lookup","arguments":{},`+metaOK)

	t.Run("over HTTP/padded headers arrive trimmed and are accepted", func(t *testing.T) {
		resp, body := rawPOST(t, addr, []string{
			"mcp-protocol-version:  \t2026-07-28\t ",
			"MCP-METHOD: \ttools/call  ",
			"mcp-name:    lookup  \t",
		}, callBody)
		h := <-seen
		if got := h.Get("Mcp-Name"); got != "lookup" {
			t.Errorf("net/http delivered Mcp-Name %q, want it trimmed to %q", got, "lookup")
		}
		if got := h.Get("Mcp-Method"); got != "tools/call" {
			t.Errorf("net/http delivered Mcp-Method %q", got)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("status %d body %s", resp.StatusCode, body)
		}
		want := `{"jsonrpc":"2.0","id":7,"result":{"method":"tools/call","resultType":"complete"}}`
		if got := strings.TrimSpace(string(body)); got != want {
			t.Errorf("body = %s, want %s", got, want)
		}
	})

	t.Run("over HTTP/mismatched Mcp-Name is a 400 application/json error echoing the id", func(t *testing.T) {
		resp, body := rawPOST(t, addr, []string{
			"MCP-Protocol-Version: 2026-07-28",
			"Mcp-Method: tools/call",
			"Mcp-Name:   other  ",
		}, callBody)
		<-seen
		if resp.StatusCode != 400 {
			t.Errorf("status = %d, want 400", resp.StatusCode)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type = %q, want application/json", ct)
		}
		want := `{"jsonrpc":"2.0","id":7,"error":{"code":-32020,"message":"header mismatch: Mcp-Name header does not match params.name"}}`
		if got := strings.TrimSpace(string(body)); got != want {
			t.Errorf("body = %s, want %s", got, want)
		}
	})

	t.Run("over HTTP/parse error omits the id", func(t *testing.T) {
		resp, body := rawPOST(t, addr, []string{"MCP-Protocol-Version: 2026-07-28"}, `{"id":7,`)
		<-seen
		if resp.StatusCode != 400 || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("status %d Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(body, &top); err != nil {
			t.Fatal(err)
		}
		if _, ok := top["id"]; ok {
			t.Errorf("id present in %s", body)
		}
	})

	t.Run("over HTTP/notification is 202 with no body", func(t *testing.T) {
		resp, body := rawPOST(t, addr, nil, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`)
		<-seen
		if resp.StatusCode != 202 || len(body) != 0 {
			t.Errorf("status %d body %q, want 202 and no body", resp.StatusCode, body)
		}
	})

	t.Run("over HTTP/unknown method is 404", func(t *testing.T) {
		resp, body := rawPOST(t, addr, []string{"MCP-Protocol-Version: 2026-07-28", "Mcp-Method: tasks/result"},
			rpc(`"r1"`, "tasks/result", `"taskId":"t1",`+metaOK))
		<-seen
		want := `{"jsonrpc":"2.0","id":"r1","error":{"code":-32601,"message":"method not found","data":{"method":"tasks/result"}}}`
		if resp.StatusCode != 404 || strings.TrimSpace(string(body)) != want {
			t.Errorf("status %d body %s, want 404 %s", resp.StatusCode, body, want)
		}
	})
}

// manyParams is n members "p0":0 … each followed by a comma.
func manyParams(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `"p%d":%d,`, i, i)
	}
	return b.String()
}
