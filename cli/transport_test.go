package cli

// Transports through the real ce binary: `ce serve --transport exec:test`
// with the test plugin (this test binary under a ce-transport-MODE symlink,
// exectest), `ce join` over the invitation's hints, the local forward of
// --hold, and every way a transport can fail.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/commonroom/ce/internal/mcptest"
	"github.com/commonroom/ce/room"
	"github.com/commonroom/ce/transport/exec/exectest"
)

// pluginPath is a directory holding ce-transport-MODE for every exectest
// mode, and the environment that puts it first on PATH, records the
// plugin's pids in pids and keeps `ce join`'s state under a temporary
// configuration directory.
type pluginPath struct {
	env  []string
	pids string
}

func newPluginPath(t *testing.T) pluginPath {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, pids, cfg := t.TempDir(), t.TempDir(), t.TempDir()
	for _, mode := range []string{"test", "garbage", "dies", "hangs", "wrongtype", "refuses"} {
		if err := os.Symlink(self, filepath.Join(bin, "ce-transport-"+mode)); err != nil {
			t.Fatal(err)
		}
	}
	return pluginPath{pids: pids, env: []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		exectest.PidDirEnv + "=" + pids, "XDG_CONFIG_HOME=" + cfg}}
}

// childPids are the pids the plugin's mode recorded for cmd (expose, dial).
func (p pluginPath) childPids(t *testing.T, mode, cmd string) []int {
	t.Helper()
	pids, err := exectest.Pids(p.pids, mode, cmd)
	if err != nil {
		t.Fatal(err)
	}
	return pids
}

// wantGone fails unless every pid names no running process (ce ended its
// children; once ce has exited, whatever it left would be reparented and
// still running).
func wantGone(t *testing.T, pids []int) {
	t.Helper()
	if len(pids) == 0 {
		t.Fatal("no plugin child recorded its pid")
	}
	for _, pid := range pids {
		deadline := time.Now().Add(fileTimeout)
		for {
			stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			// Gone, or a zombie its (dead) parent's reaper has yet to collect.
			if errors.Is(err, os.ErrNotExist) || bytes.Contains(stat, []byte(") Z ")) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("plugin child %d is still running: %s", pid, stat)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// held is a `ce join` child that holds its local forward open.
type held struct {
	*server
	out map[string]any
}

// startHeldJoin runs `ce join ARGS --json` and waits for its JSON answer.
func startHeldJoin(t *testing.T, dir string, env []string, args ...string) *held {
	t.Helper()
	return startHeldJoinWithin(t, readyTimeout, dir, env, args...)
}

// startHeldJoinWithin is startHeldJoin with its own bound, for a join whose
// transport takes longer to come up than loopback.
func startHeldJoinWithin(t *testing.T, limit time.Duration, dir string, env []string, args ...string) *held {
	t.Helper()
	s := spawnServe(t, dir, env, append([]string{"join", "--json"}, args...)...)
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		var out map[string]any
		if err := json.NewDecoder(strings.NewReader(s.stdout.String())).Decode(&out); err == nil {
			return &held{server: s, out: out}
		}
		select {
		case <-s.stdout.Notify():
		case <-s.done:
			if json.Unmarshal([]byte(s.stdout.String()), new(map[string]any)) == nil {
				continue
			}
			t.Fatalf("ce join exited (%v) before answering; stderr:\n%s", s.State(), s.stderr.String())
		case <-deadline.C:
			t.Fatalf("ce join answered nothing within %v; stderr:\n%s", limit, s.stderr.String())
		}
	}
}

// mcpCall posts one MCP 2026-07-28 request to base/mcp and returns the
// JSON-RPC result.
func mcpCall(t *testing.T, base, token, method string, params map[string]any) map[string]any {
	t.Helper()
	res, err := mcptest.New(httpClient, base+"/mcp", token, false, "ce-cli-tests").Call(context.Background(), method, params)
	var out map[string]any
	if err != nil || json.Unmarshal(res, &out) != nil || out == nil {
		t.Fatalf("%s: %v %s", method, err, res)
	}
	return out
}

// toolJSON is a tools/call's structured answer.
func toolJSON(t *testing.T, base, token, tool string) map[string]any {
	t.Helper()
	res := mcpCall(t, base, token, "tools/call", map[string]any{"name": tool, "arguments": map[string]any{}})
	if res["isError"] == true {
		t.Fatalf("%s: %v", tool, res)
	}
	sc, ok := res["structuredContent"]
	if !ok {
		t.Fatalf("%s: no structuredContent: %v", tool, res)
	}
	b, _ := json.Marshal(sc)
	var m map[string]any
	json.Unmarshal(b, &m)
	return m
}

func decodeInvite(t *testing.T, uri string) room.Invitation {
	t.Helper()
	inv, err := room.DecodeInvitation(uri, room.Defaults().MaxInvitePayload)
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

// TestServeAndJoinOverAnExecTransport: a room exposed by an external plugin
// puts its hint first in every invitation; `ce join` walks it, joins over
// the plugin (the room's Host guard accepting the exposed name), holds a
// local forward that MCP clients use, and the room labels the session with
// the transport it saw.
func TestServeAndJoinOverAnExecTransport(t *testing.T) {
	pp := newPluginPath(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "idea.md")
	if err := os.WriteFile(file, []byte("# Idea\n\nhello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := spawnServe(t, dir, pp.env, "serve", "idea.md", "--json", "--transport", "exec:test")
	s.ready()
	inv := decodeInvite(t, s.Banner.Invite)
	var line map[string]any
	json.Unmarshal([]byte(s.Line), &line)
	first := inv.Transports[0]
	want := fmt.Sprintf("exec:test (private, not encrypted) %s:%d", exectest.Address, first.Port)

	t.Run("the invitation's first hint is the plugin's, loopback after it", func(t *testing.T) {
		if len(inv.Transports) != 2 || first.Type != "exec:test" || first.Address != exectest.Address || first.Params["forward"] == "" ||
			inv.Transport.Type != "exec:test" || inv.Transports[1].Type != "loopback" || inv.Transports[1].Address != "127.0.0.1" {
			t.Fatalf("transports %+v", inv.Transports)
		}
		if !strings.HasSuffix(s.Banner.IngressURL, ":"+strconv.Itoa(inv.Transports[1].Port)) {
			t.Errorf("the loopback hint %+v is not the ingress %s", inv.Transports[1], s.Banner.IngressURL)
		}
	})
	t.Run("the banner, status and diagnostics describe it", func(t *testing.T) {
		if line["transport"] != want {
			t.Errorf("banner transport %v, want %q", line["transport"], want)
		}
		if out := mustCE(t, dir, nil, "status", "--workspace", "idea.md").stdout; !strings.Contains(out, "transport="+want+" pid=") {
			t.Errorf("ce status:\n%s", out)
		}
		var st map[string]any
		decodeJSON(t, mustCE(t, dir, nil, "status", "--workspace", "idea.md", "--json"), &st)
		if l, _ := st["listener"].(map[string]any); l["describe"] != want || l["type"] != "exec:test" || l["mode"] != "private" {
			t.Errorf("ce status --json listener %v", st["listener"])
		}
		of, err := readOwnerFile(file)
		if err != nil {
			t.Fatal(err)
		}
		code, body := httpDo(t, "GET", of.OwnerURL+"/workspace/diagnostics", of.OperatorToken, nil)
		var d room.Diagnostics
		if code != 200 || json.Unmarshal(body, &d) != nil || d.Listener.Describe != want {
			t.Errorf("diagnostics %d %s", code, body)
		}
	})
	t.Run("its state directory is beside the sidecar, owner-only", func(t *testing.T) {
		for _, d := range []string{file + ".commonroom.transport", file + ".commonroom.transport/exec-test"} {
			st, err := os.Stat(d)
			if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
				t.Errorf("%s: %v %v", d, st.Mode(), err)
			}
		}
	})

	far := startHeldJoin(t, dir, pp.env, s.Banner.Invite, "--name", "far")
	t.Run("join holds a forward over the plugin by default", func(t *testing.T) {
		local, _ := far.out["local_url"].(string)
		if !strings.HasPrefix(local, "http://127.0.0.1:") || far.out["url"] != local || far.out["transport"] != "exec:test" {
			t.Fatalf("ce join --json %v", far.out)
		}
		if len(pp.childPids(t, "test", "dial")) == 0 {
			t.Fatal("the join did not dial through the plugin")
		}
	})
	local, token := far.out["local_url"].(string), far.out["session_token"].(string)
	t.Run("MCP calls go through the local forward", func(t *testing.T) {
		st := toolJSON(t, local, token, "workspace_status")
		if st["workspace_id"] != s.Banner.WorkspaceID {
			t.Errorf("workspace_status %v", st)
		}
		for range 3 { // each call is a fresh connection through a dial child
			mcpCall(t, local, token, "tools/list", nil)
		}
		d := toolJSON(t, local, token, "workspace_diagnostics")
		if l, _ := d["listener"].(map[string]any); l["describe"] != "exec:test (private, not encrypted)" {
			t.Errorf("a participant's diagnostics show %v", d["listener"])
		}
	})
	t.Run("the room labels the session by the transport it came through", func(t *testing.T) {
		code, body := httpDo(t, "GET", local+"/workspace/participants", token, nil)
		var ps []map[string]any
		if code != 200 || json.Unmarshal(body, &ps) != nil {
			t.Fatalf("participants %d %s", code, body)
		}
		found := false
		for _, p := range ps {
			if p["participant_id"] == far.out["participant_id"] {
				found = p["transport"] == "exec:test"
			}
		}
		if !found {
			t.Errorf("participants %s", body)
		}
		if out := mustCE(t, dir, nil, "participants", "--workspace", "idea.md").stdout; !strings.Contains(out, "TRANSPORT") || !strings.Contains(out, "exec:test") {
			t.Errorf("ce participants:\n%s", out)
		}
	})
	t.Run("an interrupted hold exits cleanly and closes the forward", func(t *testing.T) {
		if code := far.stop(syscall.SIGINT); code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", code, far.stderr.String())
		}
		if _, err := http.Get(local + "/healthz"); err == nil {
			t.Error("the forward still answers")
		}
	})
	t.Run("join --no-hold joins over the plugin and exits", func(t *testing.T) {
		var g inviteGrant
		decodeJSON(t, mustCE(t, dir, nil, "invite", "--workspace", "idea.md", "--json"), &g)
		r := mustCE(t, dir, pp.env, "join", g.URI, "--name", "once", "--no-hold", "--json")
		var out map[string]any
		decodeJSON(t, r, &out)
		if _, has := out["local_url"]; has || out["transport"] != "exec:test" || out["url"] != fmt.Sprintf("http://%s:%d", exectest.Address, first.Port) {
			t.Errorf("ce join --no-hold %v", out)
		}
	})
	t.Run("stopping the room ends the plugin", func(t *testing.T) {
		if code := s.stop(syscall.SIGINT); code != 0 {
			t.Fatalf("exit %d", code)
		}
		wantGone(t, pp.childPids(t, "test", "expose"))
		wantGone(t, pp.childPids(t, "test", "dial"))
	})
}

// roomFiles reads the document and every sidecar file beside it.
func roomFiles(t *testing.T, file string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range []string{file, sidecarOf(file), sidecarOf(file) + "-wal", sidecarOf(file) + "-shm", ownerOf(file)} {
		if b, err := os.ReadFile(p); err == nil {
			out[filepath.Base(p)] = string(b)
		}
	}
	return out
}

// wantSameFiles: the document and its sidecar files are as before (from
// roomFiles), none added or gone.
func wantSameFiles(t *testing.T, file string, before map[string]string) {
	t.Helper()
	after := roomFiles(t, file)
	if len(after) != len(before) {
		t.Errorf("files %v, want %v", keysOf(after), keysOf(before))
	}
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed", k)
		}
	}
}

// TestServeTransportFailures: an unknown transport is a usage error listing
// the available ones; a plugin that is missing, prints garbage, dies at
// start, names another type or never becomes ready makes serve exit
// non-zero within --transport-timeout, naming why, its children ended, and
// the document and its sidecar untouched.
func TestServeTransportFailures(t *testing.T) {
	pp := newPluginPath(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "idea.md")
	if err := os.WriteFile(file, []byte("# Idea\n\nhello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A room that exists: a failed start must leave its sidecar as it was.
	s := startServe(t, dir, "serve", "idea.md", "--json")
	join(t, dir, s.Banner.Invite, "agent")
	if code := s.stop(syscall.SIGINT); code != 0 {
		t.Fatalf("stop: %d", code)
	}
	before := roomFiles(t, file)
	if _, ok := before["idea.md.commonroom.db"]; !ok {
		t.Fatalf("no sidecar after the first serve: %v", before)
	}

	t.Run("an unknown transport is a usage error listing the available ones", func(t *testing.T) {
		r := ce(t, dir, pp.env, "serve", "idea.md", "--json", "--transport", "carrier-pigeon")
		if r.code != exitUsage || !strings.Contains(r.stderr, `unknown transport "carrier-pigeon"`) ||
			!strings.Contains(r.stderr, "available: exec:NAME, loopback") {
			t.Fatalf("exit %d\n%s", r.code, r.output())
		}
		if r.stdout != "" {
			t.Errorf("stdout: %s", r.stdout)
		}
	})
	for _, c := range []struct {
		mode, why string
	}{
		{"nosuch", "ce-transport-nosuch is not on PATH"},
		{"garbage", "not a JSON hint"},
		{"dies", "exit status 3"},
		{"wrongtype", `of type "exec:other"`},
		{"hangs", "not up within --transport-timeout (1s)"},
	} {
		t.Run("a plugin that "+c.mode+" stops serve, named, files untouched", func(t *testing.T) {
			r := ceWithin(t, readyTimeout, dir, pp.env, "serve", "idea.md", "--json", "--transport", "exec:"+c.mode, "--transport-timeout", "1s")
			if r.code != exitBusy || !strings.Contains(r.stderr, "transport_unavailable") || !strings.Contains(r.stderr, c.why) ||
				!strings.Contains(r.stderr, "transport exec:"+c.mode) {
				t.Fatalf("exit %d, want %d naming %q\n%s", r.code, exitBusy, c.why, r.output())
			}
			if r.stdout != "" {
				t.Errorf("serve printed a banner: %s", r.stdout)
			}
			if strings.Contains(r.stderr, "kTESTSECRET") {
				t.Errorf("the plugin's secret reached ce's output:\n%s", r.stderr)
			}
			wantSameFiles(t, file, before)
			if c.mode != "nosuch" {
				wantGone(t, pp.childPids(t, c.mode, "expose"))
			}
		})
	}
	t.Run("the room still serves on loopback afterwards", func(t *testing.T) {
		s := startServe(t, dir, "serve", "idea.md", "--json")
		if st := status(t, dir, "idea.md"); st.Status.Participants != 2 {
			t.Errorf("participants %d", st.Status.Participants)
		}
		s.stop(syscall.SIGINT)
	})
}

func keysOf(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// withHints is uri with its transports replaced (the same secret).
func withHints(t *testing.T, uri string, hints ...room.Hint) string {
	t.Helper()
	inv := decodeInvite(t, uri)
	inv.Transport, inv.Transports = hints[0], hints
	return room.EncodeInvitation(inv)
}

// TestJoinWalksTheHints: hints are tried in order and the first that works
// is used; unusable ones (an unknown type, a missing plugin, a plugin that
// refuses, a loopback hint naming another machine, a dead port) are
// skipped with their reason; when none works the answer names each and the
// invitation is not spent.
func TestJoinWalksTheHints(t *testing.T) {
	pp := newPluginPath(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "idea.md"), []byte("# Idea\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, dir, "serve", "idea.md", "--json")
	live := decodeInvite(t, s.Banner.Invite).Transports[0]
	dead := live
	dead.Port = deadPort(t)
	bad := []room.Hint{
		{Type: "carrier-pigeon", Address: "coop.example", Port: 1, Mode: "public"},
		{Type: "exec:nosuch", Address: "x.invalid", Port: 1, Mode: "private"},
		{Type: "exec:refuses", Address: "x.invalid", Port: 1, Mode: "private"},
		{Type: "loopback", Address: "192.0.2.1", Port: live.Port, Mode: "local"},
		{Type: "loopback", Address: "localhost.example", Port: live.Port, Mode: "local"},
		dead,
	}
	t.Run("no usable hint: transport_unavailable naming each, invitation not spent", func(t *testing.T) {
		r := ce(t, dir, pp.env, "join", withHints(t, s.Banner.Invite, bad...), "--name", "x", "--transport-timeout", "10s")
		if r.code != exitBusy || !strings.Contains(r.stderr, "transport_unavailable") || !strings.Contains(r.stderr, "not spent") {
			t.Fatalf("exit %d\n%s", r.code, r.output())
		}
		for _, why := range []string{
			`carrier-pigeon coop.example:1: unknown transport "carrier-pigeon" (available: exec:NAME, loopback, tailscale)`,
			"exec:nosuch x.invalid:1: ce-transport-nosuch is not on PATH",
			"exec:refuses x.invalid:1:", "no route to the room today",
			`loopback 192.0.2.1:` + strconv.Itoa(live.Port) + `: a loopback hint names "192.0.2.1", which is not a loopback address`,
			`a loopback hint names "localhost.example", which is not a loopback address`,
			fmt.Sprintf("loopback 127.0.0.1:%d:", dead.Port), "connection refused",
		} {
			if !strings.Contains(r.stderr, why) {
				t.Errorf("the answer does not say %q:\n%s", why, r.stderr)
			}
		}
		if st := status(t, dir, "idea.md"); st.Status.Participants != 1 {
			t.Errorf("participants %d after a failed join", st.Status.Participants)
		}
		g := join(t, dir, s.Banner.Invite, "afterwards")
		if g.WorkspaceID != s.Banner.WorkspaceID {
			t.Errorf("the invitation did not work afterwards: %+v", g)
		}
	})
	t.Run("dead hints first, a live loopback hint last: joins over loopback without a hold", func(t *testing.T) {
		var g inviteGrant
		decodeJSON(t, mustCE(t, dir, nil, "invite", "--workspace", "idea.md", "--json"), &g)
		r := mustCE(t, dir, pp.env, "join", withHints(t, g.URI, append(bad, live)...), "--name", "late", "--json")
		var out map[string]any
		decodeJSON(t, r, &out)
		if out["transport"] != "loopback" || out["url"] != s.Banner.IngressURL {
			t.Errorf("joined over %v at %v", out["transport"], out["url"])
		}
		if _, has := out["local_url"]; has {
			t.Errorf("a loopback join held a forward: %v", out)
		}
	})
	t.Run("--hold over loopback forwards too", func(t *testing.T) {
		var g inviteGrant
		decodeJSON(t, mustCE(t, dir, nil, "invite", "--workspace", "idea.md", "--json"), &g)
		h := startHeldJoin(t, dir, pp.env, g.URI, "--name", "held", "--hold")
		local, _ := h.out["local_url"].(string)
		if !strings.HasPrefix(local, "http://127.0.0.1:") || local == s.Banner.IngressURL {
			t.Fatalf("local_url %v", h.out)
		}
		if st := toolJSON(t, local, h.out["session_token"].(string), "workspace_status"); st["workspace_id"] != s.Banner.WorkspaceID {
			t.Errorf("status over the forward: %v", st)
		}
		if code := h.stop(syscall.SIGINT); code != 0 {
			t.Errorf("exit %d", code)
		}
	})
	t.Run("bad flags are usage errors", func(t *testing.T) {
		for _, args := range [][]string{
			{"join", s.Banner.Invite, "--hold", "--no-hold"},
			{"join", s.Banner.Invite, "--transport-timeout", "0s"},
		} {
			if r := ce(t, dir, nil, args...); r.code != exitUsage {
				t.Errorf("%v: exit %d\n%s", args, r.code, r.output())
			}
		}
	})
}

// deadPort is a loopback port nothing listens on.
func deadPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return p
}

// TestExecPluginDiesWithServe: a ce serve killed outright (no graceful
// stop) takes its plugin child with it.
func TestExecPluginDiesWithServe(t *testing.T) {
	pp := newPluginPath(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "idea.md"), []byte("# Idea\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := spawnServe(t, dir, pp.env, "serve", "idea.md", "--json", "--transport", "exec:test")
	s.ready()
	pids := pp.childPids(t, "test", "expose")
	if len(pids) != 1 || syscall.Kill(pids[0], 0) != nil {
		t.Fatalf("the exposing child is not running: %v", pids)
	}
	s.kill9()
	wantGone(t, pids)
}
