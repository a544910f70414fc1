package room_test

import (
	"context"
	"encoding/base64"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/commonroom/ce/room"
)

func (e *env) list(p room.Principal, in room.ListHandoffsInput) (room.HandoffPage, error) {
	return read(e, func(eng *room.Engine, q room.Querier) (room.HandoffPage, error) {
		return eng.ListHandoffs(context.Background(), q, p, in)
	})
}

func (e *env) mustList(t *testing.T, p room.Principal, in room.ListHandoffsInput) room.HandoffPage {
	t.Helper()
	page, err := e.list(p, in)
	if err != nil {
		t.Fatalf("list %+v: %v", in, err)
	}
	return page
}

func pageIDs(page room.HandoffPage) []string {
	out := []string{}
	for _, h := range page.Handoffs {
		out = append(out, h.HandoffID)
	}
	return out
}

// inboxRoom is a room with one handoff in every relation the roles tell
// apart, and a question asked on the accepted one (so input payloads are
// there to be hidden).
type inboxRoom struct {
	e                                    *env
	owner, worker, other, approver, read room.Principal
	// openCall: owner's, addressed to nobody. toWorker: owner's, addressed
	// to worker, open. taken: owner's, addressed to worker, accepted, with a
	// question. othersCall: other's open call. takenByOther: owner's open
	// call accepted by other.
	openCall, toWorker, taken, othersCall, takenByOther string
	all                                                 []string
}

func newInboxRoom(t *testing.T) *inboxRoom {
	e := newEnv(t)
	r := &inboxRoom{e: e,
		owner: e.join("owner", agentCaps...), worker: e.join("worker", agentCaps...), other: e.join("other", agentCaps...),
		approver: e.join("approver", room.CapRead, room.CapApprove), read: e.join("reader", room.CapRead)}
	step := func(summary string, p room.Principal, assignee string) string {
		e.clock.Advance(time.Millisecond)
		return mustCreate(t, e, p, room.CreateHandoffInput{Summary: summary, Assignee: assignee}).Handoff.HandoffID
	}
	r.openCall = step("open call", r.owner, "")
	r.toWorker = step("to worker", r.owner, r.worker.ParticipantID)
	r.taken = step("taken", r.owner, r.worker.ParticipantID)
	if _, err := e.accept(r.worker, r.taken); err != nil {
		t.Fatal(err)
	}
	if _, err := e.requestInput(r.worker, r.taken, room.InputRequestSpec{Key: "q", Message: "which one?"}); err != nil {
		t.Fatal(err)
	}
	r.othersCall = step("other's call", r.other, "")
	r.takenByOther = step("taken by other", r.owner, "")
	if _, err := e.accept(r.other, r.takenByOther); err != nil {
		t.Fatal(err)
	}
	r.all = []string{r.takenByOther, r.othersCall, r.taken, r.toWorker, r.openCall} // newest first
	return r
}

// TestListHandoffs_RolesShowWhatHandoffGetShows: each role lists exactly
// the handoffs in that relation to the caller, newest first, each exactly
// as handoff_get shows it to that caller; the oracle is handoff_get itself.
func TestListHandoffs_RolesShowWhatHandoffGetShows(t *testing.T) {
	t.Parallel()
	r := newInboxRoom(t)
	e := r.e
	cases := []struct {
		name string
		p    room.Principal
		in   room.ListHandoffsInput
		want []string
	}{
		{"worker_all_sees_own_and_open_calls", r.worker, room.ListHandoffsInput{}, []string{r.othersCall, r.taken, r.toWorker, r.openCall}},
		{"worker_assigned_includes_addressed_and_accepted", r.worker, room.ListHandoffsInput{Role: room.RoleAssignedToMe}, []string{r.taken, r.toWorker}},
		{"worker_created_nothing", r.worker, room.ListHandoffsInput{Role: room.RoleCreatedByMe}, []string{}},
		{"worker_open_to_accept", r.worker, room.ListHandoffsInput{Role: room.RoleOpenToAccept}, []string{r.othersCall, r.toWorker, r.openCall}},
		{"worker_status_filter", r.worker, room.ListHandoffsInput{Status: room.HandoffAccepted}, []string{r.taken}},
		{"worker_role_and_status", r.worker, room.ListHandoffsInput{Role: room.RoleOpenToAccept, Status: room.HandoffAccepted}, []string{}},
		{"owner_created_by_me", r.owner, room.ListHandoffsInput{Role: room.RoleCreatedByMe}, []string{r.takenByOther, r.taken, r.toWorker, r.openCall}},
		{"owner_cannot_accept_own_calls", r.owner, room.ListHandoffsInput{Role: room.RoleOpenToAccept}, []string{r.othersCall}},
		{"other_open_to_accept_skips_addressed_elsewhere", r.other, room.ListHandoffsInput{Role: room.RoleOpenToAccept}, []string{r.openCall}},
		{"third_party_sees_nothing_of_others_work", r.other, room.ListHandoffsInput{}, []string{r.takenByOther, r.othersCall, r.openCall}},
		{"reader_without_checkout_sees_nothing", r.read, room.ListHandoffsInput{}, []string{}},
		{"reader_cannot_accept", r.read, room.ListHandoffsInput{Role: room.RoleOpenToAccept}, []string{}},
		{"approver_sees_all", r.approver, room.ListHandoffsInput{}, r.all},
		{"approver_assigned_nothing", r.approver, room.ListHandoffsInput{Role: room.RoleAssignedToMe}, []string{}},
		{"operator_sees_all", e.op(), room.ListHandoffsInput{}, r.all},
		{"operator_status_open", e.op(), room.ListHandoffsInput{Status: room.HandoffOpen}, []string{r.othersCall, r.toWorker, r.openCall}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			page := e.mustList(t, tc.p, tc.in)
			if got := pageIDs(page); !slices.Equal(got, tc.want) {
				t.Fatalf("listed %v\nwant     %v", got, tc.want)
			}
			if page.NextCursor != "" {
				t.Errorf("a complete listing has next_cursor %q", page.NextCursor)
			}
			for _, h := range page.Handoffs {
				g, err := e.getHandoff(tc.p, h.HandoffID)
				if err != nil {
					t.Fatalf("listed %s, but handoff_get says %v", h.HandoffID, err)
				}
				if a, b := mustJSON(t, h), mustJSON(t, g); a != b {
					t.Errorf("listed differently from handoff_get:\n%s\n%s", a, b)
				}
			}
		})
	}
	t.Run("inputs_shown_to_parties_only", func(t *testing.T) {
		for _, c := range []struct {
			p    room.Principal
			want bool
		}{{r.worker, true}, {r.owner, true}, {r.approver, false}} {
			page := e.mustList(t, c.p, room.ListHandoffsInput{Status: room.HandoffAccepted})
			i := slices.Index(pageIDs(page), r.taken)
			if i < 0 {
				t.Fatalf("%s does not list the accepted handoff", c.p.ParticipantID)
			}
			if got := len(page.Handoffs[i].Inputs) > 0; got != c.want {
				t.Errorf("%s sees inputs = %v, want %v", c.p.ParticipantID, got, c.want)
			}
		}
	})
	t.Run("open_call_leaves_the_inbox_once_taken", func(t *testing.T) {
		if _, err := e.accept(r.worker, r.openCall); err != nil {
			t.Fatal(err)
		}
		if got := pageIDs(e.mustList(t, r.other, room.ListHandoffsInput{})); slices.Contains(got, r.openCall) {
			t.Fatalf("other still lists the call worker took: %v", got)
		}
	})
}

// TestListHandoffs_PagesWithoutGapsOrDuplicates walks every page while new
// handoffs are created between pages: the walk lists every handoff that
// existed when it began exactly once, newest first, and none of the new ones.
func TestListHandoffs_PagesWithoutGapsOrDuplicates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.join("owner", agentCaps...)
	worker := e.join("worker", agentCaps...)
	make1 := func(i int) string {
		if i%3 == 0 { // several handoffs share a millisecond: the id breaks the tie
			e.clock.Advance(time.Millisecond)
		}
		res := mustCreate(t, e, owner, room.CreateHandoffInput{Summary: "work", Assignee: worker.ParticipantID})
		if err := e.cancel(owner, res.Task.TaskID); err != nil { // stay under the task caps
			t.Fatal(err)
		}
		return res.Handoff.HandoffID
	}
	for _, p := range []room.Principal{owner, worker, e.op()} {
		t.Run(p.ParticipantID, func(t *testing.T) {
			start := pageIDs(e.mustList(t, e.op(), room.ListHandoffsInput{Limit: 200}))
			for i := len(start); i < 23; i++ {
				make1(i)
			}
			want := pageIDs(e.mustList(t, e.op(), room.ListHandoffsInput{Limit: 200}))
			var got []string
			in := room.ListHandoffsInput{Limit: 5, Status: room.HandoffCancelled}
			for pages := 0; ; pages++ {
				if pages > 10 {
					t.Fatal("the walk does not end")
				}
				page := e.mustList(t, p, in)
				if len(page.Handoffs) > 5 {
					t.Fatalf("page of %d", len(page.Handoffs))
				}
				got = append(got, pageIDs(page)...)
				make1(pages)
				if page.NextCursor == "" {
					break
				}
				in.Cursor = page.NextCursor
			}
			if !slices.Equal(got, want) {
				t.Fatalf("walked %d: %v\nwant %d: %v", len(got), got, len(want), want)
			}
		})
	}
}

// TestListHandoffs_RefusesBadInput: bad roles, statuses, limits and cursors
// are invalid_request; a cursor works only for the participant and filter
// it was issued for, and a tampered one is refused.
func TestListHandoffs_RefusesBadInput(t *testing.T) {
	t.Parallel()
	r := newInboxRoom(t)
	e := r.e
	first := e.mustList(t, r.worker, room.ListHandoffsInput{Limit: 1})
	if first.NextCursor == "" {
		t.Fatal("a page of one of four has no next_cursor")
	}
	c := first.NextCursor
	body, mac, _ := strings.Cut(c, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(body)
	moved := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), "h1.", "h1.9", 1))) + "." + mac
	cases := []struct {
		name  string
		p     room.Principal
		in    room.ListHandoffsInput
		field string
	}{
		{"unknown_role", r.worker, room.ListHandoffsInput{Role: "mine"}, "role"},
		{"unknown_status", r.worker, room.ListHandoffsInput{Status: "done"}, "status"},
		{"negative_limit", r.worker, room.ListHandoffsInput{Limit: -1}, "limit"},
		{"limit_over_the_list_limit", r.worker, room.ListHandoffsInput{Limit: room.Defaults().MaxListItems + 1}, "limit"},
		{"limit_of_a_billion", r.worker, room.ListHandoffsInput{Limit: 1_000_000_000}, "limit"},
		{"garbage_cursor", r.worker, room.ListHandoffsInput{Cursor: "not a cursor"}, "cursor"},
		{"base64_without_mac", r.worker, room.ListHandoffsInput{Cursor: body}, "cursor"},
		{"tampered_position", r.worker, room.ListHandoffsInput{Limit: 1, Cursor: moved}, "cursor"},
		{"oversize_cursor", r.worker, room.ListHandoffsInput{Cursor: strings.Repeat("A", 600) + "." + mac}, "cursor"},
		{"another_participants_cursor", r.other, room.ListHandoffsInput{Limit: 1, Cursor: c}, "cursor"},
		{"cursor_of_another_status", r.worker, room.ListHandoffsInput{Limit: 1, Status: room.HandoffOpen, Cursor: c}, "cursor"},
		{"cursor_of_another_role", r.worker, room.ListHandoffsInput{Limit: 1, Role: room.RoleAssignedToMe, Cursor: c}, "cursor"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.list(tc.p, tc.in)
			wantKind(t, err, room.KindInvalidRequest)
			if de := room.AsError(err); de.Fields["field"] != tc.field {
				t.Errorf("fields = %v, want field %s", de.Fields, tc.field)
			}
			if strings.Contains(err.Error(), c) {
				t.Errorf("the error echoes the cursor: %v", err)
			}
		})
	}
	t.Run("cursor_of_another_room_is_refused", func(t *testing.T) {
		e2 := newEnv(t)
		w2 := e2.join("worker", agentCaps...)
		w2.ParticipantID = r.worker.ParticipantID // even for the same participant id
		_, err := e2.list(w2, room.ListHandoffsInput{Limit: 1, Cursor: c})
		wantKind(t, err, room.KindInvalidRequest)
	})
	t.Run("the_cursor_continues_for_its_holder", func(t *testing.T) {
		next := e.mustList(t, r.worker, room.ListHandoffsInput{Limit: 1, Cursor: c})
		if got := pageIDs(next); !slices.Equal(got, []string{r.taken}) {
			t.Fatalf("second page %v", got)
		}
	})
	t.Run("without_read_permission_denied", func(t *testing.T) {
		noRead := e.join("no-read", room.CapPropose, room.CapCheckout)
		_, err := e.list(noRead, room.ListHandoffsInput{})
		wantKind(t, err, room.KindPermissionDenied)
	})
}

// TestListHandoffs_LimitBounds: absent takes 50 (bounded by the room's
// list limit), the list limit itself is allowed, and more than it is
// refused naming the maximum, exactly as a negative limit is (issue 25:
// a billion used to be clamped silently while -1 was refused).
func TestListHandoffs_LimitBounds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withLimits(func(l *room.Limits) { l.MaxListItems = 3 }))
	owner := e.join("owner", agentCaps...)
	for range 4 {
		mustCreate(t, e, owner, room.CreateHandoffInput{Summary: "x"})
	}
	for _, tc := range []struct {
		name  string
		limit int
		want  int
	}{{"absent_takes_default_bounded_by_list_limit", 0, 3}, {"the_maximum_is_allowed", 3, 3}, {"one", 1, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			page := e.mustList(t, owner, room.ListHandoffsInput{Limit: tc.limit})
			if len(page.Handoffs) != tc.want || page.NextCursor == "" {
				t.Fatalf("got %d (next %q), want %d and a cursor", len(page.Handoffs), page.NextCursor, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name  string
		limit int
	}{{"one_over_max_is_refused", 4}, {"a_billion_is_refused", 1_000_000_000}, {"minus_one_is_refused", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.list(owner, room.ListHandoffsInput{Limit: tc.limit})
			wantKind(t, err, room.KindInvalidRequest)
			de := room.AsError(err)
			if de.Fields["field"] != "limit" || de.Fields["limit"] != 3 || !strings.Contains(de.Message, "1 to 3") {
				t.Errorf("the refusal does not name the maximum: %s %v", de.Message, de.Fields)
			}
		})
	}
	t.Run("default_is_50", func(t *testing.T) {
		e := newEnv(t)
		op := e.op()
		for i := range 51 {
			res := mustCreate(t, e, op, room.CreateHandoffInput{Summary: "x"})
			if err := e.cancel(op, res.Task.TaskID); err != nil {
				t.Fatal(i, err)
			}
		}
		if page := e.mustList(t, op, room.ListHandoffsInput{}); len(page.Handoffs) != 50 || page.NextCursor == "" {
			t.Fatalf("got %d, next %q", len(page.Handoffs), page.NextCursor)
		}
	})
}
