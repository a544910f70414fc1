package cli

// `ce call` through the real binary against a real `ce serve`: a session
// already held, sent over --url, an invitation's hints (never redeemed),
// a state file; every bad input refused before the network; a dead or
// silent room bounded.

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/commonroom/ce/room"
)

// callRoomFixture is a served room, a session in it and a max_uses=1
// invitation that ce call only reads.
type callRoomFixture struct {
	dir    string
	s      *server
	token  string
	invite string // max_uses 1, never redeemed by ce call
	live   room.Hint
}

func newCallRoom(t *testing.T) callRoomFixture {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "idea.md"), []byte("# Idea\n\nhello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, dir, "serve", "idea.md", "--json")
	g := join(t, dir, s.Banner.Invite, "caller")
	var ig inviteGrant
	decodeJSON(t, mustCE(t, dir, nil, "invite", "--workspace", "idea.md", "--max-uses", "1", "--json"), &ig)
	if ig.MaxUses == nil || *ig.MaxUses != 1 {
		t.Fatalf("invite %+v", ig)
	}
	return callRoomFixture{dir: dir, s: s, token: g.SessionToken, invite: ig.URI, live: decodeInvite(t, ig.URI).Transports[0]}
}

// callOut is ce call's one JSON line.
type callOut struct {
	Status int `json:"status"`
	Body   any `json:"body"`
}

// decodeCall decodes ce call's stdout, which must be exactly one JSON line.
func decodeCall(t *testing.T, r result) callOut {
	t.Helper()
	if strings.Count(r.stdout, "\n") != 1 || !strings.HasSuffix(r.stdout, "\n") {
		t.Fatalf("stdout is not one line:\n%s", r.stdout)
	}
	var raw map[string]any
	decodeJSON(t, r, &raw)
	requireKeys(t, "ce call", raw, "status", "body")
	if len(raw) != 2 {
		t.Errorf("ce call printed keys %v, want status and body", sortedKeys(raw))
	}
	var out callOut
	decodeJSON(t, r, &out)
	return out
}

// handoffCount is how many handoffs the room holds (the operator's view).
func handoffCount(t *testing.T, dir string) int {
	t.Helper()
	var hs []map[string]any
	decodeJSON(t, mustCE(t, dir, nil, "handoffs", "--workspace", "idea.md", "--json"), &hs)
	return len(hs)
}

// writeState writes a session state file with mode perm.
func writeState(t *testing.T, st map[string]any, perm os.FileMode) string {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(p, b, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil { // past the umask
		t.Fatal(err)
	}
	return p
}

func bodyField(t *testing.T, body any, path ...string) any {
	t.Helper()
	v := body
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("body %v: no object at %q", body, k)
		}
		v = m[k]
	}
	return v
}

// TestCallSendsWithASessionItHolds: each way of naming the room and the
// session reaches it; the answer is printed as {status, body}; the exit
// code follows the answer's error kind; the token is never printed; the
// invitation is never spent.
func TestCallSendsWithASessionItHolds(t *testing.T) {
	f := newCallRoom(t)
	wsID := f.s.Banner.WorkspaceID
	stateHints := writeState(t, map[string]any{"workspace_id": wsID, "session_token": f.token, "participant_id": "p",
		"hints": []room.Hint{f.live}, "expires_at": "2000-01-01T00:00:00.000Z"}, 0o600)
	stateURL := writeState(t, map[string]any{"workspace_id": wsID, "session_token": f.token, "url": f.s.Banner.IngressURL}, 0o600)
	isStatus := func(t *testing.T, b any) {
		if bodyField(t, b, "workspace_id") != wsID {
			t.Errorf("body %v", b)
		}
	}
	for _, tc := range []struct {
		name       string
		env        []string
		stdin      string
		args       []string
		wantCode   int
		wantStatus int
		check      func(*testing.T, any)
	}{
		{name: "GET over the invitation's hints: 200, exit 0",
			args: []string{"GET", "/workspace/status", "--session", f.token, "--invite", f.invite}, wantStatus: 200, check: isStatus},
		{name: "POST with --body creates a handoff: exit 0",
			args:       []string{"POST", "/workspace/handoff", "--body", `{"summary":"from the flag"}`, "--session", f.token, "--invite", f.invite},
			wantStatus: 200, check: func(t *testing.T, b any) {
				if bodyField(t, b, "handoff", "summary") != "from the flag" {
					t.Errorf("body %v", b)
				}
			}},
		{name: "POST with the body on stdin: exit 0", stdin: "  {\"summary\": \"from stdin\"}\n",
			args: []string{"POST", "/workspace/handoff", "--body", "-", "--session", f.token, "--invite", f.invite}, wantStatus: 200,
			check: func(t *testing.T, b any) {
				if bodyField(t, b, "handoff", "summary") != "from stdin" {
					t.Errorf("body %v", b)
				}
			}},
		{name: "a lower-case method and a query string: the room's 404 is exit 4",
			args:     []string{"get", "/workspace/handoff?handoff_id=handoff_00000000000000000000000000000000", "--session", f.token, "--invite", f.invite},
			wantCode: exitNotFound, wantStatus: 404, check: func(t *testing.T, b any) {
				if bodyField(t, b, "error") != "handoff_not_found" {
					t.Errorf("body %v", b)
				}
			}},
		{name: "a wrong token: 401 printed, exit 3",
			args:     []string{"GET", "/workspace/status", "--session", "not-a-session", "--invite", f.invite},
			wantCode: exitAuth, wantStatus: 401, check: func(t *testing.T, b any) {
				if bodyField(t, b, "error") != "unauthorized" {
					t.Errorf("body %v", b)
				}
			}},
		{name: "an unknown route: 404 printed, exit 4",
			args: []string{"GET", "/workspace/nope", "--session", f.token, "--invite", f.invite}, wantCode: exitNotFound, wantStatus: 404},
		{name: "the original form: the invitation before METHOD",
			args: []string{f.invite, "GET", "/workspace/status", "--session", f.token}, wantStatus: 200, check: isStatus},
		{name: "the token from CE_SESSION", env: []string{"CE_SESSION=" + f.token},
			args: []string{"GET", "/workspace/status", "--invite", f.invite}, wantStatus: 200, check: isStatus},
		{name: "--url: a loopback ingress",
			args: []string{"GET", "/workspace/status", "--session", f.token, "--url", f.s.Banner.IngressURL}, wantStatus: 200, check: isStatus},
		{name: "--state with hints: token and room from the file (its stale expires_at not judged)",
			args: []string{"GET", "/workspace/status", "--state", stateHints}, wantStatus: 200, check: isStatus},
		{name: "--state with only a loopback url",
			args: []string{"GET", "/workspace/status", "--state", stateURL}, wantStatus: 200, check: isStatus},
		{name: "--session beats the state file's token",
			args:     []string{"GET", "/workspace/status", "--state", stateHints, "--session", "not-a-session"},
			wantCode: exitAuth, wantStatus: 401},
		{name: "a dead hint first, the live one after: the walk moves on",
			args: []string{"GET", "/workspace/status", "--session", f.token, "--invite",
				withHints(t, f.invite, room.Hint{Type: "loopback", Address: "127.0.0.1", Port: deadPort(t), Mode: "local"}, f.live)},
			wantStatus: 200, check: isStatus},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ceStdin(t, runTimeout, f.dir, tc.env, strings.NewReader(tc.stdin), append([]string{"call"}, tc.args...)...)
			if r.code != tc.wantCode {
				t.Fatalf("exit %d, want %d\n%s", r.code, tc.wantCode, r.output())
			}
			out := decodeCall(t, r)
			if out.Status != tc.wantStatus {
				t.Errorf("status %d, want %d: %v", out.Status, tc.wantStatus, out.Body)
			}
			if tc.check != nil {
				tc.check(t, out.Body)
			}
			if strings.Contains(r.output(), f.token) {
				t.Errorf("the session token was printed:\n%s", r.output())
			}
			if tc.wantCode != 0 && !strings.Contains(r.stderr, "ce: ") {
				t.Errorf("a failed call says nothing on stderr:\n%s", r.stderr)
			}
		})
	}
	t.Run("the invitation was never spent: a later join with it works", func(t *testing.T) {
		if g := join(t, f.dir, f.invite, "later"); g.WorkspaceID != wsID {
			t.Errorf("joined %+v", g)
		}
	})
}

// TestCallRefusesBadInput: every bad input is refused before any dial with
// a clear error and its exit code, prints nothing on stdout and changes
// nothing in the room.
func TestCallRefusesBadInput(t *testing.T) {
	f := newCallRoom(t)
	other := writeState(t, map[string]any{"workspace_id": "workspace_0000000000000000", "session_token": f.token}, 0o600)
	wide := writeState(t, map[string]any{"workspace_id": f.s.Banner.WorkspaceID, "session_token": f.token, "hints": []room.Hint{f.live}}, 0o644)
	remoteURL := writeState(t, map[string]any{"session_token": f.token, "url": "http://192.0.2.1:8000"}, 0o600)
	notJSON := writeState(t, nil, 0o600)
	os.WriteFile(notJSON, []byte("session_token=x"), 0o600)
	good := writeState(t, map[string]any{"workspace_id": f.s.Banner.WorkspaceID, "session_token": f.token, "hints": []room.Hint{f.live}}, 0o600)
	link := filepath.Join(t.TempDir(), "link.json")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	before := handoffCount(t, f.dir)
	ok := []string{"--session", f.token, "--invite", f.invite}
	for _, tc := range []struct {
		name     string
		stdin    string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"a path with two slashes", "", append([]string{"GET", "//evil.example/x"}, ok...), exitUsage, "exactly one /"},
		{"an absolute URL as path", "", append([]string{"GET", "http://evil.example/x"}, ok...), exitUsage, "exactly one /"},
		{"a relative path", "", append([]string{"GET", "workspace/status"}, ok...), exitUsage, "exactly one /"},
		{"a path with a blank", "", append([]string{"GET", "/workspace/status x"}, ok...), exitUsage, "percent-encode"},
		{"a path with a backslash", "", append([]string{"GET", `/\evil.example/x`}, ok...), exitUsage, "percent-encode"},
		{"a method outside the five", "", append([]string{"TRACE", "/workspace/status"}, ok...), exitUsage, "use GET, POST, PUT, DELETE or PATCH"},
		{"CONNECT", "", append([]string{"CONNECT", "/workspace/status"}, ok...), exitUsage, "use GET, POST, PUT, DELETE or PATCH"},
		{"an array body", "", append([]string{"POST", "/workspace/handoff", "--body", `[{"summary":"x"}]`}, ok...), exitUsage, "must be a JSON object"},
		{"a string body", "", append([]string{"POST", "/workspace/handoff", "--body", `"x"`}, ok...), exitUsage, "must be a JSON object"},
		{"a number body", "", append([]string{"POST", "/workspace/handoff", "--body", `12`}, ok...), exitUsage, "must be a JSON object"},
		{"invalid JSON", "", append([]string{"POST", "/workspace/handoff", "--body", `{"summary":`}, ok...), exitUsage, "not valid JSON"},
		{"two objects", "", append([]string{"POST", "/workspace/handoff", "--body", `{} {}`}, ok...), exitUsage, "not valid JSON"},
		{"an empty --body", "", append([]string{"POST", "/workspace/handoff", "--body", ``}, ok...), exitUsage, "is empty"},
		{"invalid JSON on stdin", `{"summary"`, append([]string{"POST", "/workspace/handoff", "--body", "-"}, ok...), exitUsage, "the body on stdin is not valid JSON"},
		{"an empty stdin", "", append([]string{"POST", "/workspace/handoff", "--body", "-"}, ok...), exitUsage, "the body on stdin is empty"},
		{"a body on GET", "", append([]string{"GET", "/workspace/status", "--body", `{}`}, ok...), exitUsage, "GET takes no body"},
		{"no session", "", []string{"GET", "/workspace/status", "--invite", f.invite}, exitUsage, "no session"},
		{"a token a header cannot carry", "", []string{"GET", "/workspace/status", "--invite", f.invite, "--session", "a\nInjected: 1"}, exitUsage, "cannot carry"},
		{"no room named", "", []string{"GET", "/workspace/status", "--session", f.token}, exitUsage, "where is the room"},
		{"an unknown invitation format", "", []string{"GET", "/workspace/status", "--session", f.token, "--invite", "https://example.com/join"}, exitUsage, "not an invitation"},
		{"--url and --invite both", "", append([]string{"GET", "/workspace/status", "--url", f.s.Banner.IngressURL}, ok...), exitUsage, "give one"},
		{"--url off this machine", "", []string{"GET", "/workspace/status", "--session", f.token, "--url", "http://192.0.2.1:8000"}, exitUsage, "not a loopback address"},
		{"--url with https or a path", "", []string{"GET", "/workspace/status", "--session", f.token, "--url", f.s.Banner.IngressURL + "/workspace"}, exitUsage, "not a room URL"},
		{"a state file others can read", "", []string{"GET", "/workspace/status", "--state", wide}, exitUsage, "chmod 600"},
		{"a state file for another room than the invitation", "", []string{"GET", "/workspace/status", "--state", other, "--invite", f.invite}, exitUsage, "does not belong"},
		{"a state file whose url is off this machine", "", []string{"GET", "/workspace/status", "--state", remoteURL}, exitUsage, "not a loopback address"},
		{"a state file that is not JSON", "", []string{"GET", "/workspace/status", "--state", notJSON}, exitUsage, "not a session state file"},
		{"a state file reached through a symlink", "", []string{"GET", "/workspace/status", "--state", link}, exitUsage, "not a regular file"},
		{"a missing state file", "", []string{"GET", "/workspace/status", "--state", filepath.Join(f.dir, "nope.json")}, exitUsage, "no such file"},
		{"METHOD without PATH", "", append([]string{"GET"}, ok...), exitUsage, "METHOD and PATH"},
		{"a zero timeout", "", append([]string{"GET", "/workspace/status", "--timeout", "0s"}, ok...), exitUsage, "must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ceStdin(t, runTimeout, f.dir, nil, strings.NewReader(tc.stdin), append([]string{"call"}, tc.args...)...)
			if r.code != tc.wantCode || !strings.Contains(r.stderr, tc.wantErr) {
				t.Fatalf("exit %d, want %d with %q\n%s", r.code, tc.wantCode, tc.wantErr, r.output())
			}
			if r.stdout != "" {
				t.Errorf("printed on stdout: %s", r.stdout)
			}
			if strings.Contains(r.output(), f.token) {
				t.Errorf("the session token was printed:\n%s", r.output())
			}
		})
	}
	if n := handoffCount(t, f.dir); n != before {
		t.Errorf("handoffs %d after refused calls, want %d", n, before)
	}
	if g := join(t, f.dir, f.invite, "afterwards"); g.WorkspaceID != f.s.Banner.WorkspaceID {
		t.Errorf("the invitation did not work afterwards: %+v", g)
	}
}

// silentRoom accepts connections and never answers, until the test ends.
func silentRoom(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
			close(done)
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().(*net.TCPAddr).Port
}

// provenThenSilent passes the proven join's challenge to the room at
// ingress and answers nothing else until the test ends: a way in that
// proves it is the room and then never answers the request.
func provenThenSilent(t *testing.T, ingress string) int {
	t.Helper()
	target, err := url.Parse(ingress)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/session/join/challenge" {
			proxy.ServeHTTP(w, r)
			return
		}
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(func() { close(stop); srv.Close() })
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

// TestCallIsBounded: a dead room is transport_unavailable (exit 7) naming
// what was tried; a room that takes the request and never answers ends at
// --timeout without trying another hint (the request may have been
// applied); an answer over --max-response is refused, not printed.
func TestCallIsBounded(t *testing.T) {
	f := newCallRoom(t)
	dead := room.Hint{Type: "loopback", Address: "127.0.0.1", Port: deadPort(t), Mode: "local"}
	silent := room.Hint{Type: "loopback", Address: "127.0.0.1", Port: provenThenSilent(t, f.s.Banner.IngressURL), Mode: "local"}
	before := handoffCount(t, f.dir)
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		wantErr  []string
	}{
		{"a dead room over the invitation: transport_unavailable naming the hint",
			[]string{"GET", "/workspace/status", "--session", f.token, "--invite", withHints(t, f.invite, dead)},
			exitBusy, []string{"transport_unavailable", fmt.Sprintf("loopback 127.0.0.1:%d", dead.Port), "connection refused"}},
		{"a dead room over --url",
			[]string{"GET", "/workspace/status", "--session", f.token, "--url", fmt.Sprintf("http://127.0.0.1:%d", dead.Port)},
			exitBusy, []string{"transport_unavailable", "cannot reach the room"}},
		{"a silent room over --url ends at --timeout",
			[]string{"POST", "/workspace/handoff", "--body", `{"summary":"never"}`, "--timeout", "1s",
				"--session", f.token, "--url", fmt.Sprintf("http://127.0.0.1:%d", silentRoom(t))},
			exitBusy, []string{"transport_unavailable", "no answer within --timeout (1s)", "may have been applied"}},
		{"a room that proved itself and then stays silent ends at --timeout, and the live hint after it is not tried",
			[]string{"POST", "/workspace/handoff", "--body", `{"summary":"once at most"}`, "--timeout", "1s",
				"--session", f.token, "--invite", withHints(t, f.invite, silent, f.live)},
			exitBusy, []string{"transport_unavailable", "no answer within --timeout (1s)", "may have been applied"}},
		{"an answer over --max-response",
			[]string{"GET", "/workspace/status", "--max-response", "16", "--session", f.token, "--invite", f.invite},
			exitLimit, []string{"limit_exceeded", "larger than --max-response (16 bytes)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ceWithin(t, runTimeout, f.dir, nil, append([]string{"call"}, tc.args...)...)
			if r.code != tc.wantCode {
				t.Fatalf("exit %d, want %d\n%s", r.code, tc.wantCode, r.output())
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr does not say %q:\n%s", w, r.stderr)
				}
			}
			if r.stdout != "" {
				t.Errorf("printed on stdout: %s", r.stdout)
			}
		})
	}
	if n := handoffCount(t, f.dir); n != before {
		t.Errorf("handoffs %d, want %d: the silent hint's request went to the next hint too", n, before)
	}
}

// TestCallOverAnExecTransport: a hint of a transport plugin is dialled
// through that plugin, as ce join does, and the invitation stays unspent.
func TestCallOverAnExecTransport(t *testing.T) {
	pp := newPluginPath(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "idea.md"), []byte("# Idea\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := spawnServe(t, dir, pp.env, "serve", "idea.md", "--json", "--transport", "exec:test")
	s.ready()
	var ig inviteGrant
	decodeJSON(t, mustCE(t, dir, nil, "invite", "--workspace", "idea.md", "--max-uses", "1", "--json"), &ig)
	plugOnly := withHints(t, ig.URI, decodeInvite(t, ig.URI).Transports[0]) // no loopback fallback
	g := join(t, dir, s.Banner.Invite, "caller")
	dialsBefore := len(pp.childPids(t, "test", "dial"))
	r := ceWithin(t, runTimeout, dir, pp.env, "call", "GET", "/workspace/status", "--session", g.SessionToken, "--invite", plugOnly)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.output())
	}
	if out := decodeCall(t, r); out.Status != 200 || bodyField(t, out.Body, "workspace_id") != s.Banner.WorkspaceID {
		t.Errorf("answer %+v", out)
	}
	if len(pp.childPids(t, "test", "dial")) <= dialsBefore {
		t.Error("ce call did not dial through the plugin")
	}
	if j := join(t, dir, ig.URI, "later"); j.WorkspaceID != s.Banner.WorkspaceID {
		t.Errorf("the invitation did not work afterwards: %+v", j)
	}
}

// TestCallNeverFollowsARedirect: a redirect is printed as the answer, not
// followed, so the session never goes where an answer points.
func TestCallNeverFollowsARedirect(t *testing.T) {
	var reached atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
	}))
	defer elsewhere.Close()
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/steal", http.StatusFound)
	}))
	defer redirecting.Close()
	r := ce(t, t.TempDir(), nil, "call", "GET", "/workspace/status", "--session", "ses_secret", "--url", redirecting.URL)
	if r.code != exitInternal || !strings.Contains(r.stderr, "HTTP 302") {
		t.Fatalf("exit %d, want %d naming HTTP 302\n%s", r.code, exitInternal, r.output())
	}
	if out := decodeCall(t, r); out.Status != http.StatusFound {
		t.Errorf("answer %+v", out)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the redirect was followed (%d requests elsewhere)", n)
	}
}

// TestCallUsesTheStateCeMcpWrote: the session `ce mcp` keeps is one
// `ce call --state` can use, as the same participant, without joining.
func TestCallUsesTheStateCeMcpWrote(t *testing.T) {
	f := newCallRoom(t)
	state := filepath.Join(t.TempDir(), "session.json")
	b := startBridge(t, f.dir, f.invite, state, nil)
	waitState(t, b)
	if code := b.closeAndWait(); code != 0 {
		t.Fatalf("ce mcp exited %d", code)
	}
	st := readState(t, state)
	before := status(t, f.dir, "idea.md").Status.Participants

	r := ceStdin(t, runTimeout, f.dir, nil, strings.NewReader(""), "call", "GET", "/workspace/participants", "--state", state)
	if r.code != 0 {
		t.Fatalf("ce call --state exited %d\n%s", r.code, r.output())
	}
	out := decodeCall(t, r)
	if out.Status != 200 || !strings.Contains(fmt.Sprint(out.Body), st.ParticipantID) {
		t.Errorf("ce call --state answered %d %v; want 200 listing %s", out.Status, out.Body, st.ParticipantID)
	}
	if strings.Contains(r.output(), st.SessionToken) {
		t.Error("ce call printed the session token")
	}
	if after := status(t, f.dir, "idea.md").Status.Participants; after != before {
		t.Errorf("participants %d → %d: ce call joined", before, after)
	}
}
