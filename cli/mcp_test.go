package cli

// `ce mcp` end to end with the real binary: a real `ce serve`, the bridge
// as a child process speaking newline-delimited JSON-RPC on its stdin and
// stdout, and a second participant driving the room over plain MCP.

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/commonroom/ce/internal/cetest"
	"github.com/commonroom/ce/internal/mcptest"
	"github.com/commonroom/ce/room"
)

const bridgeTimeout = 20 * time.Second // for one line from the bridge

// bridgeProc is one running `ce mcp` child.
type bridgeProc struct {
	*cetest.Proc
	t    *testing.T
	read int // bytes of stdout already consumed
	// skipped are the lines answerTo set aside while waiting (frames of a
	// listen, say), oldest first.
	skipped []rpcLine
}

// startBridge runs `ce mcp URI --state FILE ARGS...` with its stdin piped.
func startBridge(t *testing.T, dir, uri, state string, env []string, args ...string) *bridgeProc {
	t.Helper()
	p, err := cetest.StartWith(ceBin, cetest.Options{Dir: dir, Env: env, Stdin: true, DieWithParent: true},
		append([]string{"mcp", uri, "--state", state, "--log-level", "debug"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !p.Exited() {
			p.Kill9(stopTimeout)
		}
		if t.Failed() {
			t.Logf("ce mcp stderr:\n%s", p.Stderr.String())
		}
	})
	return &bridgeProc{Proc: p, t: t}
}

// send writes one raw line to the bridge's stdin.
func (b *bridgeProc) send(line string) {
	b.t.Helper()
	if _, err := b.Stdin.Write([]byte(line + "\n")); err != nil {
		b.t.Fatalf("writing to ce mcp: %v", err)
	}
}

// request writes a conforming request (params._meta filled in, Tasks declared).
func (b *bridgeProc) request(id any, method string, params map[string]any) {
	b.t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = mcptest.Meta(mcptest.Version, mcptest.Caps(true), "ce-mcp-tests")
	msg := map[string]any{"jsonrpc": "2.0", "method": method, "params": params}
	if id != nil {
		msg["id"] = id
	}
	line, err := mcptest.Marshal(msg)
	if err != nil {
		b.t.Fatal(err)
	}
	b.send(string(line))
}

// rpcLine is one message the bridge wrote.
type rpcLine struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params map[string]any  `json:"params"`
	Result map[string]any  `json:"result"`
	Error  *struct {
		Code    int            `json:"code"`
		Message string         `json:"message"`
		Data    map[string]any `json:"data"`
	} `json:"error"`
	raw string
}

// next returns the next line the bridge writes; every line must be one
// JSON object.
func (b *bridgeProc) next() rpcLine {
	b.t.Helper()
	deadline := time.After(bridgeTimeout)
	for {
		out := b.Stdout.String()
		if i := strings.IndexByte(out[b.read:], '\n'); i >= 0 {
			raw := out[b.read : b.read+i]
			b.read += i + 1
			var l rpcLine
			if err := json.Unmarshal([]byte(raw), &l); err != nil {
				b.t.Fatalf("ce mcp wrote a line that is not one JSON object: %v\n%s", err, raw)
			}
			l.raw = raw
			return l
		}
		select {
		case <-b.Stdout.Notify():
		case <-b.Done():
			if !strings.Contains(b.Stdout.String()[b.read:], "\n") {
				b.t.Fatalf("ce mcp exited (%v) before writing a line; stderr:\n%s", b.State(), b.Stderr.String())
			}
		case <-deadline:
			b.t.Fatalf("ce mcp wrote no line within %v; stderr:\n%s", bridgeTimeout, b.Stderr.String())
		}
	}
}

// answerTo returns the answer to id, setting aside (in order) what came
// before it.
func (b *bridgeProc) answerTo(id string, before *[]rpcLine) rpcLine {
	b.t.Helper()
	for {
		l := b.next()
		if string(l.ID) == id && l.Method == "" {
			return l
		}
		if before != nil {
			*before = append(*before, l)
		} else {
			b.skipped = append(b.skipped, l)
		}
	}
}

// call sends a request and returns its result, which must not be an error.
func (b *bridgeProc) call(id int, method string, params map[string]any) map[string]any {
	b.t.Helper()
	b.request(id, method, params)
	l := b.answerTo(fmt.Sprint(id), nil)
	if l.Error != nil || l.Result == nil {
		b.t.Fatalf("%s through ce mcp: %s", method, l.raw)
	}
	return l.Result
}

// tool calls a tool that must succeed and returns its structuredContent.
func (b *bridgeProc) tool(id int, name string, args map[string]any) map[string]any {
	b.t.Helper()
	return b.toolResult(name, args, b.call(id, "tools/call", map[string]any{"name": name, "arguments": args}))
}

// toolResult is the structuredContent of a tool result that must not be
// an error.
func (b *bridgeProc) toolResult(name string, args, res map[string]any) map[string]any {
	b.t.Helper()
	sc, _ := res["structuredContent"].(map[string]any)
	if res["isError"] != false || sc == nil {
		b.t.Fatalf("%s %v through ce mcp: %v", name, args, res)
	}
	return sc
}

// closeAndWait closes stdin and returns the exit code.
func (b *bridgeProc) closeAndWait() int {
	b.t.Helper()
	b.Stdin.Close()
	code, err := b.Wait(stopTimeout)
	if err != nil {
		b.t.Fatal(err)
	}
	return code
}

func readState(t testing.TB, path string) sessionState {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s sessionState
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func inviteOnce(t testing.TB, dir, file string) string {
	t.Helper()
	var g inviteGrant
	decodeJSON(t, mustCE(t, dir, nil, "invite", "--workspace", file, "--max-uses", "1", "--json"), &g)
	return g.URI
}

// TestMCPBridge drives one room through `ce mcp` the way an MCP host would.
func TestMCPBridge(t *testing.T) {
	tt := t
	dir := t.TempDir()
	file := newDoc(t, dir, "idea.md")
	s := startServe(t, dir, "serve", "idea.md", "--json", "--streams-per-session", "1")
	ingress := strings.TrimSuffix(s.Banner.IngressURL, "/")
	u, _ := url.Parse(ingress)
	creator := join(t, dir, inviteOnce(t, dir, file), "creator")
	inv := inviteOnce(t, dir, file) // one use: a second join through it would fail
	cfg := t.TempDir()
	env := []string{"XDG_CONFIG_HOME=" + cfg}
	statePath := filepath.Join(cfg, "commonroom", "sessions", s.Banner.WorkspaceID+".json")

	b := startBridge(t, dir, inv, "", env)
	var st sessionState

	t.Run("tools/list and tools/call answer through the bridge, and the session is kept 0600 under the config directory", func(t *testing.T) {
		b.t = t
		res := b.call(1, "tools/list", nil)
		tools, _ := res["tools"].([]any)
		names := map[string]bool{}
		for _, x := range tools {
			m, _ := x.(map[string]any)
			names[fmt.Sprint(m["name"])] = true
		}
		if !names["handoff_accept"] || !names["workspace_status"] {
			t.Fatalf("tools/list through ce mcp lacks the room's tools: %v", names)
		}
		sc := b.tool(2, "workspace_status", map[string]any{})
		if sc["workspace_id"] != s.Banner.WorkspaceID {
			t.Errorf("workspace_status through ce mcp: %v", sc)
		}
		fi, err := os.Stat(statePath)
		if err != nil {
			t.Fatalf("no state file at the default place: %v", err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("state file mode %04o, want 0600", fi.Mode().Perm())
		}
		st = readState(t, statePath)
		if st.WorkspaceID != s.Banner.WorkspaceID || !strings.HasPrefix(st.SessionToken, "ses_") || st.ParticipantID == "" || st.URL != ingress {
			t.Errorf("state %+v", st)
		}
		if strings.Contains(b.Stderr.String(), st.SessionToken) {
			t.Errorf("the session token is in ce mcp's log")
		}
	})

	t.Run("a handoff created by another participant is accepted and completed through the bridge, followed on a listen", func(t *testing.T) {
		b.t = t
		task := createTask(t, httpClient, ingress, creator.SessionToken, "write the plan")
		acc := b.tool(3, "handoff_accept", map[string]any{"handoff_id": task.handoffID})
		if acc["status"] != "accepted" {
			t.Errorf("handoff_accept: %v", acc)
		}
		b.request("L1", "subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": []string{task.taskID}}})
		ack := b.next()
		if ack.Method != mcptest.AckMethod {
			t.Fatalf("first listen frame %s, want the acknowledgement", ack.raw)
		}
		b.tool(4, "handoff_complete", map[string]any{"handoff_id": task.handoffID, "result": map[string]any{"text": "done", "artifacts": []any{}}})
		got := b.call(5, "tasks/get", map[string]any{"taskId": task.taskID})
		if got["taskId"] != task.taskID || got["status"] != "completed" {
			t.Errorf("tasks/get through ce mcp: %v", got)
		}
		// The completion reaches the listen as notifications/tasks.
		for !hasTaskStatus(b.skipped, task.taskID, "completed") {
			b.skipped = append(b.skipped, b.next())
		}

		b.request(nil, "notifications/cancelled", map[string]any{"requestId": "L1"})
		// --streams-per-session 1: a second listen is admitted only once the
		// room ended the first (it frees the slot as the stream's handler
		// returns, so a refusal is retried until a generous deadline).
		var before []rpcLine
		deadline := time.Now().Add(bridgeTimeout)
		for n := 0; ; n++ {
			id := fmt.Sprintf("L2-%d", n)
			b.request(id, "subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": []string{task.taskID}}})
			l := b.next()
			for string(l.ID) != `"`+id+`"` && l.Method != mcptest.AckMethod {
				before = append(before, l)
				l = b.next()
			}
			if l.Method == mcptest.AckMethod {
				b.request(nil, "notifications/cancelled", map[string]any{"requestId": id})
				break
			}
			if l.Error == nil || l.Error.Data["error"] != "limit_exceeded" || time.Now().After(deadline) {
				t.Fatalf("a second listen after cancelling the first: %s", l.raw)
			}
			time.Sleep(20 * time.Millisecond)
		}
		for _, l := range before {
			if string(l.ID) == `"L1"` {
				t.Errorf("the bridge wrote for the cancelled listen: %s", l.raw)
			}
		}
	})

	t.Run("a garbage line gets a parse error with id null, a notification no answer, and the bridge keeps going", func(t *testing.T) {
		b.t = t
		for _, tc := range []struct{ line, want string }{
			{`{"jsonrpc":"2.0","id":9,`, "-32700"},
			{`hello`, "-32700"},
			{`[1,2]`, "-32600"},
			{`{"jsonrpc":"2.0","id":10}`, "-32600"},
		} {
			b.send(tc.line)
			l := b.next()
			if l.Error == nil || fmt.Sprint(l.Error.Code) != tc.want {
				t.Errorf("%q → %s, want error %s", tc.line, l.raw, tc.want)
			}
			if tc.want == "-32700" && string(l.ID) != "null" {
				t.Errorf("%q → id %s, want null", tc.line, l.ID)
			}
		}
		b.request(nil, "notifications/initialized", nil)
		b.request(11, "tools/list", nil)
		if l := b.next(); string(l.ID) != "11" || l.Result == nil {
			t.Errorf("after a notification the next line is %s, want the answer to 11", l.raw)
		}
	})

	t.Run("a room error comes back unchanged whatever the HTTP status", func(t *testing.T) {
		b.t = t
		b.request(12, "tasks/get", map[string]any{"taskId": "task_nope"})
		l := b.answerTo("12", nil)
		if l.Error == nil || l.Error.Code != mcptest.CodeInvalidParams {
			t.Errorf("tasks/get of an unknown task: %s", l.raw)
		}
		b.send(`{"jsonrpc":"2.0","id":13,"method":"tools/list","params":{}}`) // no _meta: the room's 400
		l = b.answerTo("13", nil)
		if l.Error == nil || l.Error.Code != mcptest.CodeInvalidParams {
			t.Errorf("a request without _meta: %s", l.raw)
		}
	})

	t.Run("a room that is gone answers unavailable, and the bridge works again once it is back", func(t *testing.T) {
		b.t = t
		s.stop(os.Interrupt)
		b.request(14, "tools/list", nil)
		l := b.answerTo("14", nil)
		if l.Error == nil || l.Error.Code != mcptest.CodeInternalError || l.Error.Data["error"] != "unavailable" ||
			!strings.Contains(l.Error.Message, "unreachable") {
			t.Fatalf("tools/list with the room gone: %s", l.raw)
		}
		s = startServe(tt, dir, "serve", "idea.md", "--json", "--ingress-addr", u.Host) // lives on after this subtest
		b.call(15, "tools/list", nil)
	})

	t.Run("stdin EOF ends the bridge with exit 0", func(t *testing.T) {
		b.t = t
		if code := b.closeAndWait(); code != 0 {
			t.Fatalf("exit %d after EOF", code)
		}
	})

	t.Run("a restarted bridge reuses the stored session: same participant, no second join", func(t *testing.T) {
		before := participants(t, dir, file)
		b2 := startBridge(t, dir, inv, "", env)
		sc := b2.tool(1, "workspace_status", map[string]any{})
		if sc["workspace_id"] != s.Banner.WorkspaceID {
			t.Errorf("workspace_status: %v", sc)
		}
		if after := participants(t, dir, file); len(after) != len(before) {
			t.Errorf("participants %d → %d: the bridge joined again", len(before), len(after))
		}
		if st2 := readState(t, statePath); st2.ParticipantID != st.ParticipantID || st2.SessionToken != st.SessionToken {
			t.Errorf("state changed on restart: %+v → %+v", st, st2)
		}
		if code := b2.closeAndWait(); code != 0 {
			t.Errorf("exit %d", code)
		}
	})

	t.Run("a state file that is too open or of another room is refused at start", func(t *testing.T) {
		for _, tc := range []struct {
			name, want string
			mode       os.FileMode
			ws         string
		}{
			{"group-readable", "chmod 600", 0o644, st.WorkspaceID},
			{"another workspace", "not of the invited", 0o600, "ws_other"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				p := filepath.Join(t.TempDir(), "s.json")
				x := st
				x.WorkspaceID = tc.ws
				raw, _ := json.Marshal(x)
				if err := os.WriteFile(p, raw, tc.mode); err != nil {
					t.Fatal(err)
				}
				os.Chmod(p, tc.mode)
				r := ce(t, dir, env, "mcp", inv, "--state", p)
				if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
					t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 naming %q", r.code, r.stdout, r.stderr, tc.want)
				}
				if strings.Contains(r.stderr, st.SessionToken) {
					t.Errorf("the refusal shows the session token")
				}
			})
		}
	})
}

func hasTaskStatus(ls []rpcLine, taskID, status string) bool {
	for _, l := range ls {
		if l.Method == mcptest.TaskMethod && l.Params["taskId"] == taskID && l.Params["status"] == status {
			return true
		}
	}
	return false
}

// waitState makes sure the bridge has joined (one answered request) and
// returns its state file.
func waitState(t *testing.T, b *bridgeProc) string {
	t.Helper()
	b.call(1, "tools/list", nil)
	for i, a := range b.Proc.Args {
		if a == "--state" {
			return b.Proc.Args[i+1]
		}
	}
	t.Fatal("no --state")
	return ""
}

// TestMCPBridgeHeaderValue: a value that would not survive as an HTTP
// header (or would be read as the spec's Base64 form) goes in that form.
func TestMCPBridgeHeaderValue(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"a plain tool name is sent as it is", "handoff_get", "handoff_get"},
		{"inner spaces are safe", "a b", "a b"},
		{"padding would be trimmed by the server, so it is encoded", " x ", "=?base64?IHgg?="},
		{"non-ASCII is encoded", "réunion", "=?base64?csOpdW5pb24=?="},
		{"a control character is encoded", "a\nb", "=?base64?YQpi?="},
		{"a literal that looks like the Base64 form is encoded", "=?base64?SGk=?=", "=?base64?PT9iYXNlNjQ/U0drPT89?="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := headerValue(tc.in); got != tc.want {
				t.Errorf("headerValue(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestMCPBridgeRoutingHeaders: the headers come from the host's message.
func TestMCPBridgeRoutingHeaders(t *testing.T) {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`
	for _, tc := range []struct {
		name, method, params, version, nameHdr string
		hasName                                bool
	}{
		{"tools/call names its tool", "tools/call", `{` + meta + `,"name":"workspace_status"}`, "2026-07-28", "workspace_status", true},
		{"tasks/get names its task", "tasks/get", `{` + meta + `,"taskId":"task_1"}`, "2026-07-28", "task_1", true},
		{"resources/read names its uri", "resources/read", `{` + meta + `,"uri":"commonroom://document"}`, "2026-07-28", "commonroom://document", true},
		{"tools/list names nothing", "tools/list", `{` + meta + `}`, "2026-07-28", "", false},
		{"the host's version is passed on as sent", "tools/list", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"v999"}}`, "v999", "", false},
		{"no _meta: the bridge's version, so the room names the missing _meta", "tools/list", `{}`, "2026-07-28", "", false},
		{"a name of the wrong type is not sent", "tools/call", `{` + meta + `,"name":5}`, "2026-07-28", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, n, has := routingHeaders(tc.method, json.RawMessage(tc.params))
			if v != tc.version || n != tc.nameHdr || has != tc.hasName {
				t.Errorf("routingHeaders = %q %q %v, want %q %q %v", v, n, has, tc.version, tc.nameHdr, tc.hasName)
			}
		})
	}
}

// TestMCPBridgeSilentRoom: a room that accepts connections and never
// answers costs a request --request-timeout, not a hang; at the end of
// stdin the bridge waits for that request's answer, then exits 0.
func TestMCPBridgeSilentRoom(t *testing.T) {
	dir := t.TempDir()
	file := newDoc(t, dir, "idea.md")
	s := startServe(t, dir, "serve", "idea.md", "--json")
	inv := inviteOnce(t, dir, file)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	state := filepath.Join(t.TempDir(), "s.json")
	raw, _ := json.Marshal(sessionState{WorkspaceID: s.Banner.WorkspaceID, SessionToken: "ses_silent", ParticipantID: "participant_x",
		Hint: room.Hint{Type: "loopback"}, URL: "http://" + ln.Addr().String()})
	if err := os.WriteFile(state, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	b := startBridge(t, dir, inv, state, nil, "--request-timeout", "1s")
	b.request(1, "tools/list", nil)
	b.Stdin.Close()
	l := b.next()
	if string(l.ID) != "1" || l.Error == nil || l.Error.Code != mcptest.CodeInternalError || l.Error.Data["error"] != "unavailable" {
		t.Fatalf("a request to a silent room: %s", l.raw)
	}
	code, err := b.Wait(stopTimeout)
	if err != nil || code != 0 {
		t.Fatalf("exit %d (%v) after EOF with a request in flight", code, err)
	}
	if strings.Contains(b.Stderr.String(), "ses_silent") {
		t.Errorf("the session token is in the log")
	}
}

// TestMCPBridgeComesBackAsItself: a stored session the host ended is
// replaced by redeeming a re-admission invitation for the same participant
// (same participant id, a new token), and a live session is kept without
// spending the invitation.
func TestMCPBridgeComesBackAsItself(t *testing.T) {
	dir := t.TempDir()
	file := newDoc(t, dir, "idea.md")
	startServe(t, dir, "serve", "idea.md", "--json")
	state := filepath.Join(t.TempDir(), "session.json")

	b := startBridge(t, dir, inviteOnce(t, dir, file), state, nil)
	waitState(t, b)
	if code := b.closeAndWait(); code != 0 {
		t.Fatalf("ce mcp exited %d", code)
	}
	first := readState(t, state)
	var ref string
	for _, p := range participants(t, dir, file) {
		if p.ParticipantID == first.ParticipantID && len(p.Sessions) == 1 {
			ref = p.Sessions[0].SessionRef
		}
	}
	if ref == "" {
		t.Fatalf("no live session of %s", first.ParticipantID)
	}
	mustCE(t, dir, nil, "end-session", "--workspace", file, "--session", ref)
	var g inviteGrant
	decodeJSON(t, mustCE(t, dir, nil, "invite", "--workspace", file, "--participant", first.ParticipantID, "--max-uses", "1", "--json"), &g)
	before := len(participants(t, dir, file))

	var readmitted string // the token the re-admission gave
	for _, step := range []string{"the ended session is replaced", "a live session is kept"} {
		b := startBridge(t, dir, g.URI, state, nil)
		res := b.call(1, "tools/list", nil)
		if _, ok := res["tools"]; !ok {
			t.Fatalf("%s: tools/list through the bridge answered %v", step, res)
		}
		if code := b.closeAndWait(); code != 0 {
			t.Fatalf("%s: ce mcp exited %d", step, code)
		}
		now := readState(t, state)
		if now.ParticipantID != first.ParticipantID {
			t.Errorf("%s: the state names %s, want %s", step, now.ParticipantID, first.ParticipantID)
		}
		if now.SessionToken == first.SessionToken {
			t.Errorf("%s: the state still holds the ended session", step)
		}
		if readmitted == "" {
			readmitted = now.SessionToken
		} else if now.SessionToken != readmitted {
			t.Errorf("%s: the live re-admitted session was replaced", step)
		}
		if n := len(participants(t, dir, file)); n != before {
			t.Errorf("%s: participants %d → %d", step, before, n)
		}
	}
	// The invitation had one use; had the second start spent it again, the
	// start would have failed above. It is still unspent by a live session:
	var invites []struct {
		InviteID  string `json:"invite_id"`
		UsedCount int    `json:"used_count"`
	}
	decodeJSON(t, mustCE(t, dir, nil, "invites", "--workspace", file, "--json"), &invites)
	found := false
	for _, iv := range invites {
		if iv.InviteID == g.InviteID {
			found = true
			if iv.UsedCount != 1 {
				t.Errorf("the re-admission invitation was used %d times, want 1", iv.UsedCount)
			}
		}
	}
	if !found {
		t.Errorf("ce invites does not list the re-admission invitation %s", g.InviteID)
	}
}
