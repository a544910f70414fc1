package cli

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/commonroom/ce/room"
)

// TestServeJSON is the scriptable contract of `ce serve FILE --json`
// (DESIGN §10): one JSON line, the listeners it names answer, the sidecar and
// the operator credential exist while serving, and SIGINT/SIGTERM stop it
// gracefully with exit 0.
func TestServeJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
	}{
		{"SIGINT_stops_with_exit_0", syscall.SIGINT},
		{"SIGTERM_stops_with_exit_0", syscall.SIGTERM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			file := filepath.Join(dir, "notes.md")
			if err := os.WriteFile(file, []byte("# Notes\n\nhello\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			s := startServe(t, dir, "serve", "notes.md", "--json") // flags after the file

			var raw map[string]any
			if err := json.Unmarshal([]byte(s.Line), &raw); err != nil {
				t.Fatal(err)
			}
			requireKeys(t, "banner", raw, bannerKeys...)
			b := s.Banner
			if !strings.HasPrefix(b.WorkspaceID, "workspace_") {
				t.Errorf("workspace_id = %q", b.WorkspaceID)
			}
			if b.Name != "notes" {
				t.Errorf("name = %q, want notes (the file stem)", b.Name)
			}
			if b.Version == "" {
				t.Error("version is empty")
			}
			if !strings.HasPrefix(b.OwnerURL, "http://127.0.0.1:") || !strings.Contains(b.OwnerURL, "?key=") {
				t.Errorf("owner_url = %q, want a loopback URL with ?key=", b.OwnerURL)
			}
			if !strings.HasPrefix(b.IngressURL, "http://127.0.0.1:") {
				t.Errorf("ingress_url = %q, want loopback", b.IngressURL)
			}
			if b.MCPURL != b.IngressURL+"/mcp" {
				t.Errorf("mcp_url = %q, want ingress_url + /mcp = %q", b.MCPURL, b.IngressURL+"/mcp")
			}
			if !strings.HasPrefix(b.Invite, "commonroom://join/") {
				t.Errorf("invite = %q", b.Invite)
			}
			if b.PID != s.cmd.Process.Pid {
				t.Errorf("pid = %d, want the child's %d", b.PID, s.cmd.Process.Pid)
			}
			inv, err := room.DecodeInvitation(b.Invite, room.Defaults().MaxInvitePayload)
			if err != nil {
				t.Fatalf("the printed invite does not decode: %v", err)
			}
			if inv.WorkspaceID != b.WorkspaceID {
				t.Errorf("invite names %s, banner %s", inv.WorkspaceID, b.WorkspaceID)
			}

			wantHealthy(t, b.IngressURL)
			if !exists(sidecarOf(file)) {
				t.Errorf("sidecar %s missing while serving", sidecarOf(file))
			}
			st, err := os.Stat(ownerOf(file))
			if err != nil {
				t.Fatalf("operator credential while serving: %v", err)
			}
			if perm := st.Mode().Perm(); perm != 0o600 {
				t.Errorf("operator credential mode = %o, want 600", perm)
			}

			if code := s.stop(tc.sig); code != 0 {
				t.Errorf("exit code after %v = %d, want 0", tc.sig, code)
			}
			if out := s.stdout.String(); out != s.Line+"\n" {
				t.Errorf("stdout is not exactly one JSON line:\n%q", out)
			}
			if exists(ownerOf(file)) {
				t.Error("operator credential left behind after a graceful stop")
			}
			if !exists(sidecarOf(file)) {
				t.Error("sidecar removed on stop")
			}
			if got, err := os.ReadFile(file); err != nil || string(got) != "# Notes\n\nhello\n" {
				t.Errorf("the file changed: %q, %v", got, err)
			}
		})
	}
}

// TestServeFiles: a missing file is created (a missing directory is not:
// see TestServeRefusesWhatIsNotARegularFile); a directory is refused.
func TestServeFiles(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, rel string }{
		{"missing_file_is_created", "notes.md"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s := startServe(t, dir, "serve", tc.rel, "--json")
			file := filepath.Join(dir, tc.rel)
			st, err := os.Stat(file)
			if err != nil || !st.Mode().IsRegular() {
				t.Fatalf("%s was not created as a file: %v", file, err)
			}
			if st.Size() != 0 {
				t.Errorf("created file has %d bytes, want empty", st.Size())
			}
			if !exists(sidecarOf(file)) {
				t.Errorf("sidecar missing beside %s", file)
			}
			if code := s.stop(syscall.SIGINT); code != 0 {
				t.Errorf("exit %d", code)
			}
		})
	}
	t.Run("directory_is_refused", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, "notes.md"), 0o755); err != nil {
			t.Fatal(err)
		}
		r := ce(t, dir, nil, "serve", "notes.md", "--json")
		if r.code == 0 {
			t.Fatalf("serving a directory succeeded: %s", r.stdout)
		}
		if r.code != exitUsage {
			t.Errorf("exit %d, want %d", r.code, exitUsage)
		}
		if !strings.Contains(r.stderr, "is a directory") {
			t.Errorf("message does not say it is a directory: %q", r.stderr)
		}
		if r.stdout != "" {
			t.Errorf("stdout not empty: %q", r.stdout)
		}
		if exists(filepath.Join(dir, "notes.md.commonroom.db")) {
			t.Error("a sidecar was created for a directory")
		}
	})
}

// TestServeRefusesNonLoopback: remote participants come in through a
// transport plugin, never through a public socket.
func TestServeRefusesNonLoopback(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"addr_0.0.0.0_refused", []string{"--addr", "0.0.0.0:0"}},
		{"ingress_addr_192.0.2.1_refused", []string{"--ingress-addr", "192.0.2.1:0"}},
		{"ingress_addr_wildcard_refused", []string{"--ingress-addr=:0"}},
		{"addr_ipv6_wildcard_refused", []string{"--addr", "[::]:0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			args := append([]string{"serve", "notes.md", "--json"}, tc.args...)
			r := ceWithin(t, fileTimeout, dir, nil, args...)
			if r.code == 0 {
				t.Fatalf("ce %v succeeded", args)
			}
			if r.code != exitUsage {
				t.Errorf("exit %d, want %d", r.code, exitUsage)
			}
			if !strings.Contains(r.stderr, "transport plugin") {
				t.Errorf("message does not mention transport plugins: %q", r.stderr)
			}
			if exists(filepath.Join(dir, "notes.md.commonroom.db")) {
				t.Error("a refused serve created a sidecar")
			}
		})
	}
}

// TestServeSecondInstance: a second `ce serve` on the same file exits at
// once, naming the running room, and the first keeps serving.
func TestServeSecondInstance(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := startServe(t, dir, "serve", "notes.md", "--json")
	if err := os.Symlink("notes.md", filepath.Join(dir, "link.md")); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		args []string
	}{
		{"same_relative_path_refused", []string{"serve", "notes.md", "--json"}},
		{"same_file_by_absolute_path_refused", []string{"serve", filepath.Join(dir, "notes.md")}},
		{"same_file_via_shorthand_refused", []string{"./notes.md", "--json"}},
		{"same_file_via_symlink_refused", []string{"serve", "link.md", "--json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ceWithin(t, fileTimeout, dir, nil, tc.args...)
			if r.code == 0 {
				t.Fatalf("second ce serve exited 0:\n%s", r.stdout)
			}
			if r.code != exitBusy {
				t.Errorf("exit %d, want %d (room_busy)", r.code, exitBusy)
			}
			if !strings.Contains(r.stderr, first.Banner.WorkspaceID) || !strings.Contains(r.stderr, "already being served") {
				t.Errorf("message does not name the running room %s: %q", first.Banner.WorkspaceID, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("second serve printed on stdout: %q", r.stdout)
			}
			if first.Exited() {
				t.Fatalf("the first ce serve exited: %v", first.State())
			}
			wantHealthy(t, first.Banner.IngressURL)
			if !exists(ownerOf(filepath.Join(dir, "notes.md"))) {
				t.Error("the second serve removed the first one's operator credential")
			}
		})
	}
	// The first still works end to end: its invitation can be redeemed.
	join(t, dir, first.Banner.Invite, "bot")
	if code := first.stop(syscall.SIGINT); code != 0 {
		t.Errorf("first serve exit %d", code)
	}
}

// TestServeRestart: the room outlives its process — same workspace, old
// sessions valid on the new ingress address, participants kept.
func TestServeRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s1 := startServe(t, dir, "serve", "notes.md", "--json")
	g := join(t, dir, s1.Banner.Invite, "bot")
	before := status(t, dir, "notes.md")
	if code := s1.stop(syscall.SIGINT); code != 0 {
		t.Fatalf("exit %d", code)
	}

	s2 := startServe(t, dir, "serve", "notes.md", "--json")
	if s2.Banner.WorkspaceID != s1.Banner.WorkspaceID {
		t.Errorf("workspace_id changed across a restart: %s → %s", s1.Banner.WorkspaceID, s2.Banner.WorkspaceID)
	}
	if s2.Banner.Invite == s1.Banner.Invite {
		t.Error("the restarted room printed the old invitation")
	}
	code, body := httpDo(t, "GET", s2.Banner.IngressURL+"/workspace/status", g.SessionToken, nil)
	if code != http.StatusOK {
		t.Fatalf("old session on the new ingress: %d %s", code, body)
	}
	var st room.Status
	if err := json.Unmarshal(body, &st); err != nil || st.WorkspaceID != s1.Banner.WorkspaceID {
		t.Errorf("status after restart: %v %s", err, body)
	}
	code, body = httpDo(t, "GET", s2.Banner.IngressURL+"/workspace/participants", g.SessionToken, nil)
	if code != http.StatusOK {
		t.Fatalf("participants after restart: %d %s", code, body)
	}
	var ps []room.Participant
	if err := json.Unmarshal(body, &ps); err != nil {
		t.Fatalf("participants: %v %s", err, body)
	}
	found := false
	for _, p := range ps {
		if p.ParticipantID == g.ParticipantID && p.Name == "bot" {
			found = true
		}
	}
	if !found {
		t.Errorf("participant %s (bot) missing after restart: %s", g.ParticipantID, body)
	}
	after := status(t, dir, "notes.md")
	if after.Status.Participants != before.Status.Participants {
		t.Errorf("participants count %d → %d across a restart", before.Status.Participants, after.Status.Participants)
	}
	if code := s2.stop(syscall.SIGINT); code != 0 {
		t.Errorf("exit %d", code)
	}
}

// TestServeAfterKill9: a crashed room leaves its lock file and credential
// behind; the next `ce serve` recognises them as stale and just works.
func TestServeAfterKill9(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "notes.md")
	s1 := startServe(t, dir, "serve", "notes.md", "--json")
	g := join(t, dir, s1.Banner.Invite, "bot")
	s1.kill9()
	if !exists(ownerOf(file)) {
		t.Fatal("precondition: a killed room should leave its credential behind")
	}

	t.Run("status_sees_no_server", func(t *testing.T) {
		if st := status(t, dir, "notes.md"); st.Listener.Serving {
			t.Errorf("status says serving (pid %d) after kill -9", st.Listener.PID)
		}
	})
	t.Run("serve_again_just_works", func(t *testing.T) {
		s2 := startServe(t, dir, "serve", "notes.md", "--json")
		if s2.Banner.WorkspaceID != s1.Banner.WorkspaceID {
			t.Errorf("workspace_id changed: %s → %s", s1.Banner.WorkspaceID, s2.Banner.WorkspaceID)
		}
		var of struct {
			PID int `json:"pid"`
		}
		b, err := os.ReadFile(ownerOf(file))
		if err != nil || json.Unmarshal(b, &of) != nil {
			t.Fatalf("credential after restart: %v %s", err, b)
		}
		if of.PID != s2.cmd.Process.Pid {
			t.Errorf("credential still names pid %d, want the new %d", of.PID, s2.cmd.Process.Pid)
		}
		if code, body := httpDo(t, "GET", s2.Banner.IngressURL+"/workspace/status", g.SessionToken, nil); code != http.StatusOK {
			t.Errorf("session from before the crash: %d %s", code, body)
		}
		if st := status(t, dir, "notes.md"); !st.Listener.Serving || st.Listener.PID != s2.cmd.Process.Pid {
			t.Errorf("status listener = %+v, want serving by pid %d", st.Listener, s2.cmd.Process.Pid)
		}
		if code := s2.stop(syscall.SIGTERM); code != 0 {
			t.Errorf("exit %d", code)
		}
		if exists(ownerOf(file)) {
			t.Error("credential left after a graceful stop")
		}
	})
}

// TestShorthandServe: `ce FILE` is `ce serve FILE`.
func TestShorthandServe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, "notes.md", "--json")
	if !strings.HasPrefix(s.Banner.Invite, "commonroom://join/") || s.Banner.MCPURL != s.Banner.IngressURL+"/mcp" {
		t.Errorf("banner: %s", s.Line)
	}
	wantHealthy(t, s.Banner.IngressURL)
	if !exists(sidecarOf(filepath.Join(dir, "notes.md"))) {
		t.Error("no sidecar beside notes.md")
	}
	if code := s.stop(syscall.SIGINT); code != 0 {
		t.Errorf("exit %d", code)
	}
}

// TestServeRace: several `ce serve` started at once on a new file — exactly
// one serves, the others are refused at once.
func TestServeRace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const n = 3
	var servers []*server
	for range n {
		servers = append(servers, spawnServe(t, dir, nil, "serve", "notes.md", "--json"))
	}
	var winners []*server
	for _, s := range servers {
		if s.servesOrExits() {
			winners = append(winners, s)
			continue
		}
		if code := s.State().ExitCode(); code != exitBusy {
			t.Errorf("a losing serve exited %d, want %d; stderr:\n%s", code, exitBusy, s.stderr.String())
		}
	}
	if len(winners) != 1 {
		t.Fatalf("%d of %d racing serves are serving, want exactly 1", len(winners), n)
	}
	w := winners[0]
	wantHealthy(t, w.Banner.IngressURL)
	join(t, dir, w.Banner.Invite, "bot")
	if code := w.stop(syscall.SIGINT); code != 0 {
		t.Errorf("exit %d", code)
	}
}

// TestServeEphemeral: --ephemeral keeps the sidecar out of the file's
// directory; the operator credential still lets local commands in.
func TestServeEphemeral(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "notes.md")
	s := startServe(t, dir, "serve", "notes.md", "--ephemeral", "--json")
	if exists(sidecarOf(file)) {
		t.Error("--ephemeral put the sidecar beside the file")
	}
	if !exists(ownerOf(file)) {
		t.Error("no operator credential while serving --ephemeral")
	}
	r := mustCE(t, dir, nil, "invite", "--workspace", "notes.md", "--json")
	var g inviteGrant
	decodeJSON(t, r, &g)
	join(t, dir, g.URI, "bot")
	if code := s.stop(syscall.SIGINT); code != 0 {
		t.Errorf("exit %d", code)
	}
	if exists(sidecarOf(file)) || exists(ownerOf(file)) {
		t.Error("sidecar or credential beside the file after an ephemeral run")
	}
	if !exists(file) {
		t.Error("--ephemeral removed the file itself")
	}
}
