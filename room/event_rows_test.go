package room_test

import (
	"sync"
	"testing"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/room"
)

// publishedEvents returns every event published so far, in publish order.
func (r *recorder) publishedEvents() []room.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []room.Event
	for _, b := range r.batches {
		for _, m := range b.Messages {
			if m.Topic == actor.EventsTopic {
				out = append(out, m.Change.(room.Event))
			}
		}
	}
	return out
}

// A batch's events are written together before COMMIT, up to 16 rows per
// INSERT, and their ids derived from the last one: what the room publishes
// (and the owner page and history readers see) must be exactly the stored
// rows — the same ids, types, payloads and references, in order — for
// steps that write one event and steps that write two, alone in a batch
// or with many others.
func TestPublishedEventsAreTheStoredRows(t *testing.T) {
	e := newEnv(t, withLimits(func(l *room.Limits) { l.MaxActiveTasks, l.MaxTasksPerParticipant = 200, 200 }))
	owner := e.join("owner", agentCaps...)
	worker := e.join("worker", agentCaps...)
	approver := e.join("approver", room.CapRead, room.CapApprove)
	from := e.lastEventID()
	skip := len(e.pub.publishedEvents())
	for range 3 {
		res, err := e.create(owner, room.CreateHandoffInput{Summary: "work"})
		if err != nil {
			t.Fatal(err)
		}
		id := res.Handoff.HandoffID
		if _, err := e.accept(worker, id); err != nil {
			t.Fatal(err)
		}
		if _, err := e.complete(worker, id, room.ResultInput{Text: "done"}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.approve(approver, id, ""); err != nil {
			t.Fatal(err)
		}
	}
	// Then 60 creates at once: the writer batches them, 120 events.
	var wg sync.WaitGroup
	for range 60 {
		wg.Go(func() {
			if _, err := e.create(owner, room.CreateHandoffInput{Summary: "work"}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	rows := e.eventsAfter(from)
	pub := e.pub.publishedEvents()[skip:]
	if len(rows) != 18+120 || len(pub) != len(rows) {
		t.Fatalf("%d event rows and %d published events, want 138 of each", len(rows), len(pub))
	}
	for i, row := range rows {
		ev := pub[i]
		if ev.ID != row.ID || ev.Type != row.Type || string(ev.Payload) != row.Payload ||
			ev.HandoffID != row.HandoffID.String || ev.TaskID != row.TaskID.String || ev.ActorID != row.ActorID.String {
			t.Errorf("published event %d is {%d %s %s %s %s %s}, the row is {%d %s %s %s %s %s}", i,
				ev.ID, ev.Type, ev.HandoffID, ev.TaskID, ev.ActorID, ev.Payload,
				row.ID, row.Type, row.HandoffID.String, row.TaskID.String, row.ActorID.String, row.Payload)
		}
	}
}
