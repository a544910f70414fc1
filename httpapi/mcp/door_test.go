package mcp_test

// POST /mcp through the real server: the validation order of spec §1.6 with
// every error code and status, authentication, discovery and caching hints,
// the tool catalog (each tool called for real), domain errors as isError
// results, the compatibility table of the brief, idempotent creation, and
// resources and prompts.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/commonroom/ce/httpapi/skill"
	"github.com/commonroom/ce/internal/mcptest"
	"github.com/commonroom/ce/internal/roomtest"
	"github.com/commonroom/ce/internal/roomtest/apitest"
)

// tasksCaps is the ClientCapabilities object declaring the Tasks extension.
func tasksCaps() map[string]any {
	return map[string]any{"extensions": map[string]any{mcptest.TasksExtension: map[string]any{}}}
}

// wantMissingTasks checks a 400 -32021 naming the Tasks extension exactly.
func wantMissingTasks(t testing.TB, r roomtest.MCPResponse) {
	t.Helper()
	e := roomtest.WantRPCError(t, r, http.StatusBadRequest, mcptest.CodeMissingCapability)
	want := map[string]any{"requiredCapabilities": roomtest.Generic(t, tasksCaps())}
	if !reflect.DeepEqual(e["data"], any(want)) {
		t.Errorf("data = %v, want %v", e["data"], want)
	}
}

func TestMCPValidationOrder(t *testing.T) {
	h := apitest.New(t, roomtest.Options{}, nil)
	owner := h.Join("owner", "read", "propose")
	taskID, _ := owner.MCP.CreateTask(t, map[string]any{"summary": "a task for the header checks"})
	doc := h.Eng.DocumentURI()
	b64 := func(s string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=" }
	extMeta := mcptest.Meta(mcptest.Version, tasksCaps(), "ce-tests")

	type vcase struct {
		name   string
		req    mcptest.Request
		ext    bool // declare the Tasks extension
		status int
		code   int  // 0: a result is expected
		noID   bool // the answer must not carry an id (it could not be read)
		check  func(t *testing.T, r roomtest.MCPResponse)
	}
	cases := []vcase{
		// Step 1: Host / Origin.
		{name: "evil Host is 403", req: mcptest.Request{Method: "server/discover", Opts: []mcptest.ReqOpt{mcptest.WithHost("evil.example.com")}}, status: 403},
		{name: "evil Host and Origin is 403", req: mcptest.Request{Method: "server/discover",
			Set: map[string]string{"Origin": "http://evil.example.com"}, Opts: []mcptest.ReqOpt{mcptest.WithHost("evil.example.com")}}, status: 403},
		{name: "evil Origin on a loopback Host is 403", req: mcptest.Request{Method: "tools/list", Set: map[string]string{"Origin": "http://evil.example.com"}}, status: 403},
		// Step 2: POST only.
		{name: "GET without Accept text/event-stream is 405", req: mcptest.Request{HTTPMethod: "GET", Set: map[string]string{"Accept": "application/json"}},
			status: 405, check: wantAllowPOST},
		{name: "DELETE is 405", req: mcptest.Request{HTTPMethod: "DELETE"}, status: 405, check: wantAllowPOST},
		// Step 3: parse.
		{name: "not JSON is 400 -32700 without id", req: mcptest.Request{Method: "tools/list", Raw: `{"jsonrpc":"2.0","id":7,"method":"tools/list"`},
			status: 400, code: mcptest.CodeParseError, noID: true},
		{name: "trailing garbage is 400 -32700 without id", req: mcptest.Request{Method: "tools/list", Raw: `{"jsonrpc":"2.0","id":7,"method":"tools/list"} x`},
			status: 400, code: mcptest.CodeParseError, noID: true},
		{name: "batch array is 400 -32600 without id", req: mcptest.Request{Method: "tools/list",
			Raw: `[{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}]`},
			status: 400, code: mcptest.CodeInvalidRequest, noID: true},
		{name: "id null is 400 -32600 without id", req: mcptest.Request{Method: "tools/list",
			Raw: `{"jsonrpc":"2.0","id":null,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`},
			status: 400, code: mcptest.CodeInvalidRequest, noID: true},
		{name: "response object is 400 -32600 echoing a number id", req: mcptest.Request{Raw: `{"jsonrpc":"2.0","id":5,"result":{"resultType":"complete"}}`},
			status: 400, code: mcptest.CodeInvalidRequest, check: wantRawID(`5`)},
		{name: "error object is 400 -32600 echoing a string id", req: mcptest.Request{Raw: `{"jsonrpc":"2.0","id":"r-5","error":{"code":1,"message":"x"}}`},
			status: 400, code: mcptest.CodeInvalidRequest, check: wantRawID(`"r-5"`)},
		{name: "params array is 400 -32600 echoing the id", req: mcptest.Request{Method: "tools/list", Raw: `{"jsonrpc":"2.0","id":9,"method":"tools/list","params":[1]}`},
			status: 400, code: mcptest.CodeInvalidRequest, check: wantRawID(`9`)},
		{name: "params string is 400 -32600 echoing the id", req: mcptest.Request{Method: "tools/list", Raw: `{"jsonrpc":"2.0","id":"p","method":"tools/list","params":"x"}`},
			status: 400, code: mcptest.CodeInvalidRequest, check: wantRawID(`"p"`)},
		{name: "jsonrpc 1.0 is 400 -32600 echoing the id", req: mcptest.Request{Method: "tools/list", Raw: `{"jsonrpc":"1.0","id":10,"method":"tools/list","params":{}}`},
			status: 400, code: mcptest.CodeInvalidRequest, check: wantRawID(`10`)},
		// Step 4: notifications.
		{name: "notification is 202 with no body", req: mcptest.Request{ID: mcptest.NoID, Method: "notifications/progress"}, status: 202, check: wantEmpty},
		{name: "notification without MCP headers is 202", req: mcptest.Request{ID: mcptest.NoID, Method: "notifications/cancelled",
			Params: map[string]any{"requestId": 1}, Del: []string{"MCP-Protocol-Version", "Mcp-Method"}}, status: 202, check: wantEmpty},
		// Step 5: the version header.
		{name: "missing MCP-Protocol-Version is 400 -32020", req: mcptest.Request{Method: "tools/list", Del: []string{"MCP-Protocol-Version"}},
			status: 400, code: mcptest.CodeHeaderMismatch},
		// Step 6: _meta.
		{name: "missing _meta is 400 -32602", req: mcptest.Request{Method: "tools/list", Meta: mcptest.DropMeta}, status: 400, code: mcptest.CodeInvalidParams},
		{name: "missing _meta on server/discover is 400 -32602", req: mcptest.Request{Method: "server/discover", Meta: mcptest.DropMeta, NoAuth: true}, status: 400, code: mcptest.CodeInvalidParams},
		{name: "missing protocolVersion is 400 -32602", req: mcptest.Request{Method: "tools/list", Meta: map[string]any{mcptest.MetaCaps: map[string]any{}}},
			status: 400, code: mcptest.CodeInvalidParams},
		{name: "missing clientCapabilities is 400 -32602", req: mcptest.Request{Method: "tools/list", Meta: map[string]any{mcptest.MetaVersion: mcptest.Version}},
			status: 400, code: mcptest.CodeInvalidParams},
		{name: "missing clientInfo is accepted", req: mcptest.Request{Method: "tools/list",
			Meta: map[string]any{mcptest.MetaVersion: mcptest.Version, mcptest.MetaCaps: map[string]any{}}}, status: 200},
		// Step 7: header and _meta versions agree before the support check.
		{name: "header 2026-07-28 with _meta v999.0.0 is 400 -32020", req: mcptest.Request{Method: "tools/list",
			Meta: mcptest.Meta("v999.0.0", map[string]any{}, "ce-tests")}, status: 400, code: mcptest.CodeHeaderMismatch},
		{name: "header 2025-11-25 with _meta 2026-07-28 is 400 -32020", req: mcptest.Request{Method: "tools/list",
			Set: map[string]string{"MCP-Protocol-Version": "2025-11-25"}, Meta: mcptest.Meta(mcptest.Version, map[string]any{}, "ce-tests")}, status: 400, code: mcptest.CodeHeaderMismatch},
		// Step 8: Mcp-Method.
		{name: "missing Mcp-Method is 400 -32020", req: mcptest.Request{Method: "tools/list", Del: []string{"Mcp-Method"}}, status: 400, code: mcptest.CodeHeaderMismatch},
		{name: "different Mcp-Method is 400 -32020", req: mcptest.Request{Method: "tools/list", Set: map[string]string{"Mcp-Method": "prompts/list"}},
			status: 400, code: mcptest.CodeHeaderMismatch},
		{name: "Mcp-Method in another case is 400 -32020", req: mcptest.Request{Method: "tools/list", Set: map[string]string{"Mcp-Method": "TOOLS/LIST"}},
			status: 400, code: mcptest.CodeHeaderMismatch},
		{name: "lower-case header names are accepted", req: mcptest.Request{Method: "tools/list", Opts: []mcptest.ReqOpt{func(r *http.Request) {
			for _, k := range []string{"MCP-Protocol-Version", "Mcp-Method"} {
				v := r.Header.Get(k)
				r.Header.Del(k)
				r.Header[strings.ToLower(k)] = []string{v}
			}
		}}}, status: 200},
		// Step 9: the version we serve.
		{name: "v999.0.0 on header and _meta is 400 -32022", req: mcptest.Request{Method: "tools/list", Version: "v999.0.0"},
			status: 400, code: mcptest.CodeUnsupportedVersion, check: wantUnsupported("v999.0.0")},
		{name: "v999.0.0 on server/discover without a session is 400 -32022", req: mcptest.Request{Method: "server/discover", Version: "v999.0.0", NoAuth: true},
			status: 400, code: mcptest.CodeUnsupportedVersion, check: wantUnsupported("v999.0.0")},
		// Step 10: methods we do not serve.
		{name: "tasks/result without Mcp-Name is 404 -32601", req: mcptest.Request{Method: "tasks/result", Params: map[string]any{"taskId": taskID}},
			ext: true, status: 404, code: mcptest.CodeMethodNotFound},
		// Step 12: the Tasks gate, before any lookup.
		{name: "listen for taskIds without the extension is 400 -32021", req: mcptest.Request{Method: "subscriptions/listen", Timeout: 5 * time.Second,
			Params: map[string]any{"notifications": map[string]any{"taskIds": []string{taskID}}}}, status: 400, code: mcptest.CodeMissingCapability, check: wantTasksData},
		{name: "listen for an unknown taskId without the extension is 400 -32021", req: mcptest.Request{Method: "subscriptions/listen", Timeout: 5 * time.Second,
			Params: map[string]any{"notifications": map[string]any{"taskIds": []string{"gate-test"}}}}, status: 400, code: mcptest.CodeMissingCapability, check: wantTasksData},
	}
	for _, m := range []string{"initialize", "ping", "logging/setLevel", "tasks/list", "unknown/method", "resources/unsubscribe/all"} {
		cases = append(cases, vcase{name: m + " is 404 -32601", req: mcptest.Request{Method: m}, status: 404, code: mcptest.CodeMethodNotFound})
	}
	for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		cases = append(cases,
			vcase{name: m + " without the extension is 400 -32021", req: mcptest.Request{Method: m, Params: map[string]any{"taskId": taskID}},
				status: 400, code: mcptest.CodeMissingCapability, check: wantTasksData},
			vcase{name: m + " on an unknown task without the extension is still 400 -32021", req: mcptest.Request{Method: m, Params: map[string]any{"taskId": "gate-test"}},
				status: 400, code: mcptest.CodeMissingCapability, check: wantTasksData},
		)
	}

	// Mcp-Name on every name-bearing method.
	named := []struct {
		method, field, value string
		ext                  bool
		params               map[string]any
	}{
		{"tools/call", "name", "workspace_status", false, map[string]any{"arguments": map[string]any{}}},
		{"resources/read", "uri", doc, false, nil},
		{"prompts/get", "name", "commonroom_handoff_workflow", false, nil},
		{"tasks/get", "taskId", taskID, true, nil},
	}
	for _, n := range named {
		params := map[string]any{n.field: n.value}
		for k, v := range n.params {
			params[k] = v
		}
		var meta any
		if n.ext {
			meta = extMeta
		}
		add := func(name string, set map[string]string, del []string, status, code int) {
			cases = append(cases, vcase{name: n.method + ": " + name, ext: n.ext,
				req: mcptest.Request{Method: n.method, Params: params, Set: set, Del: del, Meta: meta}, status: status, code: code})
		}
		add("Mcp-Name equal is accepted", nil, nil, 200, 0)
		add("missing Mcp-Name is 400 -32020", nil, []string{"Mcp-Name"}, 400, mcptest.CodeHeaderMismatch)
		add("different Mcp-Name is 400 -32020", map[string]string{"Mcp-Name": n.value + "x"}, nil, 400, mcptest.CodeHeaderMismatch)
		add("Base64 sentinel of the value is accepted", map[string]string{"Mcp-Name": b64(n.value)}, nil, 200, 0)
		add("Base64 sentinel of another value is 400 -32020", map[string]string{"Mcp-Name": b64(n.value + "x")}, nil, 400, mcptest.CodeHeaderMismatch)
		add("invalid Base64 inside the sentinel is 400 -32020", map[string]string{"Mcp-Name": "=?base64?SGVsbG8?="}, nil, 400, mcptest.CodeHeaderMismatch)
		add("upper-case sentinel markers are literal (400 -32020)",
			map[string]string{"Mcp-Name": "=?BASE64?" + base64.StdEncoding.EncodeToString([]byte(n.value)) + "?="}, nil, 400, mcptest.CodeHeaderMismatch)
	}

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			client := owner.MCP.WithTasks(c.ext)
			ids := []any{nil}
			if c.req.ID == nil && c.req.Raw == nil && c.req.HTTPMethod == "" {
				ids = []any{int64(41), "req-41"} // echoed with the same JSON type
			}
			for _, id := range ids {
				q := c.req
				if id != nil {
					q.ID = id
				}
				r := client.Do(t, q)
				if c.code != 0 {
					roomtest.WantRPCError(t, r, c.status, c.code)
					if c.noID {
						if raw, has := r.Top["id"]; has {
							t.Errorf("the id could not be read, yet the answer has id %s", raw)
						}
					}
				} else if r.Status != c.status {
					t.Fatalf("status %d, want %d; body %s", r.Status, c.status, r.Raw)
				} else if c.status == 200 {
					roomtest.WantResult(t, r)
				}
				if c.check != nil {
					c.check(t, r)
				}
			}
		})
	}

	// Go's client trims header values before sending them; the padding test
	// goes over a raw connection so the server really sees the spaces.
	for _, n := range named {
		t.Run(n.method+": padded Mcp-Name over the wire is trimmed and accepted", func(t *testing.T) {
			params := map[string]any{n.field: n.value}
			for k, v := range n.params {
				params[k] = v
			}
			if n.ext {
				params["_meta"] = extMeta
			} else {
				params["_meta"] = mcptest.Meta(mcptest.Version, map[string]any{}, "ce-tests")
			}
			body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "pad", "method": n.method, "params": params})
			r := rawPOST(t, hostPort(h.Ingress.URL), []string{
				"Authorization: Bearer " + owner.SessionToken,
				"mcp-protocol-version: \t2026-07-28 ",
				"MCP-METHOD:  " + n.method + "\t",
				"Mcp-Name:    " + n.value + "  \t",
			}, body)
			res := roomtest.WantResult(t, r)
			if string(r.Top["id"]) != `"pad"` {
				t.Errorf("id = %s", r.Top["id"])
			}
			if res["isError"] == true {
				t.Errorf("padded Mcp-Name gave an error result: %v", res)
			}
		})
	}

	t.Run("large, negative and odd ids are echoed byte for byte", func(t *testing.T) {
		for _, id := range []string{`9007199254740993`, `-1`, `0`, `"caf\u00e9 <&>"`, `""`} {
			ok := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
			bad := `{"jsonrpc":"2.0","id":` + id + `,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
			r := owner.MCP.Do(t, mcptest.Request{Method: "tools/list", Raw: ok})
			roomtest.WantResult(t, r)
			wantRawID(id)(t, r)
			r = owner.MCP.Do(t, mcptest.Request{Method: "ping", Raw: bad})
			roomtest.WantRPCError(t, r, http.StatusNotFound, mcptest.CodeMethodNotFound)
			wantRawID(id)(t, r)
		}
	})
	t.Run("a good request still works after all of the above", func(t *testing.T) {
		owner.MCP.OK(t, "tools/list", nil)
	})
}

func wantAllowPOST(t *testing.T, r roomtest.MCPResponse) {
	t.Helper()
	if allow := r.Header.Get("Allow"); !strings.Contains(allow, "POST") {
		t.Errorf("Allow = %q, want it to name POST", allow)
	}
}

func wantEmpty(t *testing.T, r roomtest.MCPResponse) {
	t.Helper()
	if len(strings.TrimSpace(string(r.Raw))) != 0 {
		t.Errorf("body = %q, want none", r.Raw)
	}
}

func wantRawID(want string) func(t *testing.T, r roomtest.MCPResponse) {
	return func(t *testing.T, r roomtest.MCPResponse) {
		t.Helper()
		if got := string(r.Top["id"]); got != want {
			t.Errorf("id = %s, want %s (same JSON type)", got, want)
		}
	}
}

func wantUnsupported(requested string) func(t *testing.T, r roomtest.MCPResponse) {
	return func(t *testing.T, r roomtest.MCPResponse) {
		t.Helper()
		data, _ := roomtest.JSONAt(r.Body, "error", "data").(map[string]any)
		if got := roomtest.StringsOf(data["supported"]); !slices.Equal(got, []string{mcptest.Version}) {
			t.Errorf("data.supported = %v, want [%s]", data["supported"], mcptest.Version)
		}
		if data["requested"] != requested {
			t.Errorf("data.requested = %v, want %q", data["requested"], requested)
		}
	}
}

func wantTasksData(t *testing.T, r roomtest.MCPResponse) {
	t.Helper()
	wantMissingTasks(t, r)
}

// protocolMethods are the methods that need a session, with params that
// would be acceptable to them.
func protocolMethods(doc string) []mcptest.Request {
	task := map[string]any{"taskId": "task_0000000000000000"}
	return []mcptest.Request{
		{Method: "tools/list"},
		{Method: "tools/call", Params: map[string]any{"name": "workspace_status", "arguments": map[string]any{}}},
		{Method: "resources/list"},
		{Method: "resources/templates/list"},
		{Method: "resources/read", Params: map[string]any{"uri": doc}},
		{Method: "resources/subscribe", Params: map[string]any{"uri": doc}},
		{Method: "resources/unsubscribe", Params: map[string]any{"uri": doc}},
		{Method: "prompts/list"},
		{Method: "prompts/get", Params: map[string]any{"name": "commonroom_edit_workflow"}},
		{Method: "subscriptions/listen", Params: map[string]any{"notifications": map[string]any{"resourceSubscriptions": []string{doc}}}, Timeout: 5 * time.Second},
		{Method: "tasks/get", Params: task},
		{Method: "tasks/update", Params: map[string]any{"taskId": task["taskId"], "inputResponses": map[string]any{}}},
		{Method: "tasks/cancel", Params: task},
	}
}

func TestMCPAuth(t *testing.T) {
	h := apitest.New(t, roomtest.Options{}, nil)
	doc := h.Eng.DocumentURI()

	// A session that then expires: past its 8 h, swept.
	expired := h.Join("soon-gone", "read", "propose")
	h.Clock.Advance(9 * time.Hour)
	h.Sweep()

	// The owner page cookie, exchanged for a one-time key on the owner listener.
	key := h.API.NewPageKey()
	page := h.Do(t, "GET", h.OwnerURL("/?key="+key), "", nil)
	var cookie *http.Cookie
	for _, ck := range (&http.Response{Header: page.Header}).Cookies() {
		if ck.Name == ownerCookie(h) {
			cookie = ck
		}
	}
	if cookie == nil {
		t.Fatalf("the page key exchange set no owner cookie: %d %v", page.Status, page.Header)
	}
	live := h.Join("live", "read", "propose")

	creds := []struct {
		name, token string
		owner       bool // send to the owner listener
		opts        []mcptest.ReqOpt
		kind        string
	}{
		{name: "no bearer", kind: "unauthorized"},
		{name: "garbage bearer", token: "ses_not-a-real-session-token", kind: "unauthorized"},
		{name: "expired session", token: expired.SessionToken, kind: "session_expired"},
		{name: "operator token on the owner listener", token: h.OpToken, owner: true, kind: "unauthorized"},
		{name: "operator token on the ingress listener", token: h.OpToken, kind: "unauthorized"},
		{name: "owner page cookie", owner: true, kind: "unauthorized",
			opts: []mcptest.ReqOpt{mcptest.WithCookie(&http.Cookie{Name: ownerCookie(h), Value: cookie.Value})}},
	}
	for _, cr := range creds {
		for _, m := range protocolMethods(doc) {
			t.Run(cr.name+"/"+m.Method+" is 401", func(t *testing.T) {
				q := m
				q.NoAuth = cr.token == ""
				q.Token = cr.token
				q.Opts = cr.opts
				if cr.owner {
					q.URL = h.OwnerURL("/mcp")
				}
				client := live.MCP.WithTasks(strings.HasPrefix(m.Method, "tasks/"))
				for _, id := range []any{int64(77), "auth-77"} {
					q.ID = id
					r := client.Do(t, q)
					e := roomtest.WantRPCError(t, r, http.StatusUnauthorized, mcptest.CodeUnauthorized)
					if got := r.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
						t.Errorf("WWW-Authenticate = %q, want a Bearer challenge", got)
					}
					if got := roomtest.JSONAt(e, "data", "error"); got != cr.kind {
						t.Errorf("data.error = %v, want %q", got, cr.kind)
					}
				}
			})
		}
	}

	t.Run("server/discover needs no session", func(t *testing.T) {
		c := h.MCP("", false)
		res := roomtest.WantResult(t, c.Do(t, mcptest.Request{Method: "server/discover", NoAuth: true}))
		if res["supportedVersions"] == nil {
			t.Errorf("no supportedVersions: %v", res)
		}
	})
	t.Run("server/discover with a garbage bearer still works", func(t *testing.T) {
		c := h.MCP("garbage", false)
		roomtest.WantResult(t, c.Do(t, mcptest.Request{Method: "server/discover"}))
	})
	t.Run("the live session is accepted on every method that needs one", func(t *testing.T) {
		for _, m := range protocolMethods(doc) {
			if m.Method == "subscriptions/listen" {
				continue // a stream: its own tests cover it
			}
			q := m
			r := live.MCP.WithTasks(strings.HasPrefix(m.Method, "tasks/")).Do(t, q)
			if r.Status == http.StatusUnauthorized {
				t.Errorf("%s: a live session was refused: %s", m.Method, r.Raw)
			}
		}
	})
}

func TestMCPDiscover(t *testing.T) {
	h := apitest.New(t, roomtest.Options{}, nil)
	reader := h.Join("reader", "read")
	res := roomtest.WantResult(t, h.MCP("", false).Do(t, mcptest.Request{Method: "server/discover", NoAuth: true}))

	t.Run("supportedVersions is exactly 2026-07-28", func(t *testing.T) {
		if got := roomtest.StringsOf(res["supportedVersions"]); !slices.Equal(got, []string{mcptest.Version}) {
			t.Errorf("supportedVersions = %v", res["supportedVersions"])
		}
	})
	t.Run("capabilities are tools, resources with subscribe, prompts and the tasks extension as {}", func(t *testing.T) {
		want := map[string]any{
			"tools":      map[string]any{},
			"resources":  map[string]any{"subscribe": true},
			"prompts":    map[string]any{},
			"extensions": map[string]any{mcptest.TasksExtension: map[string]any{}},
		}
		if !reflect.DeepEqual(res["capabilities"], any(want)) {
			t.Errorf("capabilities = %v, want %v", res["capabilities"], want)
		}
		if _, v1 := roomtest.JSONAt(res, "capabilities").(map[string]any)["tasks"]; v1 {
			t.Errorf("a v1-style capabilities.tasks is advertised")
		}
	})
	t.Run("no listChanged anywhere", func(t *testing.T) {
		if roomtest.HasKey(res, "listChanged") {
			t.Errorf("listChanged advertised: %v", res)
		}
	})
	t.Run("serverInfo in result _meta", func(t *testing.T) {
		info, _ := roomtest.JSONAt(res, "_meta", mcptest.MetaServerInfo).(map[string]any)
		if name, _ := info["name"].(string); name == "" {
			t.Errorf("serverInfo.name missing: %v", res["_meta"])
		}
		if v, _ := info["version"].(string); v == "" {
			t.Errorf("serverInfo.version missing: %v", res["_meta"])
		}
		if _, body := res["serverInfo"]; body {
			t.Errorf("serverInfo in the result body (removed in 2026-07-28)")
		}
	})
	t.Run("discover carries caching hints", func(t *testing.T) { roomtest.WantCaching(t, res) })

	doc := h.Eng.DocumentURI()
	for _, m := range []mcptest.Request{
		{Method: "tools/list"}, {Method: "prompts/list"}, {Method: "resources/list"},
		{Method: "resources/templates/list"}, {Method: "resources/read", Params: map[string]any{"uri": doc}},
	} {
		t.Run(m.Method+" carries caching hints and resultType complete", func(t *testing.T) {
			res := roomtest.WantResult(t, reader.MCP.Do(t, m))
			if res["resultType"] != "complete" {
				t.Errorf("resultType = %v", res["resultType"])
			}
			roomtest.WantCaching(t, res)
		})
	}
}

// TestMCPToolsCatalog: every tool tools/list gives is well formed, the list
// is the operations table's tools in its order, and it is the same for every
// session. (Its content is pinned by TestCatalogGolden; each tool is shown
// to work by TestFlow_EveryToolOnce.)
func TestMCPToolsCatalog(t *testing.T) {
	h := apitest.New(t, roomtest.Options{}, nil)
	owner := h.Join("owner", "read", "propose", "invite")
	worker := h.Join("worker", "read", "checkout")

	res := owner.MCP.OK(t, "tools/list", nil)
	list, _ := res["tools"].([]any)
	nameRE := regexp.MustCompile(`^[A-Za-z0-9_./-]{1,64}$`)
	var names []string
	for _, raw := range list {
		tl, _ := raw.(map[string]any)
		name, _ := tl["name"].(string)
		names = append(names, name)
		t.Run("tool "+name+" is well formed", func(t *testing.T) {
			if !nameRE.MatchString(name) {
				t.Errorf("name %q does not match %s", name, nameRE)
			}
			if d, _ := tl["description"].(string); strings.TrimSpace(d) == "" {
				t.Errorf("no description")
			}
			schema, _ := tl["inputSchema"].(map[string]any)
			if schema["type"] != "object" {
				t.Errorf("inputSchema.type = %v, want object", schema["type"])
			}
			if tl["execution"] != nil || roomtest.HasKey(tl, "taskSupport") {
				t.Errorf("a 2025-11-25 execution.taskSupport field: %v", tl)
			}
		})
	}
	t.Run("names are unique", func(t *testing.T) {
		seen := map[string]bool{}
		for _, n := range names {
			if seen[n] {
				t.Errorf("tool %q listed twice", n)
			}
			seen[n] = true
		}
	})
	t.Run("the catalog is the operations table's tools, in its order", func(t *testing.T) {
		if want := tableTools(); !slices.Equal(names, want) {
			t.Errorf("tools = %v\nwant    %v (ops.Table; the list itself is pinned in testdata/catalog_golden.txt)", names, want)
		}
	})
	t.Run("the list is the same on every call", func(t *testing.T) {
		again := worker.MCP.OK(t, "tools/list", nil)
		if !reflect.DeepEqual(again["tools"], res["tools"]) {
			t.Errorf("tools/list differs between sessions")
		}
	})

}

// TestFlow_EveryToolOnce calls every tool of the catalog for real, in one
// realistic flow through a room, and fails for a tool it did not show to
// work: a new row in the operations table is a new step here.
func TestFlow_EveryToolOnce(t *testing.T) {
	h := apitest.New(t, roomtest.Options{}, nil)
	owner := h.Join("owner", "read", "propose", "invite")
	worker := h.Join("worker", "read", "checkout")
	approver := h.Join("approver", "read", "approve")
	leaver := h.Join("leaver", "read")
	committer := h.Join("committer", "read", "commit")
	names := tableTools()

	worked := map[string]bool{}
	ok := func(c *roomtest.MCP, name string, args map[string]any) map[string]any {
		t.Helper()
		sc := c.ToolOK(t, name, args)
		worked[name] = true
		return sc
	}
	t.Run("every listed tool works", func(t *testing.T) {
		st := ok(owner.MCP, "workspace_status", nil)
		if st["workspace_id"] != h.Eng.WorkspaceID {
			t.Errorf("workspace_status workspace_id = %v, want %s", st["workspace_id"], h.Eng.WorkspaceID)
		}
		if sum := ok(owner.MCP, "workspace_summary", map[string]any{"max_lines": 5}); len(sum) == 0 {
			t.Errorf("empty summary")
		}
		regs := ok(owner.MCP, "workspace_regions", map[string]any{})
		if len(roomtest.JSONAt(regs, "regions").([]any)) != 3 {
			t.Errorf("regions = %v, want 3 headings", regs)
		}
		rd := ok(owner.MCP, "workspace_read", map[string]any{"section": "Goals"})
		if c, _ := rd["content"].(string); !strings.Contains(c, "ship it") {
			t.Errorf("workspace_read Goals = %v", rd)
		}
		hist := ok(owner.MCP, "workspace_history", map[string]any{"limit": 10})
		if len(roomtest.JSONAt(hist, "events").([]any)) == 0 {
			t.Errorf("workspace_history has no events: %v", hist)
		}
		parts := ok(owner.MCP, "workspace_participants", nil)
		if n := len(roomtest.JSONAt(parts, "participants").([]any)); n < 5 {
			t.Errorf("participants = %d, want the host and four joiners", n)
		}
		inv := ok(owner.MCP, "workspace_invite", map[string]any{"capabilities": []string{"read"}})
		if u, _ := inv["uri"].(string); !strings.HasPrefix(u, "commonroom://join/") {
			t.Errorf("workspace_invite uri = %v", inv["uri"])
		}

		created := ok(owner.MCP, "handoff_create", map[string]any{"summary": "write the risks section"})
		hid, _ := roomtest.JSONAt(created, "handoff", "handoff_id").(string)
		tid, _ := created["task_id"].(string)
		if hid == "" || tid == "" {
			t.Fatalf("handoff_create without the extension: %v", created)
		}
		if acc := ok(worker.MCP, "handoff_accept", map[string]any{"handoff_id": hid}); acc["status"] != "accepted" {
			t.Errorf("accept: %v", acc)
		}
		ok(worker.MCP, "handoff_request_input", map[string]any{"handoff_id": hid,
			"requests": []any{map[string]any{"key": "scope", "message": "How many risks?"}}})
		roomtest.WantAck(t, owner.Ext.TaskCall(t, "tasks/update", tid, map[string]any{
			"inputResponses": map[string]any{"scope": map[string]any{"action": "accept", "content": map[string]any{"answer": "three"}}}}))
		ok(worker.MCP, "handoff_request_input", map[string]any{"handoff_id": hid,
			"requests": []any{map[string]any{"key": "depth", "message": "How deep?"}}})
		ans := ok(owner.MCP, "handoff_answer", map[string]any{"handoff_id": hid,
			"input_responses": map[string]any{"depth": map[string]any{"action": "accept", "content": map[string]any{"answer": "shallow"}}}})
		if roomtest.JSONText(ans["answered_keys"]) != `["depth"]` || roomtest.JSONAt(ans, "handoff", "task_status") != "working" {
			t.Errorf("handoff_answer = %v", ans)
		}
		got := ok(worker.MCP, "handoff_get", map[string]any{"handoff_id": hid})
		if ins, _ := got["inputs"].([]any); len(ins) != 2 || roomtest.JSONAt(ins[0], "status") != "answered" || roomtest.JSONAt(ins[1], "status") != "answered" {
			t.Errorf("handoff_get inputs = %v", got["inputs"])
		}
		if done := ok(worker.MCP, "handoff_complete", map[string]any{"handoff_id": hid, "result": map[string]any{"text": "three risks"}}); done["status"] != "result_ready" {
			t.Errorf("complete: %v", done)
		}
		if ap := ok(approver.MCP, "handoff_approve", map[string]any{"handoff_id": hid, "note": "good"}); ap["status"] != "approved" {
			t.Errorf("approve: %v", ap)
		}
		evs := ok(owner.MCP, "handoff_events", map[string]any{"handoff_id": hid})
		if len(roomtest.JSONAt(evs, "events").([]any)) == 0 {
			t.Errorf("handoff_events: %v", evs)
		}
		inbox := ok(worker.MCP, "handoff_list", map[string]any{"role": "assigned_to_me"})
		if hs, _ := inbox["handoffs"].([]any); len(hs) != 1 || roomtest.JSONAt(hs[0], "handoff_id") != hid {
			t.Errorf("handoff_list: %v", inbox)
		}

		second := ok(owner.MCP, "handoff_create", map[string]any{"summary": "write the plan"})
		hid2, _ := roomtest.JSONAt(second, "handoff", "handoff_id").(string)
		ok(worker.MCP, "handoff_accept", map[string]any{"handoff_id": hid2})
		ok(worker.MCP, "handoff_complete", map[string]any{"handoff_id": hid2, "result": map[string]any{"text": "a plan"}})
		if rj := ok(approver.MCP, "handoff_reject", map[string]any{"handoff_id": hid2, "note": "too thin"}); rj["status"] != "rejected" {
			t.Errorf("reject: %v", rj)
		}
		third := ok(owner.MCP, "handoff_create", map[string]any{"summary": "write the appendix"})
		hid3, _ := roomtest.JSONAt(third, "handoff", "handoff_id").(string)
		if cn := ok(owner.MCP, "handoff_cancel", map[string]any{"handoff_id": hid3}); cn["cancelled"] != true || roomtest.JSONAt(cn, "handoff", "status") != "cancelled" {
			t.Errorf("handoff_cancel = %v", cn)
		}

		// The document: lease, propose, review, commit, and the reads of what changed.
		base := roomtest.Num(st["version"])
		lease := ok(worker.MCP, "workspace_checkout", map[string]any{"target": "Goals"})
		leaseID, _ := lease["lease_id"].(string)
		if leaseID == "" || lease["target"] != "Idea/Goals" {
			t.Fatalf("workspace_checkout = %v", lease)
		}
		if rn := ok(worker.MCP, "workspace_renew", map[string]any{"lease_id": leaseID, "minutes": 30}); rn["lease_id"] != leaseID {
			t.Errorf("workspace_renew = %v", rn)
		}
		if ls, _ := ok(owner.MCP, "workspace_leases", nil)["leases"].([]any); len(ls) != 1 || roomtest.JSONAt(ls[0], "lease_id") != leaseID {
			t.Errorf("workspace_leases = %v", ls)
		}
		prop := ok(owner.MCP, "workspace_propose", map[string]any{"target": "Goals", "base_version": base, "summary": "sharper goals",
			"change": map[string]any{"section": "Goals", "content": "## Goals\n\nship it on Friday\n\n"}})
		pid, _ := prop["proposal_id"].(string)
		if pid == "" || prop["base_is_current"] != true {
			t.Fatalf("workspace_propose = %v", prop)
		}
		if ps, _ := ok(approver.MCP, "workspace_proposals", map[string]any{"status": "pending"})["proposals"].([]any); len(ps) != 1 || roomtest.JSONAt(ps[0], "proposal_id") != pid {
			t.Errorf("workspace_proposals = %v", ps)
		}
		if one := ok(approver.MCP, "workspace_proposal", map[string]any{"proposal_id": pid}); roomtest.JSONAt(one, "change", "content") != "## Goals\n\nship it on Friday\n\n" {
			t.Errorf("workspace_proposal = %v", one)
		}
		if rv := ok(approver.MCP, "workspace_review", map[string]any{"proposal_id": pid, "approve": true}); rv["status"] != "approved" {
			t.Errorf("workspace_review = %v", rv)
		}
		if cm := ok(committer.MCP, "workspace_commit", map[string]any{"proposal_id": pid}); roomtest.Num(cm["version"]) != base+1 {
			t.Errorf("workspace_commit = %v", cm)
		}
		if df := ok(owner.MCP, "workspace_diff", map[string]any{"base_version": base}); !strings.Contains(roomtest.Str(df["diff"]), "+ship it on Friday") {
			t.Errorf("workspace_diff = %v", df)
		}
		if cs, _ := ok(owner.MCP, "workspace_changes_since", map[string]any{"version": base})["changes"].([]any); len(cs) != 1 {
			t.Errorf("workspace_changes_since = %v", cs)
		}
		if dg := ok(owner.MCP, "workspace_diagnostics", nil); roomtest.JSONAt(dg, "listener", "type") != "loopback" {
			t.Errorf("workspace_diagnostics = %v", dg)
		}
		if rl := ok(worker.MCP, "workspace_release", map[string]any{"lease_id": leaseID}); rl["status"] != "ok" {
			t.Errorf("workspace_release = %v", rl)
		}

		ok(leaver.MCP, "workspace_leave", nil)
		r := leaver.MCP.Call(t, "tools/list", nil)
		roomtest.WantRPCError(t, r, http.StatusUnauthorized, mcptest.CodeUnauthorized)
	})
	t.Run("no listed tool went uncalled", func(t *testing.T) {
		for _, n := range names {
			if !worked[n] {
				t.Errorf("tool %q is listed but was not shown to work", n)
			}
		}
	})
}

func TestMCPDomainErrors(t *testing.T) {
	h := apitest.New(t, roomtest.Options{}, nil)
	owner := h.Join("owner", "read", "propose")
	worker := h.Join("worker", "read", "checkout", "approve")

	t.Run("unknown handoff id is isError handoff_not_found", func(t *testing.T) {
		before := h.Snapshot()
		sc := worker.MCP.ToolErr(t, "handoff_get", map[string]any{"handoff_id": "handoff_0000000000000000"}, "handoff_not_found")
		if sc["handoff_id"] != "handoff_0000000000000000" {
			t.Errorf("handoff_id recovery field = %v", sc["handoff_id"])
		}
		worker.MCP.ToolErr(t, "handoff_accept", map[string]any{"handoff_id": "handoff_0000000000000000"}, "handoff_not_found")
		h.AssertUnchanged(t, before)
	})
	t.Run("approving as the assignee is isError permission_denied", func(t *testing.T) {
		created := owner.MCP.ToolOK(t, "handoff_create", map[string]any{"summary": "check the goals"})
		hid, _ := roomtest.JSONAt(created, "handoff", "handoff_id").(string)
		worker.MCP.ToolOK(t, "handoff_accept", map[string]any{"handoff_id": hid})
		worker.MCP.ToolOK(t, "handoff_complete", map[string]any{"handoff_id": hid, "result": map[string]any{"text": "checked"}})
		before := h.Snapshot()
		sc := worker.MCP.ToolErr(t, "handoff_approve", map[string]any{"handoff_id": hid}, "permission_denied")
		if sc["handoff_id"] != hid {
			t.Errorf("handoff_id = %v, want %s", sc["handoff_id"], hid)
		}
		worker.MCP.ToolErr(t, "handoff_reject", map[string]any{"handoff_id": hid}, "permission_denied")
		h.AssertUnchanged(t, before)
		if s := h.Status(t, "handoff", hid); s != "result_ready" {
			t.Errorf("handoff status = %s, want result_ready", s)
		}
	})
	t.Run("a number for handoff_id is isError invalid_request naming the field", func(t *testing.T) {
		sc := worker.MCP.ToolErr(t, "handoff_get", map[string]any{"handoff_id": 5}, "invalid_request")
		if sc["field"] != "handoff_id" {
			t.Errorf("field = %v, want handoff_id", sc["field"])
		}
		sc = owner.MCP.ToolErr(t, "handoff_create", map[string]any{"summary": []int{1}}, "invalid_request")
		if sc["field"] != "summary" {
			t.Errorf("field = %v, want summary", sc["field"])
		}
	})
	t.Run("arguments that are not an object are isError invalid_request", func(t *testing.T) {
		r := worker.MCP.Call(t, "tools/call", map[string]any{"name": "handoff_get", "arguments": "handoff_x"})
		res := roomtest.WantResult(t, r)
		if res["isError"] != true || roomtest.JSONAt(res, "structuredContent", "error") != "invalid_request" {
			t.Errorf("result = %v", res)
		}
	})
	t.Run("a missing capability is isError permission_denied", func(t *testing.T) {
		sc := worker.MCP.ToolErr(t, "handoff_create", map[string]any{"summary": "x"}, "permission_denied")
		if sc["required"] != "propose" {
			t.Errorf("required = %v, want propose", sc["required"])
		}
	})
	t.Run("an unknown tool is JSON-RPC -32602", func(t *testing.T) {
		r := worker.MCP.Call(t, "tools/call", map[string]any{"name": "no_such_tool", "arguments": map[string]any{}})
		roomtest.WantRPCError(t, r, http.StatusOK, mcptest.CodeInvalidParams)
	})
	t.Run("a tool call with no arguments key works", func(t *testing.T) {
		r := worker.MCP.Call(t, "tools/call", map[string]any{"name": "workspace_status"})
		res := roomtest.WantResult(t, r)
		if res["isError"] != false {
			t.Errorf("isError = %v: %v", res["isError"], res)
		}
	})
	t.Run("a legacy params.task is ignored", func(t *testing.T) {
		r := owner.MCP.Call(t, "tools/call", map[string]any{"name": "handoff_create",
			"arguments": map[string]any{"summary": "legacy"}, "task": map[string]any{"ttl": 1000}})
		res := roomtest.WantResult(t, r)
		if res["resultType"] != "complete" || res["isError"] != false {
			t.Errorf("result = %v", res)
		}
	})
}

func TestMCPCompatibility(t *testing.T) {
	h := apitest.New(t, roomtest.Options{}, nil)
	owner := h.Join("owner", "read", "propose")

	t.Run("2026-07-28 without the extension", func(t *testing.T) {
		var taskID string
		t.Run("handoff_create is an ordinary tool result with the handoff and task_id", func(t *testing.T) {
			res := owner.MCP.Tool(t, "handoff_create", map[string]any{"summary": "no extension"})
			if res["resultType"] != "complete" || res["isError"] != false {
				t.Fatalf("result = %v", res)
			}
			for _, k := range []string{"taskId", "status", "ttlMs", "pollIntervalMs"} {
				if _, has := res[k]; has {
					t.Errorf("top-level %q in an ordinary tool result: %v", k, res)
				}
			}
			sc, _ := res["structuredContent"].(map[string]any)
			taskID, _ = sc["task_id"].(string)
			hid, _ := roomtest.JSONAt(sc, "handoff", "handoff_id").(string)
			if taskID == "" || hid == "" || roomtest.JSONAt(sc, "handoff", "status") != "open" || roomtest.JSONAt(sc, "handoff", "task_id") != taskID {
				t.Errorf("structuredContent = %v", sc)
			}
			if n := h.Count(`SELECT count(*) FROM tasks WHERE task_id = ? AND status = 'working'`, taskID); n != 1 {
				t.Errorf("the task row exists %d times, want 1 (durable either way)", n)
			}
		})
		t.Run("tasks/get is -32021", func(t *testing.T) {
			wantMissingTasks(t, owner.MCP.TaskCall(t, "tasks/get", taskID, nil))
		})
		t.Run("resources/subscribe works", func(t *testing.T) {
			res := owner.MCP.OK(t, "resources/subscribe", map[string]any{"uri": h.Eng.DocumentURI()})
			if res["resultType"] != "complete" {
				t.Errorf("result = %v", res)
			}
			owner.MCP.OK(t, "resources/unsubscribe", map[string]any{"uri": h.Eng.DocumentURI()})
		})
	})

	t.Run("2026-07-28 with the extension", func(t *testing.T) {
		res := owner.Ext.Tool(t, "handoff_create", map[string]any{"summary": "with extension"})
		t.Run("handoff_create is a CreateTaskResult", func(t *testing.T) {
			if res["resultType"] != "task" {
				t.Fatalf("resultType = %v: %v", res["resultType"], res)
			}
			if id, _ := res["taskId"].(string); len(id) < 16 {
				t.Errorf("taskId = %v", res["taskId"])
			}
			if res["status"] != "working" {
				t.Errorf("status = %v", res["status"])
			}
			for _, k := range []string{"createdAt", "lastUpdatedAt"} {
				if s, _ := res[k].(string); !isoTimeRE.MatchString(s) {
					t.Errorf("%s = %v, want ISO 8601", k, res[k])
				}
			}
			if ttl, _ := res["ttlMs"].(float64); ttl <= 0 || ttl != float64(int64(ttl)) {
				t.Errorf("ttlMs = %v, want a positive integer", res["ttlMs"])
			}
			if res["pollIntervalMs"] != float64(5000) {
				t.Errorf("pollIntervalMs = %v, want 5000", res["pollIntervalMs"])
			}
			hid, _ := roomtest.JSONAt(res, "_meta", mcptest.HandoffMeta).(string)
			if !strings.HasPrefix(hid, "handoff_") {
				t.Errorf("_meta[%q] = %v", mcptest.HandoffMeta, hid)
			} else if s := h.Status(t, "handoff", hid); s != "open" {
				t.Errorf("handoff %s is %s, want open", hid, s)
			}
			for _, k := range []string{"result", "error", "inputRequests", "requestState", "content", "isError",
				"structuredContent", "task", "ttl", "pollInterval"} {
				if _, has := res[k]; has {
					t.Errorf("CreateTaskResult carries %q: %v", k, res)
				}
			}
		})
		t.Run("tasks/get sent immediately after resolves", func(t *testing.T) {
			id, _ := res["taskId"].(string)
			got := owner.Ext.TaskGet(t, id)
			if got["status"] != "working" || got["createdAt"] != res["createdAt"] || got["ttlMs"] != res["ttlMs"] {
				t.Errorf("tasks/get = %v\ncreate   = %v", got, res)
			}
			if roomtest.JSONAt(got, "_meta", mcptest.HandoffMeta) != roomtest.JSONAt(res, "_meta", mcptest.HandoffMeta) {
				t.Errorf("tasks/get handoff id %v, create %v", roomtest.JSONAt(got, "_meta", mcptest.HandoffMeta), roomtest.JSONAt(res, "_meta", mcptest.HandoffMeta))
			}
		})
		t.Run("the extension is per request: the next request without it gets a plain result", func(t *testing.T) {
			plain := owner.MCP.Tool(t, "handoff_create", map[string]any{"summary": "plain again"})
			if plain["resultType"] != "complete" {
				t.Errorf("resultType = %v", plain["resultType"])
			}
		})
	})

	t.Run("a 2025-11-25 client is rejected", func(t *testing.T) {
		initParams := map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
			"clientInfo": map[string]any{"name": "old", "version": "1"}}
		t.Run("initialize without _meta is 400 -32602 (step 6)", func(t *testing.T) {
			r := owner.MCP.Do(t, mcptest.Request{Method: "initialize", Params: initParams, Meta: mcptest.DropMeta, Version: "2025-11-25", Del: []string{"Mcp-Method"}})
			roomtest.WantRPCError(t, r, http.StatusBadRequest, mcptest.CodeInvalidParams)
		})
		t.Run("initialize without a version header is 400 -32020 (step 5)", func(t *testing.T) {
			r := owner.MCP.Do(t, mcptest.Request{Method: "initialize", Params: initParams, Meta: mcptest.DropMeta, Del: []string{"Mcp-Method", "MCP-Protocol-Version"}})
			roomtest.WantRPCError(t, r, http.StatusBadRequest, mcptest.CodeHeaderMismatch)
		})
		t.Run("initialize with a 2025-11-25 _meta and no Mcp-Method is 400 -32020 (step 8 before 9)", func(t *testing.T) {
			r := owner.MCP.Do(t, mcptest.Request{Method: "initialize", Params: initParams, Version: "2025-11-25", Del: []string{"Mcp-Method"}})
			roomtest.WantRPCError(t, r, http.StatusBadRequest, mcptest.CodeHeaderMismatch)
		})
		t.Run("initialize with a 2025-11-25 _meta is 400 -32022", func(t *testing.T) {
			r := owner.MCP.Do(t, mcptest.Request{Method: "initialize", Params: initParams, Version: "2025-11-25"})
			roomtest.WantRPCError(t, r, http.StatusBadRequest, mcptest.CodeUnsupportedVersion)
			wantUnsupported("2025-11-25")(t, r)
		})
		t.Run("tools/list at 2025-11-25 is 400 -32022", func(t *testing.T) {
			r := owner.MCP.Do(t, mcptest.Request{Method: "tools/list", Version: "2025-11-25"})
			roomtest.WantRPCError(t, r, http.StatusBadRequest, mcptest.CodeUnsupportedVersion)
			wantUnsupported("2025-11-25")(t, r)
		})
		t.Run("no Mcp-Session-Id is minted", func(t *testing.T) {
			r := owner.MCP.Do(t, mcptest.Request{Method: "tools/list", Set: map[string]string{"Mcp-Session-Id": "abc"}})
			roomtest.WantResult(t, r)
			if v := r.Header.Get("Mcp-Session-Id"); v != "" {
				t.Errorf("Mcp-Session-Id = %q", v)
			}
		})
	})
}

func TestMCPIdempotentCreate(t *testing.T) {
	h := apitest.New(t, roomtest.Options{}, nil)
	owner := h.Join("owner", "read", "propose")
	other := h.Join("other", "read", "propose")

	t.Run("with the extension the same key returns the same task", func(t *testing.T) {
		args := map[string]any{"summary": "once", "idempotency_key": "k-ext"}
		t1, h1 := owner.MCP.CreateTask(t, args)
		t2, h2 := owner.MCP.CreateTask(t, args)
		if t1 != t2 || h1 != h2 {
			t.Errorf("replay gave task %s handoff %s, want %s %s", t2, h2, t1, h1)
		}
		if n := h.Count(`SELECT count(*) FROM handoffs WHERE idempotency_key = 'k-ext'`); n != 1 {
			t.Errorf("%d handoffs for the key, want 1", n)
		}
	})
	t.Run("without the extension the same key returns the same handoff, flagged replayed", func(t *testing.T) {
		args := map[string]any{"summary": "twice", "idempotency_key": "k-plain"}
		a := owner.MCP.ToolOK(t, "handoff_create", args)
		b := owner.MCP.ToolOK(t, "handoff_create", args)
		if roomtest.JSONAt(a, "handoff", "handoff_id") != roomtest.JSONAt(b, "handoff", "handoff_id") || a["task_id"] != b["task_id"] {
			t.Errorf("first %v\nreplay %v", a, b)
		}
		if b["replayed"] != true {
			t.Errorf("replay not flagged: %v", b)
		}
	})
	t.Run("a replay with different arguments still returns the original", func(t *testing.T) {
		t1, _ := owner.MCP.CreateTask(t, map[string]any{"summary": "original", "idempotency_key": "k-diff"})
		t2, h2 := owner.MCP.CreateTask(t, map[string]any{"summary": "changed", "idempotency_key": "k-diff"})
		if t1 != t2 {
			t.Errorf("task %s, want %s", t2, t1)
		}
		got := owner.MCP.ToolOK(t, "handoff_get", map[string]any{"handoff_id": h2})
		if got["summary"] != "original" {
			t.Errorf("summary = %v, want the original", got["summary"])
		}
	})
	t.Run("the key is scoped to the participant", func(t *testing.T) {
		t1, _ := owner.MCP.CreateTask(t, map[string]any{"summary": "mine", "idempotency_key": "shared"})
		t2, _ := other.MCP.CreateTask(t, map[string]any{"summary": "theirs", "idempotency_key": "shared"})
		if t1 == t2 {
			t.Errorf("two participants share task %s", t1)
		}
	})
	// replayAnswers: at a limit, a create with a key already used still
	// answers (the same task both times) and changes nothing.
	replayAnswers := func(t *testing.T, at string, before roomtest.Snapshot) {
		t.Helper()
		t1, _ := owner.MCP.CreateTask(t, map[string]any{"summary": "once", "idempotency_key": "k-ext"})
		t2, _ := owner.MCP.CreateTask(t, map[string]any{"summary": "once", "idempotency_key": "k-ext"})
		if t1 != t2 {
			t.Errorf("replays at the %s disagree: %s %s", at, t1, t2)
		}
		h.AssertUnchanged(t, before)
	}
	t.Run("at the participant's share a new create is isError limit_exceeded and a replay still answers", func(t *testing.T) {
		share := h.Eng.Limits.MaxTasksPerParticipant
		for i := 0; h.Count(`SELECT count(*) FROM tasks WHERE status IN ('working','input_required') AND owner_id = '`+owner.ParticipantID+`'`) < share; i++ {
			owner.MCP.CreateTask(t, map[string]any{"summary": "filler"})
			if i > 40 {
				t.Fatal("the active-task count does not grow")
			}
		}
		before := h.Snapshot()
		sc := owner.Ext.ToolErr(t, "handoff_create", map[string]any{"summary": "one too many"}, "limit_exceeded")
		if sc["scope"] != "participant" || sc["limit"] != float64(share) || sc["count"] != float64(share) {
			t.Errorf("refusal %v, want scope participant, limit and count %d", sc, share)
		}
		h.AssertUnchanged(t, before)
		replayAnswers(t, "share", before)
	})
	t.Run("at the 32-task cap a new create is isError limit_exceeded and a replay still answers", func(t *testing.T) {
		for i := 0; h.Count(`SELECT count(*) FROM tasks WHERE status IN ('working','input_required')`) < 32; i++ {
			filler := h.Join(fmt.Sprintf("filler %d", i), "read", "propose")
			for range h.Eng.Limits.MaxTasksPerParticipant {
				if h.Count(`SELECT count(*) FROM tasks WHERE status IN ('working','input_required')`) < 32 {
					filler.MCP.CreateTask(t, map[string]any{"summary": "filler"})
				}
			}
			if i > 40 {
				t.Fatal("the active-task count does not grow")
			}
		}
		late := h.Join("late", "read", "propose")
		before := h.Snapshot()
		sc := late.Ext.ToolErr(t, "handoff_create", map[string]any{"summary": "one too many"}, "limit_exceeded")
		if sc["scope"] != "room" || sc["limit"] != float64(32) || sc["count"] != float64(32) {
			t.Errorf("refusal %v, want scope room, limit and count 32", sc)
		}
		h.AssertUnchanged(t, before)
		replayAnswers(t, "cap", before)
	})
}

func TestMCPResourcesAndPrompts(t *testing.T) {
	h := apitest.New(t, roomtest.Options{}, nil)
	reader := h.Join("reader", "read")
	blind := h.Join("blind", "propose")
	doc := h.Eng.DocumentURI()
	if doc != "commonroom://workspace/"+h.Eng.WorkspaceID {
		t.Fatalf("DocumentURI = %s", doc)
	}

	t.Run("resources/list gives the document URI (and the guide)", func(t *testing.T) {
		res := reader.MCP.OK(t, "resources/list", nil)
		list, _ := res["resources"].([]any)
		if len(list) != 2 || roomtest.JSONAt(list[1], "uri") != skill.URI {
			t.Fatalf("resources = %v", res["resources"])
		}
		r0, _ := list[0].(map[string]any)
		if r0["uri"] != doc || r0["mimeType"] != "text/markdown" {
			t.Errorf("resource = %v", r0)
		}
		if n, _ := r0["name"].(string); n == "" {
			t.Errorf("resource without name: %v", r0)
		}
	})
	t.Run("resources/templates/list gives the section template", func(t *testing.T) {
		res := reader.MCP.OK(t, "resources/templates/list", nil)
		list, _ := res["resourceTemplates"].([]any)
		if len(list) != 1 || roomtest.JSONAt(list[0], "uriTemplate") != doc+"/section/{path}" {
			t.Errorf("resourceTemplates = %v", res["resourceTemplates"])
		}
		if n, _ := roomtest.JSONAt(list[0], "name").(string); n == "" {
			t.Errorf("template without name")
		}
	})
	t.Run("resources/read of the document is text/markdown", func(t *testing.T) {
		res := reader.MCP.OK(t, "resources/read", map[string]any{"uri": doc})
		contents, _ := res["contents"].([]any)
		if len(contents) != 1 {
			t.Fatalf("contents = %v", res["contents"])
		}
		c0, _ := contents[0].(map[string]any)
		if c0["uri"] != doc || c0["mimeType"] != "text/markdown" || c0["text"] != roomtest.Doc {
			t.Errorf("content = %v", c0)
		}
		roomtest.WantCaching(t, res)
	})
	t.Run("resources/read of a percent-encoded section", func(t *testing.T) {
		uri := doc + "/section/Idea%2FPlan"
		res := reader.MCP.OK(t, "resources/read", map[string]any{"uri": uri})
		contents, _ := res["contents"].([]any)
		if len(contents) != 1 {
			t.Fatalf("contents = %v", res["contents"])
		}
		c0, _ := contents[0].(map[string]any)
		text, _ := c0["text"].(string)
		if c0["uri"] != uri || c0["mimeType"] != "text/markdown" || !strings.Contains(text, "step two") || strings.Contains(text, "ship it") {
			t.Errorf("content = %v", c0)
		}
	})
	for _, uri := range []string{
		"test://nonexistent-resource-for-conformance-testing",
		doc + "/section/Nope",
		doc + "/section/",
		doc + "x",
		"commonroom://workspace/workspace_0000000000000000",
	} {
		t.Run("unknown URI "+uri+" is -32602 with data.uri", func(t *testing.T) {
			r := reader.MCP.Call(t, "resources/read", map[string]any{"uri": uri})
			e := roomtest.WantRPCError(t, r, http.StatusOK, mcptest.CodeInvalidParams)
			if roomtest.JSONAt(e, "data", "uri") != uri {
				t.Errorf("data.uri = %v, want %q", roomtest.JSONAt(e, "data", "uri"), uri)
			}
			if r.Result != nil {
				t.Errorf("a result (contents) beside the error: %s", r.Raw)
			}
		})
	}
	t.Run("a session without read cannot read resources", func(t *testing.T) {
		r := blind.MCP.Call(t, "resources/read", map[string]any{"uri": doc})
		if r.Result != nil {
			t.Fatalf("a session without read got contents: %s", r.Raw)
		}
		if r.Error == nil || roomtest.JSONAt(r.Body, "error", "data", "error") != "permission_denied" {
			t.Errorf("error = %s, want a JSON-RPC error with data.error permission_denied", r.Raw)
		}
		res := blind.MCP.OK(t, "resources/list", nil)
		if l, _ := res["resources"].([]any); len(l) != 0 {
			t.Errorf("a session without read sees resources %v", l)
		}
		r = blind.MCP.Call(t, "resources/subscribe", map[string]any{"uri": doc})
		if r.Result != nil {
			t.Errorf("a session without read subscribed: %s", r.Raw)
		}
	})
	t.Run("prompts/list has described prompts", func(t *testing.T) {
		res := reader.MCP.OK(t, "prompts/list", nil)
		list, _ := res["prompts"].([]any)
		if len(list) == 0 {
			t.Fatalf("no prompts")
		}
		for _, p := range list {
			if n, _ := roomtest.JSONAt(p, "name").(string); n == "" {
				t.Errorf("prompt without name: %v", p)
			}
			if d, _ := roomtest.JSONAt(p, "description").(string); strings.TrimSpace(d) == "" {
				t.Errorf("prompt without description: %v", p)
			}
			if strings.Contains(strings.ToLower(roomtest.JSONAt(p, "name").(string)), "test") {
				t.Errorf("a fixture prompt: %v", p)
			}
		}
		roomtest.WantCaching(t, res)
	})
	t.Run("prompts/get returns messages", func(t *testing.T) {
		for _, name := range []string{"commonroom_edit_workflow", "commonroom_handoff_workflow"} {
			res := reader.MCP.OK(t, "prompts/get", map[string]any{"name": name, "arguments": map[string]any{"role": "worker", "goal": "a fix"}})
			msgs, _ := res["messages"].([]any)
			if len(msgs) == 0 {
				t.Fatalf("%s: no messages", name)
			}
			if roomtest.JSONAt(msgs[0], "role") != "user" || roomtest.JSONAt(msgs[0], "content", "type") != "text" {
				t.Errorf("%s: message = %v", name, msgs[0])
			}
			if txt, _ := roomtest.JSONAt(msgs[0], "content", "text").(string); len(txt) < 40 {
				t.Errorf("%s: text = %q", name, txt)
			}
		}
	})
	t.Run("unknown prompt is -32602", func(t *testing.T) {
		roomtest.WantRPCError(t, reader.MCP.Call(t, "prompts/get", map[string]any{"name": "no_such_prompt"}), http.StatusOK, mcptest.CodeInvalidParams)
	})
	t.Run("a cursor on a list is -32602", func(t *testing.T) {
		for _, m := range []string{"tools/list", "prompts/list", "resources/list", "resources/templates/list"} {
			roomtest.WantRPCError(t, reader.MCP.Call(t, m, map[string]any{"cursor": "p2"}), http.StatusOK, mcptest.CodeInvalidParams)
		}
	})
}
