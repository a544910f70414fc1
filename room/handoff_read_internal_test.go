package room

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"
)

// TestGetHandoffAndInbox_OneStatementShowWhatTheViewShows: GetHandoff (and
// the inbox, ListHandoffs, for each handoff of its page) reads the
// input requests folded into the handoff's row (one statement, no read
// transaction); for every kind of reader it answers byte for byte what the
// handoff's view with its own inputs query shows — open, answered and
// superseded inputs, keys asked in the same millisecond, and answers and
// schemas whose JSON text has escapes, non-ASCII and odd spacing.
func TestGetHandoffAndInbox_OneStatementShowWhatTheViewShows(t *testing.T) {
	d := openDirect(t)
	owner := d.join("read", "propose", "approve")
	worker := d.join("read", "checkout")
	approver := d.join("read", "approve")
	admin := d.join("read", "admin")
	res := d.create(owner, CreateHandoffInput{Summary: "ask <me> & \"things\" é", Assignee: worker.ParticipantID})
	id := res.Handoff.HandoffID
	ctx := context.Background()
	step := func(fn func(tx *Tx) error) {
		t.Helper()
		if _, err := d.run(fn); err != nil {
			t.Fatal(err)
		}
	}
	step(func(tx *Tx) error { _, err := d.e.AcceptHandoff(tx, worker, HandoffIDInput{HandoffID: id}); return err })
	schema := json.RawMessage(`{ "type" : "object", "properties":{"ok":{"type":"boolean","description":"\u00e9 \"<q>\" \u2028"}}}`)
	step(func(tx *Tx) error {
		_, err := d.e.RequestInput(tx, worker, RequestInputInput{HandoffID: id, Requests: []InputRequestSpec{
			{Key: "zeta", Message: "first <in> the millisecond", RequestedSchema: schema},
			{Key: "alpha", Message: "second, same millisecond: sorts by key"},
			{Key: "mid", Message: "left open é"},
		}})
		return err
	})
	d.advance(5 * time.Millisecond)
	step(func(tx *Tx) error {
		_, err := d.e.RequestInput(tx, worker, RequestInputInput{HandoffID: id, Requests: []InputRequestSpec{{Key: "aaa", Message: "asked later, sorts after the earlier keys"}}})
		return err
	})
	answer := json.RawMessage(`{"action":"accept", "content":{"ok":true,"note":"\u00e9\n\"x\" <&>"}}`)
	step(func(tx *Tx) error {
		_, err := d.e.UpdateTask(tx, owner, UpdateTaskInput{TaskID: res.Task.TaskID, InputResponses: map[string]json.RawMessage{
			"zeta": answer, "alpha": json.RawMessage(`{"action":"decline"}`)}})
		return err
	})
	check := func(t *testing.T, name string, wantInputs int) {
		for _, who := range []struct {
			name string
			p    Principal
		}{{"owner", owner}, {"worker", worker}, {"approver", approver}, {"admin", admin}, {"operator", Operator(d.e.HostID)}} {
			t.Run(name+"/"+who.name+" sees what the view shows", func(t *testing.T) {
				q := NewConnQuerier(d.conn, nil)
				defer q.Close()
				got, err := d.e.GetHandoff(ctx, q, who.p, HandoffIDInput{HandoffID: id})
				if err != nil {
					t.Fatal(err)
				}
				if sees := sameAsView(t, q, who.p, got); sees && len(got.Inputs) != wantInputs {
					t.Fatalf("%d inputs, want %d: %+v", len(got.Inputs), wantInputs, got)
				}
			})
			t.Run(name+"/"+who.name+"'s inbox shows each handoff as the view does", func(t *testing.T) {
				q := NewConnQuerier(d.conn, nil)
				defer q.Close()
				page, err := d.e.ListHandoffs(ctx, q, who.p, ListHandoffsInput{})
				if err != nil {
					t.Fatal(err)
				}
				if len(page.Handoffs) == 0 {
					t.Fatal("an empty inbox")
				}
				for _, got := range page.Handoffs {
					sameAsView(t, q, who.p, got)
				}
			})
		}
	}
	check(t, "with_inputs", 4)
	step(func(tx *Tx) error {
		_, err := d.e.CompleteHandoff(tx, worker, CompleteInput{HandoffID: id, Result: ResultInput{Text: "done"}})
		return err
	})
	check(t, "after_completion_supersedes", 4)
	plain := d.create(owner, CreateHandoffInput{Summary: "no inputs", Assignee: worker.ParticipantID})
	id = plain.Handoff.HandoffID
	check(t, "without_inputs", 0)
}

// sameAsView fails unless got is, byte for byte, what the handoff's view
// shows p when it reads the input requests with their own query (a row
// loaded without them), and reports whether p sees the inputs.
func sameAsView(t *testing.T, q Querier, p Principal, got Handoff) bool {
	t.Helper()
	ctx := context.Background()
	h, err := loadHandoff(ctx, q, got.HandoffID)
	if err != nil {
		t.Fatal(err)
	}
	if h.inputs.Valid {
		t.Fatal("loadHandoff read the inputs column: the comparison would be with itself")
	}
	want, err := h.view(ctx, q, p)
	if err != nil {
		t.Fatal(err)
	}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if !bytes.Equal(gb, wb) {
		t.Fatalf("answered\n%s\nthe view with its own inputs query\n%s", gb, wb)
	}
	return h.seesInputs(p)
}
