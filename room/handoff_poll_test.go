package room_test

import (
	"context"
	"testing"

	"github.com/commonroom/ce/room"
)

// TestHandoffCarriesThePollIntervalWhileItsTaskIsLive: an agent that cannot
// listen learns from the handoff itself when to read it again. handoff_get
// and every handoff of handoff_list carry the task's poll interval while the
// task is working or waiting for input, and null once it is terminal (or
// purged); the answers of the steps (which the writer renders without
// reading back) say the same as a read.
func TestHandoffCarriesThePollIntervalWhileItsTaskIsLive(t *testing.T) {
	poll := int64(7_000)
	cases := []struct {
		state string
		want  *int64
	}{
		{"open", &poll},
		{"accepted", &poll},
		{"input", &poll},
		{"result_ready", nil},
		{"approved", nil},
		{"cancelled", nil},
		{"expired", nil},
	}
	for _, c := range cases {
		name := "null when " + c.state
		if c.want != nil {
			name = "the interval when " + c.state
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, withLimits(func(l *room.Limits) { l.TaskPollInterval = 7e9 }))
			ps := newTwinParties(e)
			h, _ := twinHandoffs(t, e, ps, c.state)
			check := func(where string, got *int64) {
				t.Helper()
				if (got == nil) != (c.want == nil) || got != nil && *got != *c.want {
					t.Errorf("%s: poll_interval_ms = %v, want %v", where, deref(got), deref(c.want))
				}
			}
			got, err := e.getHandoff(ps.owner, h.HandoffID)
			if err != nil {
				t.Fatal(err)
			}
			check("handoff_get", got.PollIntervalMs)
			page, err := read(e, func(eng *room.Engine, q room.Querier) (room.HandoffPage, error) {
				return eng.ListHandoffs(context.Background(), q, ps.owner, room.ListHandoffsInput{Role: room.RoleCreatedByMe})
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range page.Handoffs {
				check("handoff_list", x.PollIntervalMs)
			}
			if len(page.Handoffs) != 2 {
				t.Errorf("handoff_list has %d handoffs, want the 2 made", len(page.Handoffs))
			}
		})
	}
	t.Run("the steps answer with the interval, the last with null", func(t *testing.T) {
		e := newEnv(t, withLimits(func(l *room.Limits) { l.TaskPollInterval = 7e9 }))
		ps := newTwinParties(e)
		res, err := e.create(ps.owner, room.CreateHandoffInput{Summary: "steps"})
		if err != nil || deref(res.Handoff.PollIntervalMs) != poll {
			t.Fatalf("create: %v, %v", deref(res.Handoff.PollIntervalMs), err)
		}
		id := res.Handoff.HandoffID
		acc, err := e.accept(ps.worker, id)
		if err != nil || deref(acc.PollIntervalMs) != poll {
			t.Fatalf("accept: %v, %v", deref(acc.PollIntervalMs), err)
		}
		ask, err := e.requestInput(ps.worker, id, room.InputRequestSpec{Key: "k", Message: "?"})
		if err != nil || deref(ask.PollIntervalMs) != poll {
			t.Fatalf("request_input: %v, %v", deref(ask.PollIntervalMs), err)
		}
		done, err := e.complete(ps.worker, id, room.ResultInput{Text: "x"})
		if err != nil || done.PollIntervalMs != nil {
			t.Fatalf("complete: %v, %v", deref(done.PollIntervalMs), err)
		}
		e.clock.Advance(2 * e.limits.TaskTTL)
		e.sweep()
		purged, err := e.getHandoff(ps.owner, id)
		if err != nil || purged.TaskStatus != nil || purged.PollIntervalMs != nil {
			t.Fatalf("after the purge: task_status %v poll %v, %v", purged.TaskStatus, deref(purged.PollIntervalMs), err)
		}
	})
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}
