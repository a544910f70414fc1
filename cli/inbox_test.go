package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
)

// inboxOut is `ce inbox --json` (room.Waiting on the wire).
type inboxOut struct {
	Count     int `json:"count"`
	Results   int `json:"results"`
	Proposals int `json:"proposals"`
	Questions int `json:"questions"`
	Items     []struct {
		Kind     string `json:"kind"`
		ID       string `json:"id"`
		Summary  string `json:"summary"`
		FromName string `json:"from_name"`
		Stale    bool   `json:"stale"`
	} `json:"items"`
}

// agentCall sends one authenticated request to the room's ingress and
// decodes a 200 answer into out.
func inboxAgentCall(t *testing.T, base, token, method, path string, body, out any) {
	t.Helper()
	code, raw := httpDo(t, method, base+path, token, body)
	if code != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, path, code, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatal(err)
		}
	}
}

// TestInboxCommand: `ce inbox` lists what waits for the host — through the
// running room's owner listener while it serves (the room logs the
// request), in-process once it has stopped — with the same answer, in
// words naming participants, and refuses bad invocations.
func TestInboxCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/notes.md", []byte("# Notes\n\n## Venue\n\nTBD\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, dir, "serve", "notes.md", "--json", "--log-level", "debug")
	var inv inviteGrant
	decodeJSON(t, mustCE(t, dir, nil, "invite", "--workspace", "notes.md", "--json", "--max-uses", "2"), &inv)
	planner, writer := join(t, dir, inv.URI, "planner"), join(t, dir, inv.URI, "writer")
	base := s.Banner.IngressURL

	inbox := func() (inboxOut, string) {
		t.Helper()
		var out inboxOut
		decodeJSON(t, mustCE(t, dir, nil, "inbox", "--workspace", "notes.md", "--json"), &out)
		return out, mustCE(t, dir, nil, "inbox", "--workspace", "notes.md").stdout
	}
	if got, text := inbox(); got.Count != 0 || len(got.Items) != 0 || strings.TrimSpace(text) != "nothing waits for you" {
		t.Fatalf("empty room: %+v %q", got, text)
	}

	var created struct {
		Handoff struct {
			HandoffID string `json:"handoff_id"`
		} `json:"handoff"`
	}
	inboxAgentCall(t, base, planner.SessionToken, "POST", "/workspace/handoff",
		map[string]any{"summary": "About Venue", "assignee": writer.ParticipantID}, &created)
	hid := created.Handoff.HandoffID
	inboxAgentCall(t, base, writer.SessionToken, "POST", "/workspace/handoff/accept", map[string]any{"handoff_id": hid}, nil)
	inboxAgentCall(t, base, writer.SessionToken, "POST", "/workspace/handoff/request_input", map[string]any{"handoff_id": hid,
		"requests": []map[string]any{{"key": "city", "message": "Which city?"}}}, nil)
	got, text := inbox()
	if got.Count != 1 || got.Questions != 1 || !strings.Contains(text, `writer asks 1 question about "About Venue" — waiting for your answer`) {
		t.Fatalf("a question: %+v\n%s", got, text)
	}
	var h struct {
		TaskID string `json:"task_id"`
	}
	inboxAgentCall(t, base, writer.SessionToken, "GET", "/workspace/handoff?handoff_id="+hid, nil, &h)
	inboxAgentCall(t, base, planner.SessionToken, "POST", "/workspace/task/update", map[string]any{"task_id": h.TaskID,
		"input_responses": map[string]any{"city": map[string]any{"action": "accept", "content": map[string]any{"answer": "Lyon"}}}}, nil)
	inboxAgentCall(t, base, writer.SessionToken, "POST", "/workspace/handoff/complete", map[string]any{"handoff_id": hid,
		"result": map[string]any{"text": "Venue: Lyon"}}, nil)
	var prop struct {
		ProposalID string `json:"proposal_id"`
	}
	inboxAgentCall(t, base, writer.SessionToken, "POST", "/workspace/propose", map[string]any{"target": "Venue", "base_version": 1,
		"summary": "Name the venue", "change": map[string]any{"section": "Venue", "content": "## Venue\n\nLyon\n"}}, &prop)

	serving, text := inbox()
	if serving.Count != 2 || serving.Results != 1 || serving.Proposals != 1 || serving.Questions != 0 {
		t.Fatalf("serving: %+v", serving)
	}
	for _, want := range []string{
		"2 waiting for you: 1 result to approve, 1 proposal to review, 0 handoffs with questions",
		hid + `  writer finished "About Venue" — waiting for your approval`,
		prop.ProposalID + `  writer proposes a change to Notes/Venue: "Name the venue" — waiting for your review`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, writer.ParticipantID) {
		t.Errorf("text names a participant by id:\n%s", text)
	}
	if log := s.stderr.String(); !strings.Contains(log, "route=/workspace/waiting") {
		t.Errorf("ce inbox did not ask the running room (its log has no GET /workspace/waiting):\n%s", log)
	}

	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"a_positional_argument_exit_2", []string{"inbox", "--workspace", "notes.md", "extra"}, exitUsage},
		{"an_unknown_flag_exit_2", []string{"inbox", "--workspace", "notes.md", "--all"}, exitUsage},
		{"a_missing_file_exit_4", []string{"inbox", "--workspace", "missing.md"}, exitNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ce(t, dir, nil, tc.args...)
			if r.code != tc.code || r.stdout != "" {
				t.Fatalf("exit %d, want %d\n%s", r.code, tc.code, r.output())
			}
		})
	}

	if code := s.stop(os.Interrupt); code != 0 {
		t.Fatalf("serve exit %d", code)
	}
	stopped, stoppedText := inbox()
	if fmt.Sprint(stopped) != fmt.Sprint(serving) || stoppedText != text {
		t.Fatalf("stopped room answers differently:\n%+v\n%+v\n%s\n%s", stopped, serving, stoppedText, text)
	}
	// The in-process read left no lock behind: the room serves again.
	s2 := startServe(t, dir, "serve", "notes.md", "--json")
	if code := s2.stop(os.Interrupt); code != 0 {
		t.Fatalf("second serve exit %d", code)
	}
}

// TestInviteLabelCommand: `ce invite --label` stores the label; --json and
// `ce invites` show it (bad labels are in badInviteFlags).
func TestInviteLabelCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/notes.md", []byte("# Notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var g struct {
		InviteID string `json:"invite_id"`
		Label    string `json:"label"`
	}
	decodeJSON(t, mustCE(t, dir, nil, "invite", "--workspace", "notes.md", "--json", "--label", "for the reviewer"), &g)
	if g.Label != "for the reviewer" {
		t.Fatalf("invite --json label = %q", g.Label)
	}
	var list []struct {
		InviteID string `json:"invite_id"`
		Label    string `json:"label"`
	}
	decodeJSON(t, mustCE(t, dir, nil, "invites", "--workspace", "notes.md", "--json"), &list)
	if len(list) != 1 || list[0].InviteID != g.InviteID || list[0].Label != "for the reviewer" {
		t.Fatalf("invites --json: %+v", list)
	}
	if text := mustCE(t, dir, nil, "invites", "--workspace", "notes.md").stdout; !strings.Contains(text, "LABEL") || !strings.Contains(text, "for the reviewer") {
		t.Fatalf("invites text:\n%s", text)
	}
}
