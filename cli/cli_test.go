package cli

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/commonroom/ce/room"
)

// TestJoin: `ce join URI --json` against a running room.
func TestJoin(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, "serve", "notes.md", "--json")

	var g joinGrant
	t.Run("fresh_invitation_gives_a_session", func(t *testing.T) {
		g = join(t, dir, s.Banner.Invite, "bot")
		if g.WorkspaceID != s.Banner.WorkspaceID {
			t.Errorf("workspace_id = %s, want %s", g.WorkspaceID, s.Banner.WorkspaceID)
		}
		if !strings.HasPrefix(g.ParticipantID, "participant_") || g.SessionRef == "" {
			t.Errorf("grant: %+v", g)
		}
		if strings.Contains(g.SessionRef, g.SessionToken) {
			t.Error("session_ref carries the secret token")
		}
		if len(g.Capabilities) == 0 {
			t.Error("no capabilities")
		}
		if _, err := time.Parse(time.RFC3339, g.ExpiresAt); err != nil {
			t.Errorf("expires_at %q: %v", g.ExpiresAt, err)
		}
	})
	t.Run("token_is_a_bearer_on_the_ingress", func(t *testing.T) {
		if g.SessionToken == "" {
			t.Skip("no session from the previous subtest")
		}
		code, body := httpDo(t, "GET", s.Banner.IngressURL+"/workspace/status", g.SessionToken, nil)
		if code != http.StatusOK {
			t.Fatalf("GET /workspace/status with the token: %d %s", code, body)
		}
		var st room.Status
		if err := json.Unmarshal(body, &st); err != nil || st.WorkspaceID != s.Banner.WorkspaceID {
			t.Errorf("status body: %v %s", err, body)
		}
		if code, body := httpDo(t, "GET", s.Banner.IngressURL+"/workspace/status", "", nil); code != http.StatusUnauthorized {
			t.Errorf("without a bearer: %d %s, want 401", code, body)
		}
		if code, body := httpDo(t, "GET", s.Banner.IngressURL+"/workspace/status", g.SessionToken+"x", nil); code != http.StatusUnauthorized {
			t.Errorf("with a wrong bearer: %d %s, want 401", code, body)
		}
	})
	t.Run("bad_kind_refused_and_spends_nothing", func(t *testing.T) {
		var ig inviteGrant
		decodeJSON(t, mustCE(t, dir, nil, "invite", "--workspace", "notes.md", "--json"), &ig)
		r := ce(t, dir, nil, "join", ig.URI, "--name", "bot", "--kind", "robot", "--json")
		if r.code != exitUsage {
			t.Errorf("--kind robot: exit %d, want %d\n%s", r.code, exitUsage, r.output())
		}
		join(t, dir, ig.URI, "bot") // the single use is still there
	})
	t.Run("redeemed_invitation_refused", func(t *testing.T) {
		r := ce(t, dir, nil, "join", s.Banner.Invite, "--name", "bot2", "--json")
		if r.code == 0 {
			t.Fatalf("second join with a single-use invitation succeeded: %s", r.stdout)
		}
		if r.code != exitAuth {
			t.Errorf("exit %d, want %d", r.code, exitAuth)
		}
		if !strings.Contains(r.output(), "invitation_redeemed") {
			t.Errorf("output does not carry the error code invitation_redeemed:\nstdout: %q\nstderr: %q", r.stdout, r.stderr)
		}
	})
	for _, tc := range []struct{ name, uri string }{
		{"garbage_uri_is_a_usage_error", "garbage"},
		{"bad_base64_is_a_usage_error", "commonroom://join/%%%"},
		{"wrong_protocol_is_a_usage_error", `{"protocol":"other","version":"1"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ce(t, dir, nil, "join", tc.uri, "--name", "x", "--json")
			if r.code != exitUsage {
				t.Errorf("exit %d, want %d\n%s", r.code, exitUsage, r.output())
			}
			if r.stdout != "" {
				t.Errorf("stdout: %q", r.stdout)
			}
		})
	}
	t.Run("no_uri_is_a_usage_error", func(t *testing.T) {
		if r := ce(t, dir, nil, "join", "--name", "x"); r.code != exitUsage {
			t.Errorf("exit %d, want %d\n%s", r.code, exitUsage, r.output())
		}
	})
	if code := s.stop(syscall.SIGINT); code != 0 {
		t.Errorf("exit %d", code)
	}
	t.Run("room_not_served_is_transport_unavailable", func(t *testing.T) {
		inv := mustCE(t, dir, nil, "invite", "--workspace", "notes.md")
		r := ce(t, dir, nil, "join", strings.TrimSpace(inv.stdout), "--name", "x", "--json")
		if r.code != exitBusy {
			t.Errorf("exit %d, want %d\n%s", r.code, exitBusy, r.output())
		}
	})
}

// TestInviteWhileServing: `ce invite` reaches the running room through its
// owner listener with the operator credential.
func TestInviteWhileServing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, "serve", "notes.md", "--json")

	for _, tc := range []struct {
		name     string
		flags    []string
		caps     []string
		maxUses  int // 0: unlimited (null)
		minutes  int
		joinable int // joins that must succeed before the next one is refused; -1: don't exhaust
	}{
		{"defaults_one_use_agent_caps", nil,
			[]string{"read", "observe", "propose", "checkout", "commit"}, 1, 60, 1},
		{"read_two_uses_five_minutes_honoured", []string{"--capabilities", "read", "--max-uses", "2", "--expires", "5"},
			[]string{"read"}, 2, 5, 2},
		{"unlimited_uses", []string{"--capabilities", "read,observe", "--max-uses", "0"},
			[]string{"read", "observe"}, 0, 60, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"invite", "--workspace", "notes.md", "--json"}, tc.flags...)
			before := time.Now()
			r := mustCE(t, dir, nil, args...)
			var raw map[string]any
			decodeJSON(t, r, &raw)
			requireKeys(t, "ce invite --json", raw, inviteKeys...)
			var g inviteGrant
			decodeJSON(t, r, &g)
			if !strings.HasPrefix(g.InviteID, "invite_") {
				t.Errorf("invite_id %q", g.InviteID)
			}
			if !strings.HasPrefix(g.URI, "commonroom://join/") {
				t.Errorf("uri %q", g.URI)
			}
			if !slices.Equal(g.Capabilities, tc.caps) {
				t.Errorf("capabilities = %v, want %v", g.Capabilities, tc.caps)
			}
			switch {
			case tc.maxUses == 0 && g.MaxUses != nil:
				t.Errorf("max_uses = %d, want null (unlimited)", *g.MaxUses)
			case tc.maxUses > 0 && (g.MaxUses == nil || *g.MaxUses != tc.maxUses):
				t.Errorf("max_uses = %v, want %d", g.MaxUses, tc.maxUses)
			}
			exp, err := time.Parse(time.RFC3339, g.ExpiresAt)
			if err != nil {
				t.Fatalf("expires_at %q: %v", g.ExpiresAt, err)
			}
			want := before.Add(time.Duration(tc.minutes) * time.Minute)
			if exp.Before(want.Add(-time.Minute)) || exp.After(want.Add(time.Minute)) {
				t.Errorf("expires_at = %s, want about %s", exp, want)
			}
			inv, err := room.DecodeInvitation(g.URI, room.Defaults().MaxInvitePayload)
			if err != nil {
				t.Fatalf("uri does not decode: %v", err)
			}
			if inv.WorkspaceID != s.Banner.WorkspaceID {
				t.Errorf("invite for %s, room is %s", inv.WorkspaceID, s.Banner.WorkspaceID)
			}

			n := tc.joinable
			if n < 0 {
				n = 2
			}
			for i := range n {
				jg := join(t, dir, g.URI, "bot")
				if !slices.Equal(jg.Capabilities, tc.caps) {
					t.Errorf("join %d: session capabilities = %v, want %v", i+1, jg.Capabilities, tc.caps)
				}
			}
			if tc.joinable >= 0 {
				r := ce(t, dir, nil, "join", g.URI, "--name", "late", "--json")
				if r.code != exitAuth {
					t.Errorf("join beyond max_uses: exit %d, want %d\n%s", r.code, exitAuth, r.output())
				}
			}
		})
	}
	t.Run("text_output_is_the_uri", func(t *testing.T) {
		r := mustCE(t, dir, nil, "invite", "--workspace", "notes.md")
		uri := strings.TrimSpace(r.stdout)
		if !strings.HasPrefix(uri, "commonroom://join/") || strings.Contains(uri, "\n") {
			t.Fatalf("text output %q", r.stdout)
		}
		join(t, dir, uri, "texty")
	})
	for _, tc := range badInviteFlags {
		t.Run(tc.name, func(t *testing.T) {
			r := ce(t, dir, nil, append([]string{"invite", "--workspace", "notes.md", "--json"}, tc.flags...)...)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d\n%s", r.code, tc.code, r.output())
			}
			if r.stdout != "" {
				t.Errorf("stdout: %q", r.stdout)
			}
		})
	}
	if s.Exited() {
		t.Fatalf("ce serve exited during the invites: %v", s.State())
	}
	if code := s.stop(syscall.SIGINT); code != 0 {
		t.Errorf("exit %d", code)
	}
}

var badInviteFlags = []struct {
	name  string
	flags []string
	code  int
}{
	{"bogus_capability_exit_2", []string{"--capabilities", "bogus"}, exitUsage},
	{"zero_expiry_exit_2", []string{"--expires", "0"}, exitUsage},
	{"negative_max_uses_exit_2", []string{"--max-uses", "-1"}, exitUsage},
	// Above the maximum is a usage mistake, not a limit the room reached (issue 13).
	{"expiry_above_a_week_exit_2", []string{"--expires", "10081"}, exitUsage},
	// Only a flag left out takes the default set; an empty one grants nothing and is refused (issue 13).
	{"empty_capabilities_exit_2", []string{"--capabilities", ""}, exitUsage},
	{"blank_capabilities_exit_2", []string{"--capabilities", " , "}, exitUsage},
	{"empty_permissions_exit_2", []string{"--permissions", ""}, exitUsage},
	{"zero_max_live_sessions_exit_2", []string{"--max-live-sessions", "0"}, exitUsage},
	{"max_live_sessions_above_the_room_exit_2", []string{"--max-live-sessions", "33"}, exitUsage},
	{"positional_argument_exit_2", []string{"extra"}, exitUsage},
	{"non_numeric_max_uses_exit_2", []string{"--max-uses", "two"}, exitUsage},
	{"label_with_a_newline_exit_2", []string{"--label", "two\nlines"}, exitUsage},
	{"label_with_an_escape_exit_2", []string{"--label", "\x1b[2Jcleared"}, exitUsage},
	{"label_over_80_characters_exit_6", []string{"--label", strings.Repeat("x", 81)}, exitLimit},
}

// TestInviteWithoutServer: with no room serving, `ce invite` runs the engine
// in-process under the writer lock and releases it afterwards.
func TestInviteWithoutServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "notes.md")

	// A mistyped file name is refused, and nothing is created for it.
	if r := ce(t, dir, nil, "invite", "--workspace", "notes.md", "--json"); r.code != exitNotFound {
		t.Fatalf("invite for a missing file: exit %d, want %d\n%s", r.code, exitNotFound, r.output())
	}
	if exists(file) || exists(sidecarOf(file)) {
		t.Fatal("invite for a missing file created the file or a sidecar")
	}
	if err := os.WriteFile(file, []byte("# Notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	r := mustCE(t, dir, nil, "invite", "--workspace", "notes.md", "--json", "--capabilities", "read", "--max-uses", "1")
	var g inviteGrant
	decodeJSON(t, r, &g)
	if !strings.HasPrefix(g.URI, "commonroom://join/") || !slices.Equal(g.Capabilities, []string{"read"}) {
		t.Fatalf("invite: %s", r.stdout)
	}
	if !exists(sidecarOf(file)) {
		t.Fatal("the in-process invite left no sidecar")
	}
	if exists(ownerOf(file)) {
		t.Error("an in-process invite wrote an operator credential (it must not serve)")
	}
	lock, err := room.AcquireWriterLock(file)
	if err != nil {
		t.Fatalf("the writer lock is still held after ce invite: %v", err)
	}
	lock.Release()
	if st := status(t, dir, "notes.md"); st.Listener.Serving {
		t.Error("status says serving after an in-process invite")
	}

	for _, tc := range badInviteFlags {
		t.Run(tc.name, func(t *testing.T) {
			r := ce(t, dir, nil, append([]string{"invite", "--workspace", "notes.md", "--json"}, tc.flags...)...)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d\n%s", r.code, tc.code, r.output())
			}
		})
	}

	t.Run("serve_afterwards_redeems_it", func(t *testing.T) {
		s := startServe(t, dir, "serve", "notes.md", "--json")
		inv, err := room.DecodeInvitation(g.URI, room.Defaults().MaxInvitePayload)
		if err != nil {
			t.Fatal(err)
		}
		if inv.WorkspaceID != s.Banner.WorkspaceID {
			t.Errorf("invite names %s, served room is %s", inv.WorkspaceID, s.Banner.WorkspaceID)
		}
		// The invite was made offline, so its hint has no port: redeem it
		// over the ingress directly (POST /session/join).
		code, body := httpDo(t, "POST", s.Banner.IngressURL+"/session/join", "",
			map[string]string{"invite": g.URI, "name": "offline", "kind": "agent"})
		if code != http.StatusOK {
			t.Fatalf("joining the offline invite: %d %s", code, body)
		}
		var jg joinGrant
		if err := json.Unmarshal(body, &jg); err != nil || !slices.Equal(jg.Capabilities, []string{"read"}) {
			t.Errorf("join grant: %v %s", err, body)
		}
		if code := s.stop(syscall.SIGINT); code != 0 {
			t.Errorf("exit %d", code)
		}
	})
}

// TestStatus: `ce status --json` reads the sidecar and tells whether the room
// is being served.
func TestStatus(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, "serve", "notes.md", "--json")

	t.Run("serving", func(t *testing.T) {
		r := mustCE(t, dir, nil, "status", "--workspace", "notes.md", "--json")
		var raw map[string]any
		decodeJSON(t, r, &raw)
		requireKeys(t, "ce status --json", raw, "status", "listener")
		var st statusOut
		decodeJSON(t, r, &st)
		if st.Status.WorkspaceID != s.Banner.WorkspaceID || st.Status.Name != "notes" || st.Status.Version < 1 {
			t.Errorf("status: %s", r.stdout)
		}
		if !st.Listener.Serving || st.Listener.PID != s.cmd.Process.Pid {
			t.Errorf("listener = %+v, want serving by pid %d", st.Listener, s.cmd.Process.Pid)
		}
		txt := mustCE(t, dir, nil, "status", "--workspace", "notes.md")
		if !strings.Contains(txt.stdout, "workspace="+s.Banner.WorkspaceID) || !strings.Contains(txt.stdout, "transport=loopback") {
			t.Errorf("text status: %q", txt.stdout)
		}
	})
	if code := s.stop(syscall.SIGINT); code != 0 {
		t.Fatalf("exit %d", code)
	}
	t.Run("stopped", func(t *testing.T) {
		st := status(t, dir, "notes.md")
		if st.Listener.Serving {
			t.Errorf("listener = %+v after stop", st.Listener)
		}
		if st.Status.WorkspaceID != s.Banner.WorkspaceID {
			t.Errorf("workspace_id %s, want %s", st.Status.WorkspaceID, s.Banner.WorkspaceID)
		}
		txt := mustCE(t, dir, nil, "status", "--workspace", "notes.md")
		if !strings.Contains(txt.stdout, "not being served") {
			t.Errorf("text status: %q", txt.stdout)
		}
	})

	for _, tc := range []struct {
		name   string
		create bool
		want   string
	}{
		{"never_served_file_fails_clearly", true, "ce serve"},
		{"missing_file_fails_clearly", false, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "other.md")
			if tc.create {
				if err := os.WriteFile(file, []byte("# x\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			r := ce(t, dir, nil, "status", "--workspace", "other.md", "--json")
			if r.code == 0 {
				t.Fatalf("status succeeded: %s", r.stdout)
			}
			if r.code != exitNotFound {
				t.Errorf("exit %d, want %d", r.code, exitNotFound)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("message %q does not contain %q", r.stderr, tc.want)
			}
			if r.stdout != "" {
				t.Errorf("stdout: %q", r.stdout)
			}
			if exists(sidecarOf(file)) {
				t.Error("a read-only status created a sidecar")
			}
			if exists(file) != tc.create {
				t.Errorf("status changed whether %s exists", file)
			}
		})
	}
}

// TestFlagSources: flag > environment CE_* > config file, and unknown flags
// are usage errors.
func TestFlagSources(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, "serve", "notes.md", "--json")
	if code := s.stop(syscall.SIGINT); code != 0 {
		t.Fatalf("exit %d", code)
	}
	writeConfig := func(t *testing.T, content string) string {
		p := filepath.Join(t.TempDir(), "ce.conf")
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name   string
		env    []string
		config string // written to a file passed with --config
		args   []string
	}{
		{"env_CE_WORKSPACE_is_read", []string{"CE_WORKSPACE=notes.md"}, "", nil},
		{"config_file_is_read", nil, "workspace notes.md\n", nil},
		{"config_file_with_json_key_is_read", nil, "# a comment\nworkspace notes.md\njson true\n", nil},
		{"flag_beats_env", []string{"CE_WORKSPACE=absent.md"}, "", []string{"--workspace", "notes.md"}},
		{"env_beats_config", []string{"CE_WORKSPACE=notes.md"}, "workspace absent.md\n", nil},
		{"flag_beats_config", nil, "workspace absent.md\n", []string{"--workspace", "notes.md"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"status", "--json"}, tc.args...)
			if tc.config != "" {
				args = append(args, "--config", writeConfig(t, tc.config))
			}
			r := ce(t, dir, tc.env, args...)
			if r.code != 0 {
				t.Fatalf("ce %v (env %v): exit %d\n%s", args, tc.env, r.code, r.output())
			}
			var st statusOut
			decodeJSON(t, r, &st)
			if st.Status.WorkspaceID != s.Banner.WorkspaceID {
				t.Errorf("status of %s, want %s", st.Status.WorkspaceID, s.Banner.WorkspaceID)
			}
			if exists(filepath.Join(dir, "absent.md")) {
				t.Error("the losing source's file was created")
			}
		})
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"unknown_flag_on_status_exit_2", []string{"status", "--bogus"}},
		{"unknown_flag_on_serve_exit_2", []string{"serve", "notes.md", "--bogus"}},
		{"unknown_flag_on_invite_exit_2", []string{"invite", "--workspace", "notes.md", "--nope=1"}},
		{"unknown_flag_on_join_exit_2", []string{"join", "commonroom://join/x", "--bogus"}},
		{"dangling_value_flag_exit_2", []string{"serve", "notes.md", "--addr"}},
		{"missing_config_file_exit_2", []string{"status", "--config", "no-such.conf"}},
		{"no_subcommand_exit_2", []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ceWithin(t, fileTimeout, dir, nil, tc.args...)
			if r.code != exitUsage {
				t.Errorf("ce %v: exit %d, want %d\n%s", tc.args, r.code, exitUsage, r.output())
			}
		})
	}
	t.Run("help_exit_0", func(t *testing.T) {
		r := ce(t, dir, nil, "status", "--help")
		if r.code != 0 || !strings.Contains(r.stderr, "workspace") {
			t.Errorf("exit %d\n%s", r.code, r.output())
		}
	})
}
