package room_test

import (
	"strings"
	"testing"

	"github.com/commonroom/ce/room"
)

// The writer keeps each live handoff as its last step left it, so accept,
// complete and the decision start from that copy instead of a read; in
// this package's tests every copy used is also compared with the row
// (verifyWriterCache), so a stale copy fails the step. Any other command
// that writes handoffs, tasks or task_inputs empties the copy, whatever
// its SQL: the steps after it read the row and see that command's change.
func TestWriterCopyOfHandoffs(t *testing.T) {
	lifecycle := func(t *testing.T, e *env, between func(step string, id string)) room.Handoff {
		t.Helper()
		owner := e.join("owner", agentCaps...)
		worker := e.join("worker", agentCaps...)
		approver := e.join("approver", room.CapRead, room.CapApprove)
		res, err := e.create(owner, room.CreateHandoffInput{Summary: "work", Constraints: "carefully",
			Artifacts: []room.Artifact{{URI: "https://example.com/a", Title: "a"}}})
		if err != nil {
			t.Fatal(err)
		}
		id := res.Handoff.HandoffID
		between("create", id)
		if _, err := e.accept(worker, id); err != nil {
			t.Fatal(err)
		}
		between("accept", id)
		if _, err := e.complete(worker, id, room.ResultInput{Text: "done"}); err != nil {
			t.Fatal(err)
		}
		between("complete", id)
		h, err := e.approve(approver, id, "fine")
		if err != nil {
			t.Fatal(err)
		}
		return h
	}

	t.Run("three_steps_of_a_plain_lifecycle_start_from_the_copy", func(t *testing.T) {
		e := newEnv(t)
		before := room.WriterCopiesUsed(e.eng)
		lifecycle(t, e, func(string, string) {})
		if got := room.WriterCopiesUsed(e.eng) - before; got != 3 {
			t.Errorf("%d steps started from the copy, want 3 (accept, complete, approve)", got)
		}
	})

	t.Run("a_write_by_another_command_is_seen_by_the_next_step", func(t *testing.T) {
		e := newEnv(t)
		before := room.WriterCopiesUsed(e.eng)
		h := lifecycle(t, e, func(step, id string) {
			// Any SQL that writes the handoff: the next step must show it.
			e.rawSQL(`UPDATE handoffs SET summary = summary || ' after '||? WHERE handoff_id = ?`, step, id)
		})
		if want := "work after create after accept after complete"; h.Summary != want {
			t.Errorf("the approved handoff's summary is %q, want %q", h.Summary, want)
		}
		if got := room.WriterCopiesUsed(e.eng) - before; got != 0 {
			t.Errorf("%d steps started from a copy another command had made stale", got)
		}
	})

	t.Run("a_write_to_the_task_is_seen_by_the_next_step", func(t *testing.T) {
		e := newEnv(t)
		h := lifecycle(t, e, func(step, id string) {
			if step == "accept" {
				// The task's TTL is stretched: the copy carried its old due time.
				e.rawSQL(`UPDATE tasks SET ttl_ms = ttl_ms + 1 WHERE task_id = (SELECT task_id FROM handoffs WHERE handoff_id = ?)`, id)
			}
		})
		if h.Status != room.HandoffApproved {
			t.Errorf("status %s, want approved", h.Status)
		}
	})

	t.Run("a_command_that_writes_nothing_keeps_the_copy", func(t *testing.T) {
		e := newEnv(t)
		before := room.WriterCopiesUsed(e.eng)
		lifecycle(t, e, func(step, id string) { e.rawSQL(`SELECT 1`) })
		if got := room.WriterCopiesUsed(e.eng) - before; got != 3 {
			t.Errorf("%d steps started from the copy, want 3", got)
		}
	})

	t.Run("a_refused_step_leaves_the_copy_as_it_was", func(t *testing.T) {
		e := newEnv(t)
		before := room.WriterCopiesUsed(e.eng)
		lifecycle(t, e, func(step, id string) {
			if step == "accept" {
				// A second accept is refused: nothing it did commits.
				intruder := e.join("intruder", agentCaps...)
				if _, err := e.accept(intruder, id); room.ErrorKind(err) != room.KindHandoffConflict {
					t.Fatalf("a second accept: %v, want handoff_conflict", err)
				}
			}
		})
		if got := room.WriterCopiesUsed(e.eng) - before; got < 3 {
			t.Errorf("%d steps started from the copy, want at least 3", got)
		}
	})
}

// The copy stands for the row exactly: a step that read a stale copy would
// answer from it. This reads what the room says after a raw change to a
// copied handoff, through a step that answers with the whole handoff.
func TestWriterCopyNeverAnswersStale(t *testing.T) {
	e := newEnv(t)
	owner := e.join("owner", agentCaps...)
	worker := e.join("worker", agentCaps...)
	res, err := e.create(owner, room.CreateHandoffInput{Summary: "work"})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Handoff.HandoffID
	e.rawSQL(`UPDATE handoffs SET constraints_text = 'changed' WHERE handoff_id = ?`, id)
	h, err := e.accept(worker, id)
	if err != nil {
		t.Fatal(err)
	}
	if h.Constraints == nil || !strings.EqualFold(*h.Constraints, "changed") {
		t.Errorf("accept answered constraints %v, want the committed change", h.Constraints)
	}
}
