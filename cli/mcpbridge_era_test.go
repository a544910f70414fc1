package cli

// `ce mcp` for a host of an earlier MCP revision (one that begins with
// initialize), end to end with the real binaries: a real `ce serve`, the
// bridge as a child process, and the host's lines written by hand exactly
// as such a host writes them (no params._meta).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/commonroom/ce/httpapi/present"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/commonroom/ce/internal/mcptest"
)

// oldRequest writes a request as a host of an earlier revision does: no
// params._meta (params left out when nil).
func (b *bridgeProc) oldRequest(id any, method string, params map[string]any) {
	b.t.Helper()
	msg := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		msg["params"] = params
	}
	if id != nil {
		msg["id"] = id
	}
	line, err := json.Marshal(msg)
	if err != nil {
		b.t.Fatal(err)
	}
	b.send(string(line))
}

// oldCall sends an old-era request and returns the answer's line.
func (b *bridgeProc) oldCall(id int, method string, params map[string]any) rpcLine {
	b.t.Helper()
	b.oldRequest(id, method, params)
	return b.answerTo(fmt.Sprint(id), nil)
}

// oldOK is oldCall for a request that must succeed.
func (b *bridgeProc) oldOK(id int, method string, params map[string]any) map[string]any {
	b.t.Helper()
	l := b.oldCall(id, method, params)
	if l.Error != nil || l.Result == nil {
		b.t.Fatalf("%s through ce mcp (earlier era): %s", method, l.raw)
	}
	return l.Result
}

// oldTool calls a tool that must succeed and returns its structuredContent.
func (b *bridgeProc) oldTool(id int, name string, args map[string]any) map[string]any {
	b.t.Helper()
	return b.toolResult(name, args, b.oldOK(id, "tools/call", map[string]any{"name": name, "arguments": args}))
}

// initialize is the handshake of a host speaking version.
func (b *bridgeProc) initialize(id int, version string, caps map[string]any) rpcLine {
	b.t.Helper()
	if caps == nil {
		caps = map[string]any{}
	}
	return b.oldCall(id, "initialize", map[string]any{"protocolVersion": version, "capabilities": caps,
		"clientInfo": map[string]any{"name": "old-host", "version": "1.0"}})
}

// noModernMembers fails when a result carries what only 2026-07-28 has.
func noModernMembers(t *testing.T, what string, res map[string]any) {
	t.Helper()
	for _, k := range []string{"resultType", "ttlMs", "cacheScope"} {
		if _, ok := res[k]; ok {
			t.Errorf("%s carries %s: %v", what, k, res)
		}
	}
	if meta, ok := res["_meta"].(map[string]any); ok {
		if _, ok := meta["io.modelcontextprotocol/serverInfo"]; ok {
			t.Errorf("%s carries serverInfo in _meta: %v", what, res)
		}
	}
}

// waitLine reads lines until one satisfies ok, returning it; what it read
// before is kept in skipped.
func (b *bridgeProc) waitLine(what string, ok func(rpcLine) bool) rpcLine {
	b.t.Helper()
	for i, l := range b.skipped {
		if ok(l) {
			b.skipped = append(b.skipped[:i:i], b.skipped[i+1:]...)
			return l
		}
	}
	for {
		l := b.next()
		if ok(l) {
			return l
		}
		b.skipped = append(b.skipped, l)
	}
}

func isUpdated(uri string) func(rpcLine) bool {
	return func(l rpcLine) bool { return l.Method == "notifications/resources/updated" && l.Params["uri"] == uri }
}

// TestMCPBridgeEarlierEra drives a room through `ce mcp` as a host of MCP
// 2025-11-25 would: the handshake, the tools, a whole handoff with the
// tool twins, a resource subscription that hears an edit made outside and
// survives the room going away and coming back.
func TestMCPBridgeEarlierEra(t *testing.T) {
	tt := t
	dir := t.TempDir()
	file := newDoc(t, dir, "idea.md")
	s := startServe(t, dir, "serve", "idea.md", "--json")
	ingress := strings.TrimSuffix(s.Banner.IngressURL, "/")
	u, _ := url.Parse(ingress)
	worker := join(t, dir, inviteOnce(t, dir, file), "worker")
	inv := inviteOnce(t, dir, file)
	b := startBridge(t, dir, inv, filepath.Join(t.TempDir(), "s.json"), nil)
	docURI := "commonroom://workspace/" + s.Banner.WorkspaceID

	t.Run("before initialize: a ping is answered, any other request is refused naming initialize", func(t *testing.T) {
		b.t = t
		if l := b.oldCall(1, "ping", nil); l.Error != nil || l.Result == nil || len(l.Result) != 0 {
			t.Errorf("ping before initialize: %s", l.raw)
		}
		l := b.oldCall(2, "tools/list", nil)
		if l.Error == nil || l.Error.Code != rpcInvalidParams || !strings.Contains(l.Error.Message, "initialize") {
			t.Errorf("tools/list before initialize: %s", l.raw)
		}
	})

	t.Run("initialize is answered by the bridge in the host's revision, with the room's name and instructions", func(t *testing.T) {
		b.t = t
		l := b.initialize(3, "2025-11-25", map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}})
		if l.Error != nil {
			t.Fatalf("initialize: %s", l.raw)
		}
		r := l.Result
		caps, _ := r["capabilities"].(map[string]any)
		res, _ := caps["resources"].(map[string]any)
		info, _ := r["serverInfo"].(map[string]any)
		if r["protocolVersion"] != "2025-11-25" || caps["tools"] == nil || caps["prompts"] == nil || res["subscribe"] != true || caps["logging"] == nil ||
			info["name"] != "commonroom-ce" || !strings.Contains(fmt.Sprint(r["instructions"]), "handoff_") {
			t.Errorf("initialize result: %s", l.raw)
		}
		for _, k := range []string{"tasks", "extensions", "completions"} {
			if _, ok := caps[k]; ok {
				t.Errorf("initialize offers %s: %s", k, l.raw)
			}
		}
		b.oldRequest(nil, "notifications/initialized", nil)
		if l := b.initialize(4, "2025-11-25", nil); l.Error == nil || l.Error.Code != rpcInvalidRequest {
			t.Errorf("a second initialize: %s", l.raw)
		}
	})

	t.Run("ping and logging/setLevel are answered; an unknown level is invalid params", func(t *testing.T) {
		b.t = t
		if r := b.oldOK(5, "ping", nil); len(r) != 0 {
			t.Errorf("ping: %v", r)
		}
		if r := b.oldOK(6, "logging/setLevel", map[string]any{"level": "warning"}); len(r) != 0 {
			t.Errorf("logging/setLevel: %v", r)
		}
		if l := b.oldCall(7, "logging/setLevel", map[string]any{"level": "loud"}); l.Error == nil || l.Error.Code != rpcInvalidParams {
			t.Errorf("logging/setLevel loud: %s", l.raw)
		}
	})

	t.Run("methods of 2026-07-28 and of the tasks extension are not found in this era", func(t *testing.T) {
		b.t = t
		for i, m := range []string{"tasks/get", "tasks/cancel", "tasks/update", "tasks/list", "subscriptions/listen", "server/discover"} {
			l := b.oldCall(10+i, m, map[string]any{"taskId": "task_x"})
			if l.Error == nil || l.Error.Code != rpcMethodNotFound {
				t.Errorf("%s: %s", m, l.raw)
			}
		}
	})

	t.Run("lists and reads come back without the 2026-07-28 members", func(t *testing.T) {
		b.t = t
		tl := b.oldOK(20, "tools/list", nil)
		noModernMembers(t, "tools/list", tl)
		names := map[string]bool{}
		for _, x := range tl["tools"].([]any) {
			names[fmt.Sprint(x.(map[string]any)["name"])] = true
		}
		for _, n := range []string{"handoff_create", "handoff_get", "workspace_status"} {
			if !names[n] {
				t.Errorf("tools/list lacks %s", n)
			}
		}
		for i, m := range []string{"resources/list", "resources/templates/list", "prompts/list"} {
			noModernMembers(t, m, b.oldOK(21+i, m, nil))
		}
		rd := b.oldOK(25, "resources/read", map[string]any{"uri": docURI})
		noModernMembers(t, "resources/read", rd)
		if c, _ := rd["contents"].([]any); len(c) != 1 || !strings.Contains(fmt.Sprint(c[0]), "Idea") {
			t.Errorf("resources/read: %v", rd)
		}
		st := b.oldTool(26, "workspace_status", map[string]any{})
		if st["workspace_id"] != s.Banner.WorkspaceID {
			t.Errorf("workspace_status: %v", st)
		}
	})

	var handoffID, taskID string
	t.Run("handoff_create gives the ordinary tool result although the host declared the tasks extension", func(t *testing.T) {
		b.t = t
		res := b.oldOK(30, "tools/call", map[string]any{"name": "handoff_create", "arguments": map[string]any{
			"summary": "write the plan", "assignee": worker.ParticipantID, "idempotency_key": "era-1"}})
		noModernMembers(t, "tools/call", res)
		sc, _ := res["structuredContent"].(map[string]any)
		h, _ := sc["handoff"].(map[string]any)
		handoffID, taskID = fmt.Sprint(h["handoff_id"]), fmt.Sprint(sc["task_id"])
		if res["isError"] != false || !strings.HasPrefix(handoffID, "handoff_") || !strings.HasPrefix(taskID, "task_") {
			t.Fatalf("handoff_create: %v", res)
		}
		if _, ok := res["taskId"]; ok {
			t.Errorf("a task handle reached an old-era host: %v", res)
		}
	})

	t.Run("a resource subscription hears an edit made outside, and stops at unsubscribe", func(t *testing.T) {
		b.t = t
		if r := b.oldOK(40, "resources/subscribe", map[string]any{"uri": docURI}); len(r) != 0 {
			t.Errorf("resources/subscribe: %v", r)
		}
		appendFile(t, file, "\n## Venue\n\nthe hall\n")
		l := b.waitLine("the edit's notification", isUpdated(docURI))
		if _, ok := l.Params["_meta"]; ok {
			t.Errorf("the notification carries the listen's _meta: %s", l.raw)
		}
		if r := b.oldOK(41, "resources/unsubscribe", map[string]any{"uri": docURI}); len(r) != 0 {
			t.Errorf("resources/unsubscribe: %v", r)
		}
		b.skipped = nil
		appendFile(t, file, "\nafter unsubscribe\n")
		waitVersion(t, dir, file, 3)
		if r := b.oldOK(42, "resources/subscribe", map[string]any{"uri": docURI}); len(r) != 0 {
			t.Errorf("resources/subscribe again: %v", r)
		}
		for _, l := range b.skipped {
			if l.Method != "" {
				t.Errorf("after unsubscribe the host heard %s", l.raw)
			}
		}
	})

	t.Run("the room's refusal of a subscription is passed on", func(t *testing.T) {
		b.t = t
		l := b.oldCall(43, "resources/subscribe", map[string]any{"uri": "commonroom://workspace/" + s.Banner.WorkspaceID + "/section/Nowhere"})
		if l.Error == nil || l.Error.Code != rpcInvalidParams {
			t.Errorf("a subscription to a section that does not exist: %s", l.raw)
		}
		l = b.oldCall(44, "resources/subscribe", map[string]any{})
		if l.Error == nil || l.Error.Code != rpcInvalidParams {
			t.Errorf("a subscription without a uri: %s", l.raw)
		}
	})

	t.Run("a session that may not read: an unknown revision gets the newest, and the room's refusal of a subscription comes back as the room gave it", func(t *testing.T) {
		var g inviteGrant
		decodeJSON(t, mustCE(t, dir, nil, "invite", "--workspace", file, "--capabilities", "propose", "--json"), &g)
		state := filepath.Join(t.TempDir(), "noread.json")
		nb := startBridge(t, dir, g.URI, state, nil)
		if l := nb.initialize(1, "2099-01-01", nil); l.Error != nil || l.Result["protocolVersion"] != "2025-11-25" {
			t.Fatalf("initialize with an unknown revision: %s", l.raw)
		}
		via := nb.oldCall(2, "resources/subscribe", map[string]any{"uri": docURI})
		_, err := mcpClient(httpClient, ingress, readState(t, state).SessionToken, false).
			Call(context.Background(), "resources/subscribe", map[string]any{"uri": docURI})
		var direct *mcptest.RPCError
		if !errors.As(err, &direct) || direct.Code == 0 {
			t.Fatalf("the room's own answer: %v", err)
		}
		if via.Error == nil || via.Error.Code != direct.Code || via.Error.Message != direct.Message ||
			fmt.Sprint(via.Error.Data) != fmt.Sprint(direct.Data) {
			t.Errorf("through ce mcp %s; the room said %d %q %v", via.raw, direct.Code, direct.Message, direct.Data)
		}
	})

	t.Run("the room gone and back: the subscription follows again and says the resource may have changed", func(t *testing.T) {
		b.t = t
		b.skipped = nil
		s.stop(os.Interrupt)
		// A host that connects meanwhile is still answered, from what the
		// bridge itself knows, and told the room is unreachable after.
		b2 := startBridge(t, dir, inv, stateOf(b), nil)
		l := b2.initialize(1, "2025-06-18", nil)
		if info, _ := l.Result["serverInfo"].(map[string]any); l.Error != nil || l.Result["protocolVersion"] != "2025-06-18" ||
			info["name"] != "ce" || l.Result["instructions"] != present.Instructions {
			t.Errorf("initialize with the room gone: %s", l.raw)
		}
		if l := b2.oldCall(2, "tools/list", nil); l.Error == nil || l.Error.Data["error"] != "unavailable" {
			t.Errorf("tools/list with the room gone: %s", l.raw)
		}
		if code := b2.closeAndWait(); code != 0 {
			t.Errorf("the second bridge exited %d", code)
		}
		s = startServe(tt, dir, "serve", "idea.md", "--json", "--ingress-addr", u.Host) // lives on after this subtest
		// First the bridge's own word that the gap may hide a change.
		b.waitLine("the gap's notification", isUpdated(docURI))
		appendFile(t, file, "\nafter the restart\n")
		b.waitLine("the edit's notification after the restart", isUpdated(docURI))
	})

	t.Run("a whole handoff with the tool twins: the requester answers and cancels without tasks/*", func(t *testing.T) {
		b.t = t
		wtool := func(name string, args map[string]any) {
			t.Helper()
			mcpTool(t, httpClient, ingress, worker.SessionToken, name, args)
		}
		wtool("handoff_accept", map[string]any{"handoff_id": handoffID})
		wtool("handoff_request_input", map[string]any{"handoff_id": handoffID,
			"requests": []any{map[string]any{"key": "venue", "message": "which hall?"}}})
		if got := b.oldTool(50, "handoff_get", map[string]any{"handoff_id": handoffID}); got["task_status"] != "input_required" {
			t.Errorf("after the question: %v", got)
		}
		b.oldTool(51, "handoff_answer", map[string]any{"handoff_id": handoffID,
			"input_responses": map[string]any{"venue": map[string]any{"action": "accept", "content": map[string]any{"answer": "the big one"}}}})
		if got := b.oldTool(56, "handoff_get", map[string]any{"handoff_id": handoffID}); got["task_status"] != "working" ||
			!strings.Contains(fmt.Sprint(got["inputs"]), "the big one") {
			t.Errorf("after the answer: %v", got)
		}
		wtool("handoff_complete", map[string]any{"handoff_id": handoffID, "result": map[string]any{"text": "planned", "artifacts": []any{}}})
		done := b.oldTool(52, "handoff_get", map[string]any{"handoff_id": handoffID})
		if done["status"] != "result_ready" {
			t.Errorf("after completion: %v", done)
		}
		second := b.oldTool(53, "handoff_create", map[string]any{"summary": "not needed after all"})
		h2 := fmt.Sprint(second["handoff"].(map[string]any)["handoff_id"])
		b.oldTool(54, "handoff_cancel", map[string]any{"handoff_id": h2})
		if c := b.oldTool(55, "handoff_get", map[string]any{"handoff_id": h2}); c["status"] != "cancelled" {
			t.Errorf("after handoff_cancel: %v", c)
		}
	})

	t.Run("stdin closed with requests in flight: every one is answered, then exit 0", func(t *testing.T) {
		b.t = t
		var lines []string
		for i := range 8 {
			raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call",
				"params": map[string]any{"name": "workspace_status", "arguments": map[string]any{}}})
			lines = append(lines, string(raw))
		}
		b.Stdin.Write([]byte(strings.Join(lines, "\n") + "\n"))
		if code := b.closeAndWait(); code != 0 {
			t.Fatalf("exit %d", code)
		}
		for i := range 8 { // answers come in the order the room gave them
			id := fmt.Sprint(100 + i)
			l := b.waitLine("the answer to "+id, func(l rpcLine) bool { return string(l.ID) == id && l.Method == "" })
			if l.Error != nil || l.Result["isError"] != false {
				t.Errorf("request %s: %s", id, l.raw)
			}
		}
	})
}

// appendFile appends text to the document, as an editor outside the room would.
func appendFile(t *testing.T, file, text string) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

// waitVersion waits until the room has recorded version want.
func waitVersion(t *testing.T, dir, file string, want int64) {
	t.Helper()
	deadline := time.Now().Add(bridgeTimeout)
	for status(t, dir, file).Status.Version < want {
		if time.Now().After(deadline) {
			t.Fatalf("the room did not reach version %d", want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stateOf is the state file a running bridge was started with.
func stateOf(b *bridgeProc) string {
	for i, a := range b.Proc.Args {
		if a == "--state" {
			return b.Proc.Args[i+1]
		}
	}
	b.t.Fatal("no --state")
	return ""
}
