package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/commonroom/ce/internal/roomtest"
)

// shareRoom serves a room (with extra serve flags) where a flooder and a
// bystander have joined over HTTP.
type shareRoom struct {
	srv                *server
	dir, file          string
	flooder, bystander joinGrant
	flooderH, bystandH []string // handoff ids each created
}

func newShareRoom(t *testing.T, serveFlags ...string) *shareRoom {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "notes.md")
	if err := os.WriteFile(file, []byte("# Notes\n\n## Plan\n\nstep one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, dir, append([]string{"serve", file, "--json"}, serveFlags...)...)
	r := &shareRoom{srv: srv, dir: dir, file: file}
	r.flooder = join(t, dir, srv.Banner.Invite, "flooder")
	var inv inviteGrant
	decodeJSON(t, mustCE(t, dir, nil, "invite", "--workspace", file, "--json"), &inv)
	r.bystander = join(t, dir, inv.URI, "bystander")
	return r
}

// create asks for a handoff over HTTP as g; it returns the status, the
// handoff id (on success) and the decoded body.
func (r *shareRoom) create(t *testing.T, g joinGrant, summary string) (int, string, map[string]any) {
	t.Helper()
	code, body := httpDo(t, "POST", r.srv.Banner.IngressURL+"/workspace/handoff", g.SessionToken, map[string]any{"summary": summary})
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("create: %d %s", code, body)
	}
	id, _ := roomtest.JSONAt(m, "handoff", "handoff_id").(string)
	return code, id, m
}

// fill has g create n handoffs, all of which must succeed.
func (r *shareRoom) fill(t *testing.T, g joinGrant, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		code, id, m := r.create(t, g, fmt.Sprintf("job %d", i))
		if code != http.StatusOK {
			t.Fatalf("create %d as %s: %d %v", i, g.ParticipantID, code, m)
		}
		ids = append(ids, id)
	}
	return ids
}

// refused checks that g's next create is refused by the participant share.
func (r *shareRoom) refused(t *testing.T, g joinGrant, limit int) {
	t.Helper()
	code, _, m := r.create(t, g, "one too many")
	if code != http.StatusTooManyRequests || m["error"] != "limit_exceeded" || m["scope"] != "participant" ||
		m["limit"] != float64(limit) || m["count"] != float64(limit) {
		t.Fatalf("create over the share: %d %v, want 429 limit_exceeded scope participant limit %d", code, m, limit)
	}
}

func (r *shareRoom) handoffStatus(t *testing.T, id string) string {
	t.Helper()
	var h struct {
		Status     string `json:"status"`
		TaskStatus string `json:"task_status"`
	}
	decodeJSON(t, mustCE(t, r.dir, nil, "handoff", id, "--workspace", r.file, "--json"), &h)
	return h.Status + "/" + h.TaskStatus
}

func TestCancelHandoffs_ThroughTheRunningRoom(t *testing.T) {
	r := newShareRoom(t)
	flood := r.fill(t, r.flooder, 8)
	r.refused(t, r.flooder, 8)
	theirs := r.fill(t, r.bystander, 1)

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"without_participant_usage", []string{"cancel-handoffs", "--workspace", r.file}, exitUsage, "--participant"},
		{"with_an_argument_usage", []string{"cancel-handoffs", "extra", "--participant", r.flooder.ParticipantID, "--workspace", r.file}, exitUsage, "no arguments"},
		{"unknown_participant_not_found", []string{"cancel-handoffs", "--participant", "participant_0000000000000000", "--workspace", r.file}, exitNotFound, "not_found: unknown participant"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := ce(t, r.dir, nil, tc.args...)
			if res.code != tc.code || !strings.Contains(res.stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d mentioning %q", res.code, res.stderr, tc.code, tc.want)
			}
			if got := r.handoffStatus(t, flood[0]); got != "open/working" {
				t.Fatalf("a refused command changed a handoff: %s", got)
			}
		})
	}

	var out struct {
		ParticipantID string   `json:"participant_id"`
		Cancelled     int      `json:"cancelled"`
		HandoffIDs    []string `json:"handoff_ids"`
	}
	decodeJSON(t, mustCE(t, r.dir, nil, "cancel-handoffs", "--participant", r.flooder.ParticipantID, "--workspace", r.file, "--json"), &out)
	if out.Cancelled != 8 || out.ParticipantID != r.flooder.ParticipantID || len(out.HandoffIDs) != 8 {
		t.Fatalf("ce cancel-handoffs --json = %+v, want 8 cancelled", out)
	}
	for _, id := range flood {
		if got := r.handoffStatus(t, id); got != "cancelled/cancelled" {
			t.Fatalf("%s: %s, want cancelled/cancelled", id, got)
		}
	}
	if got := r.handoffStatus(t, theirs[0]); got != "open/working" {
		t.Fatalf("the bystander's handoff: %s, want open/working", got)
	}
	// The share is free again; the text form reports what it did.
	r.fill(t, r.flooder, 1)
	res := mustCE(t, r.dir, nil, "cancel-handoffs", "--participant", r.flooder.ParticipantID, "--workspace", r.file)
	if !strings.Contains(res.stdout, "cancelled 1 handoff of "+r.flooder.ParticipantID) {
		t.Fatalf("text output %q", res.stdout)
	}
}

func TestCancelHandoffs_InProcessWhenNoRoomIsServing(t *testing.T) {
	r := newShareRoom(t)
	flood := r.fill(t, r.flooder, 3)
	if code := r.srv.stop(os.Interrupt); code != 0 {
		t.Fatalf("serve exit %d", code)
	}
	if res := ce(t, r.dir, nil, "cancel-handoffs", "--participant", "participant_0000000000000000", "--workspace", r.file); res.code != exitNotFound {
		t.Fatalf("unknown participant in-process: exit %d %s", res.code, res.output())
	}
	var out struct {
		Cancelled int `json:"cancelled"`
	}
	decodeJSON(t, mustCE(t, r.dir, nil, "cancel-handoffs", "--participant", r.flooder.ParticipantID, "--workspace", r.file, "--json"), &out)
	if out.Cancelled != 3 {
		t.Fatalf("in-process clear cancelled %d, want 3", out.Cancelled)
	}
	for _, id := range flood {
		if got := r.handoffStatus(t, id); got != "cancelled/cancelled" {
			t.Fatalf("%s: %s after an in-process clear", id, got)
		}
	}
	// The lock was released: the room serves again.
	srv := startServe(t, r.dir, "serve", r.file, "--json")
	srv.stop(os.Interrupt)
}

func TestServe_MaxTasksPerParticipantFlag(t *testing.T) {
	t.Run("a share of 2 refuses the third for one participant only", func(t *testing.T) {
		r := newShareRoom(t, "--max-tasks-per-participant", "2")
		r.fill(t, r.flooder, 2)
		r.refused(t, r.flooder, 2)
		r.fill(t, r.bystander, 2)
	})
	for _, bad := range []string{"0", "-1", "33", "many"} {
		t.Run("--max-tasks-per-participant "+bad+" is a usage error", func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "notes.md")
			res := ce(t, dir, nil, "serve", file, "--json", "--max-tasks-per-participant", bad)
			if res.code != exitUsage || !strings.Contains(res.stderr, "max-tasks-per-participant") {
				t.Fatalf("exit %d, stderr %q; want a usage error naming the flag", res.code, res.stderr)
			}
			if res.stdout != "" {
				t.Fatalf("it served: %s", res.stdout)
			}
		})
	}
}
