package httpapi

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/commonroom/ce/internal/mcptest"
)

// The request log an operator reads: one info line per request, in JSON
// when asked, naming the route or tool, the participant, the outcome and
// the trace the agent sent, and nothing secret.

// jsonLogHarness is a harness whose front door logs JSON at info into the
// returned buffer (the room's other logs stay in h.Logs).
func jsonLogHarness(t *testing.T) (*roomHarness, *lockedBuffer) {
	t.Helper()
	buf := &lockedBuffer{}
	h := newHarness(t, "", harnessOpts{Server: func(c *Config) {
		c.Logger = slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}})
	return h, buf
}

// requestLines parses the log line by line, failing on any line that is
// not a JSON object, and returns its "request" lines by request id,
// failing when one id has two lines.
func requestLines(t *testing.T, log string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("a log line is not JSON (%v): %s", err, sc.Bytes())
		}
		if line["msg"] != "request" {
			continue
		}
		id, _ := line["request_id"].(string)
		if id == "" {
			t.Fatalf("a request line without a request_id: %v", line)
		}
		if out[id] != nil {
			t.Fatalf("two lines for request %s:\n%v\n%v", id, out[id], line)
		}
		out[id] = line
	}
	return out
}

// loggedRequest is one request a test made and what its line must say
// (fields left empty must be absent from the line).
type loggedRequest struct {
	what                          string
	id                            string
	route, rpcMethod, tool        string
	participant, errKind, traceID string
	status                        int
}

func (w loggedRequest) check(t *testing.T, lines map[string]map[string]any) {
	t.Helper()
	line := lines[w.id]
	if line == nil {
		t.Errorf("%s: no request line with request_id %q", w.what, w.id)
		return
	}
	if line["level"] != "INFO" {
		t.Errorf("%s: level %v, want INFO: %v", w.what, line["level"], line)
	}
	if _, ok := line["duration_ms"].(float64); !ok {
		t.Errorf("%s: no duration_ms: %v", w.what, line)
	}
	if line["status"] != float64(w.status) {
		t.Errorf("%s: status %v, want %d: %v", w.what, line["status"], w.status, line)
	}
	for key, want := range map[string]string{"route": w.route, "rpc_method": w.rpcMethod, "tool": w.tool,
		"participant_id": w.participant, "error_kind": w.errKind, "trace_id": w.traceID} {
		got, has := line[key]
		if want == "" && has {
			t.Errorf("%s: %s = %v, want none: %v", w.what, key, got, line)
		}
		if want != "" && got != want {
			t.Errorf("%s: %s = %v, want %q: %v", w.what, key, got, want, line)
		}
	}
}

// TestRequestLog_ALifecycleLogsOneLinePerRequestAndNoSecret drives a whole
// lifecycle — invitations, joins, a handoff created, accepted, completed
// and approved, a proposal approved and committed — through MCP tools and
// plain HTTP, then reads the JSON log: every line parses, every request has
// exactly one info line naming its route or tool and its participant, and
// no line holds a session token, an invitation, the operator credential or
// the document's text.
func TestRequestLog_ALifecycleLogsOneLinePerRequestAndNoSecret(t *testing.T) {
	h, logs := jsonLogHarness(t)
	var made []loggedRequest
	httpStep := func(what, method, url, token string, body any, want loggedRequest) apiResp {
		t.Helper()
		r := h.do(method, url, token, body)
		if r.Status != want.status {
			t.Fatalf("%s: status %d, want %d: %s", what, r.Status, want.status, r.Body)
		}
		want.what, want.id, want.route = what, r.Header.Get("X-Request-Id"), url[strings.Index(url[len("http://"):], "/")+len("http://"):]
		if i := strings.IndexByte(want.route, '?'); i >= 0 {
			want.route = want.route[:i]
		}
		made = append(made, want)
		return r
	}
	toolStep := func(what string, c *mcpClient, participant, tool string, args map[string]any, errKind string) map[string]any {
		t.Helper()
		res := c.do(t, mcpReq{Method: "tools/call", Params: map[string]any{"name": tool, "arguments": args}})
		sc, _ := res.Result["structuredContent"].(map[string]any)
		if res.Status != http.StatusOK || sc == nil || (res.Result["isError"] == true) != (errKind != "") {
			t.Fatalf("%s: status %d: %s", what, res.Status, res.Raw)
		}
		if errKind != "" && sc["error"] != errKind {
			t.Fatalf("%s: error %v, want %s", what, sc["error"], errKind)
		}
		made = append(made, loggedRequest{what: what, id: res.Header.Get("X-Request-Id"), route: "/mcp", rpcMethod: "tools/call",
			tool: tool, participant: participant, errKind: errKind, status: http.StatusOK})
		return sc
	}

	host := h.Eng.HostID
	var bossInv, workerInv inviteGrant
	httpStep("invite the boss", "POST", h.OwnerURL("/workspace/invite"), h.OpToken,
		map[string]any{"capabilities": []string{"read", "propose", "approve", "commit"}},
		loggedRequest{participant: host, status: http.StatusOK}).Into(t, &bossInv)
	httpStep("invite the worker", "POST", h.OwnerURL("/workspace/invite"), h.OpToken,
		map[string]any{"capabilities": []string{"read", "checkout"}},
		loggedRequest{participant: host, status: http.StatusOK}).Into(t, &workerInv)
	// The one-step join puts the invitation itself in the body: the log
	// must still not hold it.
	var bossG, workerG sessionGrant
	joined := httpStep("the boss joins", "POST", h.IngressURL("/session/join"), "", map[string]any{"invite": bossInv.URI, "name": "boss"},
		loggedRequest{status: http.StatusOK})
	joined.Into(t, &bossG)
	made[len(made)-1].participant = bossG.ParticipantID
	httpStep("the worker joins", "POST", h.IngressURL("/session/join"), "", map[string]any{"invite": workerInv.URI, "name": "worker"},
		loggedRequest{status: http.StatusOK}).Into(t, &workerG)
	made[len(made)-1].participant = workerG.ParticipantID
	boss, worker := h.asParty(bossG), h.asParty(workerG)

	const summary = "draft the risks section, quietly"
	created := toolStep("handoff_create", boss.mcp, boss.ParticipantID, "handoff_create", map[string]any{"summary": summary, "assignee": worker.ParticipantID}, "")
	hid, _ := jsonAt(created, "handoff", "handoff_id").(string)
	if hid == "" {
		t.Fatalf("handoff_create: no handoff_id: %v", created)
	}
	toolStep("handoff_accept", worker.mcp, worker.ParticipantID, "handoff_accept", map[string]any{"handoff_id": hid}, "")
	toolStep("handoff_complete", worker.mcp, worker.ParticipantID, "handoff_complete", map[string]any{"handoff_id": hid, "result": map[string]any{"text": "the risks, listed"}}, "")
	toolStep("handoff_approve", boss.mcp, boss.ParticipantID, "handoff_approve", map[string]any{"handoff_id": hid}, "")
	toolStep("handoff_get of no handoff", boss.mcp, boss.ParticipantID, "handoff_get", map[string]any{"handoff_id": "handoff_0000000000000000"}, "handoff_not_found")

	const newText = "a sentence only the proposal holds"
	proposed := toolStep("workspace_propose", boss.mcp, boss.ParticipantID, "workspace_propose", map[string]any{"target": "Goals", "base_version": 1, "summary": "goals",
		"change": map[string]any{"section": "Goals", "content": "## Goals\n\n" + newText + "\n\n"}}, "")
	pid, _ := proposed["proposal_id"].(string)
	httpStep("review the proposal", "POST", h.IngressURL("/workspace/proposal/review"), boss.SessionToken, map[string]any{"proposal_id": pid, "approve": true},
		loggedRequest{participant: boss.ParticipantID, status: http.StatusOK})
	httpStep("commit it", "POST", h.IngressURL("/workspace/commit"), boss.SessionToken, map[string]any{"proposal_id": pid},
		loggedRequest{participant: boss.ParticipantID, status: http.StatusOK})
	httpStep("read the document", "GET", h.IngressURL("/workspace/read"), worker.SessionToken, nil,
		loggedRequest{participant: worker.ParticipantID, status: http.StatusOK})
	httpStep("a handoff that is not there", "GET", h.IngressURL("/workspace/handoff?handoff_id=handoff_0000000000000000"), worker.SessionToken, nil,
		loggedRequest{participant: worker.ParticipantID, errKind: "handoff_not_found", status: http.StatusNotFound})
	httpStep("a token that is no session", "GET", h.IngressURL("/workspace/status"), "not-a-session-token-4d1f", nil,
		loggedRequest{errKind: "unauthorized", status: http.StatusUnauthorized})
	httpStep("a write beyond the worker's capabilities", "POST", h.IngressURL("/workspace/commit"), worker.SessionToken, map[string]any{"proposal_id": pid},
		loggedRequest{participant: worker.ParticipantID, errKind: "permission_denied", status: http.StatusForbidden})

	lines := requestLines(t, logs.String())
	for _, w := range made {
		w.check(t, lines)
	}
	if len(lines) != len(made) {
		t.Errorf("%d request lines for %d requests:\n%s", len(lines), len(made), logs.String())
	}
	secrets := map[string]string{
		"the operator credential": h.OpToken,
		"the boss's session":      boss.SessionToken, "the worker's session": worker.SessionToken,
		"the boss's invitation": bossInv.URI, "the boss's invitation secret": bossInv.Token,
		"the worker's invitation": workerInv.URI, "the worker's invitation secret": workerInv.Token,
		"the document's text": "hello world", "the proposed text": newText, "the handoff's summary": summary,
	}
	for _, log := range []string{logs.String(), h.Logs.String()} {
		if found := leaked(log, secrets); len(found) > 0 {
			t.Errorf("the log holds %v:\n%s", found, log)
		}
	}
}

// TestRequestLog_CarriesTheTraceIDSent: a valid traceparent, as a header
// or in an MCP request's params._meta (which wins), puts its trace id in
// the request's line; one that is malformed, of another version or huge is
// ignored and the request is answered as if it had none.
func TestRequestLog_CarriesTheTraceIDSent(t *testing.T) {
	h, logs := jsonLogHarness(t)
	p := h.join("tracer")
	const (
		header = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		inMeta = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	)
	huge := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" + strings.Repeat("-ab", 2000)
	var made []loggedRequest
	for _, c := range []struct {
		name, header string
		want         string
	}{
		{"a valid header is carried", header, "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"a malformed header is ignored", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", ""},
		{"an uppercase header is ignored", strings.ToUpper(header), ""},
		{"an all-zero trace id is ignored", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", ""},
		{"a huge header is ignored", huge, ""},
	} {
		t.Run(c.name+" (HTTP)", func(t *testing.T) {
			r := h.do("GET", h.IngressURL("/workspace/status"), p.SessionToken, nil, withHeader("Traceparent", c.header))
			if r.Status != http.StatusOK {
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
			made = append(made, loggedRequest{what: c.name, id: r.Header.Get("X-Request-Id"), route: "/workspace/status",
				participant: p.ParticipantID, traceID: c.want, status: http.StatusOK})
		})
	}
	for _, c := range []struct {
		name        string
		header      string
		traceparent any // nil: none in _meta
		want        string
	}{
		{"a valid _meta.traceparent is carried", "", inMeta, "0af7651916cd43dd8448eb211c80319c"},
		{"_meta.traceparent wins over the header", header, inMeta, "0af7651916cd43dd8448eb211c80319c"},
		{"the header is carried when _meta has none", header, nil, "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"the header is kept when _meta's is malformed", header, "00-zz", "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"a _meta.traceparent that is a number is ignored", "", 42, ""},
		{"a _meta.traceparent that is an object is ignored", "", map[string]any{"a": inMeta}, ""},
		{"a huge _meta.traceparent is ignored", "", huge, ""},
		{"a _meta.traceparent of another version is ignored", "", "01" + inMeta[2:], ""},
	} {
		t.Run(c.name+" (MCP)", func(t *testing.T) {
			meta := mcptest.Meta(mcptest.Version, mcptest.Caps(false), "tracer")
			if c.traceparent != nil {
				meta["traceparent"] = c.traceparent
			}
			q := mcpReq{Method: "tools/call", Params: map[string]any{"name": "workspace_status"}, Meta: meta}
			if c.header != "" {
				q.Set = map[string]string{"Traceparent": c.header}
			}
			// Twice: a repeated _meta may be answered from the envelope's cache.
			for range 2 {
				res := p.mcp.do(t, q)
				if res.Status != http.StatusOK || res.Result == nil || res.Result["isError"] != false {
					t.Fatalf("status %d: %s", res.Status, res.Raw)
				}
				made = append(made, loggedRequest{what: c.name, id: res.Header.Get("X-Request-Id"), route: "/mcp", rpcMethod: "tools/call",
					tool: "workspace_status", participant: p.ParticipantID, traceID: c.want, status: http.StatusOK})
			}
		})
	}
	lines := requestLines(t, logs.String())
	for _, w := range made {
		w.check(t, lines)
	}
}

// TestRequestLog_ProbesAndFaults: a health probe that succeeds is logged at
// debug, not info; MCP protocol faults and refusals name their kind; a
// route nobody serves logs no route (its path is the client's text).
func TestRequestLog_ProbesAndFaults(t *testing.T) {
	h, logs := jsonLogHarness(t)
	p := h.join("prober")
	var made []loggedRequest
	probe := h.do("GET", h.IngressURL("/healthz"), "", nil)
	metrics := h.do("GET", h.OwnerURL("/debug/metrics"), h.OpToken, nil)
	if probe.Status != http.StatusOK || metrics.Status != http.StatusOK {
		t.Fatalf("probes answered %d, %d", probe.Status, metrics.Status)
	}
	r := h.do("GET", h.IngressURL("/no/such/route/"+p.SessionToken), "", nil)
	made = append(made, loggedRequest{what: "an unknown route", id: r.Header.Get("X-Request-Id"), errKind: "not_found", status: http.StatusNotFound})
	r = h.do("DELETE", h.IngressURL("/workspace/status"), "", nil)
	made = append(made, loggedRequest{what: "a method the route does not take", id: r.Header.Get("X-Request-Id"), errKind: "invalid_request", status: http.StatusMethodNotAllowed})
	for _, c := range []struct {
		name string
		ext  bool // declare the Tasks extension
		q    mcpReq
		want loggedRequest
	}{
		{"a body that is not JSON", false, mcpReq{Method: "tools/list", Raw: "{not json"},
			loggedRequest{errKind: "parse_error", status: http.StatusBadRequest}},
		{"an unknown method", false, mcpReq{Method: "nope/" + p.SessionToken},
			loggedRequest{errKind: "method_not_found", status: http.StatusNotFound}},
		{"an unknown tool", false, mcpReq{Method: "tools/call", Params: map[string]any{"name": "no_tool_" + p.SessionToken}},
			loggedRequest{rpcMethod: "tools/call", participant: p.ParticipantID, errKind: "invalid_params", status: http.StatusOK}},
		{"no session", false, mcpReq{Method: "tools/list", NoAuth: true},
			loggedRequest{rpcMethod: "tools/list", errKind: "unauthorized", status: http.StatusUnauthorized}},
		{"a task that is not there", true, mcpReq{Method: "tasks/get", Params: map[string]any{"taskId": "task_0000000000000000"}},
			loggedRequest{rpcMethod: "tasks/get", participant: p.ParticipantID, errKind: "task_not_found", status: http.StatusOK}},
		{"a Tasks method without the extension", false, mcpReq{Method: "tasks/get", Params: map[string]any{"taskId": "task_0000000000000000"}},
			loggedRequest{rpcMethod: "tasks/get", participant: p.ParticipantID, errKind: "missing_capability", status: http.StatusBadRequest}},
		{"a notification", false, mcpReq{ID: mcptest.NoID, Method: "notifications/whatever_" + p.SessionToken},
			loggedRequest{rpcMethod: "notification", status: http.StatusAccepted}},
	} {
		t.Run(c.name+" names its kind", func(t *testing.T) {
			client := p.mcp
			if c.ext {
				client = p.ext
			}
			res := client.do(t, c.q)
			if res.Status != c.want.status {
				t.Fatalf("status %d, want %d: %s", res.Status, c.want.status, res.Raw)
			}
			w := c.want
			w.what, w.id, w.route = c.name, res.Header.Get("X-Request-Id"), "/mcp"
			made = append(made, w)
		})
	}
	lines := requestLines(t, logs.String())
	for _, w := range made {
		w.check(t, lines)
	}
	for _, id := range []string{probe.Header.Get("X-Request-Id"), metrics.Header.Get("X-Request-Id")} {
		if lines[id] != nil {
			t.Errorf("a probe that succeeded is logged at info: %v", lines[id])
		}
	}
	if strings.Contains(logs.String(), p.SessionToken) {
		t.Errorf("the log holds text a client sent in a path, method or tool name:\n%s", logs.String())
	}
}
