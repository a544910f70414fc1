package httpapi

// Proposals at the HTTP and MCP doors (issue 13, item 9): pending
// proposals capped per participant and per room, the listing paged with a
// validated cursor and without the proposed text, and one proposal read
// with its text (GET /workspace/proposal, workspace_proposal).

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/commonroom/ce/room"
)

// proposalsOf requires a 200 page of the listing and returns its proposals.
func proposalsOf(t testing.TB, r apiResp) []map[string]any {
	t.Helper()
	page := okJSON(t, r)
	raw, ok := page["proposals"].([]any)
	if !ok {
		t.Fatalf("no proposals array in %.300s", r.Body)
	}
	out := make([]map[string]any, 0, len(raw))
	for _, p := range raw {
		m, _ := p.(map[string]any)
		out = append(out, m)
	}
	return out
}

// proposalCount is the number of proposal rows in the sidecar.
func proposalCount(t testing.TB, h *roomHarness) int {
	t.Helper()
	var n int
	if err := h.Store.Reader.QueryRow(`SELECT count(*) FROM proposals`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func numberedProposal(i int) map[string]any {
	return map[string]any{"target": "Goals", "base_version": 1, "summary": fmt.Sprintf("edit %d", i),
		"change": map[string]any{"section": "Goals", "content": fmt.Sprintf("## Goals\n\nproposal %d, é\n\n", i)}}
}

// wantNoChangeText fails when a listed proposal carries text rather than its size.
func wantNoChangeText(t testing.TB, p map[string]any) {
	t.Helper()
	if hasKey(p["change"], "content") {
		t.Fatalf("a listed proposal carries its text: %v", p)
	}
	if _, ok := jsonAt(p, "change", "content_bytes").(float64); !ok {
		t.Fatalf("a listed proposal has no content_bytes: %v", p)
	}
}

func TestProposalListingPagedAtEachDoor(t *testing.T) {
	h := newHarness(t, "", harnessOpts{Limits: func(l *room.Limits) {
		l.MaxPendingProposalsPerParticipant = 100
		l.MaxPendingProposals = 100
	}})
	author := h.join("author", agentCaps...)
	reader := h.join("reader", "read")
	tok := reader.SessionToken
	const n = 12
	var want []string // newest first
	sizes := map[string]int64{}
	for i := range n {
		p := okJSON(t, h.post(t, author.SessionToken, "/workspace/propose", numberedProposal(i)))
		id := str(p["proposal_id"])
		want = append([]string{id}, want...)
		sizes[id] = int64(len(fmt.Sprintf("## Goals\n\nproposal %d, é\n\n", i)))
	}

	check := func(t *testing.T, ps []map[string]any) []string {
		t.Helper()
		var ids []string
		for _, p := range ps {
			wantNoChangeText(t, p)
			id := str(p["proposal_id"])
			if got := num(jsonAt(p, "change", "content_bytes")); got != sizes[id] {
				t.Errorf("%s: content_bytes %d, want %d", id, got, sizes[id])
			}
			ids = append(ids, id)
		}
		return ids
	}
	t.Run("HTTP pages walk every proposal once, newest first, without text", func(t *testing.T) {
		var got []string
		cursor := ""
		for page := 0; page < 10; page++ {
			q := url.Values{"limit": {"5"}}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			m := okJSON(t, h.get(t, tok, "/workspace/proposals?"+q.Encode()))
			raw, _ := m["proposals"].([]any)
			var ps []map[string]any
			for _, p := range raw {
				ps = append(ps, p.(map[string]any))
			}
			got = append(got, check(t, ps)...)
			next, has := m["next_cursor"].(string)
			if !has {
				break
			}
			cursor = next
		}
		if !slices.Equal(got, want) {
			t.Fatalf("walked %v\nwant %v", got, want)
		}
	})
	t.Run("MCP pages walk every proposal once, newest first, without text", func(t *testing.T) {
		var got []string
		args := map[string]any{"limit": 5}
		for page := 0; page < 10; page++ {
			sc := reader.mcp.toolOK(t, "workspace_proposals", args)
			raw, _ := sc["proposals"].([]any)
			var ps []map[string]any
			for _, p := range raw {
				ps = append(ps, p.(map[string]any))
			}
			got = append(got, check(t, ps)...)
			next, has := sc["next_cursor"].(string)
			if !has {
				break
			}
			args = map[string]any{"limit": 5, "cursor": next}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("walked %v\nwant %v", got, want)
		}
	})
	t.Run("the room view carries sizes, not text", func(t *testing.T) {
		r := h.get(t, tok, "/workspace/room")
		for _, p := range okJSON(t, r)["proposals"].([]any) {
			wantNoChangeText(t, p.(map[string]any))
		}
		if strings.Contains(string(r.Body), "proposal 3, é") {
			t.Fatal("the room view carries proposed text")
		}
	})

	pendingCursor := str(okJSON(t, h.get(t, tok, "/workspace/proposals?status=pending&limit=1"))["next_cursor"])
	huge := strings.Repeat("Q", 64<<10)
	bad := []struct {
		name, query, field string
	}{
		{"a garbage cursor is 400 invalid_request", "cursor=garbage!", "cursor"},
		{"a forged cursor naming no proposal is 400 invalid_request", "cursor=cDEAAHByb3Bvc2FsXzAwMDAwMDAwMDAwMDAwMDA", "cursor"},
		{"a cursor from another status filter is 400 invalid_request", "cursor=" + pendingCursor, "cursor"},
		{"an oversize cursor is 400 invalid_request, not echoed", "cursor=" + huge, "cursor"},
		{"a limit that is not a number is 400 invalid_request", "limit=ten", "limit"},
		{"a negative limit is 400 invalid_request", "limit=-1", "limit"},
	}
	for _, tc := range bad {
		t.Run("HTTP: "+tc.name, func(t *testing.T) {
			r := h.get(t, tok, "/workspace/proposals?"+tc.query)
			m := wantError(t, r, http.StatusBadRequest, "invalid_request")
			if m["field"] != tc.field {
				t.Errorf("field %v, want %s", m["field"], tc.field)
			}
			if len(r.Body) > 1024 {
				t.Errorf("a %d-byte answer: the input is echoed", len(r.Body))
			}
		})
	}
	mcpBad := []struct {
		name string
		args map[string]any
	}{
		{"a garbage cursor is invalid_request", map[string]any{"cursor": "garbage!"}},
		{"a cursor from another status filter is invalid_request", map[string]any{"cursor": pendingCursor}},
		{"an oversize cursor is invalid_request", map[string]any{"cursor": huge}},
		{"a cursor of the wrong type is invalid_request", map[string]any{"cursor": 7}},
		{"a limit of the wrong type is invalid_request", map[string]any{"limit": "ten"}},
		{"a negative limit is invalid_request", map[string]any{"limit": -1}},
	}
	for _, tc := range mcpBad {
		t.Run("MCP: "+tc.name, func(t *testing.T) {
			sc := reader.mcp.toolErr(t, "workspace_proposals", tc.args, "invalid_request")
			if s := fmt.Sprint(sc); len(s) > 1024 {
				t.Errorf("a %d-byte error: the input is echoed", len(s))
			}
		})
	}

	t.Run("one proposal with its text, at both doors", func(t *testing.T) {
		id := want[3]
		text := fmt.Sprintf("## Goals\n\nproposal %d, é\n\n", n-1-3)
		p := okJSON(t, h.get(t, tok, "/workspace/proposal?proposal_id="+id))
		if jsonAt(p, "change", "content") != text || p["proposal_id"] != id || p["status"] != "pending" {
			t.Fatalf("GET /workspace/proposal = %v", p)
		}
		sc := reader.mcp.toolOK(t, "workspace_proposal", map[string]any{"proposal_id": id})
		if jsonAt(sc, "change", "content") != text || sc["proposal_id"] != id {
			t.Fatalf("workspace_proposal = %v", sc)
		}
	})
	t.Run("one proposal: unknown, missing and oversize ids are refused without echo", func(t *testing.T) {
		wantError(t, h.get(t, tok, "/workspace/proposal?proposal_id=proposal_0123456789abcdef"), http.StatusNotFound, "proposal_not_found")
		wantError(t, h.get(t, tok, "/workspace/proposal"), http.StatusBadRequest, "invalid_request")
		r := h.get(t, tok, "/workspace/proposal?proposal_id="+strings.Repeat("p", 16<<10))
		wantError(t, r, http.StatusNotFound, "proposal_not_found")
		if len(r.Body) > 1024 {
			t.Errorf("an oversize id came back: %d bytes", len(r.Body))
		}
		reader.mcp.toolErr(t, "workspace_proposal", map[string]any{"proposal_id": "proposal_0123456789abcdef"}, "proposal_not_found")
		reader.mcp.toolErr(t, "workspace_proposal", map[string]any{}, "invalid_request")
		reader.mcp.toolErr(t, "workspace_proposal", map[string]any{"proposal_id": 5}, "invalid_request")
	})
}

func TestProposalCapsAtEachDoor(t *testing.T) {
	h := newHarness(t, "", harnessOpts{Limits: func(l *room.Limits) {
		l.MaxPendingProposalsPerParticipant = 2
		l.MaxPendingProposals = 3
	}})
	a := h.join("a", agentCaps...)
	b := h.join("b", agentCaps...)
	c := h.join("c", agentCaps...)
	okJSON(t, h.post(t, a.SessionToken, "/workspace/propose", numberedProposal(1)))
	a.mcp.toolOK(t, "workspace_propose", numberedProposal(2))

	refusedHTTP := func(t *testing.T, p party, scope string, limit, pending int) {
		t.Helper()
		before := proposalCount(t, h)
		m := wantError(t, h.post(t, p.SessionToken, "/workspace/propose", numberedProposal(9)), http.StatusTooManyRequests, "limit_exceeded")
		if m["scope"] != scope || num(m["limit"]) != int64(limit) || num(m["pending"]) != int64(pending) {
			t.Fatalf("refusal %v, want scope %s limit %d pending %d", m, scope, limit, pending)
		}
		sc := p.mcp.toolErr(t, "workspace_propose", numberedProposal(9), "limit_exceeded")
		if sc["scope"] != scope || num(sc["limit"]) != int64(limit) {
			t.Fatalf("MCP refusal %v", sc)
		}
		if after := proposalCount(t, h); after != before {
			t.Fatalf("a refused proposal was stored: %d rows, then %d", before, after)
		}
	}
	t.Run("a participant over its cap is refused at both doors and nothing is stored", func(t *testing.T) {
		refusedHTTP(t, a, "participant", 2, 2)
	})
	t.Run("the room's cap refuses everyone once reached", func(t *testing.T) {
		okJSON(t, h.post(t, b.SessionToken, "/workspace/propose", numberedProposal(3)))
		refusedHTTP(t, c, "room", 3, 3)
	})
	t.Run("the host rejecting one frees a place", func(t *testing.T) {
		ps := proposalsOf(t, h.get(t, a.SessionToken, "/workspace/proposals?status=pending"))
		wantOK(t, h.do("POST", h.OwnerURL("/workspace/proposal/review"), h.OpToken, map[string]any{"proposal_id": ps[0]["proposal_id"], "approve": false}))
		c.mcp.toolOK(t, "workspace_propose", numberedProposal(4))
	})
}

// TestProposeNamesItsScopeOneWay (issue 24): at both doors, a proposal for a
// section names it in target and change.section alike, and only target
// "workspace" without change.section replaces the whole document; anything
// ambiguous is refused with invalid_request naming change.section and the
// fix, storing nothing. Every door shows a stored proposal's scope: the
// answer, the listing and the proposal read back.
func TestProposeNamesItsScopeOneWay(t *testing.T) {
	h := newHarness(t, "")
	a := h.join("author", "read", "propose")
	body := func(target, section string) map[string]any {
		change := map[string]any{"content": "## Goals\n\nsharper\n\n"}
		if section != "" {
			change["section"] = section
		}
		return map[string]any{"target": target, "base_version": 1, "summary": "edit", "change": change}
	}
	cases := []struct {
		name            string
		target, section string
		wantScope       string // "" when refused
		wantFix         string // a piece of the refusal's message
	}{
		{name: "a section named twice is a section proposal", target: "Goals", section: "Goals", wantScope: "section"},
		{name: "a section named by title and path is a section proposal", target: "Idea/Goals", section: "Goals", wantScope: "section"},
		{name: "workspace alone replaces the whole document", target: "workspace", wantScope: "document"},
		{name: "a section target without change.section is refused", target: "Goals",
			wantFix: `set change.section to "Idea/Goals" to replace that section, or set target to "workspace"`},
		{name: "two different sections are refused", target: "Goals", section: "Idea",
			wantFix: `change.section names "Idea" but target names "Idea/Goals"`},
		{name: "a section under a workspace target is refused", target: "workspace", section: "Goals",
			wantFix: `set target to "Idea/Goals" to replace that section, or leave change.section out`},
		{name: "the whole document as change.section under a section target is refused", target: "Goals", section: "workspace",
			wantFix: `change.section names the whole document but target names the section "Idea/Goals"`},
	}
	doors := []struct {
		name    string
		propose func(t *testing.T, in map[string]any) (code string, m map[string]any)
	}{
		{"http", func(t *testing.T, in map[string]any) (string, map[string]any) {
			r := h.post(t, a.SessionToken, "/workspace/propose", in)
			if r.Status == http.StatusOK {
				return "", r.JSON(t)
			}
			m := wantError(t, r, http.StatusBadRequest, "invalid_request")
			return str(m["error"]), m
		}},
		{"mcp", func(t *testing.T, in map[string]any) (string, map[string]any) {
			res := a.mcp.tool(t, "workspace_propose", in)
			sc, _ := res["structuredContent"].(map[string]any)
			if res["isError"] == true {
				return str(sc["error"]), sc
			}
			return "", sc
		}},
	}
	for _, door := range doors {
		for _, c := range cases {
			t.Run(door.name+"/"+c.name, func(t *testing.T) {
				before := h.Snapshot()
				code, m := door.propose(t, body(c.target, c.section))
				if c.wantScope == "" {
					if code != "invalid_request" || m["field"] != "change.section" || !strings.Contains(str(m["message"]), c.wantFix) {
						t.Fatalf("answer %v, want invalid_request on change.section saying %q", m, c.wantFix)
					}
					h.AssertUnchanged(t, before)
					return
				}
				if code != "" || m["scope"] != c.wantScope {
					t.Fatalf("answer %v, want scope %s", m, c.wantScope)
				}
				id := str(m["proposal_id"])
				one := okJSON(t, h.Do(t, "GET", h.IngressURL("/workspace/proposal?proposal_id="+id), a.SessionToken, nil))
				if one["scope"] != c.wantScope {
					t.Errorf("GET /workspace/proposal scope %v, want %s", one["scope"], c.wantScope)
				}
				if tool := a.mcp.toolOK(t, "workspace_proposal", map[string]any{"proposal_id": id}); tool["scope"] != c.wantScope {
					t.Errorf("workspace_proposal scope %v, want %s", tool["scope"], c.wantScope)
				}
				listed := proposalsOf(t, h.Do(t, "GET", h.IngressURL("/workspace/proposals?limit=1"), a.SessionToken, nil))
				if len(listed) != 1 || listed[0]["proposal_id"] != id || listed[0]["scope"] != c.wantScope {
					t.Errorf("GET /workspace/proposals = %v, want %s with scope %s", listed, id, c.wantScope)
				}
				// The author may hold only so many pending proposals: take this one back out of the way.
				inWriter(t, h, func(tx *room.Tx) (room.ReviewResult, error) {
					no := false
					return h.Eng.Review(tx, room.Operator(h.Eng.HostID), room.ReviewInput{ProposalID: id, Approve: &no})
				})
			})
		}
	}
}
