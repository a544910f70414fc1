package cli

// The local operator's reads with the real binary: `ce participants`,
// `ce leases`, `ce proposals`, `ce history` and `ce diff`, against a room
// while it is served and after it stopped. The room's state is made over
// HTTP by a joined agent, so the commands show what the network did.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

const readsDoc = "# Notes\n\n## Plan\n\nstep one\n\n## Risks\n\nnone yet\n"

// readsRoom is a served room with one agent holding every capability a
// change needs, a live lease and a pending proposal made over HTTP.
type readsRoom struct {
	srv        *server
	dir, file  string
	agent      joinGrant
	leaseID    string
	proposalID string
}

func newReadsRoom(t *testing.T) *readsRoom {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "notes.md")
	if err := os.WriteFile(file, []byte(readsDoc), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, dir, "serve", file, "--json")
	var inv inviteGrant
	decodeJSON(t, mustCE(t, dir, nil, "invite", "--workspace", file, "--capabilities", "read,observe,checkout,propose,approve,commit", "--json"), &inv)
	agent := join(t, dir, inv.URI, "editor-agent")
	r := &readsRoom{srv: srv, dir: dir, file: file, agent: agent}
	lease := r.post(t, "/workspace/checkout", map[string]any{"target": "Plan"})
	r.leaseID, _ = lease["lease_id"].(string)
	p := r.post(t, "/workspace/propose", map[string]any{"target": "Risks", "base_version": 1, "summary": "name a risk",
		"change": map[string]any{"section": "Risks", "content": "## Risks\n\nscope creep\n"}})
	r.proposalID, _ = p["proposal_id"].(string)
	if r.leaseID == "" || r.proposalID == "" {
		t.Fatalf("lease %v, proposal %v", lease, p)
	}
	return r
}

// post sends a request as the agent over the ingress listener; it must succeed.
func (r *readsRoom) post(t *testing.T, path string, body any) map[string]any {
	t.Helper()
	code, b := httpDo(t, "POST", r.srv.Banner.IngressURL+path, r.agent.SessionToken, body)
	var m map[string]any
	if code != http.StatusOK || json.Unmarshal(b, &m) != nil {
		t.Fatalf("POST %s: %d %s", path, code, b)
	}
	return m
}

// commit proposes content for section against base, approves and commits
// it; it returns the new version.
func (r *readsRoom) commit(t *testing.T, base int, section, content string) int {
	t.Helper()
	p := r.post(t, "/workspace/propose", map[string]any{"target": section, "base_version": base, "summary": "edit " + section,
		"change": map[string]any{"section": section, "content": content}})
	r.post(t, "/workspace/proposal/review", map[string]any{"proposal_id": p["proposal_id"], "approve": true})
	c := r.post(t, "/workspace/commit", map[string]any{"proposal_id": p["proposal_id"]})
	v, _ := c["version"].(float64)
	return int(v)
}

// readJSON runs `ce NAME --workspace FILE --json ARGS...` and decodes it.
func (r *readsRoom) readJSON(t *testing.T, v any, name string, args ...string) {
	t.Helper()
	decodeJSON(t, mustCE(t, r.dir, nil, append([]string{name, "--workspace", r.file, "--json"}, args...)...), v)
}

type readsEvent struct {
	ID   int64  `json:"event_id"`
	Type string `json:"event_type"`
}

// readsProposals is one page of `ce proposals --json`.
type readsProposals struct {
	Proposals  []map[string]any `json:"proposals"`
	NextCursor string           `json:"next_cursor"`
}

type readsHistory struct {
	WorkspaceID   string       `json:"workspace_id"`
	Events        []readsEvent `json:"events"`
	OldestEventID int64        `json:"oldest_event_id"`
	NewestEventID int64        `json:"newest_event_id"`
}

func TestReadCommands(t *testing.T) {
	r := newReadsRoom(t)
	wsID := r.srv.Banner.WorkspaceID

	// checkState runs every read against the sidecar and checks what the
	// network made; phase names when (serving, stopped).
	checkState := func(t *testing.T, phase string, wantVersion int) {
		t.Run(phase+": participants lists the host and the agent", func(t *testing.T) {
			var ps []map[string]any
			r.readJSON(t, &ps, "participants")
			var ids []string
			for _, p := range ps {
				ids = append(ids, fmt.Sprint(p["participant_id"]))
			}
			if len(ps) < 2 || !slices.Contains(ids, r.agent.ParticipantID) {
				t.Errorf("participants = %v, want the host and %s", ps, r.agent.ParticipantID)
			}
			out := mustCE(t, r.dir, nil, "participants", "--workspace", r.file).stdout
			if !strings.Contains(out, r.agent.ParticipantID) || !strings.Contains(out, "editor-agent") {
				t.Errorf("ce participants text:\n%s", out)
			}
		})
		t.Run(phase+": leases shows the lease taken over HTTP", func(t *testing.T) {
			var ls []map[string]any
			r.readJSON(t, &ls, "leases")
			if len(ls) != 1 || ls[0]["lease_id"] != r.leaseID || ls[0]["target"] != "Notes/Plan" || ls[0]["participant_id"] != r.agent.ParticipantID {
				t.Errorf("ce leases --json = %v, want lease %s on Notes/Plan", ls, r.leaseID)
			}
			out := mustCE(t, r.dir, nil, "leases", "--workspace", r.file).stdout
			if !strings.Contains(out, r.leaseID) || !strings.Contains(out, "Notes/Plan") {
				t.Errorf("ce leases text:\n%s", out)
			}
		})
		t.Run(phase+": proposals shows the proposal made over HTTP", func(t *testing.T) {
			var page readsProposals
			r.readJSON(t, &page, "proposals")
			ps := page.Proposals
			var found map[string]any
			for _, p := range ps {
				if p["proposal_id"] == r.proposalID {
					found = p
				}
			}
			if found == nil || found["target"] != "Notes/Risks" || found["participant_id"] != r.agent.ParticipantID {
				t.Fatalf("ce proposals --json = %v, want %s", ps, r.proposalID)
			}
			out := mustCE(t, r.dir, nil, "proposals", "--workspace", r.file).stdout
			if !strings.Contains(out, r.proposalID) || !strings.Contains(out, "name a risk") {
				t.Errorf("ce proposals text:\n%s", out)
			}
		})
		t.Run(phase+": history --since N is ascending with oldest_event_id", func(t *testing.T) {
			var all readsHistory
			r.readJSON(t, &all, "history")
			if all.WorkspaceID != wsID || len(all.Events) < 5 {
				t.Fatalf("ce history --json = %+v", all)
			}
			for i := 1; i < len(all.Events); i++ {
				if all.Events[i].ID >= all.Events[i-1].ID {
					t.Fatalf("ce history without --since is not newest first: %v", all.Events)
				}
			}
			since := all.Events[len(all.Events)-1].ID + 1
			var after readsHistory
			r.readJSON(t, &after, "history", "--since", fmt.Sprint(since))
			if after.OldestEventID <= 0 || after.OldestEventID > since {
				t.Errorf("oldest_event_id = %d, want the oldest kept id (at most %d)", after.OldestEventID, since)
			}
			if len(after.Events) == 0 || after.Events[0].ID != since+1 {
				t.Fatalf("ce history --since %d = %v, want events from %d", since, after.Events, since+1)
			}
			for i, ev := range after.Events {
				if ev.ID <= since || i > 0 && ev.ID <= after.Events[i-1].ID {
					t.Fatalf("ce history --since %d is not ascending after it: %v", since, after.Events)
				}
			}
			if last := after.Events[len(after.Events)-1].ID; last != all.Events[0].ID {
				t.Errorf("ce history --since ends at %d, want the newest event %d", last, all.Events[0].ID)
			}
			text := mustCE(t, r.dir, nil, "history", "--workspace", r.file, "--since", fmt.Sprint(since)).stdout
			if !strings.Contains(text, "lease.acquired") || !strings.Contains(text, "proposal.created") {
				t.Errorf("ce history text:\n%s", text)
			}
		})
		t.Run(phase+": diff --base 1 prints a unified diff from v1", func(t *testing.T) {
			out := mustCE(t, r.dir, nil, "diff", "--workspace", r.file, "--base", "1").stdout
			for _, want := range []string{"--- v1\n", fmt.Sprintf("+++ v%d\n", wantVersion), "-step one\n", "+step two\n"} {
				if !strings.Contains(out, want) {
					t.Errorf("ce diff --base 1 lacks %q:\n%s", want, out)
				}
			}
			var d map[string]any
			r.readJSON(t, &d, "diff", "--base", "1")
			if d["base_version"] != float64(1) || d["current_version"] != float64(wantVersion) || d["workspace_id"] != wsID {
				t.Errorf("ce diff --json = %v", d)
			}
		})
		t.Run(phase+": diff without --base is a usage error", func(t *testing.T) {
			res := ce(t, r.dir, nil, "diff", "--workspace", r.file)
			if res.code != exitUsage || !strings.Contains(res.stderr, "--base") {
				t.Errorf("exit %d, want %d with a word on --base: %s", res.code, exitUsage, res.output())
			}
		})
		t.Run(phase+": diff from an unknown version exits 4 with version_not_found", func(t *testing.T) {
			res := ce(t, r.dir, nil, "diff", "--workspace", r.file, "--base", "99")
			if res.code != exitNotFound || !strings.Contains(res.stderr, "version_not_found") {
				t.Errorf("exit %d, want %d: %s", res.code, exitNotFound, res.output())
			}
		})
	}

	v := r.commit(t, 1, "Plan", "## Plan\n\nstep two\n\n")
	if v != 2 {
		t.Fatalf("commit made version %d, want 2", v)
	}
	// The pending proposal was superseded by the commit; a new one stays pending.
	p := r.post(t, "/workspace/propose", map[string]any{"target": "Risks", "base_version": 2, "summary": "name a risk",
		"change": map[string]any{"section": "Risks", "content": "## Risks\n\nscope creep\n"}})
	superseded := r.proposalID
	r.proposalID = fmt.Sprint(p["proposal_id"])

	checkState(t, "serving", 2)
	t.Run("serving: a whole-document proposal says so in ce proposals and ce proposal", func(t *testing.T) {
		whole := r.post(t, "/workspace/propose", map[string]any{"target": "workspace", "base_version": 2, "summary": "start over",
			"change": map[string]any{"content": "# Notes\n\nall new\n"}})
		id := fmt.Sprint(whole["proposal_id"])
		if whole["scope"] != "document" {
			t.Fatalf("propose answered scope %v, want document", whole["scope"])
		}
		var page readsProposals
		r.readJSON(t, &page, "proposals")
		for _, p := range page.Proposals {
			want := "section"
			if p["proposal_id"] == id {
				want = "document"
			}
			if p["scope"] != want {
				t.Errorf("ce proposals --json: %v has scope %v, want %s", p["proposal_id"], p["scope"], want)
			}
		}
		for _, line := range strings.Split(mustCE(t, r.dir, nil, "proposals", "--workspace", r.file).stdout, "\n") {
			switch {
			case strings.Contains(line, id) && !strings.Contains(line, "WHOLE DOCUMENT"):
				t.Errorf("the whole-document proposal's line does not say so: %q", line)
			case strings.Contains(line, "proposal_") && !strings.Contains(line, id) && strings.Contains(line, "WHOLE DOCUMENT"):
				t.Errorf("a section proposal's line says WHOLE DOCUMENT: %q", line)
			}
		}
		if out := mustCE(t, r.dir, nil, "proposal", id, "--workspace", r.file).stdout; !strings.Contains(out, "replaces  THE WHOLE DOCUMENT") {
			t.Errorf("ce proposal of a whole-document proposal:\n%s", out)
		}
		if out := mustCE(t, r.dir, nil, "proposal", r.proposalID, "--workspace", r.file).stdout; !strings.Contains(out, "replaces  the section Notes/Risks only") {
			t.Errorf("ce proposal of a section proposal:\n%s", out)
		}
	})
	t.Run("serving: proposals --status filters", func(t *testing.T) {
		var page readsProposals
		r.readJSON(t, &page, "proposals", "--status", "superseded")
		ps := page.Proposals
		if len(ps) != 1 || ps[0]["proposal_id"] != superseded {
			t.Errorf("superseded = %v, want %s", ps, superseded)
		}
	})

	if code := r.srv.stop(syscall.SIGINT); code != 0 {
		t.Fatalf("ce serve exited %d", code)
	}
	checkState(t, "stopped", 2)
	t.Run("stopped: the newest event is workspace.stopped", func(t *testing.T) {
		var h readsHistory
		r.readJSON(t, &h, "history", "--limit", "1")
		if len(h.Events) != 1 || h.Events[0].Type != "workspace.stopped" {
			t.Errorf("ce history --limit 1 = %+v", h.Events)
		}
	})
	t.Run("stopped: the reads did not change the sidecar", func(t *testing.T) {
		var a, b readsHistory
		r.readJSON(t, &a, "history")
		mustCE(t, r.dir, nil, "leases", "--workspace", r.file)
		mustCE(t, r.dir, nil, "diff", "--workspace", r.file, "--base", "1")
		r.readJSON(t, &b, "history")
		if a.NewestEventID != b.NewestEventID || len(a.Events) != len(b.Events) {
			t.Errorf("history moved from %d to %d across reads", a.NewestEventID, b.NewestEventID)
		}
	})
}

func TestReadCommandsRefuse(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "notes.md")
	if err := os.WriteFile(file, []byte(readsDoc), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, dir, "serve", file, "--json")
	if code := srv.stop(syscall.SIGINT); code != 0 {
		t.Fatalf("ce serve exited %d", code)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{name: "participants with an argument is a usage error", args: []string{"participants", "--workspace", file, "extra"}, code: exitUsage},
		{name: "diff with --base 0 is a usage error", args: []string{"diff", "--workspace", file, "--base", "0"}, code: exitUsage},
		{name: "diff with a base that is not a number is a usage error", args: []string{"diff", "--workspace", file, "--base", "one"}, code: exitUsage},
		{name: "proposals with an unknown status is a usage error", args: []string{"proposals", "--workspace", file, "--status", "bogus"}, code: exitUsage},
		{name: "history with an unknown flag is a usage error", args: []string{"history", "--workspace", file, "--bogus"}, code: exitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := ce(t, dir, nil, tc.args...)
			if res.code != tc.code {
				t.Errorf("ce %v: exit %d, want %d: %s", tc.args, res.code, tc.code, res.output())
			}
		})
	}
	t.Run("leases of a room with none says so", func(t *testing.T) {
		if out := mustCE(t, dir, nil, "leases", "--workspace", file).stdout; !strings.Contains(out, "no live leases") {
			t.Errorf("ce leases = %q", out)
		}
		var ls []any
		decodeJSON(t, mustCE(t, dir, nil, "leases", "--workspace", file, "--json"), &ls)
		if ls == nil || len(ls) != 0 {
			t.Errorf("ce leases --json = %v, want []", ls)
		}
	})
	t.Run("diff --base of the current version says there are no changes", func(t *testing.T) {
		out := mustCE(t, dir, nil, "diff", "--workspace", file, "--base", "1").stdout
		if !strings.Contains(out, "no changes between v1 and v1") {
			t.Errorf("ce diff = %q", out)
		}
	})
}
