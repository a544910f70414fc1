package cli

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// inboxPage is `ce handoffs --participant|--session … --json`.
type inboxPage struct {
	Handoffs []struct {
		HandoffID string            `json:"handoff_id"`
		Inputs    []json.RawMessage `json:"inputs"`
	} `json:"handoffs"`
	NextCursor string `json:"next_cursor"`
}

func (p inboxPage) ids() []string {
	out := []string{}
	for _, h := range p.Handoffs {
		out = append(out, h.HandoffID)
	}
	return out
}

// TestHandoffsInbox_CallerScoped: ce handoffs --session/--participant lists
// what that participant may see, by role and status, one page at a time;
// the operator's ce handoffs stays the whole room; bad flags and cursors
// exit with the usage or auth code and print no handoffs.
func TestHandoffsInbox_CallerScoped(t *testing.T) {
	h := newHandoffRoom(t) // owner's open call: h.handoffID
	create := func(t *testing.T, args map[string]any) string {
		t.Helper()
		code, body := httpDo(t, "POST", h.srv.Banner.IngressURL+"/workspace/handoff", h.owner.SessionToken, args)
		if code != http.StatusOK {
			t.Fatalf("create: %d %s", code, body)
		}
		var res struct {
			Handoff struct {
				HandoffID string `json:"handoff_id"`
			} `json:"handoff"`
		}
		if err := json.Unmarshal(body, &res); err != nil {
			t.Fatal(err)
		}
		return res.Handoff.HandoffID
	}
	toWorker := create(t, map[string]any{"summary": "for the worker", "assignee": h.worker.ParticipantID})
	var inv inviteGrant
	decodeJSON(t, mustCE(t, h.dir, nil, "invite", "--workspace", h.file, "--capabilities", "read", "--json"), &inv)
	bystander := join(t, h.dir, inv.URI, "bystander")

	list := func(t *testing.T, args ...string) inboxPage {
		t.Helper()
		var p inboxPage
		decodeJSON(t, mustCE(t, h.dir, nil, append([]string{"handoffs", "--workspace", h.file, "--json"}, args...)...), &p)
		return p
	}
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"a session's open_to_accept", []string{"--session", h.worker.SessionToken, "--role", "open_to_accept"}, []string{toWorker, h.handoffID}},
		{"a session's assigned_to_me", []string{"--session", h.worker.SessionToken, "--role", "assigned_to_me"}, []string{toWorker}},
		{"a participant's created_by_me", []string{"--participant", h.owner.ParticipantID, "--role", "created_by_me"}, []string{toWorker, h.handoffID}},
		{"status narrows", []string{"--participant", h.owner.ParticipantID, "--status", "accepted"}, []string{}},
		{"a third party without checkout sees nothing", []string{"--participant", bystander.ParticipantID}, []string{}},
		{"the bystander's session sees nothing either", []string{"--session", bystander.SessionToken}, []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := list(t, tc.args...).ids(); !slices.Equal(got, tc.want) {
				t.Fatalf("listed %v, want %v", got, tc.want)
			}
		})
	}

	t.Run("pages walk without gaps or duplicates while handoffs are created", func(t *testing.T) {
		want := list(t, "--participant", h.owner.ParticipantID).ids()
		var got []string
		args := []string{"--participant", h.owner.ParticipantID, "--limit", "1"}
		for pages := 0; ; pages++ {
			if pages > 5 {
				t.Fatal("the walk does not end")
			}
			p := list(t, args...)
			got = append(got, p.ids()...)
			create(t, map[string]any{"summary": "new between pages"})
			if p.NextCursor == "" {
				break
			}
			args = []string{"--participant", h.owner.ParticipantID, "--limit", "1", "--cursor", p.NextCursor}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("walked %v, want %v", got, want)
		}
	})
	t.Run("the operator's listing stays the whole room, as an array", func(t *testing.T) {
		var all []map[string]any
		decodeJSON(t, mustCE(t, h.dir, nil, "handoffs", "--workspace", h.file, "--json"), &all)
		if len(all) != 4 {
			t.Fatalf("operator lists %d handoffs, want 4 (2 before the walk, 2 created during it)", len(all))
		}
	})

	t.Run("the operator pages through the whole room with --limit and --cursor", func(t *testing.T) {
		var all []struct {
			HandoffID string `json:"handoff_id"`
		}
		decodeJSON(t, mustCE(t, h.dir, nil, "handoffs", "--workspace", h.file, "--json"), &all)
		want := []string{}
		for _, x := range all {
			want = append(want, x.HandoffID)
		}
		var got []string
		args := []string{"--limit", "3"}
		for pages := 0; ; pages++ {
			if pages > 3 {
				t.Fatal("the walk does not end")
			}
			p := list(t, args...)
			if len(p.Handoffs) > 3 {
				t.Fatalf("a page of --limit 3 held %d handoffs", len(p.Handoffs))
			}
			got = append(got, p.ids()...)
			if p.NextCursor == "" {
				break
			}
			args = []string{"--cursor", p.NextCursor, "--limit", "3"}
		}
		if len(want) < 4 || !slices.Equal(got, want) {
			t.Fatalf("walked %v, want the whole room %v", got, want)
		}
		// As text: the first page and the cursor that goes on.
		out := mustCE(t, h.dir, nil, "handoffs", "--workspace", h.file, "--limit", "1").stdout
		cur := list(t, "--limit", "1").NextCursor
		if !strings.Contains(out, want[0]) || strings.Contains(out, want[1]) || !strings.Contains(out, "more: --cursor "+cur) {
			t.Fatalf("the first text page of one: %s", out)
		}
	})

	ownerCursor := list(t, "--participant", h.owner.ParticipantID, "--limit", "1").NextCursor
	bad := []struct {
		name string
		args []string
		code int
	}{
		{"an unknown role", []string{"--participant", h.owner.ParticipantID, "--role", "mine"}, exitUsage},
		{"a negative limit", []string{"--participant", h.owner.ParticipantID, "--limit", "-1"}, exitUsage},
		{"a limit over the maximum", []string{"--participant", h.owner.ParticipantID, "--limit", "201"}, exitUsage},
		{"a limit of a billion", []string{"--session", h.worker.SessionToken, "--limit", "1000000000"}, exitUsage},
		{"a limit of a billion for the operator", []string{"--limit", "1000000000"}, exitUsage},
		{"a negative limit for the operator", []string{"--limit", "-1"}, exitUsage},
		{"a limit that is not a number", []string{"--participant", h.owner.ParticipantID, "--limit", "ten"}, exitUsage},
		{"a garbage cursor", []string{"--participant", h.owner.ParticipantID, "--cursor", "garbage"}, exitUsage},
		{"another participant's cursor", []string{"--participant", h.worker.ParticipantID, "--limit", "1", "--cursor", ownerCursor}, exitUsage},
		{"a cursor with another filter", []string{"--participant", h.owner.ParticipantID, "--limit", "1", "--status", "open", "--cursor", ownerCursor}, exitUsage},
		{"a role without a participant", []string{"--role", "created_by_me"}, exitUsage},
		{"a participant's cursor for the operator", []string{"--limit", "1", "--cursor", ownerCursor}, exitUsage},
		{"a garbage cursor for the operator", []string{"--cursor", "garbage"}, exitUsage},
		{"both --participant and --session", []string{"--participant", h.owner.ParticipantID, "--session", h.worker.SessionToken}, exitUsage},
		{"an unknown session", []string{"--session", "not-a-session"}, exitAuth},
		{"an unknown participant", []string{"--participant", "participant_nobody"}, exitUsage},
	}
	for _, tc := range bad {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			r := ce(t, h.dir, nil, append([]string{"handoffs", "--workspace", h.file, "--json"}, tc.args...)...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d: %s", r.code, tc.code, r.output())
			}
			if strings.Contains(r.stdout, "handoff_") {
				t.Fatalf("printed handoffs: %s", r.stdout)
			}
			if strings.Contains(r.output(), h.worker.SessionToken) {
				t.Fatalf("echoed a session token: %s", r.output())
			}
		})
	}
	t.Run("a refused limit names the maximum, whichever side it is off", func(t *testing.T) {
		for _, n := range []string{"-1", "201", "1000000000"} {
			r := ce(t, h.dir, nil, "handoffs", "--workspace", h.file, "--participant", h.owner.ParticipantID, "--limit", n)
			if r.code != exitUsage || !strings.Contains(r.stderr, "limit must be 1 to 200") {
				t.Errorf("--limit %s: exit %d, stderr %q", n, r.code, r.stderr)
			}
		}
	})
}
