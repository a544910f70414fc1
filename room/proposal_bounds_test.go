package room_test

// The bounds on proposals (issue 13, item 9): pending proposals capped per
// participant and per room, the listing paged with a validated cursor and
// without the proposed text, one proposal read with its text; and the
// resource URIs a session may follow.

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/commonroom/ce/room"
)

func (d docRoom) list(p room.Principal, in room.ProposalsInput) (room.ProposalPage, error) {
	return read(d.env, func(eng *room.Engine, q room.Querier) (room.ProposalPage, error) {
		return eng.Proposals(d.tb.(*testing.T).Context(), q, p, in)
	})
}

func (d docRoom) getProposal(p room.Principal, id string) (room.Proposal, error) {
	return read(d.env, func(eng *room.Engine, q room.Querier) (room.Proposal, error) {
		return eng.GetProposal(d.tb.(*testing.T).Context(), q, p, room.ProposalInput{ProposalID: id})
	})
}

// walk lists every page with limit and returns the ids in order.
func (d docRoom) walk(t *testing.T, p room.Principal, status string, limit int, between func(page int)) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for page := 0; ; page++ {
		pg, err := d.list(p, room.ProposalsInput{Status: status, Limit: limit, Cursor: cursor})
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		if len(pg.Proposals) > limit {
			t.Fatalf("page %d has %d proposals, limit %d", page, len(pg.Proposals), limit)
		}
		for _, pr := range pg.Proposals {
			ids = append(ids, pr.ProposalID)
		}
		if pg.NextCursor == "" {
			return ids
		}
		if len(pg.Proposals) != limit {
			t.Fatalf("page %d is short (%d) yet has a next cursor", page, len(pg.Proposals))
		}
		if between != nil {
			between(page)
		}
		cursor = pg.NextCursor
		if page > 1000 {
			t.Fatal("the walk does not end")
		}
	}
}

func TestPropose_PendingCaps(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t, withLimits(func(l *room.Limits) {
		l.MaxPendingProposalsPerParticipant = 2
		l.MaxPendingProposals = 3
	}))
	a, b, c := d.join("a", agentCaps...), d.join("b", agentCaps...), d.join("c", agentCaps...)
	first := d.mustPropose(a, "Goals", "## Goals\n\none\n").ProposalID
	d.mustPropose(a, "Goals", "## Goals\n\ntwo\n")

	refused := func(t *testing.T, p room.Principal, scope string, limit, pending int) {
		t.Helper()
		before := d.docDump()
		_, err := d.propose(p, room.ProposeInput{Target: "Goals", BaseVersion: d.version(), Summary: "one more",
			Change: room.ChangeInput{Content: refOf("## Goals\n\nmore\n"), Section: "Goals"}})
		wantKind(t, err, room.KindLimitExceeded)
		if errField(t, err, "scope") != scope || errField(t, err, "limit") != limit || errField(t, err, "pending") != pending {
			t.Fatalf("fields %v, want scope %s limit %d pending %d", room.AsError(err).Fields, scope, limit, pending)
		}
		if !strings.Contains(room.AsError(err).Message, fmt.Sprint(pending)) {
			t.Errorf("message %q does not give the number", room.AsError(err).Message)
		}
		if after := d.docDump(); after != before {
			t.Fatalf("a refused proposal changed the room:\n%s\n---\n%s", before, after)
		}
	}
	t.Run("a participant at its cap is refused with limit_exceeded and nothing changes", func(t *testing.T) {
		refused(t, a, "participant", 2, 2)
	})
	t.Run("another participant still may, up to the room's cap", func(t *testing.T) {
		d.mustPropose(b, "Goals", "## Goals\n\nb\n")
		refused(t, c, "room", 3, 3)
	})
	t.Run("a review frees a place", func(t *testing.T) {
		if _, err := d.review(d.op(), first, false); err != nil {
			t.Fatal(err)
		}
		d.mustPropose(c, "Goals", "## Goals\n\nc\n")
		refused(t, a, "room", 3, 3)
	})
	t.Run("approved proposals do not count; a commit supersedes the pending ones", func(t *testing.T) {
		d.rejectPending()
		x := d.mustPropose(a, "Goals", "## Goals\n\nx\n").ProposalID
		d.mustApprove(x)
		d.mustPropose(a, "Goals", "## Goals\n\ny\n")
		d.mustPropose(a, "Goals", "## Goals\n\nz\n")
		refused(t, a, "participant", 2, 2)
		d.rawCommit(d.fileText() + "\nmore\n")
		d.mustPropose(a, "Goals", "## Goals\n\nafter\n")
	})
}

func TestProposals_Paging(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t, withLimits(func(l *room.Limits) {
		l.MaxPendingProposalsPerParticipant = 0
		l.MaxPendingProposals = 0
	}))
	a, b := d.join("a", agentCaps...), d.join("b", agentCaps...)
	const n = 23
	var created []string // oldest first
	for i := range n {
		who := a
		if i%3 == 0 {
			who = b
		}
		created = append(created, d.mustPropose(who, "Goals", fmt.Sprintf("## Goals\n\n%d\n", i)).ProposalID)
	}
	for _, id := range created[:5] {
		d.mustApprove(id)
	}
	newestFirst := slices.Clone(created)
	slices.Reverse(newestFirst)

	for _, limit := range []int{1, 5, 7, 23, 200} {
		t.Run(fmt.Sprintf("pages of %d walk every proposal exactly once, newest first", limit), func(t *testing.T) {
			if got := d.walk(t, a, "", limit, nil); !slices.Equal(got, newestFirst) {
				t.Fatalf("walked %d ids, want %d in order:\n%v\n%v", len(got), n, got, newestFirst)
			}
		})
	}
	t.Run("the default page is 50 and a limit above 200 takes 200", func(t *testing.T) {
		d2 := newDocRoom(t, withLimits(func(l *room.Limits) {
			l.MaxPendingProposalsPerParticipant = 0
			l.MaxPendingProposals = 0
		}))
		x := d2.join("x", agentCaps...)
		for i := range 205 {
			d2.mustPropose(x, "Goals", fmt.Sprintf("## Goals\n\n%d\n", i))
		}
		for _, tc := range []struct{ limit, want int }{{0, 50}, {201, 200}, {1 << 30, 200}} {
			pg, err := d2.list(x, room.ProposalsInput{Limit: tc.limit})
			if err != nil {
				t.Fatal(err)
			}
			if len(pg.Proposals) != tc.want || pg.NextCursor == "" {
				t.Fatalf("limit %d: %d proposals, next %q; want %d and a cursor", tc.limit, len(pg.Proposals), pg.NextCursor, tc.want)
			}
		}
	})
	t.Run("proposals added during a walk do not disturb it", func(t *testing.T) {
		var added []string
		got := d.walk(t, a, "", 4, func(page int) {
			if page < 3 {
				added = append(added, d.mustPropose(b, "Goals", fmt.Sprintf("## Goals\n\nlate %d\n", page)).ProposalID)
			}
		})
		if !slices.Equal(got, newestFirst) {
			t.Fatalf("walk during inserts: %v\nwant %v", got, newestFirst)
		}
		// The next walk starts with them.
		pg, err := d.list(a, room.ProposalsInput{Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		slices.Reverse(added)
		var first []string
		for _, p := range pg.Proposals {
			first = append(first, p.ProposalID)
		}
		if !slices.Equal(first, added) {
			t.Fatalf("newest page %v, want the added %v", first, added)
		}
		d.rejectPending()
	})
	t.Run("a status filter pages within that status", func(t *testing.T) {
		want := slices.Clone(created[:5])
		slices.Reverse(want)
		if got := d.walk(t, a, "approved", 2, nil); !slices.Equal(got, want) {
			t.Fatalf("approved walk %v, want %v", got, want)
		}
	})
}

func TestProposals_BadCursorsAndLimits(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t)
	a := d.join("a", agentCaps...)
	var ids []string
	for i := range 3 {
		ids = append(ids, d.mustPropose(a, "Goals", fmt.Sprintf("## Goals\n\n%d\n", i)).ProposalID)
	}
	d.mustApprove(ids[0])
	pg, err := d.list(a, room.ProposalsInput{Limit: 1})
	if err != nil || pg.NextCursor == "" {
		t.Fatalf("first page: %v %+v", err, pg)
	}
	good := pg.NextCursor
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	huge := strings.Repeat("A", 64<<10)
	cases := []struct {
		name   string
		in     room.ProposalsInput
		field  string
		reason string
	}{
		{"garbage is invalid_request", room.ProposalsInput{Cursor: "not a cursor!"}, "cursor", "not one this listing issued"},
		{"valid base64 of something else is invalid_request", room.ProposalsInput{Cursor: enc("hello")}, "cursor", "not one this listing issued"},
		{"another format version is invalid_request", room.ProposalsInput{Cursor: enc("p9\x00\x00" + ids[0])}, "cursor", "not one this listing issued"},
		{"an empty proposal id is invalid_request", room.ProposalsInput{Cursor: enc("p1\x00\x00")}, "cursor", "not one this listing issued"},
		{"a forged id this room never had is invalid_request", room.ProposalsInput{Cursor: enc("p1\x00\x00proposal_0000000000000000")}, "cursor", "stale or forged"},
		{"a cursor for another status filter is invalid_request", room.ProposalsInput{Status: "approved", Cursor: good}, "cursor", "another status filter"},
		{"an oversize cursor is invalid_request and not echoed", room.ProposalsInput{Cursor: huge}, "cursor", "not one this listing issued"},
		{"a negative limit is invalid_request", room.ProposalsInput{Limit: -1}, "limit", "limit must be"},
		{"an unknown status is invalid_request", room.ProposalsInput{Status: "open"}, "status", "status must be"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := d.list(a, tc.in)
			wantKind(t, err, room.KindInvalidRequest)
			e := room.AsError(err)
			if e.Fields["field"] != tc.field || !strings.Contains(e.Message, tc.reason) {
				t.Fatalf("error %q %v, want field %s and %q", e.Message, e.Fields, tc.field, tc.reason)
			}
			if len(mustJSON(t, e)) > 1024 {
				t.Fatalf("the error is %d bytes: it echoes the input", len(mustJSON(t, e)))
			}
		})
	}
	t.Run("the issued cursor still works", func(t *testing.T) {
		pg, err := d.list(a, room.ProposalsInput{Limit: 1, Cursor: good})
		if err != nil || len(pg.Proposals) != 1 || pg.Proposals[0].ProposalID != ids[1] {
			t.Fatalf("%v %+v", err, pg)
		}
	})
}

func TestProposals_ListViewHasNoTextAndGetProposalHasIt(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t)
	a := d.join("a", agentCaps...)
	reader := d.join("reader", room.CapRead)
	const marker = "zebra-crossing-é"
	text := "## Goals\n\n" + strings.Repeat(marker+" ", 1000) + "\n"
	id := d.mustPropose(a, "Goals", text).ProposalID
	whole := d.mustPropose(a, "", "# Whole\n\n"+marker+"\n").ProposalID
	goalsPath := ""
	for _, r := range mustRegions(t, d, reader) {
		if r.Title == "Goals" {
			goalsPath = r.Path
		}
	}

	t.Run("the listing gives the size and section, never the text", func(t *testing.T) {
		pg, err := d.list(reader, room.ProposalsInput{})
		if err != nil {
			t.Fatal(err)
		}
		js := mustJSON(t, pg)
		if strings.Contains(js, "zebra") || strings.Contains(js, `"content"`) {
			t.Fatalf("the listing carries the text: %.300s", js)
		}
		byID := map[string]room.ProposalInfo{}
		for _, p := range pg.Proposals {
			byID[p.ProposalID] = p
		}
		if got := byID[id].Change; got.ContentBytes != int64(len(text)) || got.Section != goalsPath {
			t.Fatalf("change info %+v, want %d bytes of section %s", got, len(text), goalsPath)
		}
		if got := byID[whole].Change; got.ContentBytes != int64(len("# Whole\n\n"+marker+"\n")) || got.Section != "" {
			t.Fatalf("whole-document change info %+v", got)
		}
	})
	t.Run("the room view gives the size, never the text", func(t *testing.T) {
		v, err := read(d.env, func(eng *room.Engine, q room.Querier) (room.RoomView, error) {
			return eng.Room(t.Context(), q, reader, room.Empty{})
		})
		if err != nil {
			t.Fatal(err)
		}
		if js := mustJSON(t, v.Proposals); strings.Contains(js, "zebra") || len(v.Proposals) != 2 {
			t.Fatalf("room view proposals: %.300s", js)
		}
	})
	t.Run("GetProposal has the text", func(t *testing.T) {
		p, err := d.getProposal(reader, id)
		if err != nil {
			t.Fatal(err)
		}
		if p.Change.Content != text || p.Change.Section != goalsPath || p.Status != room.ProposalPending || p.ParticipantID != a.ParticipantID {
			t.Fatalf("got %d bytes of section %q, status %s, by %s", len(p.Change.Content), p.Change.Section, p.Status, p.ParticipantID)
		}
	})
	bad := []struct {
		name string
		who  room.Principal
		id   string
		kind room.Kind
	}{
		{"without read is permission_denied", room.Principal{ParticipantID: a.ParticipantID, Caps: room.Caps{room.CapPropose}}, id, room.KindPermissionDenied},
		{"an unknown id is proposal_not_found", reader, "proposal_0123456789abcdef", room.KindProposalNotFound},
		{"an empty id is invalid_request", reader, "", room.KindInvalidRequest},
		{"an oversize id is proposal_not_found without the echo", reader, strings.Repeat("p", 100_000), room.KindProposalNotFound},
	}
	for _, tc := range bad {
		t.Run("GetProposal "+tc.name, func(t *testing.T) {
			_, err := d.getProposal(tc.who, tc.id)
			wantKind(t, err, tc.kind)
			if len(mustJSON(t, room.AsError(err))) > 1024 {
				t.Fatal("the error echoes the id")
			}
		})
	}
}

func TestResourceURI(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t)
	reader := d.join("reader", room.CapRead)
	doc := d.eng.DocumentURI()
	goals, ok := "", false
	for _, r := range mustRegions(t, d, reader) {
		if r.Title == "Goals" {
			goals, ok = d.eng.SectionURI(r.Path), true
		}
	}
	if !ok {
		t.Fatal("no Goals section")
	}
	cases := []struct {
		name, uri, want string
		ok              bool
	}{
		{"the document", doc, doc, true},
		{"a section by its path", goals, goals, true},
		{"a section by its title, canonical", doc + "/section/Goals", goals, true},
		{"a section that does not exist", doc + "/section/Nowhere", "", false},
		{"another room", "commonroom://workspace/other/section/Goals", "", false},
		{"not a URI of ours", "https://example.invalid/x", "", false},
		{"an oversize URI", doc + "/section/" + strings.Repeat("G", d.eng.Limits.MaxResourceURIChars), "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := read(d.env, func(eng *room.Engine, q room.Querier) ([2]any, error) {
				u, ok, err := eng.ResourceURI(t.Context(), q, reader, tc.uri)
				return [2]any{u, ok}, err
			})
			if err != nil {
				t.Fatal(err)
			}
			if got[0] != tc.want || got[1] != tc.ok {
				t.Fatalf("got %q %v, want %q %v", got[0], got[1], tc.want, tc.ok)
			}
		})
	}
	t.Run("it needs read", func(t *testing.T) {
		_, err := read(d.env, func(eng *room.Engine, q room.Querier) (string, error) {
			u, _, err := eng.ResourceURI(t.Context(), q, room.Principal{ParticipantID: reader.ParticipantID}, doc)
			return u, err
		})
		wantKind(t, err, room.KindPermissionDenied)
	})
}

func mustRegions(t *testing.T, d docRoom, p room.Principal) []room.Region {
	t.Helper()
	rs, err := read(d.env, func(eng *room.Engine, q room.Querier) ([]room.Region, error) {
		r, err := eng.Regions(t.Context(), q, p, room.Empty{})
		return r.Regions, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return rs
}
