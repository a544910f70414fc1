package cli

import (
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/commonroom/ce/internal/cetest"
)

var updateDecideGolden = flag.Bool("update-decide-golden", false, "rewrite testdata/decide/*.golden from this build")

// decideRoom is a room where the host has things to decide: proposals by
// "writer" and handoffs from "planner" to "writer" in every state the
// deciding commands meet. The agents act over HTTP while the room serves;
// with serving false the room is stopped before the test's commands run,
// so every command is tried in-process too.
type decideRoom struct {
	t               *testing.T
	dir             string
	env             []string // USER=alice: the host's name in every output
	srv             *server
	planner, writer joinGrant
	// p1 (Venue) and p2 (Food) and p5 (Food) are pending at v2; p4
	// (Venue) is pending at v1, made stale by an edit of the file (v2).
	p1, p2, p4, p5 string
	// hA and hB have results ready; hQ waits on questions q1 (free text)
	// and q2 (an integer count); hO is open, not accepted.
	hA, hB, hQ, hO string
	taskA          string
	serving        bool
}

const decideDoc = "# Notes\n\n## Venue\n\nTBD\n\n## Food\n\nnone yet\n"

func newDecideRoom(t *testing.T, serving bool) *decideRoom {
	t.Helper()
	d := &decideRoom{t: t, dir: t.TempDir(), env: []string{"USER=alice"}, serving: serving}
	if err := os.WriteFile(filepath.Join(d.dir, "notes.md"), []byte(decideDoc), 0o644); err != nil {
		t.Fatal(err)
	}
	d.srv = spawnServe(t, d.dir, d.env, "serve", "notes.md", "--json")
	d.srv.ready()
	d.planner = join(t, d.dir, d.srv.Banner.Invite, "planner")
	var inv inviteGrant
	decodeJSON(t, d.ce("invite", "--workspace", "notes.md", "--json"), &inv)
	d.writer = join(t, d.dir, inv.URI, "writer")

	d.p4 = d.propose("Venue", 1, "## Venue\n\nthe old hall\n", "venue from v1")
	// An edit of the file while the room serves: v2, and p4's base is stale.
	if err := os.WriteFile(filepath.Join(d.dir, "notes.md"), []byte(decideDoc+"soup\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d.waitVersion(2)
	d.p1 = d.propose("Venue", 2, "## Venue\n\nthe town hall\n", "pick the town hall")
	d.p2 = d.propose("Food", 2, "## Food\n\nsandwiches\n", "sandwiches")
	d.p5 = d.propose("Food", 2, "## Food\n\nsoup and bread\n", "soup and bread")

	d.hA, d.taskA = d.handoff("write the venue section")
	d.post(d.writer, "/workspace/handoff/accept", map[string]any{"handoff_id": d.hA})
	d.post(d.writer, "/workspace/handoff/complete", map[string]any{"handoff_id": d.hA, "result": map[string]any{"text": "done: the town hall"}})
	d.hB, _ = d.handoff("write the food section")
	d.post(d.writer, "/workspace/handoff/accept", map[string]any{"handoff_id": d.hB})
	d.post(d.writer, "/workspace/handoff/complete", map[string]any{"handoff_id": d.hB, "result": map[string]any{"text": "done: soup"}})
	d.hQ, _ = d.handoff("book the hall")
	d.post(d.writer, "/workspace/handoff/accept", map[string]any{"handoff_id": d.hQ})
	d.post(d.writer, "/workspace/handoff/request_input", map[string]any{"handoff_id": d.hQ, "requests": []any{
		map[string]any{"key": "q1", "message": "Which hall?"},
		map[string]any{"key": "q2", "message": "How many guests?", "requested_schema": map[string]any{
			"type": "object", "properties": map[string]any{"count": map[string]any{"type": "integer"}}, "required": []string{"count"}}},
	}})
	d.hO, _ = d.handoff("print the menus")

	if !serving {
		if code := d.srv.stop(syscall.SIGINT); code != 0 {
			t.Fatalf("ce serve exit %d", code)
		}
		if exists(ownerOf(filepath.Join(d.dir, "notes.md"))) {
			t.Fatal("the credential is still there: the commands would try the stopped room")
		}
	}
	return d
}

// ce runs one command in the room's directory as the host alice.
func (d *decideRoom) ce(args ...string) result {
	d.t.Helper()
	return ce(d.t, d.dir, d.env, args...)
}

func (d *decideRoom) post(as joinGrant, path string, body any) map[string]any {
	d.t.Helper()
	code, raw := httpDo(d.t, "POST", d.srv.Banner.IngressURL+path, as.SessionToken, body)
	if code != http.StatusOK {
		d.t.Fatalf("POST %s: %d %s", path, code, raw)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		d.t.Fatalf("POST %s: %v %s", path, err, raw)
	}
	return m
}

func (d *decideRoom) propose(section string, base int, content, summary string) string {
	d.t.Helper()
	m := d.post(d.writer, "/workspace/propose", map[string]any{"target": section, "base_version": base, "summary": summary,
		"change": map[string]any{"section": section, "content": content}})
	return m["proposal_id"].(string)
}

func (d *decideRoom) handoff(summary string) (handoffID, taskID string) {
	d.t.Helper()
	m := d.post(d.planner, "/workspace/handoff", map[string]any{"summary": summary, "assignee": d.writer.ParticipantID})
	return m["handoff"].(map[string]any)["handoff_id"].(string), m["task"].(map[string]any)["taskId"].(string)
}

// waitVersion waits until the room has recorded version v (a read syncs
// the file's edit; the watcher may also have).
func (d *decideRoom) waitVersion(v float64) {
	d.t.Helper()
	deadline := time.Now().Add(fileTimeout)
	for {
		code, raw := httpDo(d.t, "GET", d.srv.Banner.IngressURL+"/workspace/status", d.planner.SessionToken, nil)
		var st map[string]any
		if code == http.StatusOK && json.Unmarshal(raw, &st) == nil && st["version"] == v {
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("the room did not reach version %v: %d %s", v, code, raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// placeholders turns the room's random ids into stable names for the
// golden files.
func (d *decideRoom) placeholders(s string) string {
	return strings.NewReplacer(
		d.p1, "<p1>", d.p2, "<p2>", d.p4, "<p4>", d.p5, "<p5>",
		d.hA, "<hA>", d.hB, "<hB>", d.hQ, "<hQ>", d.hO, "<hO>",
		d.planner.ParticipantID, "<planner-id>", d.writer.ParticipantID, "<writer-id>",
	).Replace(s)
}

// golden compares text output with testdata/decide/NAME.golden: the same
// file for the serving and the stopped room, so both ways print alike.
func (d *decideRoom) golden(name, got string) {
	d.t.Helper()
	got = d.placeholders(got)
	path := filepath.Join("testdata", "decide", name+".golden")
	if *updateDecideGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			d.t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			d.t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		d.t.Fatalf("%v (run with -update-decide-golden to create it)", err)
	}
	if string(want) != got {
		d.t.Errorf("%s differs from %s:\n--- got\n%s\n--- want\n%s", name, path, got, want)
	}
}

// want checks a command's exit code and that its output carries each of
// the fragments.
func (d *decideRoom) want(r result, code int, fragments ...string) {
	d.t.Helper()
	if r.code != code {
		d.t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
		return
	}
	for _, f := range fragments {
		if !strings.Contains(r.output(), f) {
			d.t.Errorf("output lacks %q:\nstdout:\n%s\nstderr:\n%s", f, r.stdout, r.stderr)
		}
	}
}

// proposalStatus and handoffStatus read an item's status as ce proposal
// --json and ce handoff --json show it.
func (d *decideRoom) proposalStatus(id string) string { return d.status("proposal", id) }
func (d *decideRoom) handoffStatus(id string) string  { return d.status("handoff", id) }

func (d *decideRoom) status(cmd, id string) string {
	d.t.Helper()
	var v struct {
		Status string `json:"status"`
	}
	decodeJSON(d.t, d.ce(cmd, id, "--workspace", "notes.md", "--json"), &v)
	return v.Status
}

func forBothRooms(t *testing.T, fn func(t *testing.T, d *decideRoom)) {
	for _, tc := range []struct {
		name    string
		serving bool
	}{{"serving", true}, {"stopped", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fn(t, newDecideRoom(t, tc.serving))
		})
	}
}

// TestApproveRejectProposals: ce approve and ce reject decide a pending
// proposal as the host, through the running room or in-process; deciding
// it again, or a --note on a proposal, is refused and changes nothing; a
// proposal whose base is stale is approved with the warning that
// committing it will fail.
func TestApproveRejectProposals(t *testing.T) {
	forBothRooms(t, func(t *testing.T, d *decideRoom) {
		r := d.ce("approve", d.p1, "--workspace", "notes.md")
		d.want(r, exitOK)
		d.golden("approve_proposal", r.stdout)
		if s := d.proposalStatus(d.p1); s != "approved" {
			t.Fatalf("after ce approve: %s", s)
		}
		t.Run("approving_twice_is_a_conflict_naming_who_decided", func(t *testing.T) {
			d.want(d.ce("approve", d.p1, "--workspace", "notes.md"), exitConflict, "proposal_conflict", "approved by alice at ")
		})
		t.Run("rejecting_an_approved_one_is_a_conflict", func(t *testing.T) {
			d.want(d.ce("reject", d.p1, "--workspace", "notes.md"), exitConflict, "proposal_conflict", "is approved")
			if s := d.proposalStatus(d.p1); s != "approved" {
				t.Errorf("after the refused reject: %s", s)
			}
		})
		t.Run("a_note_on_a_proposal_is_refused_and_decides_nothing", func(t *testing.T) {
			d.want(d.ce("reject", d.p2, "--note", "no", "--workspace", "notes.md"), exitUsage, "--note is for a handoff")
			if s := d.proposalStatus(d.p2); s != "pending" {
				t.Errorf("after the refused reject: %s", s)
			}
		})
		t.Run("reject_then_approve_is_a_conflict", func(t *testing.T) {
			r := d.ce("reject", d.p2, "--workspace", "notes.md")
			d.want(r, exitOK)
			d.golden("reject_proposal", r.stdout)
			d.want(d.ce("approve", d.p2, "--workspace", "notes.md"), exitConflict, "proposal_conflict", "rejected by alice")
		})
		t.Run("stale_base_is_approved_with_the_warning", func(t *testing.T) {
			r := d.ce("approve", d.p4, "--workspace", "notes.md")
			d.want(r, exitOK)
			d.golden("approve_stale_proposal", r.stdout)
		})
		t.Run("json_keeps_the_ids", func(t *testing.T) {
			var res map[string]any
			decodeJSON(t, d.ce("approve", d.p5, "--workspace", "notes.md", "--json"), &res)
			if res["proposal_id"] != d.p5 || res["status"] != "approved" || !strings.HasPrefix(res["reviewer_id"].(string), "participant_") {
				t.Errorf("ce approve --json = %v", res)
			}
		})
	})
}

// TestCommitProposal: ce commit writes an approved proposal into the file;
// a rejected, pending or already committed one is refused, and a stale one
// answers the engine's stale_version with base and current version, the
// versions since and the diff, and becomes conflicted.
func TestCommitProposal(t *testing.T) {
	forBothRooms(t, func(t *testing.T, d *decideRoom) {
		d.want(d.ce("approve", d.p1, "--workspace", "notes.md"), exitOK)
		d.want(d.ce("approve", d.p4, "--workspace", "notes.md"), exitOK)
		d.want(d.ce("reject", d.p2, "--workspace", "notes.md"), exitOK)
		t.Run("rejected_is_refused", func(t *testing.T) {
			d.want(d.ce("commit", d.p2, "--workspace", "notes.md"), exitConflict, "proposal_conflict", "is rejected")
		})
		t.Run("pending_is_refused_saying_approve_first", func(t *testing.T) {
			d.want(d.ce("commit", d.p5, "--workspace", "notes.md"), exitConflict, "proposal_conflict", "approve it first (ce approve "+d.p5+")")
		})
		r := d.ce("commit", d.p1, "--workspace", "notes.md")
		d.want(r, exitOK)
		d.golden("commit_proposal", r.stdout)
		b, err := os.ReadFile(filepath.Join(d.dir, "notes.md"))
		if err != nil || !strings.Contains(string(b), "the town hall") || !strings.Contains(string(b), "soup") {
			t.Fatalf("the file after ce commit: %v\n%s", err, b)
		}
		t.Run("committing_twice_is_a_conflict", func(t *testing.T) {
			d.want(d.ce("commit", d.p1, "--workspace", "notes.md"), exitConflict, "proposal_conflict", "is committed")
		})
		t.Run("stale_answers_stale_version_with_the_diff", func(t *testing.T) {
			r := d.ce("commit", d.p4, "--workspace", "notes.md")
			d.want(r, exitConflict)
			if r.stdout != "" {
				t.Errorf("stdout: %q", r.stdout)
			}
			d.golden("commit_stale_proposal", r.stderr)
			if s := d.proposalStatus(d.p4); s != "conflicted" {
				t.Errorf("after the stale commit: %s", s)
			}
			after, _ := os.ReadFile(filepath.Join(d.dir, "notes.md"))
			if string(after) != string(b) {
				t.Errorf("the stale commit changed the file:\n%s", after)
			}
		})
		t.Run("a_pending_one_superseded_by_the_commit_is_refused", func(t *testing.T) {
			d.want(d.ce("commit", d.p5, "--workspace", "notes.md"), exitConflict, "proposal_conflict", "is superseded")
		})
	})
}

// TestDecideHandoffs: ce approve and ce reject decide a delivered result,
// with a note; a handoff whose result is not ready, or one already decided,
// is refused with who decided it.
func TestDecideHandoffs(t *testing.T) {
	forBothRooms(t, func(t *testing.T, d *decideRoom) {
		t.Run("not_ready_is_a_conflict", func(t *testing.T) {
			d.want(d.ce("approve", d.hO, "--workspace", "notes.md"), exitConflict, "handoff_conflict", "is open")
			d.want(d.ce("reject", d.hQ, "--workspace", "notes.md"), exitConflict, "handoff_conflict", "is accepted")
		})
		r := d.ce("approve", d.hA, "--note", "good work", "--workspace", "notes.md")
		d.want(r, exitOK)
		d.golden("approve_handoff", r.stdout)
		if s := d.handoffStatus(d.hA); s != "approved" {
			t.Fatalf("after ce approve: %s", s)
		}
		t.Run("approving_twice_is_a_conflict_naming_who_decided", func(t *testing.T) {
			d.want(d.ce("approve", d.hA, "--workspace", "notes.md"), exitConflict, "handoff_conflict", "approved by alice at ")
		})
		t.Run("rejecting_an_approved_one_is_a_conflict", func(t *testing.T) {
			d.want(d.ce("reject", d.hA, "--note", "no", "--workspace", "notes.md"), exitConflict, "handoff_conflict")
			if s := d.handoffStatus(d.hA); s != "approved" {
				t.Errorf("after the refused reject: %s", s)
			}
		})
		t.Run("reject_with_a_note_json_keeps_the_ids", func(t *testing.T) {
			var h map[string]any
			decodeJSON(t, d.ce("reject", d.hB, "--note", "redo it", "--workspace", "notes.md", "--json"), &h)
			if h["handoff_id"] != d.hB || h["status"] != "rejected" || h["decision_note"] != "redo it" ||
				h["owner_id"] != d.planner.ParticipantID || h["assignee_id"] != d.writer.ParticipantID {
				t.Errorf("ce reject --json = %v", h)
			}
		})
		t.Run("handoffs_lists_names_not_ids", func(t *testing.T) {
			r := d.ce("handoffs", "--workspace", "notes.md")
			d.want(r, exitOK, "planner → writer", "planner → writer")
			if strings.Contains(r.stdout, d.planner.ParticipantID) || strings.Contains(r.stdout, d.writer.ParticipantID) {
				t.Errorf("ce handoffs prints participant ids:\n%s", r.stdout)
			}
			d.golden("handoffs", r.stdout)
		})
	})
}

// TestAnswerHandoff: ce answer answers a worker's open questions by flag
// or as a JSON object (from stdin too); a handoff with no open question, an
// unknown key, a value the form does not take and malformed JSON are
// refused before anything is sent.
func TestAnswerHandoff(t *testing.T) {
	forBothRooms(t, func(t *testing.T, d *decideRoom) {
		for _, tc := range []struct {
			name string
			args []string
			want []string
		}{
			{"no_answer_lists_the_open_questions", nil, []string{"q1: Which hall?", "q2: How many guests?"}},
			{"unknown_key_is_refused", []string{"--answer", "q9=x"}, []string{`"q9" is not an open question`, "open: q1, q2"}},
			{"unknown_key_in_json_is_refused", []string{"--responses", `{"q9": {"action": "accept", "content": {"answer": "x"}}}`}, []string{`"q9" is not an open question`}},
			{"unknown_key_declined_is_refused", []string{"--decline", "q9"}, []string{`"q9" is not an open question`}},
			{"answer_without_equals_is_refused", []string{"--answer", "q1"}, []string{"give KEY=VALUE"}},
			{"not_an_integer_is_refused", []string{"--answer", "q2=many"}, []string{`asks for an integer: "many" is not one`}},
			{"malformed_json_is_refused", []string{"--responses", `{"q1": `}, []string{"--responses must be one JSON object"}},
			{"json_array_is_refused", []string{"--responses", `[1]`}, []string{"--responses must be one JSON object"}},
			{"json_answer_not_an_object_is_refused", []string{"--responses", `{"q1": "the hall"}`}, []string{`the answer to "q1" must be an object`}},
			{"two_json_values_are_refused", []string{"--responses", `{} {}`}, []string{"--responses must be one JSON object"}},
			{"the_same_question_twice_is_refused", []string{"--answer", "q1=a", "--responses", `{"q1":{"action":"accept","content":{"answer":"b"}}}`}, []string{`"q1" is answered twice`}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				d.want(d.ce(append([]string{"answer", d.hQ, "--workspace", "notes.md"}, tc.args...)...), exitUsage, tc.want...)
			})
		}
		var h struct {
			Inputs []struct {
				Status string `json:"status"`
			} `json:"inputs"`
		}
		decodeJSON(t, d.ce("handoff", d.hQ, "--workspace", "notes.md", "--json"), &h)
		if len(h.Inputs) != 2 || h.Inputs[0].Status != "open" || h.Inputs[1].Status != "open" {
			t.Fatalf("a refused answer changed the questions: %+v", h.Inputs)
		}

		r := d.ce("answer", d.hQ, "--answer", "q1=the town hall", "--workspace", "notes.md")
		d.want(r, exitOK)
		d.golden("answer_partial", r.stdout)
		t.Run("the_rest_from_stdin_as_json", func(t *testing.T) {
			r := ceStdin(t, runTimeout, d.dir, d.env, strings.NewReader(`{"q2": {"action": "accept", "content": {"count": 40}}}`),
				"answer", d.hQ, "--responses", "-", "--workspace", "notes.md", "--json")
			var res struct {
				Handoff struct {
					HandoffID  string `json:"handoff_id"`
					TaskStatus string `json:"task_status"`
					OwnerID    string `json:"owner_id"`
				} `json:"handoff"`
				Answered []string `json:"answered_keys"`
			}
			d.want(r, exitOK)
			decodeJSON(t, r, &res)
			if res.Handoff.HandoffID != d.hQ || res.Handoff.TaskStatus != "working" || !slices.Equal(res.Answered, []string{"q2"}) ||
				res.Handoff.OwnerID != d.planner.ParticipantID {
				t.Errorf("ce answer --json = %s", r.stdout)
			}
		})
		t.Run("no_open_question_is_a_conflict", func(t *testing.T) {
			d.want(d.ce("answer", d.hQ, "--answer", "q1=again", "--workspace", "notes.md"), exitConflict, "handoff_conflict", "no open question", "nothing was sent")
			d.want(d.ce("answer", d.hO, "--answer", "q1=x", "--workspace", "notes.md"), exitConflict, "handoff_conflict", "is open")
		})
	})
}

// TestDecideCommands_RefuseWrongIDs: each command refuses another kind of
// id (exit 2, naming what it is), an id of no kind the room makes and an
// unknown id of the right kind (exit 4), and missing or extra arguments
// (exit 2); none of it changes the room.
func TestDecideCommands_RefuseWrongIDs(t *testing.T) {
	forBothRooms(t, func(t *testing.T, d *decideRoom) {
		for _, tc := range []struct {
			name string
			args []string
			code int
			want string
		}{
			{"commit_a_handoff", []string{"commit", d.hA}, exitUsage, "is a handoff id; ce commit takes a proposal id"},
			{"answer_a_proposal", []string{"answer", d.p1, "--answer", "q1=x"}, exitUsage, "is a proposal id; ce answer takes a handoff id"},
			{"approve_a_task", []string{"approve", d.taskA}, exitUsage, "is a task id"},
			{"reject_a_participant", []string{"reject", d.writer.ParticipantID}, exitUsage, "is a participant id"},
			{"answer_a_task", []string{"answer", d.taskA}, exitUsage, "is a task id"},
			{"approve_garbage", []string{"approve", "garbage"}, exitNotFound, `no proposal or handoff has the id "garbage"`},
			{"commit_garbage", []string{"commit", "garbage"}, exitNotFound, "not_found"},
			{"approve_unknown_proposal", []string{"approve", "proposal_0000000000000000"}, exitNotFound, "proposal_not_found"},
			{"reject_unknown_handoff", []string{"reject", "handoff_00000000000000000000000000000000"}, exitNotFound, "handoff_not_found"},
			{"commit_unknown_proposal", []string{"commit", "proposal_0000000000000000"}, exitNotFound, "proposal_not_found"},
			{"answer_unknown_handoff", []string{"answer", "handoff_00000000000000000000000000000000", "--answer", "q1=x"}, exitNotFound, "handoff_not_found"},
			{"approve_nothing", []string{"approve"}, exitUsage, "exactly one"},
			{"reject_two", []string{"reject", d.p1, d.p2}, exitUsage, "exactly one"},
			{"commit_nothing", []string{"commit"}, exitUsage, "exactly one"},
			{"answer_nothing", []string{"answer"}, exitUsage, "exactly one"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				d.want(d.ce(append(tc.args, "--workspace", "notes.md")...), tc.code, tc.want)
			})
		}
		for id, want := range map[string]string{d.p1: "pending", d.p2: "pending"} {
			if s := d.proposalStatus(id); s != want {
				t.Errorf("%s is %s after the refusals, want %s", id, s, want)
			}
		}
		if s := d.handoffStatus(d.hA); s != "result_ready" {
			t.Errorf("%s is %s after the refusals", d.hA, s)
		}
	})
}

// TestDecideHandoffs_TwoHostsAtOnce: two terminals approve and reject the
// same result at once through the serving room: one wins, the other is
// refused with who decided it.
func TestDecideHandoffs_TwoHostsAtOnce(t *testing.T) {
	t.Parallel()
	d := newDecideRoom(t, true)
	type ran struct {
		r   result
		err error
	}
	results := make(chan ran, 2)
	for _, verb := range []string{"approve", "reject"} {
		go func() { // t.Fatal belongs to the test's goroutine: report instead
			ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
			defer cancel()
			out, err := cetest.Run(ctx, ceBin, d.dir, d.env, nil, verb, d.hA, "--workspace", "notes.md")
			results <- ran{result{stdout: out.Stdout, stderr: out.Stderr, code: out.Code}, err}
		}()
	}
	ra, rb := <-results, <-results
	if ra.err != nil || rb.err != nil {
		t.Fatal(ra.err, rb.err)
	}
	a, b := ra.r, rb.r
	if a.code == exitOK {
		a, b = b, a
	}
	if b.code != exitOK {
		t.Fatalf("neither decision won:\n%s\n%s", a.output(), b.output())
	}
	d.want(a, exitConflict, "handoff_conflict", " by alice at ")
}

// TestHostOutput_WhatAgentsWroteIsInert: a participant's name and a
// handoff's summary carrying terminal escapes reach the host's terminal
// with the escapes defused, in the listing and in the deciding commands.
func TestHostOutput_WhatAgentsWroteIsInert(t *testing.T) {
	t.Parallel()
	d := newDecideRoom(t, true)
	var inv inviteGrant
	decodeJSON(t, d.ce("invite", "--workspace", "notes.md", "--json"), &inv)
	evil := join(t, d.dir, inv.URI, "evil\x1b[2J\u202e")
	m := d.post(evil, "/workspace/handoff", map[string]any{"summary": "title \x1b]0;pwned\x07 here", "assignee": d.writer.ParticipantID})
	id := m["handoff"].(map[string]any)["handoff_id"].(string)
	for _, args := range [][]string{{"handoffs"}, {"handoff", id}, {"approve", id}} {
		r := d.ce(append(args, "--workspace", "notes.md")...)
		if strings.ContainsAny(r.output(), "\x1b\x07\u202e") {
			t.Errorf("ce %v lets an escape through:\n%q", args, r.output())
		}
	}
	if r := d.ce("handoffs", "--workspace", "notes.md"); !strings.Contains(r.stdout, "evil?[2J? → writer") || !strings.Contains(r.stdout, "title ?]0;pwned? here") {
		t.Errorf("ce handoffs:\n%s", r.stdout)
	}
}
