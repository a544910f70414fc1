package httpapi

// Hostile input and resources (issue #8 item 4): deep, huge and key-heavy
// JSON on every POST route and /mcp, long strings in every text field of
// every tool and route, slow and idle connections against a server set up
// with `ce serve`'s timeouts, too many streams for one session, per-session
// rate limits, a stalled reader under a flood of large notifications, DNS
// rebinding on every route of both listeners, and a scan for secrets in the
// sidecar, the events, the logs and every answer after a full session of
// activity. A read-only or full disk is room/disk_test.go; a sidecar written
// by another program is refused untouched by room.OpenStore
// (room/store_test.go, TestOpenStore_RefusesWhatIsNotOurs).

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/commonroom/ce/httpapi/ops"
	"github.com/commonroom/ce/internal/mcptest"
	"github.com/commonroom/ce/internal/roomtest"
	"github.com/commonroom/ce/listen"
	"github.com/commonroom/ce/room"
)

// ---- deep, huge and key-heavy JSON ----

// postRoute is a POST route with the listener that serves it.
type postRoute struct {
	Path  string
	Owner bool // served by the owner listener only
}

func postRoutes(t testing.TB, h *roomHarness) []postRoute {
	t.Helper()
	var out []postRoute
	ingress := map[string]bool{}
	for _, r := range walkRoutes(t, h.API.IngressHandler()) {
		if r.Method == "POST" {
			ingress[r.Path] = true
			out = append(out, postRoute{Path: r.Path})
		}
	}
	for _, r := range walkRoutes(t, h.API.OwnerHandler()) {
		if r.Method == "POST" && !ingress[r.Path] {
			out = append(out, postRoute{Path: r.Path, Owner: true})
		}
	}
	return out
}

// ignoresBody: routes whose handler never reads the body.
var ignoresBody = map[string]bool{"/workspace/leave": true, "/owner/key": true}

func deepJSON(n int, open, close string) []byte {
	return []byte(strings.Repeat(open, n) + strings.Repeat(close, n))
}

func TestHostileDeepAndHugeJSON(t *testing.T) {
	h := newHarness(t, "", harnessOpts{Limits: func(l *room.Limits) { l.RateLimitPerMinute = 0 }, InMemory: true})
	star := h.join("star", "*")
	limit := int(h.Eng.Limits.MaxBodyBytes)

	manyKeys := func(dup bool) []byte {
		var b bytes.Buffer
		b.WriteString(`{"jsonrpc":"2.0","id":1,"method":"tools/list"`)
		for i := 0; i < 100_000 && b.Len() < limit-64; i++ {
			if dup {
				b.WriteString(`,"zz":"x"`)
			} else {
				fmt.Fprintf(&b, `,"k%d":0`, i)
			}
		}
		b.WriteString("}")
		return b.Bytes()
	}
	huge := append(append([]byte(`{"summary":"`), bytes.Repeat([]byte("a"), limit)...), `"}`...)
	bodies := []struct {
		name  string
		body  []byte
		chunk bool
		want  func(mcp bool) (int, string, int) // status, REST error code, JSON-RPC code
	}{
		{"a 100,000-deep array", deepJSON(100_000, "[", "]"), false, func(mcp bool) (int, string, int) {
			return 400, "invalid_request", mcptest.CodeParseError
		}},
		{"a 100,000-deep array inside a field", append(append([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","summary":`), deepJSON(100_000, "[", "]")...), '}'),
			false, func(mcp bool) (int, string, int) { return 400, "invalid_request", mcptest.CodeParseError }},
		{"100,000-deep objects", []byte(strings.Repeat(`{"a":`, 100_000) + "1" + strings.Repeat("}", 100_000)),
			false, func(mcp bool) (int, string, int) { return 400, "invalid_request", mcptest.CodeParseError }},
		{"1 MiB + 1 with Content-Length", huge[:limit+1], false, func(bool) (int, string, int) {
			return 413, "limit_exceeded", mcptest.CodeInvalidRequest
		}},
		{"1 MiB + 1 chunked", huge[:limit+1], true, func(bool) (int, string, int) { return 413, "limit_exceeded", mcptest.CodeInvalidRequest }},
		{"100,000 distinct keys", manyKeys(false), false, nil},
		{"one key repeated 100,000 times", manyKeys(true), false, nil},
	}
	h.Sweep()
	before := h.Snapshot()
	for _, rt := range postRoutes(t, h) {
		for _, b := range bodies {
			t.Run(rt.Path+": "+b.name, func(t *testing.T) {
				base, token := h.Ingress.URL, star.SessionToken
				if rt.Owner {
					base, token = h.Owner.URL, h.OpToken
				}
				if rt.Path == "/workspace/leave" {
					token = h.admit(t, "leaver", []string{"read"}, 0).SessionToken
				}
				var body io.Reader = bytes.NewReader(b.body)
				if b.chunk {
					body = io.MultiReader(bytes.NewReader(b.body)) // no length: sent chunked
				}
				start := time.Now()
				r, err := h.Send("POST", base+rt.Path, token, body, withHeader("Accept", "application/json, text/event-stream"))
				if err != nil {
					t.Fatalf("the server did not answer: %v", err)
				}
				if d := time.Since(start); d > 10*time.Second {
					t.Errorf("answered after %v", d)
				}
				if r.Status >= 500 {
					t.Fatalf("%d: %s", r.Status, r.Body)
				}
				if ignoresBody[rt.Path] {
					return // never read: whatever it is, it costs nothing
				}
				if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
					t.Errorf("Content-Type %q", ct)
				}
				m := r.JSON(t)
				if b.want == nil {
					return // keys it does not know are ignored: a clear answer either way
				}
				if r.Status < 400 {
					t.Fatalf("a hostile body was accepted: %d %.300s", r.Status, r.Body)
				}
				mcp := rt.Path == "/mcp"
				status, code, rpc := b.want(mcp)
				if r.Status != status {
					t.Errorf("status %d, want %d: %.300s", r.Status, status, r.Body)
				}
				if mcp {
					e, _ := m["error"].(map[string]any)
					if got, _ := e["code"].(float64); int(got) != rpc {
						t.Errorf("JSON-RPC code %v, want %d: %.300s", e["code"], rpc, r.Body)
					}
				} else if m["error"] != code {
					t.Errorf("error %v, want %s: %.300s", m["error"], code, r.Body)
				}
				if len(r.Body) > 4096 {
					t.Errorf("the error answer is %d bytes: it must not echo the input", len(r.Body))
				}
			})
		}
	}
	t.Run("the server keeps serving, nothing changed, nothing panicked", func(t *testing.T) {
		wantOK(t, h.do("GET", h.IngressURL("/workspace/status"), star.SessionToken, nil))
		newMCPClient(h, star.SessionToken, false).toolOK(t, "workspace_status", map[string]any{})
		after := h.Snapshot()
		// Only the leave route may have changed rows: it ended the sessions
		// made for it. Everything else must be as it was.
		for _, d := range before.Diff(after) {
			if !strings.HasPrefix(d, "sessions:") && !strings.HasPrefix(d, "participants:") &&
				!strings.HasPrefix(d, "invites:") && !strings.HasPrefix(d, "events:") {
				t.Errorf("changed: %s", d)
			}
		}
		if n := h.Count(`SELECT count(*) FROM handoffs`) + h.Count(`SELECT count(*) FROM proposals`) + h.Count(`SELECT count(*) FROM leases`); n != 0 {
			t.Errorf("%d records were created from hostile bodies", n)
		}
		if strings.Contains(h.Logs.String(), "panic") {
			t.Errorf("a handler panicked:\n%s", h.Logs.String())
		}
	})
}

// ---- long strings in every text field ----

// longText is a long text of mixed one- to four-byte characters (270 KB, 120k
// code points): over every text limit (the largest are 256 KiB), under the
// body limit.
var longText = strings.Repeat("ab€😀", 30_000)

// stringPaths lists the paths of every string field of a tool's input
// schema; "[]" stands for the first element of an array.
func stringPaths(schema map[string]any, prefix []string) [][]string {
	var out [][]string
	switch schema["type"] {
	case "string":
		return [][]string{slices.Clone(prefix)}
	case "object":
		props, _ := schema["properties"].(map[string]any)
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			sub, _ := props[k].(map[string]any)
			out = append(out, stringPaths(sub, append(slices.Clone(prefix), k))...)
		}
	case "array":
		items, _ := schema["items"].(map[string]any)
		out = append(out, stringPaths(items, append(slices.Clone(prefix), "[]"))...)
	}
	return out
}

// schemaAt returns the schema of the value at path.
func schemaAt(schema map[string]any, path []string) map[string]any {
	for _, p := range path {
		if p == "[]" {
			schema, _ = schema["items"].(map[string]any)
		} else {
			props, _ := schema["properties"].(map[string]any)
			schema, _ = props[p].(map[string]any)
		}
	}
	return schema
}

// setAt returns v with the value at path set to val, creating what is
// missing: an array element is made from its schema (an object holding its
// required strings, or a string).
func setAt(v any, schema map[string]any, path []string, val any) any {
	if len(path) == 0 {
		return val
	}
	if path[0] == "[]" {
		arr, _ := v.([]any)
		items, _ := schema["items"].(map[string]any)
		if len(arr) == 0 {
			arr = []any{zeroFor(items)}
		}
		arr[0] = setAt(arr[0], items, path[1:], val)
		return arr
	}
	obj, _ := v.(map[string]any)
	if obj == nil {
		obj = map[string]any{}
	}
	props, _ := schema["properties"].(map[string]any)
	sub, _ := props[path[0]].(map[string]any)
	obj[path[0]] = setAt(obj[path[0]], sub, path[1:], val)
	return obj
}

func zeroFor(schema map[string]any) any {
	if schema["type"] != "object" {
		return "x"
	}
	o := map[string]any{}
	req, _ := schema["required"].([]string)
	for _, r := range req {
		o[r] = "x"
	}
	return o
}

func TestHostileLongStrings(t *testing.T) {
	h := newHarness(t, manySections(40), harnessOpts{
		Limits: func(l *room.Limits) {
			l.RateLimitPerMinute = 0
			l.MaxActiveTasks, l.MaxTasksPerParticipant = 1<<20, 1<<20
		},
		InMemory: true,
	})
	star := h.join("star", "*")
	m := &matrix{h: h, docURI: h.Eng.DocumentURI()}
	m.A = h.admit(t, "other owner", agentCaps, 0).ParticipantID
	m.B = h.admit(t, "other assignee", agentCaps, 0).ParticipantID
	me := star.ParticipantID

	// base gives a tool's (and its HTTP twin's) arguments that reach the
	// engine's own checks: records made fresh for each call.
	base := func(t *testing.T, name string) map[string]any {
		r := &records{}
		switch name {
		case "handoff_accept":
			m.handoff(t, r, me, roleOpen, fixOpen)
		case "handoff_request_input", "handoff_complete":
			m.handoff(t, r, me, roleAssignee, fixAccepted)
		case "handoff_approve", "handoff_reject", "handoff_get", "handoff_events":
			m.handoff(t, r, me, roleOwner, fixResult)
		case "workspace_renew", "workspace_release":
			s := m.nextSection(t)
			l := inWriter(t, h, func(tx *room.Tx) (room.Lease, error) {
				return h.Eng.Checkout(tx, trusted(me), room.CheckoutInput{Target: s})
			})
			return map[string]any{"lease_id": l.LeaseID}
		case "workspace_review":
			c := "## Goals\n\nx\n\n"
			p := inWriter(t, h, func(tx *room.Tx) (room.Proposal, error) {
				return h.Eng.Propose(tx, trusted(m.A), room.ProposeInput{Target: "Goals", BaseVersion: 1, Summary: "x",
					Change: room.ChangeInput{Content: &c, Section: "Goals"}})
			})
			return map[string]any{"proposal_id": p.ProposalID, "approve": true}
		case "workspace_propose":
			return proposeIn(r)
		case "workspace_checkout":
			return map[string]any{"target": m.nextSection(t)}
		case "workspace_diff":
			return map[string]any{"base_version": 1}
		case "workspace_changes_since":
			return map[string]any{"version": 1}
		case "handoff_create":
			return map[string]any{"summary": "x"}
		default:
			return map[string]any{}
		}
		out := map[string]any{"handoff_id": r.HandoffID}
		if name == "handoff_request_input" {
			out["requests"] = []any{map[string]any{"key": "k", "message": "?"}}
		}
		if name == "handoff_complete" {
			out["result"] = map[string]any{"text": "done"}
		}
		return out
	}
	// The HTTP twins of the tools that write (the operations table's POST
	// routes of its tools): the same argument names.
	twin := map[string]string{}
	for _, op := range ops.Table {
		if op.Tool != "" && op.Method() == http.MethodPost {
			twin[op.Tool] = op.Path()
		}
	}
	accepted := map[string]bool{}
	largest, largestAt := 0, ""
	var echoes []string // refusals that send the long text back
	report := func(t *testing.T, where string, ok bool, code string, raw []byte) {
		t.Helper()
		if !ok && len(raw) > largest {
			largest, largestAt = len(raw), where
		}
		if !ok && len(raw) > len(longText)/2 {
			echoes = append(echoes, fmt.Sprintf("%s (%d KB)", where, len(raw)>>10))
		}
		switch {
		case ok:
			accepted[where] = true
		case code == "" || code == "internal":
			t.Errorf("%s: not a clear refusal: %.400s", where, raw)
		}
	}
	for _, tl := range toolCatalog() {
		for _, path := range stringPaths(tl.Input, nil) {
			where := tl.Name + "." + strings.Join(path, ".")
			t.Run("tool "+where, func(t *testing.T) {
				args := setAt(base(t, tl.Name), tl.Input, path, longText)
				r := star.mcp.do(t, mcpReq{Method: "tools/call", Params: map[string]any{"name": tl.Name, "arguments": args}, Timeout: frameWait})
				res := wantResult(t, r) // a tool result, whatever it says
				code, _ := jsonAt(res, "structuredContent", "error").(string)
				report(t, "tool "+where, res["isError"] != true, code, r.Raw)
			})
			if p, ok := twin[tl.Name]; ok {
				t.Run("POST "+p+" "+strings.Join(path, "."), func(t *testing.T) {
					args := setAt(base(t, tl.Name), tl.Input, path, longText)
					r := h.do("POST", h.IngressURL(p), star.SessionToken, args)
					if r.Status >= 500 {
						t.Fatalf("%d %.400s", r.Status, r.Body)
					}
					var code string
					if r.Status >= 400 {
						code, _ = r.JSON(t)["error"].(string)
					}
					report(t, "POST "+p+" "+strings.Join(path, "."), r.Status < 400, code, r.Body)
				})
			}
		}
	}
	// The routes and methods without a tool twin.
	tasks := &records{}
	m.handoff(t, tasks, me, roleOwner, fixInput)
	other := []struct {
		name string
		call func(t *testing.T) (bool, string, []byte)
	}{
		{"POST /session/join invite", func(t *testing.T) (bool, string, []byte) {
			r := h.joinRaw(map[string]any{"invite": longText, "name": "x"})
			return restOutcome(t, r)
		}},
		{"POST /session/join name", func(t *testing.T) (bool, string, []byte) {
			return restOutcome(t, h.joinRaw(map[string]any{"invite": h.fixtureInvite(t, "read").Token, "name": longText}))
		}},
		{"POST /session/join kind", func(t *testing.T) (bool, string, []byte) {
			return restOutcome(t, h.joinRaw(map[string]any{"invite": h.fixtureInvite(t, "read").Token, "name": "x", "kind": longText}))
		}},
		{"POST /session/join transport", func(t *testing.T) (bool, string, []byte) {
			// The transport label is cut to 64 characters, not refused (spec §1.4).
			r := h.joinRaw(map[string]any{"invite": h.fixtureInvite(t, "read").Token, "name": "x", "transport": longText})
			if r.Status == 200 {
				var g sessionGrant
				r.Into(t, &g)
				if len([]rune(g.Transport)) > h.Eng.Limits.MaxTransportChars {
					t.Errorf("transport kept %d characters", len([]rune(g.Transport)))
				}
			}
			return restOutcome(t, r)
		}},
		{"POST /workspace/invite/revoke invite_id", func(t *testing.T) (bool, string, []byte) {
			return restOutcome(t, h.do("POST", h.IngressURL("/workspace/invite/revoke"), star.SessionToken, map[string]any{"invite_id": longText}))
		}},
		{"POST /workspace/invite/revoke token", func(t *testing.T) (bool, string, []byte) {
			return restOutcome(t, h.do("POST", h.IngressURL("/workspace/invite/revoke"), star.SessionToken, map[string]any{"token": longText}))
		}},
		{"POST /workspace/session/end session_ref", func(t *testing.T) (bool, string, []byte) {
			return restOutcome(t, h.do("POST", h.IngressURL("/workspace/session/end"), star.SessionToken, map[string]any{"session_ref": longText}))
		}},
		{"POST /workspace/session/end participant_id", func(t *testing.T) (bool, string, []byte) {
			return restOutcome(t, h.do("POST", h.IngressURL("/workspace/session/end"), star.SessionToken, map[string]any{"participant_id": longText}))
		}},
		{"POST /workspace/task/update task_id", func(t *testing.T) (bool, string, []byte) {
			return restOutcome(t, h.do("POST", h.IngressURL("/workspace/task/update"), star.SessionToken, map[string]any{"task_id": longText}))
		}},
		{"POST /workspace/task/update input_responses", func(t *testing.T) (bool, string, []byte) {
			return restOutcome(t, h.do("POST", h.IngressURL("/workspace/task/update"), star.SessionToken, map[string]any{
				"task_id": tasks.TaskID, "input_responses": map[string]any{"k": map[string]any{"action": "accept", "content": map[string]any{"answer": longText}}}}))
		}},
		{"POST /workspace/task/cancel task_id", func(t *testing.T) (bool, string, []byte) {
			return restOutcome(t, h.do("POST", h.IngressURL("/workspace/task/cancel"), star.SessionToken, map[string]any{"task_id": longText}))
		}},
		{"GET /workspace/task task_id", func(t *testing.T) (bool, string, []byte) {
			return restOutcome(t, h.do("GET", h.IngressURL("/workspace/task?task_id="+longText[:4000]), star.SessionToken, nil))
		}},
		{"tasks/get taskId (and Mcp-Name)", func(t *testing.T) (bool, string, []byte) {
			r := star.ext.taskCall(t, "tasks/get", longText, nil)
			return mcpOutcome(t, r)
		}},
		{"tasks/update inputResponses", func(t *testing.T) (bool, string, []byte) {
			r := star.ext.taskCall(t, "tasks/update", tasks.TaskID, map[string]any{"inputResponses": map[string]any{
				longText: map[string]any{"action": "accept"}}})
			return mcpOutcome(t, r)
		}},
		{"resources/read uri (and Mcp-Name)", func(t *testing.T) (bool, string, []byte) {
			return mcpOutcome(t, star.mcp.call(t, "resources/read", map[string]any{"uri": m.docURI + "/section/" + longText}))
		}},
		{"tools/call name (and Mcp-Name)", func(t *testing.T) (bool, string, []byte) {
			return mcpOutcome(t, star.mcp.call(t, "tools/call", map[string]any{"name": longText, "arguments": map[string]any{}}))
		}},
		{"subscriptions/listen taskIds", func(t *testing.T) (bool, string, []byte) {
			s, r := h.ListenReq(t, streamClient(), star.SessionToken, "1", map[string]any{"taskIds": []string{longText}}, true)
			if s == nil {
				return false, "refused", r.Raw
			}
			s.Start()
			ack := s.Ack(t)
			if _, ok := ack["taskIds"]; ok {
				t.Errorf("an unknown task id was acknowledged")
			}
			s.Close()
			return true, "", nil
		}},
	}
	for _, o := range other {
		t.Run(o.name, func(t *testing.T) {
			ok, code, raw := o.call(t)
			report(t, o.name, ok, code, raw)
		})
	}
	var names []string
	for k := range accepted {
		names = append(names, k)
	}
	slices.Sort(names)
	t.Logf("fields that took a %d-byte string (the rest were refused with a clear error): %v", len(longText), names)
	t.Logf("the largest refusal was %d bytes (%s); %d refusals echo the text back: %v", largest, largestAt, len(echoes), echoes)
	wantOK(t, h.do("GET", h.IngressURL("/workspace/status"), star.SessionToken, nil))
	if strings.Contains(h.Logs.String(), "panic") {
		t.Errorf("a handler panicked")
	}
}

// postMCP sends one MCP request and returns the status and raw answer,
// without the conformance checks of mcpClient (too slow on megabyte answers).
func restOutcome(t *testing.T, r apiResp) (bool, string, []byte) {
	t.Helper()
	if r.Status >= 500 {
		t.Fatalf("%d %.400s", r.Status, r.Body)
	}
	if r.Status < 400 {
		return true, "", r.Body
	}
	code, _ := r.JSON(t)["error"].(string)
	return false, code, r.Body
}

func mcpOutcome(t *testing.T, r mcpResp) (bool, string, []byte) {
	t.Helper()
	if r.Status >= 500 {
		t.Fatalf("%d %.400s", r.Status, r.Raw)
	}
	if e := r.Error; e != nil {
		if e.Code == mcptest.CodeInternalError {
			return false, "internal", r.Raw
		}
		return false, fmt.Sprint(e.Code), r.Raw
	}
	if res := r.Result; res != nil && res["isError"] == true {
		sc, _ := res["structuredContent"].(map[string]any)
		code, _ := sc["error"].(string)
		return false, code, r.Raw
	}
	return true, "", r.Raw
}

// ---- slow and idle clients ----

func TestHostileSlowClients(t *testing.T) {
	// `ce serve` builds both listeners' servers with NewHTTPServer. The
	// same servers are built here with short limits, so the test measures
	// the behaviour rather than waiting minutes.
	if srv := NewHTTPServer(http.NotFoundHandler(), nil); srv.ReadHeaderTimeout <= 0 || srv.IdleTimeout <= 0 ||
		srv.ConnContext == nil || srv.WriteTimeout != 0 {
		t.Fatalf("NewHTTPServer: ReadHeaderTimeout %v, IdleTimeout %v, ConnContext set %v, WriteTimeout %v; want both limits, the probe hook and no write timeout",
			srv.ReadHeaderTimeout, srv.IdleTimeout, srv.ConnContext != nil, srv.WriteTimeout)
	}
	const headerTimeout, idleTimeout, margin = 500 * time.Millisecond, 700 * time.Millisecond, 3 * time.Second
	h := newHarness(t, "")
	for _, l := range []struct {
		name    string
		handler http.Handler
	}{{"owner", h.API.OwnerHandler()}, {"ingress", h.API.IngressHandler()}} {
		srv := NewHTTPServer(l.handler, h.Log)
		srv.ReadHeaderTimeout, srv.IdleTimeout = headerTimeout, idleTimeout
		ln := roomtest.Listener(t)
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		addr := ln.Addr().String()

		t.Run(l.name+": headers sent byte by byte are cut off at ReadHeaderTimeout", func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			start := time.Now()
			type end struct {
				after time.Duration
				got   []byte
			}
			closed := make(chan end, 1)
			go func() {
				b, _ := io.ReadAll(conn) // until the server closes
				closed <- end{time.Since(start), b}
			}()
			head := "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + strings.Repeat("a", 4096) + "\r\n\r\n"
			tick := time.NewTicker(20 * time.Millisecond) // 50 bytes/s: the head would take 80 s
			defer tick.Stop()
			others := false
			for i := 0; ; i++ {
				select {
				case e := <-closed:
					if e.after < headerTimeout-50*time.Millisecond || e.after > headerTimeout+margin {
						t.Errorf("the slow connection was closed after %v, want about %v", e.after, headerTimeout)
					}
					if bytes.Contains(e.got, []byte("200 OK")) {
						t.Errorf("the slow request was served: %q", e.got)
					}
					if !others {
						t.Errorf("no other request was tried while the slow one was open")
					}
					return
				case <-tick.C:
					if time.Since(start) > headerTimeout+margin {
						t.Fatalf("the slow connection is still open after %v", time.Since(start))
					}
					conn.Write([]byte{head[i%len(head)]})
					if i == 5 {
						// Meanwhile others are served at once.
						r, err := http.Get("http://" + addr + "/healthz")
						if err != nil || r.StatusCode != 200 {
							t.Errorf("a normal request during the slow one: %v %v", err, r)
						}
						if r != nil {
							r.Body.Close()
						}
						others = true
					}
				}
			}
		})

		t.Run(l.name+": an idle keep-alive connection is closed after IdleTimeout", func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(idleTimeout + 2*margin))
			br := bufio.NewReader(conn)
			for range 2 { // the connection is reused, then left idle
				if _, err := conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")); err != nil {
					t.Fatal(err)
				}
				res, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != 200 || res.Close {
					t.Fatalf("keep-alive request: %d close=%v", res.StatusCode, res.Close)
				}
			}
			idle := time.Now()
			_, err = br.ReadByte()
			after := time.Since(idle)
			if err == nil {
				t.Fatal("the server sent bytes on an idle connection")
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("the idle connection was not closed within %v", idleTimeout+2*margin)
			}
			if after < idleTimeout-50*time.Millisecond || after > idleTimeout+margin {
				t.Errorf("the idle connection was closed after %v, want about %v", after, idleTimeout)
			}
		})
	}
}

// ---- streams per session ----

func TestHostileStreamsPerSession(t *testing.T) {
	h := newHarness(t, "", harnessOpts{})
	c := streamClient()
	s := h.join("greedy", "read", "observe")
	other := h.join("other", "read")
	open := func(t *testing.T, kind, token string) (*stream, *mcpResp) {
		t.Helper()
		switch kind {
		case "listen":
			return h.ListenReq(t, c, token, fmt.Sprintf("%q", randomID("l")), map[string]any{"resourceSubscriptions": []string{h.Eng.DocumentURI()}}, false)
		case "GET /mcp":
			return h.LegacyGet(t, c, token, "text/event-stream")
		default:
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, "GET", h.IngressURL("/workspace/observe"), nil)
			req.Header.Set("Authorization", "Bearer "+token)
			return openStream(t, c, req, cancel, "observe")
		}
	}
	var held []*stream
	for _, kind := range []string{"listen", "listen", "observe", "GET /mcp"} {
		st, r := open(t, kind, s.SessionToken)
		if st == nil {
			t.Fatalf("%s %d of 4 refused: %d %s", kind, len(held)+1, r.Status, r.Raw)
		}
		held = append(held, st)
	}
	h.waitSubscribers(t, 4)
	for _, kind := range []string{"listen", "observe", "GET /mcp"} {
		t.Run("a fifth stream ("+kind+") is refused with 429 limit_exceeded", func(t *testing.T) {
			st, r := open(t, kind, s.SessionToken)
			if st != nil {
				st.Close()
				t.Fatal("a fifth stream opened")
			}
			if r.Status != http.StatusTooManyRequests || !bytes.Contains(r.Raw, []byte(`"limit_exceeded"`)) {
				t.Errorf("%d %s, want 429 limit_exceeded", r.Status, r.Raw)
			}
		})
	}
	t.Run("another session is not limited", func(t *testing.T) {
		st, r := open(t, "listen", other.SessionToken)
		if st == nil {
			t.Fatalf("%d %s", r.Status, r.Raw)
		}
		st.Close()
		h.waitSubscribers(t, 4)
	})
	t.Run("after one ends, the session may open another", func(t *testing.T) {
		held[0].Close()
		h.waitSubscribers(t, 3)
		st, r := open(t, "listen", s.SessionToken)
		if st == nil {
			t.Fatalf("%d %s", r.Status, r.Raw)
		}
		held[0] = st
	})
	t.Run("no stream outlives its client", func(t *testing.T) {
		for _, st := range held {
			st.Close()
		}
		h.waitSubscribers(t, 0)
	})
}

// ---- per-session rate limits ----

func TestHostileRateLimit(t *testing.T) {
	const perMinute = 5
	h := newHarness(t, "", harnessOpts{Limits: func(l *room.Limits) { l.RateLimitPerMinute = perMinute }})
	a := h.join("a", "read")
	b := h.join("b", "read")
	status := func(p party) apiResp {
		return h.do("GET", h.IngressURL("/workspace/status"), p.SessionToken, nil)
	}
	for i := range perMinute {
		if r := status(a); r.Status != 200 {
			t.Fatalf("request %d: %d %s", i+1, r.Status, r.Body)
		}
	}
	retry := 0
	t.Run("the sixth request is 429 with retry_after_seconds", func(t *testing.T) {
		r := status(a)
		m := wantError(t, r, http.StatusTooManyRequests, "limit_exceeded")
		s, _ := m["retry_after_seconds"].(float64)
		// At most the window (60 s, rounded up, plus the limiter's one second).
		if retry = int(s); s < 1 || s > 61 {
			t.Errorf("retry_after_seconds = %v, want 1..61", m["retry_after_seconds"])
		}
		if got := r.Header.Get("Retry-After"); got != strconv.Itoa(retry) {
			t.Errorf("Retry-After %q, want the body's retry_after_seconds %d", got, retry)
		}
	})
	t.Run("MCP shares the budget: 429 with data.retry_after_seconds", func(t *testing.T) {
		r := a.mcp.call(t, "tools/call", map[string]any{"name": "workspace_status", "arguments": map[string]any{}})
		e := wantRPCError(t, r, http.StatusTooManyRequests, mcptest.CodeInternalError)
		data, _ := e["data"].(map[string]any)
		if data["error"] != "limit_exceeded" || data["retry_after_seconds"] == nil {
			t.Errorf("data %v, want error limit_exceeded and retry_after_seconds", data)
		}
	})
	t.Run("another session is unaffected", func(t *testing.T) {
		wantOK(t, status(b))
		b.mcp.toolOK(t, "workspace_status", map[string]any{})
	})
	t.Run("the local operator is not limited", func(t *testing.T) {
		for range 2 * perMinute {
			wantOK(t, h.do("GET", h.OwnerURL("/workspace/status"), h.OpToken, nil))
		}
	})
	t.Run("one second before retry_after_seconds it is still refused", func(t *testing.T) {
		h.Clock.Advance(time.Duration(retry-1)*time.Second - time.Millisecond)
		wantError(t, status(a), http.StatusTooManyRequests, "limit_exceeded")
	})
	t.Run("after retry_after_seconds (a minute) it goes through again", func(t *testing.T) {
		h.Clock.Advance(time.Second + time.Millisecond)
		wantOK(t, status(a))
		a.mcp.toolOK(t, "workspace_status", map[string]any{})
	})
}

// ---- a stalled reader under a flood of large notifications ----

func TestHostileSSEBacklog(t *testing.T) {
	// Every change puts one frame of at least 128 KiB on each stream (a task
	// asking a long question), then a small one (the answer). A reader that
	// stops reading fills its socket buffers, then its queue of 4, and is
	// dropped; one that reads gets every frame. TestListenStalledReaderIsDropped
	// (listen_test.go) covers the same rule with many tasks; here two stalled
	// streams of two sessions share one task with a reading one.
	const big, queue = 128 << 10, 4
	h := newHarness(t, "", harnessOpts{
		Limits: func(l *room.Limits) {
			l.MaxInputMessage = big
			l.RateLimitPerMinute = 0
		},
		Hub:      listen.Config{QueueLen: queue},
		InMemory: true,
	})
	c := streamClient()
	o := h.join("owner", "read", "propose")
	a := h.join("assignee", "read", "checkout")
	x := &records{}
	m := &matrix{h: h, A: o.ParticipantID, B: a.ParticipantID}
	m.handoff(t, x, o.ParticipantID, roleThird, fixAccepted) // owned by o, accepted by a
	follow := map[string]any{"taskIds": []string{x.TaskID}}
	stalled := []*stream{}
	for i, tok := range []string{o.SessionToken, a.SessionToken} {
		s, r := h.ListenReq(t, c, tok, fmt.Sprintf(`"stalled-%d"`, i), follow, true)
		if s == nil {
			t.Fatalf("listen refused: %d %s", r.Status, r.Raw)
		}
		s.ID = fmt.Sprintf(`"stalled-%d"`, i)
		stalled = append(stalled, s)
	}
	healthy, ack := h.Listen(t, c, o.SessionToken, "1", follow, true)
	if _, ok := ack["taskIds"]; !ok {
		t.Fatal("the healthy listen was not acknowledged for the task")
	}
	h.waitSubscribers(t, 3)
	question := strings.Repeat("?", big-1)
	published := 0
	for i := 0; h.Hub.Stats().Dropped < 2; i++ {
		if i == 400 {
			t.Fatalf("no drop after %d frames of %d KiB: %+v", published, big>>10, h.Hub.Stats())
		}
		key := fmt.Sprintf("q%d", i)
		inWriter(t, h, func(tx *room.Tx) (room.Handoff, error) {
			return h.Eng.RequestInput(tx, trusted(a.ParticipantID), room.RequestInputInput{HandoffID: x.HandoffID, Requests: []room.InputRequestSpec{{Key: key, Message: question}}})
		})
		healthy.ExpectTask(t, x.TaskID, room.TaskInputRequired)
		inWriter(t, h, func(tx *room.Tx) (struct{}, error) {
			_, err := h.Eng.UpdateTask(tx, trusted(o.ParticipantID), room.UpdateTaskInput{TaskID: x.TaskID, InputResponses: map[string]json.RawMessage{key: json.RawMessage(`{"action":"accept"}`)}})
			return struct{}{}, err
		})
		healthy.ExpectTask(t, x.TaskID, room.TaskWorking)
		published += 2
	}
	st := h.Hub.Stats()
	t.Logf("both stalled streams dropped after %d frames: %+v", published, st)
	if st.Dropped != 2 || st.DroppedQueueFull+st.DroppedSlow != 2 {
		t.Errorf("stats %+v, want exactly the two stalled streams dropped", st)
	}
	if st.Subscribers != 1 {
		t.Errorf("%d subscribers left, want the healthy one", st.Subscribers)
	}
	for _, s := range stalled {
		s.Start()
		frames := s.End(t)
		if len(frames) == 0 {
			t.Fatalf("%s delivered nothing, not even its acknowledgement", s.Name)
		}
		got := 0
		for _, f := range frames[1:] {
			if f.IsFinal() {
				t.Errorf("%s: a dropped stream carried the final result", s.Name)
			}
			got++
		}
		// What the server held for it is bounded: its queue plus what the
		// kernel buffers took; the rest never left the hub.
		if got >= published {
			t.Errorf("%s got all %d frames: it was never behind", s.Name, published)
		}
		t.Logf("%s received %d of %d frames before it was dropped", s.Name, got, published)
	}
	t.Run("the room and the healthy stream go on", func(t *testing.T) {
		o.ext.taskGet(t, x.TaskID)
		inWriter(t, h, func(tx *room.Tx) (room.Handoff, error) {
			return h.Eng.RequestInput(tx, trusted(a.ParticipantID), room.RequestInputInput{HandoffID: x.HandoffID, Requests: []room.InputRequestSpec{{Key: "last", Message: "?"}}})
		})
		healthy.ExpectTask(t, x.TaskID, room.TaskInputRequired)
		if st := h.Hub.Stats(); st.Dropped != 2 || st.Subscribers != 1 {
			t.Errorf("stats %+v, want still two drops and one subscriber", st)
		}
	})
}

// ---- DNS rebinding on every route of both listeners ----

func TestHostileDNSRebinding(t *testing.T) {
	h := newHarness(t, "")
	star := h.join("star", "*")
	_, cookie := h.pageCookie(t)
	variants := []struct {
		name string
		opt  func(port string) []reqOpt
	}{
		{"evil Host", func(port string) []reqOpt { return []reqOpt{withHost("evil.example:" + port)} }},
		{"a Host that starts with a loopback name", func(port string) []reqOpt { return []reqOpt{withHost("127.0.0.1.evil.example:" + port)} }},
		{"evil Origin", func(string) []reqOpt { return []reqOpt{withHeader("Origin", "http://evil.example")} }},
		{"null Origin", func(string) []reqOpt { return []reqOpt{withHeader("Origin", "null")} }},
	}
	h.Sweep()
	before := h.Snapshot()
	for _, l := range []struct {
		name, base, token, port string
		handler                 http.Handler
	}{
		{"owner", h.Owner.URL, h.OpToken, serverPort(h.Owner), h.API.OwnerHandler()},
		{"ingress", h.Ingress.URL, star.SessionToken, serverPort(h.Ingress), h.API.IngressHandler()},
	} {
		routes := append(walkRoutes(t, l.handler), servedRoute{"GET", "/no-such-route"}, servedRoute{"GET", "/?key=anything"})
		for _, rt := range routes {
			for _, v := range variants {
				t.Run(l.name+" "+rt.String()+" with "+v.name, func(t *testing.T) {
					var body any
					opts := v.opt(l.port)
					if rt.Method != "GET" {
						body = map[string]any{"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": map[string]any{}}
					}
					if rt.Path == "/mcp" || rt.Path == "/workspace/observe" {
						opts = append(opts, withHeader("Accept", "application/json, text/event-stream"))
					}
					if l.name == "owner" {
						opts = append(opts, withCookie(cookie))
					}
					r := h.do(rt.Method, l.base+rt.Path, l.token, body, opts...)
					m := wantError(t, r, http.StatusForbidden, "permission_denied")
					if msg, _ := m["message"].(string); !strings.Contains(msg, "loopback") {
						t.Errorf("the refusal does not say why: %s", r.Body)
					}
				})
			}
		}
	}
	t.Run("an owner-page cookie write from another local origin is refused", func(t *testing.T) {
		for _, p := range []string{"/workspace/invite", "/workspace/handoff", "/owner/key", "/workspace/commit"} {
			r := h.do("POST", h.OwnerURL(p), "", map[string]any{}, withCookie(cookie), withHeader("Origin", "http://127.0.0.1:1"))
			wantError(t, r, http.StatusForbidden, "permission_denied")
		}
	})
	t.Run("nothing changed", func(t *testing.T) { h.AssertUnchanged(t, before) })
}

// ---- secrets ----

// TestFlow_HostileSecretsScan runs a room through joins, invitations,
// handoffs, MCP and operator calls, the owner page and failed logins,
// keeping every answer, then scans every answer, table, file, event and log
// line for every secret it handed out: one long flow by design.
func TestFlow_HostileSecretsScan(t *testing.T) {
	h := newHarness(t, "", harnessOpts{})
	secrets := map[string]string{"operator token": h.OpToken}
	type answer struct {
		label   string
		text    string
		allowed []string // secret labels this answer may carry: the one it hands out
	}
	var answers []answer
	keep := func(label string, status int, header http.Header, body []byte, allowed ...string) {
		var hb strings.Builder
		for k, vs := range header {
			fmt.Fprintf(&hb, "%s: %s\n", k, strings.Join(vs, ", "))
		}
		answers = append(answers, answer{label, hb.String() + "\n" + string(body), allowed})
	}
	call := func(label, method, url, token string, body any, allowed []string, opts ...reqOpt) apiResp {
		t.Helper()
		r := h.do(method, url, token, body, opts...)
		keep(label, r.Status, r.Header, r.Body, allowed...)
		return r
	}
	mcpCall := func(label string, c *mcpClient, q mcpReq, allowed ...string) mcpResp {
		t.Helper()
		r := c.do(t, q)
		keep(label, r.Status, r.Header, r.Raw, allowed...)
		return r
	}
	addInvite := func(label string, r apiResp) inviteGrant {
		t.Helper()
		wantOK(t, r)
		var g inviteGrant
		r.Into(t, &g)
		secrets[label+" secret"], secrets[label+" uri"] = g.Token, g.URI
		return g
	}
	join := func(label, invite string) sessionGrant {
		t.Helper()
		r := call("join "+label, "POST", h.IngressURL("/session/join"), "", map[string]any{"invite": invite, "name": label}, []string{label + " session"})
		wantOK(t, r)
		var g sessionGrant
		r.Into(t, &g)
		secrets[label+" session"] = g.SessionToken
		return g
	}

	// An observe stream is open through it all: every event it carries is scanned.
	c := streamClient()
	watcherInv := addInvite("invite for watcher", call("operator invite", "POST", h.OwnerURL("/workspace/invite"), h.OpToken,
		map[string]any{"capabilities": []string{"read", "observe"}}, []string{"invite for watcher secret", "invite for watcher uri"}))
	watcher := join("watcher", watcherInv.URI)
	ctx, cancel := context.WithCancel(context.Background())
	oreq, _ := http.NewRequestWithContext(ctx, "GET", h.IngressURL("/workspace/observe"), nil)
	oreq.Header.Set("Authorization", "Bearer "+watcher.SessionToken)
	observe, r0 := openStream(t, c, oreq, cancel, "observe")
	if observe == nil {
		t.Fatalf("observe: %d %s", r0.Status, r0.Raw)
	}
	observe.Start()

	// Joins: by URI, by raw secret, by an invitation an agent made over MCP.
	ia := addInvite("invite for alice", call("operator invite", "POST", h.OwnerURL("/workspace/invite"), h.OpToken,
		map[string]any{"capabilities": append(slices.Clone(agentCaps), "invite")}, []string{"invite for alice secret", "invite for alice uri"}))
	alice := join("alice", ia.URI)
	ib := addInvite("invite for bob", call("operator invite", "POST", h.OwnerURL("/workspace/invite"), h.OpToken,
		map[string]any{"capabilities": []string{"read", "approve"}, "max_uses": 2}, []string{"invite for bob secret", "invite for bob uri"}))
	bob := join("bob", ib.Token)
	am := newMCPClient(h, alice.SessionToken, false)
	res := mcpCall("mcp workspace_invite", am, mcpReq{Method: "tools/call", Params: map[string]any{"name": "workspace_invite",
		"arguments": map[string]any{"capabilities": agentCaps}}}, "invite for carol secret", "invite for carol uri")
	sc, _ := res.Result["structuredContent"].(map[string]any)
	secrets["invite for carol secret"], _ = sc["token"].(string)
	secrets["invite for carol uri"], _ = sc["uri"].(string)
	if secrets["invite for carol secret"] == "" {
		t.Fatalf("workspace_invite gave no token: %s", res.Raw)
	}
	carol := join("carol", secrets["invite for carol uri"])
	bm := newMCPClient(h, bob.SessionToken, true)
	cm := newMCPClient(h, carol.SessionToken, true)

	// A handoff through its whole life, over both front doors.
	cr := mcpCall("mcp handoff_create", am.withTasks(true), mcpReq{Method: "tools/call", Params: map[string]any{"name": "handoff_create",
		"arguments": map[string]any{"summary": "write the plan", "assignee": carol.ParticipantID}}})
	taskID, _ := cr.Result["taskId"].(string)
	meta, _ := cr.Result["_meta"].(map[string]any)
	handoffID, _ := meta[mcptest.HandoffMeta].(string)
	if taskID == "" || handoffID == "" {
		t.Fatalf("handoff_create: %s", cr.Raw)
	}
	wantOK(t, call("accept", "POST", h.IngressURL("/workspace/handoff/accept"), carol.SessionToken, map[string]any{"handoff_id": handoffID}, nil))
	mcpCall("mcp request_input", cm, mcpReq{Method: "tools/call", Params: map[string]any{"name": "handoff_request_input",
		"arguments": map[string]any{"handoff_id": handoffID, "requests": []any{map[string]any{"key": "when", "message": "by when?"}}}}})
	mcpCall("mcp tasks/update", am.withTasks(true), mcpReq{Method: "tasks/update", Params: map[string]any{"taskId": taskID,
		"inputResponses": map[string]any{"when": map[string]any{"action": "accept", "content": map[string]any{"answer": "friday"}}}}})
	mcpCall("mcp tasks/get", cm, mcpReq{Method: "tasks/get", Params: map[string]any{"taskId": taskID}})
	wantOK(t, call("complete", "POST", h.IngressURL("/workspace/handoff/complete"), carol.SessionToken,
		map[string]any{"handoff_id": handoffID, "result": map[string]any{"text": "done"}}, nil))
	mcpCall("mcp handoff_approve", bm, mcpReq{Method: "tools/call", Params: map[string]any{"name": "handoff_approve", "arguments": map[string]any{"handoff_id": handoffID}}})
	mcpCall("mcp resources/read", am, mcpReq{Method: "resources/read", Params: map[string]any{"uri": h.Eng.DocumentURI()}})
	mcpCall("mcp handoff_events", am, mcpReq{Method: "tools/call", Params: map[string]any{"name": "handoff_events", "arguments": map[string]any{"handoff_id": handoffID}}})
	for _, p := range []string{"/workspace/history", "/workspace/participants", "/workspace/room", "/workspace/invites", "/workspace/diagnostics", "/workspace/status"} {
		call("GET "+p, "GET", h.IngressURL(p), alice.SessionToken, nil, nil)
		call("operator GET "+p, "GET", h.OwnerURL(p), h.OpToken, nil, nil)
	}
	lst, _ := h.Listen(t, c, alice.SessionToken, "9", map[string]any{"taskIds": []string{taskID}, "resourceSubscriptions": []string{h.Eng.DocumentURI()}}, true)

	// The operator: a call, one acting as a participant, a second handoff cancelled.
	second := mcpCall("mcp handoff_create 2", am.withTasks(true), mcpReq{Method: "tools/call", Params: map[string]any{"name": "handoff_create",
		"arguments": map[string]any{"summary": "another"}}})
	task2, _ := second.Result["taskId"].(string)
	wantOK(t, call("operator act-as cancel", "POST", h.OwnerURL("/workspace/task/cancel"), h.OpToken, map[string]any{"task_id": task2}, nil,
		withHeader(ActAsHeader, alice.ParticipantID)))
	wantOK(t, call("operator metrics", "GET", h.OwnerURL("/debug/metrics"), h.OpToken, nil, nil))

	// The owner page: a key, the cookie, the page, a write from the page.
	kr := call("owner key", "POST", h.OwnerURL("/owner/key"), h.OpToken, map[string]any{}, []string{"page key"})
	wantOK(t, kr)
	secrets["page key"], _ = kr.JSON(t)["key"].(string)
	xr := call("page key exchange", "GET", h.OwnerURL("/?key="+secrets["page key"]), "", nil, []string{"owner cookie"})
	for _, ck := range (&http.Response{Header: xr.Header}).Cookies() {
		if ck.Name == h.API.pages.name {
			secrets["owner cookie"] = ck.Value
		}
	}
	if secrets["owner cookie"] == "" {
		t.Fatalf("no owner cookie: %d %v", xr.Status, xr.Header)
	}
	ck := &http.Cookie{Name: h.API.pages.name, Value: secrets["owner cookie"]}
	if r := call("owner page", "GET", h.OwnerURL("/"), "", nil, nil, withCookie(ck)); r.Status != 200 {
		t.Fatalf("owner page: %d", r.Status)
	}
	addInvite("invite from the page", call("page invite", "POST", h.OwnerURL("/workspace/invite"), "", map[string]any{},
		[]string{"invite from the page secret", "invite from the page uri"}, withCookie(ck), withHeader("Origin", h.Owner.URL)))
	call("page key reused", "GET", h.OwnerURL("/?key="+secrets["page key"]), "", nil, nil)

	// Failed logins and misuse: wrong bearer, wrong operator token, wrong
	// and spent invitations, revoke by secret.
	secrets["wrong session token"] = randomID("ses")
	secrets["wrong operator token"] = "op_" + randomID("x")
	secrets["wrong invite secret"] = strings.TrimPrefix(randomID("x"), "x_") + "AbCdEf"
	call("wrong bearer", "GET", h.IngressURL("/workspace/status"), secrets["wrong session token"], nil, nil)
	mcpCall("mcp wrong bearer", newMCPClient(h, secrets["wrong session token"], false), mcpReq{Method: "tools/list"})
	call("wrong operator token", "GET", h.OwnerURL("/workspace/status"), secrets["wrong operator token"], nil, nil)
	call("operator token on ingress", "GET", h.IngressURL("/workspace/status"), h.OpToken, nil, nil)
	call("wrong invite", "POST", h.IngressURL("/session/join"), "", map[string]any{"invite": secrets["wrong invite secret"], "name": "x"}, nil)
	call("spent invite", "POST", h.IngressURL("/session/join"), "", map[string]any{"invite": ia.URI, "name": "again"}, nil)
	call("revoke by secret", "POST", h.OwnerURL("/workspace/invite/revoke"), h.OpToken, map[string]any{"token": ib.Token}, nil)
	call("join revoked", "POST", h.IngressURL("/session/join"), "", map[string]any{"invite_token": ib.Token, "name": "late"}, nil)
	call("leave", "POST", h.IngressURL("/workspace/leave"), bob.SessionToken, map[string]any{}, nil)
	call("after leave", "GET", h.IngressURL("/workspace/status"), bob.SessionToken, nil, nil)

	h.CancelListen(t, alice.SessionToken, "9")
	listenFrames := lst.End(t)
	observe.Close()
	var frames []string
	for _, f := range listenFrames {
		frames = append(frames, string(f.Data))
	}
	for _, f := range observe.Frames() {
		frames = append(frames, string(f.Data))
	}
	if len(frames) < 10 {
		t.Errorf("only %d stream frames were captured", len(frames))
	}

	// Base64 forms of every secret, in case something stores an encoding.
	for label, s := range maps.Clone(secrets) {
		if strings.HasSuffix(label, " uri") {
			payload := strings.TrimPrefix(s, room.InvitePrefix)
			secrets[label+" payload"] = payload
			continue
		}
		secrets[label+" (base64)"] = base64.StdEncoding.EncodeToString([]byte(s))
		secrets[label+" (base64url)"] = base64.RawURLEncoding.EncodeToString([]byte(s))
	}
	for label, s := range secrets {
		if s == "" {
			t.Fatalf("secret %q was not captured", label)
		}
	}
	allowedFor := func(a answer) map[string]string {
		out := map[string]string{}
		for label, s := range secrets {
			ok := false
			for _, al := range a.allowed {
				if label == al || strings.HasPrefix(label, al+" ") {
					ok = true
				}
			}
			if !ok {
				out[label] = s
			}
		}
		return out
	}

	t.Run("no secret in any answer but the one that hands it out", func(t *testing.T) {
		for _, a := range answers {
			if found := leaked(a.text, allowedFor(a)); len(found) > 0 {
				t.Errorf("%s carries %v:\n%.600s", a.label, found, a.text)
			}
		}
	})
	t.Run("no secret in any stream frame (events, tasks, resources)", func(t *testing.T) {
		for _, f := range frames {
			if found := leaked(f, secrets); len(found) > 0 {
				t.Errorf("a frame carries %v: %.300s", found, f)
			}
		}
	})
	t.Run("no secret in the log", func(t *testing.T) {
		logs := h.Logs.String()
		if !strings.Contains(logs, "request") {
			t.Fatalf("the log captured nothing")
		}
		if found := leaked(logs, secrets); len(found) > 0 {
			t.Errorf("the log carries %v", found)
		}
	})

	// Stop the room (its last commit included) and read the sidecar cold.
	h.Stop()
	t.Run("no secret in any column of any table", func(t *testing.T) {
		db, err := sql.Open("sqlite", "file:"+room.SidecarPath(h.Eng.DocPath)+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table'`)
		if err != nil {
			t.Fatal(err)
		}
		var tables []string
		for rows.Next() {
			var n string
			rows.Scan(&n)
			tables = append(tables, n)
		}
		rows.Close()
		if len(tables) < len(sidecarTables) {
			t.Fatalf("only %d tables: %v", len(tables), tables)
		}
		cells := 0
		for _, table := range tables {
			rows, err := db.Query(`SELECT * FROM "` + table + `"`)
			if err != nil {
				t.Fatal(err)
			}
			cols, _ := rows.Columns()
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			for rows.Next() {
				if err := rows.Scan(ptrs...); err != nil {
					t.Fatal(err)
				}
				for i, v := range vals {
					cells++
					text := fmt.Sprint(v)
					if b, ok := v.([]byte); ok {
						text = string(b)
					}
					if found := leaked(text, secrets); len(found) > 0 {
						t.Errorf("%s.%s holds %v", table, cols[i], found)
					}
				}
			}
			rows.Close()
		}
		t.Logf("scanned %d cells in %d tables", cells, len(tables))
	})
	t.Run("no secret in any byte of the room's files", func(t *testing.T) {
		entries, err := os.ReadDir(h.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(h.Dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if found := leaked(string(b), secrets); len(found) > 0 {
				t.Errorf("%s holds %v", e.Name(), found)
			}
		}
	})
}

// TestHostileSlowBody: headers in time, then a body trickled byte by byte.
// The server has no read timeout (streams live long), so the body read has
// its own bound; the handler gives up and other clients are unaffected.
func TestHostileSlowBody(t *testing.T) {
	const bodyTimeout, margin = 500 * time.Millisecond, 3 * time.Second
	h := newHarness(t, "")
	api := New(Config{Room: h.Room, Hub: h.Hub, BodyReadTimeout: bodyTimeout})
	srv := &http.Server{Handler: api.IngressHandler()}
	ln := roomtest.Listener(t)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()
	before := h.Snapshot()

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"invite":"` + strings.Repeat("a", 100) + `","name":"slow"}`
	fmt.Fprintf(conn, "POST /session/join HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	conn.Write([]byte(body[:1]))
	start := time.Now()
	answered := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(conn)
		answered <- b
	}()
	tick := time.NewTicker(100 * time.Millisecond) // the body would take 10 s
	defer tick.Stop()
	for i := 1; ; i++ {
		select {
		case got := <-answered:
			if d := time.Since(start); d > bodyTimeout+margin {
				t.Errorf("answered after %v, want about %v", d, bodyTimeout)
			}
			if !bytes.Contains(got, []byte(" 400 ")) && len(got) != 0 {
				t.Errorf("a trickled body was answered %q, want 400 or a closed connection", got)
			}
			h.AssertUnchanged(t, before)
			r, err := http.Get("http://" + addr + "/healthz")
			if err != nil || r.StatusCode != 200 {
				t.Fatalf("the server stopped serving: %v %v", err, r)
			}
			r.Body.Close()
			return
		case <-tick.C:
			if time.Since(start) > bodyTimeout+margin {
				t.Fatalf("still waiting for the trickled body after %v", time.Since(start))
			}
			if i < len(body) {
				conn.Write([]byte{body[i]})
			}
		}
	}
}
