package cli

// Issue 16 item 4 at the command line: `ce invite --participant P` makes a
// re-admission invitation and `ce join` redeems it as P; `ce serve` takes
// the session's idle window and maximum lifetime as flags.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestInviteParticipant_ReadmitsThroughCeJoin(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, "serve", "notes.md", "--json")
	agent := join(t, dir, s.Banner.Invite, "agent")
	code, body := httpDo(t, "POST", s.Banner.IngressURL+"/workspace/handoff", agent.SessionToken,
		map[string]any{"summary": "mine", "idempotency_key": "k-cli"})
	if code != 200 {
		t.Fatalf("create: %d %s", code, body)
	}

	r := mustCE(t, dir, nil, "invite", "--workspace", "notes.md", "--json", "--participant", agent.ParticipantID, "--capabilities", "read,propose")
	var inv struct {
		inviteGrant
		ParticipantID string `json:"participant_id"`
	}
	decodeJSON(t, r, &inv)
	if inv.ParticipantID != agent.ParticipantID || !slices.Equal(inv.Capabilities, []string{"read", "propose"}) {
		t.Fatalf("ce invite --participant: %s", r.stdout)
	}
	back := join(t, dir, inv.URI, "another name")
	if back.ParticipantID != agent.ParticipantID || back.SessionRef == agent.SessionRef ||
		!slices.Equal(back.Capabilities, []string{"read", "propose"}) {
		t.Fatalf("ce join: %+v, want a new session for %s with [read propose]", back, agent.ParticipantID)
	}
	code, body = httpDo(t, "POST", s.Banner.IngressURL+"/workspace/handoff", back.SessionToken,
		map[string]any{"summary": "mine", "idempotency_key": "k-cli"})
	var replay struct {
		Replayed bool `json:"replayed"`
	}
	if code != 200 || json.Unmarshal(body, &replay) != nil || !replay.Replayed {
		t.Errorf("the retry with its key after re-admission: %d %s, want the original replayed", code, body)
	}

	for _, tc := range []struct {
		name  string
		flags []string
		exit  int
	}{
		{"an_unknown_participant", []string{"--participant", "participant_nobody"}, exitNotFound},
		{"capabilities_wider_than_the_participant's", []string{"--participant", agent.ParticipantID, "--capabilities", "approve"}, exitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"invite", "--workspace", "notes.md", "--json"}, tc.flags...)
			if r := ce(t, dir, nil, args...); r.code != tc.exit {
				t.Fatalf("exit %d, want %d\n%s", r.code, tc.exit, r.output())
			}
		})
	}
	t.Run("used_twice", func(t *testing.T) {
		if r := ce(t, dir, nil, "join", inv.URI, "--name", "again", "--json"); r.code != exitAuth {
			t.Fatalf("exit %d, want %d\n%s", r.code, exitAuth, r.output())
		}
	})
}

func TestServeSessionFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		flags []string
		why   string // the refusal must name the rule, not just be an unknown flag
	}{
		{"an_idle_window_below_a_minute_is_refused", []string{"--session-idle", "30s"}, "--session-idle must be between 1m and"},
		{"an_idle_window_above_a_day_is_refused", []string{"--session-idle", "25h"}, "--session-idle must be between 1m and"},
		{"a_max_lifetime_below_the_idle_window_is_refused", []string{"--session-idle", "2h", "--session-max-lifetime", "1h"},
			"--session-max-lifetime must be at least --session-idle"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "notes.md"), []byte("# Notes\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			r := ce(t, dir, nil, append([]string{"serve", "notes.md", "--json"}, tc.flags...)...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.why) {
				t.Fatalf("exit %d, want %d saying %q\n%s", r.code, exitUsage, tc.why, r.output())
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Errorf("a refused flag left files behind: %v", entries)
			}
		})
	}
	t.Run("the_idle_window_sets_a_joins_expiry", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		s := startServe(t, dir, "serve", "notes.md", "--json", "--session-idle", "90m", "--session-max-lifetime", "2h")
		before := time.Now()
		g := join(t, dir, s.Banner.Invite, "agent")
		exp, err := time.Parse(time.RFC3339, g.ExpiresAt)
		if err != nil {
			t.Fatal(err)
		}
		if d := exp.Sub(before); d < 89*time.Minute || d > 91*time.Minute {
			t.Errorf("a join expires %s after it, want the 90m idle window", d)
		}
	})
}
