package roomtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/commonroom/ce/internal/mcptest"
)

// MCPResponse is one answer on /mcp (a JSON-RPC answer, a refused stream, or
// an HTTP failure), decoded once: the body as it came, its members, and the
// JSON-RPC envelope typed.
type MCPResponse struct {
	Status int
	Header http.Header
	Raw    []byte
	Top    map[string]json.RawMessage // nil when the body is not a JSON object
	Body   map[string]any             // the same, decoded
	ID     json.RawMessage            // the answer's id as sent
	Result map[string]any             // nil when the answer carries none
	Error  *mcptest.RPCError          // nil when the answer carries none
}

// MCP speaks MCP on the ingress listener as one session, and checks the
// rules every answer must keep (a JSON error body, resultType, _meta on
// every result, the id echoed with its JSON type).
type MCP struct {
	h  *Harness
	mc *mcptest.Client
}

// MCP is a client on the ingress listener for token ("" = none), declaring
// the Tasks extension when tasks is set.
func (h *Harness) MCP(token string, tasks bool) *MCP {
	return &MCP{h: h, mc: mcptest.New(h.client, h.IngressURL("/mcp"), token, tasks, "")}
}

// WithTasks is the same session declaring (or not) the Tasks extension.
func (c *MCP) WithTasks(on bool) *MCP { return &MCP{h: c.h, mc: c.mc.WithTasks(on)} }

// Client is the underlying mcptest client, for requests that must not be
// checked (a test of what a malformed exchange does).
func (c *MCP) Client() *mcptest.Client { return c.mc }

// Do sends q and decodes the answer, checking the rules for every answer.
func (c *MCP) Do(t testing.TB, q mcptest.Request) MCPResponse {
	t.Helper()
	r, err := c.mc.Do(context.Background(), q)
	if err != nil {
		t.Fatalf("%s %s: %v", q.HTTPMethod, q.Method, err)
	}
	c.h.NoteError(r)
	out := DecodeMCP(t, r.Status, r.Header, r.Raw)

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
			if name, _ := JSONAt(res, "_meta", mcptest.MetaServerInfo, "name").(string); name == "" {
				t.Errorf("%s: result without _meta[%q] (on every result): %.300s", q.Method, mcptest.MetaServerInfo, out.Raw)
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

// DecodeMCP decodes an answer body when it is a JSON object.
func DecodeMCP(t testing.TB, status int, h http.Header, body []byte) MCPResponse {
	t.Helper()
	out := MCPResponse{Status: status, Header: h, Raw: body}
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

// Call sends method with params the conforming way.
func (c *MCP) Call(t testing.TB, method string, params map[string]any) MCPResponse {
	t.Helper()
	return c.Do(t, mcptest.Request{Method: method, Params: params})
}

// OK sends method and requires HTTP 200 with a result.
func (c *MCP) OK(t testing.TB, method string, params map[string]any) map[string]any {
	t.Helper()
	return WantResult(t, c.Call(t, method, params))
}

// Tool calls a tool; args nil sends no arguments member. It returns the result.
func (c *MCP) Tool(t testing.TB, name string, args map[string]any) map[string]any {
	t.Helper()
	params := map[string]any{"name": name}
	if args != nil {
		params["arguments"] = args
	}
	return WantResult(t, c.Call(t, "tools/call", params))
}

// ToolOK calls a tool that must succeed and returns its structuredContent.
// The text block must hold the same JSON.
func (c *MCP) ToolOK(t testing.TB, name string, args map[string]any) map[string]any {
	t.Helper()
	res := c.Tool(t, name, args)
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
	CheckTextBlock(t, name, res, sc)
	return sc
}

// ToolErr calls a tool that must fail as a tool (isError) with Commonroom
// error code want, and returns structuredContent.
func (c *MCP) ToolErr(t testing.TB, name string, args map[string]any, want string) map[string]any {
	t.Helper()
	return WantToolError(t, name, c.Tool(t, name, args), want)
}

// WantToolError checks a tool result that is a refusal with code want
// (isError, structuredContent.error, a message, the text block) and returns
// structuredContent.
func WantToolError(t testing.TB, name string, res map[string]any, want string) map[string]any {
	t.Helper()
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
	CheckTextBlock(t, name, res, sc)
	return sc
}

// WantResult requires HTTP 200 with a JSON-RPC result and returns it.
func WantResult(t testing.TB, r MCPResponse) map[string]any {
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

// WantRPCError requires the status and JSON-RPC error code and returns the
// error object. The error must have a message.
func WantRPCError(t testing.TB, r MCPResponse, status, code int) map[string]any {
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

// CheckTextBlock: content holds one text block whose text is the
// structuredContent as JSON (what a client without structured output reads).
func CheckTextBlock(t testing.TB, name string, res, sc map[string]any) {
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

// JSONAt walks a decoded JSON value by keys; nil when a step is missing.
func JSONAt(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}
