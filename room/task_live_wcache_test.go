package room_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/commonroom/ce/room"
)

// The writer counts the live tasks for the cap check from its own set
// (task_live_wcache.go). In this package's tests every use is compared with
// the statement it replaces and the set with the sidecar after every command
// that holds it (verifyWriterCache), so a set left stale fails a command.
// Each case ends or starts live tasks by another path between creates, then
// fills the room's cap of 3 and checks the refusal comes exactly at the cap.
func TestWriterLiveTaskSetStaysExact(t *testing.T) {
	cases := []struct {
		name string
		// between runs after two creates (a and b, by owner); it returns
		// how many of them it left live.
		between func(t *testing.T, e *env, owner, worker room.Principal, a, b room.CreateHandoffResult) int
	}{
		{"a_complete_frees_its_slot", func(t *testing.T, e *env, owner, worker room.Principal, a, _ room.CreateHandoffResult) int {
			if _, err := e.accept(worker, a.Handoff.HandoffID); err != nil {
				t.Fatal(err)
			}
			if _, err := e.complete(worker, a.Handoff.HandoffID, room.ResultInput{Text: "done"}); err != nil {
				t.Fatal(err)
			}
			return 1
		}},
		{"a_cancel_frees_its_slot", func(t *testing.T, e *env, owner, _ room.Principal, a, _ room.CreateHandoffResult) int {
			if err := e.cancel(owner, a.Task.TaskID); err != nil {
				t.Fatal(err)
			}
			return 1
		}},
		{"an_expiry_frees_every_slot", func(t *testing.T, e *env, _, _ room.Principal, _, _ room.CreateHandoffResult) int {
			e.clock.Advance(e.limits.TaskTTL + 1)
			return 0
		}},
		{"raw_sql_that_ends_a_task_frees_its_slot", func(t *testing.T, e *env, _, _ room.Principal, a, _ room.CreateHandoffResult) int {
			e.rawSQL(`UPDATE tasks SET status = 'cancelled', last_updated_at = last_updated_at WHERE task_id = ?`, a.Task.TaskID)
			return 1
		}},
		{"raw_sql_that_revives_a_task_takes_a_slot", func(t *testing.T, e *env, owner, worker room.Principal, a, _ room.CreateHandoffResult) int {
			if _, err := e.accept(worker, a.Handoff.HandoffID); err != nil {
				t.Fatal(err)
			}
			if _, err := e.complete(worker, a.Handoff.HandoffID, room.ResultInput{Text: "done"}); err != nil {
				t.Fatal(err)
			}
			e.rawSQL(`UPDATE tasks SET status = 'working', result_json = NULL WHERE task_id = ?`, a.Task.TaskID)
			return 2
		}},
		{"a_create_rolled_back_takes_no_slot", func(t *testing.T, e *env, owner, _ room.Principal, _, _ room.CreateHandoffResult) int {
			boom := errors.New("boom")
			_, err := do(e, func(eng *room.Engine, tx *room.Tx) (struct{}, error) {
				if _, err := eng.CreateHandoff(tx, owner, room.CreateHandoffInput{Summary: "rolled back"}); err != nil {
					return struct{}{}, err
				}
				return struct{}{}, boom
			})
			if !errors.Is(err, boom) {
				t.Fatalf("the failing command answered %v, want boom", err)
			}
			return 2
		}},
		{"a_create_in_a_batch_that_fails_to_commit_takes_no_slot", func(t *testing.T, e *env, owner, _ room.Principal, _, _ room.CreateHandoffResult) int {
			// The create is kept on its plain path; a deferred foreign key
			// the command breaks in another table fails the batch's COMMIT.
			_, err := do(e, func(eng *room.Engine, tx *room.Tx) (struct{}, error) {
				if _, err := eng.CreateHandoff(tx, owner, room.CreateHandoffInput{Summary: "never committed"}); err != nil {
					return struct{}{}, err
				}
				for _, q := range []string{`PRAGMA defer_foreign_keys = ON`,
					`UPDATE sessions SET participant_id = 'nobody' WHERE rowid = (SELECT min(rowid) FROM sessions)`} {
					if _, err := tx.Querier().ExecContext(tx.Context(), q); err != nil {
						return struct{}{}, err
					}
				}
				return struct{}{}, nil
			})
			if room.ErrorKind(err) != room.KindInternal {
				t.Fatalf("the batch that cannot commit answered %v, want internal", err)
			}
			return 2
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, withLimits(func(l *room.Limits) { l.MaxActiveTasks, l.MaxTasksPerParticipant = 3, 3 }))
			owner := e.join("owner", agentCaps...)
			worker := e.join("worker", agentCaps...)
			other := e.join("other", agentCaps...)
			var made []room.CreateHandoffResult
			for i := range 2 {
				res, err := e.create(owner, room.CreateHandoffInput{Summary: fmt.Sprintf("first %d", i)})
				if err != nil {
					t.Fatal(err)
				}
				made = append(made, res)
			}
			live := tc.between(t, e, owner, worker, made[0], made[1])
			before := room.WriterLiveCountsUsed(e.eng)
			for i := live; i < 3; i++ {
				if _, err := e.create(other, room.CreateHandoffInput{Summary: fmt.Sprintf("fill %d", i)}); err != nil {
					t.Fatalf("create %d with %d live: %v", i, live, err)
				}
			}
			_, err := e.create(e.op(), room.CreateHandoffInput{Summary: "over"}) // the host has no share
			if room.ErrorKind(err) != room.KindLimitExceeded || room.AsError(err).Fields["scope"] != "room" || room.AsError(err).Fields["count"] != 3 {
				t.Fatalf("the create past the cap answered %v, want limit_exceeded for the room at 3", err)
			}
			if got := e.scalar(`SELECT count(*) FROM tasks WHERE status IN ('working','input_required')`); got != 3 {
				t.Fatalf("%d live tasks stored, want 3", got)
			}
			if used := room.WriterLiveCountsUsed(e.eng) - before; used == 0 {
				t.Errorf("no create counted from the writer's set")
			}
		})
	}
}
