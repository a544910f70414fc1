package cli

// `ce end-session`, `ce revoke`, `ce invites` and the session refs of
// `ce participants`, with the real binary, against a running room (through
// its owner listener) and with none (in-process), issue 13 item 11.

import (
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
)

// participantOut is one entry of `ce participants --json`.
type participantOut struct {
	ParticipantID string `json:"participant_id"`
	IsHost        bool   `json:"is_host"`
	Sessions      []struct {
		SessionRef string `json:"session_ref"`
	} `json:"sessions"`
}

func participants(t testing.TB, dir, file string) []participantOut {
	t.Helper()
	var ps []participantOut
	decodeJSON(t, mustCE(t, dir, nil, "participants", "--workspace", file, "--json"), &ps)
	return ps
}

// roster is participant ids with their live session refs, for "nothing changed".
func roster(t testing.TB, dir, file string) string {
	t.Helper()
	var b strings.Builder
	for _, p := range participants(t, dir, file) {
		b.WriteString(p.ParticipantID + ":")
		for _, s := range p.Sessions {
			b.WriteString(s.SessionRef + ",")
		}
		b.WriteString(";")
	}
	return b.String()
}

// statusAs is GET /workspace/status with a session token; it returns the code.
func statusAs(t testing.TB, ingress, token string) int {
	t.Helper()
	code, _ := httpDo(t, "GET", ingress+"/workspace/status", token, nil)
	return code
}

func TestEndSessionCommand_ThroughTheRunningRoom(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, "serve", "notes.md", "--json")
	var inv inviteGrant
	decodeJSON(t, mustCE(t, dir, nil, "invite", "--workspace", "notes.md", "--json", "--max-uses", "3"), &inv)
	a, b := join(t, dir, inv.URI, "a"), join(t, dir, inv.URI, "b")

	var host string
	for _, p := range participants(t, dir, "notes.md") {
		if p.IsHost {
			host = p.ParticipantID
		}
		if p.ParticipantID == a.ParticipantID && (len(p.Sessions) != 1 || p.Sessions[0].SessionRef != a.SessionRef) {
			t.Errorf("participants --json shows %+v for a, want its session %s", p, a.SessionRef)
		}
	}
	if text := mustCE(t, dir, nil, "participants", "--workspace", "notes.md").stdout; !strings.Contains(text, "SESSIONS") || !strings.Contains(text, a.SessionRef) {
		t.Errorf("participants text does not show session refs:\n%s", text)
	}

	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"neither_flag_exit_2", nil, exitUsage},
		{"both_flags_exit_2", []string{"--participant", a.ParticipantID, "--session", a.SessionRef}, exitUsage},
		{"a_positional_argument_exit_2", []string{a.ParticipantID}, exitUsage},
		{"an_unknown_participant_exit_4", []string{"--participant", "participant_0000000000000000"}, exitNotFound},
		{"an_unknown_session_exit_4", []string{"--session", "sref_0000000000000000"}, exitNotFound},
		{"the_host_exit_2", []string{"--participant", host}, exitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := roster(t, dir, "notes.md")
			r := ce(t, dir, nil, append([]string{"end-session", "--workspace", "notes.md", "--json"}, tc.args...)...)
			if r.code != tc.code || r.stdout != "" {
				t.Fatalf("exit %d, want %d\n%s", r.code, tc.code, r.output())
			}
			if roster(t, dir, "notes.md") != before {
				t.Error("a refused end-session changed the room")
			}
		})
	}
	if code := statusAs(t, s.Banner.IngressURL, a.SessionToken); code != http.StatusOK {
		t.Fatalf("a's session is %d after refused end-sessions", code)
	}

	var res struct {
		EndedSessions   []string `json:"ended_sessions"`
		ParticipantLeft bool     `json:"participant_left"`
	}
	decodeJSON(t, mustCE(t, dir, nil, "end-session", "--workspace", "notes.md", "--participant", a.ParticipantID, "--json"), &res)
	if !res.ParticipantLeft || !slices.Equal(res.EndedSessions, []string{a.SessionRef}) {
		t.Fatalf("end-session --participant: %+v", res)
	}
	if code := statusAs(t, s.Banner.IngressURL, a.SessionToken); code != http.StatusUnauthorized {
		t.Errorf("a's session answers %d after end-session, want 401", code)
	}
	if code := statusAs(t, s.Banner.IngressURL, b.SessionToken); code != http.StatusOK {
		t.Errorf("b's session answers %d, want 200", code)
	}
	out := mustCE(t, dir, nil, "end-session", "--workspace", "notes.md", "--session", b.SessionRef).stdout
	if !strings.Contains(out, "ended session "+b.SessionRef) {
		t.Errorf("text output: %q", out)
	}
	if code := statusAs(t, s.Banner.IngressURL, b.SessionToken); code != http.StatusUnauthorized {
		t.Errorf("b's session answers %d after end-session --session, want 401", code)
	}
	if out := mustCE(t, dir, nil, "end-session", "--workspace", "notes.md", "--session", b.SessionRef).stdout; !strings.Contains(out, "nothing to end") {
		t.Errorf("a second end says %q", out)
	}
	if s.Exited() {
		t.Fatalf("ce serve exited: %v", s.State())
	}
	if code := s.stop(os.Interrupt); code != 0 {
		t.Errorf("serve exit %d", code)
	}
}

func TestRevokeCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, "serve", "notes.md", "--json")
	var inv inviteGrant
	decodeJSON(t, mustCE(t, dir, nil, "invite", "--workspace", "notes.md", "--json", "--max-uses", "2", "--max-live-sessions", "2"), &inv)
	c := join(t, dir, inv.URI, "c")

	var list []struct {
		InviteID        string  `json:"invite_id"`
		LiveSessions    int     `json:"live_sessions"`
		MaxLiveSessions int     `json:"max_live_sessions"`
		RevokedAt       *string `json:"revoked_at"`
	}
	decodeJSON(t, mustCE(t, dir, nil, "invites", "--workspace", "notes.md", "--json"), &list)
	found := false
	for _, i := range list {
		if i.InviteID == inv.InviteID {
			found = i.LiveSessions == 1 && i.MaxLiveSessions == 2 && i.RevokedAt == nil
		}
	}
	if !found {
		t.Errorf("ce invites --json: %+v, want %s with 1 of 2 live sessions", list, inv.InviteID)
	}
	if text := mustCE(t, dir, nil, "invites", "--workspace", "notes.md").stdout; !strings.Contains(text, inv.InviteID) {
		t.Errorf("ce invites text: %s", text)
	}

	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"no_id_exit_2", nil, exitUsage},
		{"two_ids_exit_2", []string{inv.InviteID, inv.InviteID}, exitUsage},
		{"an_unknown_id_exit_3", []string{"invite_0000000000000000"}, exitAuth},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ce(t, dir, nil, append([]string{"revoke", "--workspace", "notes.md", "--end-sessions"}, tc.args...)...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d\n%s", r.code, tc.code, r.output())
			}
		})
	}
	if code := statusAs(t, s.Banner.IngressURL, c.SessionToken); code != http.StatusOK {
		t.Fatalf("c's session answers %d after refused revokes", code)
	}

	var res struct {
		InviteID      string   `json:"invite_id"`
		EndedSessions []string `json:"ended_sessions"`
	}
	decodeJSON(t, mustCE(t, dir, nil, "revoke", inv.InviteID, "--workspace", "notes.md", "--end-sessions", "--json"), &res)
	if res.InviteID != inv.InviteID || !slices.Equal(res.EndedSessions, []string{c.SessionRef}) {
		t.Fatalf("revoke --end-sessions: %+v", res)
	}
	if code := statusAs(t, s.Banner.IngressURL, c.SessionToken); code != http.StatusUnauthorized {
		t.Errorf("c's session answers %d after revoke --end-sessions, want 401", code)
	}
	if r := ce(t, dir, nil, "join", inv.URI, "--name", "late", "--json"); r.code != exitAuth {
		t.Errorf("join after revoke: exit %d\n%s", r.code, r.output())
	}
	if code := s.stop(os.Interrupt); code != 0 {
		t.Errorf("serve exit %d", code)
	}
}

// TestEndSessionCommand_InProcessThenRestart: with no room serving the
// command runs the engine itself, and the ended session stays ended when
// the room serves again.
func TestEndSessionCommand_InProcessThenRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, "serve", "notes.md", "--json")
	var inv inviteGrant
	decodeJSON(t, mustCE(t, dir, nil, "invite", "--workspace", "notes.md", "--json", "--max-uses", "2"), &inv)
	d, e := join(t, dir, inv.URI, "d"), join(t, dir, inv.URI, "e")
	if code := s.stop(os.Interrupt); code != 0 {
		t.Fatalf("serve exit %d", code)
	}
	if r := ce(t, dir, nil, "end-session", "--workspace", "notes.md", "--participant", "participant_0000000000000000"); r.code != exitNotFound {
		t.Errorf("unknown participant in-process: exit %d\n%s", r.code, r.output())
	}
	mustCE(t, dir, nil, "end-session", "--workspace", "notes.md", "--participant", d.ParticipantID)
	for _, p := range participants(t, dir, "notes.md") {
		if p.ParticipantID == d.ParticipantID {
			t.Errorf("d is still listed after end-session")
		}
	}
	s = startServe(t, dir, "serve", "notes.md", "--json")
	if code := statusAs(t, s.Banner.IngressURL, d.SessionToken); code != http.StatusUnauthorized {
		t.Errorf("after a restart d's ended session answers %d, want 401", code)
	}
	if code := statusAs(t, s.Banner.IngressURL, e.SessionToken); code != http.StatusOK {
		t.Errorf("after a restart e's session answers %d, want 200", code)
	}
	if code := s.stop(os.Interrupt); code != 0 {
		t.Errorf("serve exit %d", code)
	}
}
