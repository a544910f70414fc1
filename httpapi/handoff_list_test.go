package httpapi

// The inbox at the HTTP and MCP doors (issue 16 item 3): GET
// /workspace/handoffs and handoff_list answer the same page for the same
// session, each handoff as handoff_get shows it, pages walk without gaps or
// duplicates while handoffs are created, a cursor is not a capability, and
// bad input is a 400 / invalid_request that changes nothing.

import (
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/commonroom/ce/internal/roomtest"
)

func listIDs(t testing.TB, page map[string]any) []string {
	t.Helper()
	hs, ok := page["handoffs"].([]any)
	if !ok {
		t.Fatalf("no handoffs array: %v", page)
	}
	out := []string{}
	for _, h := range hs {
		out = append(out, str(jsonAt(h, "handoff_id")))
	}
	return out
}

func TestHandoffListAtEachDoor(t *testing.T) {
	h := newHarness(t, "")
	owner := h.join("owner", "read", "propose")
	worker := h.join("worker", "read", "checkout")
	outsider := h.join("outsider", "read", "checkout", "propose")
	approver := h.join("approver", "read", "approve")

	create := func(t *testing.T, p party, args map[string]any) (hid, taskID string) {
		t.Helper()
		res := okJSON(t, h.post(t, p.SessionToken, "/workspace/handoff", args))
		return str(jsonAt(res, "handoff", "handoff_id")), str(jsonAt(res, "handoff", "task_id"))
	}
	// toWorker creates a handoff addressed to worker and cancels its task, so
	// any number fit under the task caps.
	toWorker := func(t *testing.T, i int) string {
		t.Helper()
		hid, tid := create(t, owner, map[string]any{"summary": fmt.Sprintf("job %d", i), "assignee": worker.ParticipantID})
		okJSON(t, h.post(t, owner.SessionToken, "/workspace/task/cancel", map[string]any{"task_id": tid}))
		return hid
	}
	var made []string // newest first
	for i := range 9 {
		made = append([]string{toWorker(t, i)}, made...)
	}
	openForWorker, _ := create(t, owner, map[string]any{"summary": "still open", "assignee": worker.ParticipantID})
	made = append([]string{openForWorker}, made...)
	outsiderCall, _ := create(t, outsider, map[string]any{"summary": "anyone?"})

	get := func(t *testing.T, p party, q url.Values) map[string]any {
		t.Helper()
		return okJSON(t, h.get(t, p.SessionToken, "/workspace/handoffs?"+q.Encode()))
	}

	t.Run("HTTP and MCP answer the same page, each handoff as handoff_get shows it", func(t *testing.T) {
		for _, p := range []party{owner, worker, outsider, approver} {
			httpPage := get(t, p, url.Values{"limit": {"4"}})
			mcpPage := p.mcp.toolOK(t, "handoff_list", map[string]any{"limit": 4})
			if !reflect.DeepEqual(listIDs(t, httpPage), listIDs(t, mcpPage)) {
				t.Fatalf("%s: HTTP %v, MCP %v", p.Name, listIDs(t, httpPage), listIDs(t, mcpPage))
			}
			for _, item := range httpPage["handoffs"].([]any) {
				one := okJSON(t, h.get(t, p.SessionToken, "/workspace/handoff?handoff_id="+str(jsonAt(item, "handoff_id"))))
				if !reflect.DeepEqual(item, any(one)) {
					t.Errorf("%s: listed %v\nhandoff_get %v", p.Name, item, one)
				}
			}
		}
	})
	t.Run("roles and status narrow the inbox", func(t *testing.T) {
		cases := []struct {
			name string
			p    party
			q    url.Values
			want []string
		}{
			{"worker: open_to_accept is the one addressed to it and the outsider's call", worker,
				url.Values{"role": {"open_to_accept"}}, []string{outsiderCall, openForWorker}},
			{"worker: assigned_to_me and open", worker, url.Values{"role": {"assigned_to_me"}, "status": {"open"}}, []string{openForWorker}},
			{"owner: created_by_me, cancelled", owner, url.Values{"role": {"created_by_me"}, "status": {"cancelled"}, "limit": {"200"}}, made[1:]},
			{"owner: nothing assigned to it", owner, url.Values{"role": {"assigned_to_me"}}, []string{}},
			{"outsider: a third party sees none of the others' handoffs", outsider, url.Values{"limit": {"200"}}, []string{outsiderCall}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				if got := listIDs(t, get(t, tc.p, tc.q)); !slices.Equal(got, tc.want) {
					t.Fatalf("HTTP listed %v\nwant %v", got, tc.want)
				}
				args := map[string]any{}
				for k, v := range tc.q {
					args[k] = v[0]
				}
				if v, ok := tc.q["limit"]; ok {
					args["limit"], _ = strconv.Atoi(v[0]) // a number on MCP
				}
				if got := listIDs(t, tc.p.mcp.toolOK(t, "handoff_list", args)); !slices.Equal(got, tc.want) {
					t.Fatalf("MCP listed %v\nwant %v", got, tc.want)
				}
			})
		}
	})
	t.Run("walking the pages lists each handoff once while new ones arrive", func(t *testing.T) {
		for _, door := range []string{"HTTP", "MCP"} {
			t.Run(door, func(t *testing.T) {
				want := listIDs(t, get(t, worker, url.Values{"role": {"assigned_to_me"}, "limit": {"200"}}))
				var got []string
				cursor := ""
				for pages := 0; ; pages++ {
					if pages > 20 {
						t.Fatal("the walk does not end")
					}
					var page map[string]any
					if door == "HTTP" {
						q := url.Values{"role": {"assigned_to_me"}, "limit": {"3"}}
						if cursor != "" {
							q.Set("cursor", cursor)
						}
						page = get(t, worker, q)
					} else {
						args := map[string]any{"role": "assigned_to_me", "limit": 3}
						if cursor != "" {
							args["cursor"] = cursor
						}
						page = worker.mcp.toolOK(t, "handoff_list", args)
					}
					ids := listIDs(t, page)
					if len(ids) > 3 {
						t.Fatalf("a page of %d", len(ids))
					}
					got = append(got, ids...)
					toWorker(t, 100+pages) // new work between pages
					next, has := page["next_cursor"].(string)
					if !has {
						break
					}
					cursor = next
				}
				if !slices.Equal(got, want) {
					t.Fatalf("walked %d %v\nwant %d %v", len(got), got, len(want), want)
				}
			})
		}
	})
	t.Run("GET /workspace/room lists the same handoffs as the inbox", func(t *testing.T) {
		for _, p := range []party{owner, worker, outsider, approver} {
			roomView := okJSON(t, h.get(t, p.SessionToken, "/workspace/room"))
			inbox := get(t, p, url.Values{"limit": {"200"}})
			if !reflect.DeepEqual(roomView["handoffs"], inbox["handoffs"]) {
				t.Errorf("%s: room %v\ninbox %v", p.Name, listIDs(t, roomView), listIDs(t, inbox))
			}
		}
	})
}

// TestHandoffListRefuse: the inbox's bad input at each door, on one shared
// room where the worker has a page to turn: a 400 / invalid_request (a tool
// error at MCP) that names the field, does not echo the input, and changes
// nothing.
func TestHandoffListRefuse(t *testing.T) {
	huge := strings.Repeat("Q", 64<<10)
	notEchoed := func(t testing.TB, _ *roomtest.Setup, raw []byte) {
		if len(raw) > 1024 {
			t.Errorf("a %d-byte answer: the input is echoed", len(raw))
		}
	}
	toolNotEchoed := func(t testing.TB, _ *roomtest.Setup, raw []byte) {
		sc := jsonAt(rawJSON(t, raw), "result", "structuredContent")
		if s := fmt.Sprint(sc); len(s) > 1024 {
			t.Errorf("a %d-byte error: the input is echoed", len(s))
		}
	}
	cursor := func(more map[string]any) func(s *roomtest.Setup) any {
		return func(s *roomtest.Setup) any {
			out := map[string]any{"cursor": s.Vars["cursor"]}
			for k, v := range more {
				out[k] = v
			}
			return out
		}
	}
	httpBad := func(name string, query map[string]any, args func(*roomtest.Setup) any, field string) roomtest.Scenario {
		return roomtest.Scenario{Name: "HTTP: " + name, Route: "GET /workspace/handoffs", As: "worker", Body: query, Args: args,
			Status: http.StatusBadRequest, Error: "invalid_request", After: func(t testing.TB, s *roomtest.Setup, raw []byte) {
				fieldIs(field)(t, s, raw)
				notEchoed(t, s, raw)
			}}
	}
	mcpBad := func(name string, args map[string]any) roomtest.Scenario {
		return roomtest.Scenario{Name: "MCP: " + name, Tool: "handoff_list", As: "worker", Body: args,
			Error: "invalid_request", After: toolNotEchoed}
	}
	roomtest.Scenarios{
		Open:    openScenarioRoom,
		Shared:  true,
		Parties: []roomtest.PartySpec{{Name: "owner", Caps: []string{"read", "propose"}}, {Name: "worker", Caps: []string{"read", "checkout"}}, {Name: "outsider", Caps: []string{"read", "checkout", "propose"}}},
		Prepare: func(t testing.TB, s *roomtest.Setup) {
			for i := range 2 {
				beforeCall(t, s, "owner", "POST", "/workspace/handoff", map[string]any{"summary": fmt.Sprintf("job %d", i), "assignee": s.Parties["worker"].ParticipantID})
			}
			page := beforeCall(t, s, "worker", "GET", "/workspace/handoffs?limit=1", nil)
			if s.Vars["cursor"] = str(page["next_cursor"]); s.Vars["cursor"] == "" {
				t.Fatal("no cursor to misuse")
			}
		},
		Cases: []roomtest.Scenario{
			{Name: "HTTP: another session's cursor is refused: a cursor is not a capability", Route: "GET /workspace/handoffs", As: "outsider",
				Args: cursor(map[string]any{"limit": 1}), Status: http.StatusBadRequest, Error: "invalid_request", After: fieldIs("cursor")},
			{Name: "MCP: another session's cursor is refused: a cursor is not a capability", Tool: "handoff_list", As: "outsider",
				Args: cursor(map[string]any{"limit": 1}), Error: "invalid_request"},
			httpBad("an unknown role is 400", map[string]any{"role": "mine"}, nil, "role"),
			httpBad("an unknown status is 400", map[string]any{"status": "done"}, nil, "status"),
			httpBad("a limit that is not a number is 400", map[string]any{"limit": "ten"}, nil, "limit"),
			httpBad("a negative limit is 400", map[string]any{"limit": -1}, nil, "limit"),
			httpBad("a garbage cursor is 400", map[string]any{"cursor": "garbage!"}, nil, "cursor"),
			httpBad("a cursor with another filter is 400", nil, cursor(map[string]any{"status": "open", "limit": 1}), "cursor"),
			httpBad("an oversize cursor is 400, not echoed", map[string]any{"cursor": huge}, nil, "cursor"),
			mcpBad("an unknown role is invalid_request", map[string]any{"role": "mine"}),
			mcpBad("a role of the wrong type is invalid_request", map[string]any{"role": 5}),
			mcpBad("a status of the wrong type is invalid_request", map[string]any{"status": []any{"open"}}),
			mcpBad("a limit of the wrong type is invalid_request", map[string]any{"limit": "ten"}),
			mcpBad("a negative limit is invalid_request", map[string]any{"limit": -1}),
			mcpBad("a cursor of the wrong type is invalid_request", map[string]any{"cursor": 7}),
			mcpBad("a garbage cursor is invalid_request", map[string]any{"cursor": "garbage!"}),
			mcpBad("an oversize cursor is invalid_request", map[string]any{"cursor": huge}),
			{Name: "HTTP: without a session it is 401", Route: "GET /workspace/handoffs", Status: http.StatusUnauthorized, Error: "unauthorized"},
		},
	}.Run(t)
}
