package room_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"modernc.org/sqlite"

	"github.com/commonroom/ce/room"
)

// TestReadsAreNotRepreparedOnEachRun holds every read of the engine to
// statements SQLite keeps prepared: run a second time, with the same or
// another page size of the same size class, a read must not parse or plan
// any statement again. A bound LIMIT (`LIMIT ?`) broke this for every
// listing: SQLite plans with the bound value, so each run re-prepared the
// statement (sqllimit.go). The authorizer is called for every statement
// SQLite prepares, so counting its calls counts (re)preparations.
func TestReadsAreNotRepreparedOnEachRun(t *testing.T) {
	d := newDocRoom(t)
	ctx := context.Background()
	op := d.op()
	ag := d.join("agent", agent()...)
	reader := d.join("reader", room.CapRead)
	owner := d.join("owner", agent()...)
	made, err := d.create(owner, room.CreateHandoffInput{Summary: "look at the risks"})
	if err != nil {
		t.Fatal(err)
	}
	h := made.Handoff
	d.mustPropose(ag, "Goals", "ship it soon\n")

	conn, err := d.store.Reader.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var prepares atomic.Int64
	if err := conn.Raw(func(dc any) error {
		return dc.(sqlite.AuthorizerRegisterer).RegisterAuthorizer(
			func(sqlite.AuthorizerActionCode, string, string, string, string) sqlite.AuthorizerReturnCode {
				prepares.Add(1)
				return sqlite.AuthorizerOK
			})
	}); err != nil {
		t.Fatal(err)
	}
	q := room.NewConnQuerier(conn, nil)
	defer q.Close()
	eng := d.eng
	since := int64(0)

	// Each read runs with page size a, then b (the same size class).
	cases := []struct {
		name string
		run  func(limit int) error
	}{
		{"history, newest", func(n int) error {
			_, err := eng.History(ctx, q, op, room.HistoryInput{Limit: n})
			return err
		}},
		{"history, since an event", func(n int) error {
			_, err := eng.History(ctx, q, op, room.HistoryInput{Limit: n, SinceEventID: &since})
			return err
		}},
		{"history as a party, newest", func(n int) error {
			_, err := eng.History(ctx, q, ag, room.HistoryInput{Limit: n})
			return err
		}},
		{"history as a party, since an event", func(n int) error {
			_, err := eng.History(ctx, q, ag, room.HistoryInput{Limit: n, SinceEventID: &since})
			return err
		}},
		{"history without checkout, since an event", func(n int) error {
			_, err := eng.History(ctx, q, reader, room.HistoryInput{Limit: n, SinceEventID: &since})
			return err
		}},
		{"a handoff's events, newest", func(n int) error {
			_, err := eng.HandoffEvents(ctx, q, owner, room.HandoffEventsInput{HandoffID: h.HandoffID, Limit: n})
			return err
		}},
		{"a handoff's events, since an event", func(n int) error {
			_, err := eng.HandoffEvents(ctx, q, owner, room.HandoffEventsInput{HandoffID: h.HandoffID, Limit: n, SinceEventID: &since})
			return err
		}},
		{"the inbox, whole room", func(n int) error {
			_, err := eng.ListHandoffs(ctx, q, op, room.ListHandoffsInput{Limit: n})
			return err
		}},
		{"the inbox, an agent's sources", func(n int) error {
			_, err := eng.ListHandoffs(ctx, q, ag, room.ListHandoffsInput{Limit: n})
			return err
		}},
		{"the inbox, by role and status", func(n int) error {
			_, err := eng.ListHandoffs(ctx, q, owner, room.ListHandoffsInput{Role: room.RoleCreatedByMe, Status: "open", Limit: n})
			return err
		}},
		{"proposals", func(n int) error {
			_, err := eng.Proposals(ctx, q, op, room.ProposalsInput{Limit: n})
			return err
		}},
		{"proposals by status", func(n int) error {
			_, err := eng.Proposals(ctx, q, op, room.ProposalsInput{Status: "pending", Limit: n})
			return err
		}},
		{"versions since", func(n int) error {
			_, err := eng.ChangesSince(ctx, q, op, room.ChangesInput{Version: 0, Limit: n})
			return err
		}},
		{"handoff_get", func(int) error {
			_, err := eng.GetHandoff(ctx, q, owner, room.HandoffIDInput{HandoffID: h.HandoffID})
			return err
		}},
		{"tasks/get", func(int) error {
			_, err := eng.GetTask(ctx, q, owner, room.TaskIDInput{TaskID: h.TaskID})
			return err
		}},
		{"the room view", func(int) error {
			_, err := eng.Room(ctx, q, op, room.Empty{})
			return err
		}},
		{"participants", func(int) error {
			_, err := eng.Participants(ctx, q, op, room.Empty{})
			return err
		}},
		{"leases", func(int) error {
			_, err := eng.Leases(ctx, q, op, room.Empty{})
			return err
		}},
		{"invitations", func(int) error {
			_, err := eng.ListInvites(ctx, q, op, room.Empty{})
			return err
		}},
		{"status", func(int) error {
			_, err := eng.Status(ctx, q, op, room.Empty{})
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.run(10); err != nil {
				t.Fatal(err)
			}
			before := prepares.Load()
			for _, n := range []int{10, 12, 14, 9} {
				if err := c.run(n); err != nil {
					t.Fatal(err)
				}
			}
			if got := prepares.Load() - before; got != 0 {
				t.Errorf("%d statements prepared again over four more runs, want 0", got)
			}
		})
	}
}

// TestRoundedLimitsGiveExactPages: a listing's statement reads up to its
// page size rounded up to a power of two (sqllimit.go), and the engine
// keeps exactly the page asked for: the newest n, or the first n after a
// position.
func TestRoundedLimitsGiveExactPages(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t)
	op := d.op()
	for i := range 5 {
		d.rawCommit(fmt.Sprintf("# Idea\n\nedit %d\n", i))
	}
	ctx := context.Background()
	all, err := read(d.env, func(eng *room.Engine, q room.Querier) (room.History, error) {
		return eng.History(ctx, q, op, room.HistoryInput{Limit: 200})
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Events) < 6 {
		t.Fatalf("want at least 6 events to page through, have %d", len(all.Events))
	}
	history := func(in room.HistoryInput) []int64 {
		h, err := read(d.env, func(eng *room.Engine, q room.Querier) (room.History, error) {
			return eng.History(ctx, q, op, in)
		})
		if err != nil {
			t.Fatal(err)
		}
		return eventIDs(h.Events)
	}
	// Newest first without since_event_id, oldest first with it.
	if got, want := history(room.HistoryInput{Limit: 3}), eventIDs(all.Events[:3]); !slices.Equal(got, want) {
		t.Errorf("history limit 3: %v, want the newest three %v", got, want)
	}
	first := all.Events[len(all.Events)-1].ID
	ascending := eventIDs(all.Events)
	slices.Reverse(ascending)
	if got, want := history(room.HistoryInput{Limit: 3, SinceEventID: &first}), ascending[1:4]; !slices.Equal(got, want) {
		t.Errorf("history since %d, limit 3: %v, want %v", first, got, want)
	}

	versions := func(after int64, limit int) []int64 {
		c, err := read(d.env, func(eng *room.Engine, q room.Querier) (room.Changes, error) {
			return eng.ChangesSince(ctx, q, op, room.ChangesInput{Version: after, Limit: limit})
		})
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, v := range c.Changes {
			out = append(out, v.Version)
		}
		return out
	}
	if got, want := versions(1, 3), []int64{2, 3, 4}; !slices.Equal(got, want) {
		t.Errorf("versions after 1, limit 3: %v, want %v", got, want)
	}
}
