package httpapi

// Issue 13 at the HTTP and MCP doors: the host ends sessions (item 11),
// invitations are scoped to their creator (13), an empty grant is refused
// (12), /debug takes only the operator bearer (14), and a value out of
// range is 400, not 429.

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/commonroom/ce/internal/mcptest"
)

// wantToolError requires an isError tool result with code and field.
func wantToolError(t testing.TB, res map[string]any, code, field string) {
	t.Helper()
	sc, _ := res["structuredContent"].(map[string]any)
	if res["isError"] != true || sc["error"] != code || (field != "" && sc["field"] != field) {
		t.Fatalf("tool result %v, want isError %s naming %q", res, code, field)
	}
}

// waitEnded waits for an observe stream to be closed by the server.
func waitEnded(t testing.TB, s *stream) {
	t.Helper()
	select {
	case <-s.Done():
	case <-time.After(frameWait):
		t.Fatalf("%s: the stream was not closed", s.Name)
	}
}

func TestEndSessionRoute_CutsTheParticipantOffEverywhere(t *testing.T) {
	h := newHarness(t, "")
	c := streamClient()
	victim := h.join("victim", "read", "observe")
	keeper := h.join("keeper", "read")
	listen, _ := h.Listen(t, c, victim.SessionToken, "1", map[string]any{"resourceSubscriptions": []string{h.Eng.DocumentURI()}}, false)
	observe, r := h.observe(t, victim.SessionToken, "")
	if observe == nil {
		t.Fatalf("observe: %d %s", r.Status, r.Body)
	}
	keep, _ := h.Listen(t, c, keeper.SessionToken, "1", map[string]any{"resourceSubscriptions": []string{h.Eng.DocumentURI()}}, false)

	res := h.do("POST", h.OwnerURL("/workspace/session/end"), h.OpToken, map[string]any{"participant_id": victim.ParticipantID})
	wantOK(t, res)
	body := res.JSON(t)
	if body["participant_id"] != victim.ParticipantID || body["participant_left"] != true ||
		!slices.Equal(stringsOf(body["ended_sessions"]), []string{victim.SessionRef}) {
		t.Fatalf("answer = %s", res.Body)
	}
	listen.ExpectFinal(t)
	waitEnded(t, observe)
	wantUnauthorized(t, h.do("GET", h.IngressURL("/workspace/status"), victim.SessionToken, nil), "unauthorized")
	wantRPCError(t, newMCPClient(h, victim.SessionToken, false).call(t, "tools/call",
		map[string]any{"name": "workspace_status", "arguments": map[string]any{}}), http.StatusUnauthorized, mcptest.CodeUnauthorized)
	wantOK(t, h.do("GET", h.IngressURL("/workspace/status"), keeper.SessionToken, nil))
	h.EditFile(t, keeper.SessionToken, threeSections("hello again", "ship it\nsoon", "step one"))
	keep.ExpectRes(t, h.Eng.DocumentURI())
	evs := h.Events("session.ended")
	if last := evs[len(evs)-1]; last.Payload["reason"] != "ended_by_host" || last.Payload["session_ref"] != victim.SessionRef {
		t.Errorf("session.ended = %s", last.Raw)
	}
	if strings.Contains(h.Logs.String(), victim.SessionToken) {
		t.Error("the log holds the ended session's token")
	}

	t.Run("an admin session on the ingress ends one session by its ref", func(t *testing.T) {
		admin := h.join("moderator", "admin")
		other := h.join("other", "read")
		r := h.do("POST", h.IngressURL("/workspace/session/end"), admin.SessionToken, map[string]any{"session_ref": other.SessionRef})
		wantOK(t, r)
		if b := r.JSON(t); b["participant_left"] != false || !slices.Equal(stringsOf(b["ended_sessions"]), []string{other.SessionRef}) {
			t.Errorf("answer = %s", r.Body)
		}
		wantUnauthorized(t, h.do("GET", h.IngressURL("/workspace/status"), other.SessionToken, nil), "unauthorized")
		evs := h.Events("session.ended")
		if last := evs[len(evs)-1]; last.Payload["reason"] != "ended_by_admin" {
			t.Errorf("session.ended = %s", last.Raw)
		}
	})
	t.Run("the owner page ends a participant", func(t *testing.T) {
		_, cookie := h.pageCookie(t)
		other := h.join("paged", "read")
		wantOK(t, h.do("POST", h.OwnerURL("/workspace/session/end"), "", map[string]any{"participant_id": other.ParticipantID},
			withCookie(cookie), withHeader("Origin", h.Owner.URL)))
		wantUnauthorized(t, h.do("GET", h.IngressURL("/workspace/status"), other.SessionToken, nil), "unauthorized")
	})
	t.Run("ending again answers ok and changes nothing", func(t *testing.T) {
		before := h.Snapshot()
		r := h.do("POST", h.OwnerURL("/workspace/session/end"), h.OpToken, map[string]any{"session_ref": victim.SessionRef})
		wantOK(t, r)
		if b := r.JSON(t); len(stringsOf(b["ended_sessions"])) != 0 {
			t.Errorf("answer = %s", r.Body)
		}
		h.AssertUnchanged(t, before)
	})
}

func TestEndSessionRoute_RefusalsChangeNothing(t *testing.T) {
	h := newHarness(t, "")
	victim := h.join("victim", "read")
	agent := h.join("agent")
	inviter := h.join("inviter", "read", "invite")
	_, cookie := h.pageCookie(t)
	pid := map[string]any{"participant_id": victim.ParticipantID}
	for _, tc := range []struct {
		name     string
		owner    bool
		token    string
		opts     []reqOpt
		body     any
		status   int
		code     string
		field    string
		required string
	}{
		{"no session is 401", false, "", nil, pid, 401, "unauthorized", "", ""},
		{"the operator token on the ingress is 401", false, h.OpToken, nil, pid, 401, "unauthorized", "", ""},
		{"an agent without admin is 403 naming admin", false, agent.SessionToken, nil, pid, 403, "permission_denied", "", "admin"},
		{"an invite holder is 403 naming admin", false, inviter.SessionToken, nil, pid, 403, "permission_denied", "", "admin"},
		{"the page cookie without its Origin is 403", true, "", []reqOpt{withCookie(cookie)}, pid, 403, "permission_denied", "", ""},
		{"an unknown participant is 404", true, h.OpToken, nil, map[string]any{"participant_id": "participant_0000000000000000"}, 404, "not_found", "participant_id", ""},
		{"an unknown session is 404", true, h.OpToken, nil, map[string]any{"session_ref": "sref_0000000000000000"}, 404, "not_found", "session_ref", ""},
		{"the host is 400", true, h.OpToken, nil, map[string]any{"participant_id": h.Eng.HostID}, 400, "invalid_request", "participant_id", ""},
		{"both names are 400", true, h.OpToken, nil, map[string]any{"participant_id": victim.ParticipantID, "session_ref": victim.SessionRef}, 400, "invalid_request", "session_ref", ""},
		{"no name is 400", true, h.OpToken, nil, map[string]any{}, 400, "invalid_request", "session_ref", ""},
		{"a number for a participant is 400", true, h.OpToken, nil, `{"participant_id": 7}`, 400, "invalid_request", "participant_id", ""},
		{"malformed JSON is 400", true, h.OpToken, nil, `{"participant_id": `, 400, "invalid_request", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := h.IngressURL("/workspace/session/end")
			if tc.owner {
				url = h.OwnerURL("/workspace/session/end")
			}
			before := h.Snapshot()
			m := wantError(t, h.do("POST", url, tc.token, tc.body, tc.opts...), tc.status, tc.code)
			if tc.field != "" && m["field"] != tc.field {
				t.Errorf("field = %v, want %s", m["field"], tc.field)
			}
			if tc.code == "permission_denied" && (m["required"] != nil) != (tc.required != "") {
				t.Errorf("required = %v, want %q", m["required"], tc.required)
			}
			h.AssertUnchanged(t, before)
		})
	}
	wantOK(t, h.do("GET", h.IngressURL("/workspace/status"), victim.SessionToken, nil))
}

func TestRevokeRoute_EndSessions(t *testing.T) {
	h := newHarness(t, "")
	c := streamClient()
	inv := h.Invite(map[string]any{"capabilities": []string{"read"}, "max_uses": 2})
	a, b := h.redeem(inv.URI, "a"), h.redeem(inv.URI, "b")
	keeper := h.join("keeper", "read")
	stream, _ := h.Listen(t, c, a.SessionToken, "1", map[string]any{"resourceSubscriptions": []string{h.Eng.DocumentURI()}}, false)
	inviter := h.join("inviter", "read", "invite")

	t.Run("another's invitation answers as an unknown one and nothing ends", func(t *testing.T) {
		before := h.Snapshot()
		foreign := h.do("POST", h.IngressURL("/workspace/invite/revoke"), inviter.SessionToken, map[string]any{"invite_id": inv.InviteID, "end_sessions": true})
		unknown := h.do("POST", h.IngressURL("/workspace/invite/revoke"), inviter.SessionToken, map[string]any{"invite_id": "invite_0000000000000000", "end_sessions": true})
		wantError(t, foreign, 401, "unauthorized")
		if string(foreign.Body) != string(unknown.Body) || foreign.Status != unknown.Status {
			t.Errorf("foreign %d %s, unknown %d %s", foreign.Status, foreign.Body, unknown.Status, unknown.Body)
		}
		h.AssertUnchanged(t, before)
	})
	t.Run("end_sessions of the wrong type is 400", func(t *testing.T) {
		before := h.Snapshot()
		m := wantError(t, h.do("POST", h.OwnerURL("/workspace/invite/revoke"), h.OpToken, `{"invite_id": "`+inv.InviteID+`", "end_sessions": "yes"}`), 400, "invalid_request")
		if m["field"] != "end_sessions" {
			t.Errorf("field = %v", m["field"])
		}
		h.AssertUnchanged(t, before)
	})
	r := h.do("POST", h.OwnerURL("/workspace/invite/revoke"), h.OpToken, map[string]any{"invite_id": inv.InviteID, "end_sessions": true})
	wantOK(t, r)
	if got := stringsOf(r.JSON(t)["ended_sessions"]); !slices.Equal(got, []string{a.SessionRef, b.SessionRef}) {
		t.Fatalf("ended %v, want %s and %s", got, a.SessionRef, b.SessionRef)
	}
	stream.ExpectFinal(t)
	for _, s := range []party{a, b} {
		wantUnauthorized(t, h.do("GET", h.IngressURL("/workspace/status"), s.SessionToken, nil), "unauthorized")
	}
	wantOK(t, h.do("GET", h.IngressURL("/workspace/status"), keeper.SessionToken, nil))
	for _, ev := range h.Events("session.ended") {
		if ev.Payload["reason"] != "invite_revoked" {
			t.Errorf("session.ended = %s", ev.Raw)
		}
	}

	t.Run("a restart does not bring them back", func(t *testing.T) {
		h.Restart()
		for _, s := range []party{a, b} {
			wantUnauthorized(t, h.do("GET", h.IngressURL("/workspace/status"), s.SessionToken, nil), "unauthorized")
		}
		wantOK(t, h.do("GET", h.IngressURL("/workspace/status"), keeper.SessionToken, nil))
	})
}

func TestJoin_PerInvitationCapOverHTTP(t *testing.T) {
	h := newHarness(t, "")
	many := h.Invite(map[string]any{"max_uses": 0})
	var gs []party
	for i := range 8 {
		gs = append(gs, h.redeem(many.URI, "bot"+string(rune('a'+i))))
	}
	before := h.Snapshot()
	m := wantError(t, h.joinRaw(map[string]any{"invite": many.URI, "name": "ninth"}), 429, "limit_exceeded")
	if m["limit"] != float64(8) {
		t.Errorf("limit = %v", m["limit"])
	}
	h.AssertUnchanged(t, before)
	h.redeem(h.Invite(nil).URI, "newcomer")
	wantOK(t, h.do("POST", h.OwnerURL("/workspace/session/end"), h.OpToken, map[string]any{"session_ref": gs[0].SessionRef}))
	h.redeem(many.URI, "ninth")
	t.Run("the listing shows its live sessions against its cap", func(t *testing.T) {
		r := h.do("GET", h.OwnerURL("/workspace/invites"), h.OpToken, nil)
		wantOK(t, r)
		var list []map[string]any
		r.Into(t, &list)
		for _, it := range list {
			if it["invite_id"] == many.InviteID && (it["live_sessions"] != float64(8) || it["max_live_sessions"] != float64(8) || it["created_by"] != h.Eng.HostID) {
				t.Errorf("listing = %v", it)
			}
		}
	})
}

func TestInvitations_ScopedToTheirCreatorOverHTTP(t *testing.T) {
	h := newHarness(t, "")
	a := h.join("a", "read", "invite")
	b := h.join("b", "read", "invite")
	admin := h.join("admin", "admin")
	mint := func(token string) string {
		t.Helper()
		r := h.do("POST", h.IngressURL("/workspace/invite"), token, map[string]any{"capabilities": []string{"read"}})
		wantOK(t, r)
		return r.JSON(t)["invite_id"].(string)
	}
	mine, theirs, hosts := mint(a.SessionToken), mint(b.SessionToken), h.Invite(nil).InviteID
	ids := func(r apiResp) []string {
		t.Helper()
		wantOK(t, r)
		var list []map[string]any
		r.Into(t, &list)
		var out []string
		for _, it := range list {
			out = append(out, it["invite_id"].(string))
		}
		return out
	}
	if got := ids(h.do("GET", h.IngressURL("/workspace/invites"), a.SessionToken, nil)); !slices.Equal(got, []string{mine}) {
		t.Errorf("a lists %v, want only %s", got, mine)
	}
	for _, who := range []struct {
		name string
		list apiResp
	}{
		{"the operator", h.do("GET", h.OwnerURL("/workspace/invites"), h.OpToken, nil)},
		{"an admin session", h.do("GET", h.IngressURL("/workspace/invites"), admin.SessionToken, nil)},
	} {
		got := ids(who.list)
		for _, id := range []string{mine, theirs, hosts} {
			if !slices.Contains(got, id) {
				t.Errorf("%s lists %v, missing %s", who.name, got, id)
			}
		}
	}
	unknown := h.do("POST", h.IngressURL("/workspace/invite/revoke"), a.SessionToken, map[string]any{"invite_id": "invite_0000000000000000"})
	for _, id := range []string{theirs, hosts} {
		before := h.Snapshot()
		r := h.do("POST", h.IngressURL("/workspace/invite/revoke"), a.SessionToken, map[string]any{"invite_id": id})
		wantError(t, r, 401, "unauthorized")
		if string(r.Body) != string(unknown.Body) {
			t.Errorf("foreign %s, unknown %s", r.Body, unknown.Body)
		}
		h.AssertUnchanged(t, before)
	}
	wantOK(t, h.do("POST", h.IngressURL("/workspace/invite/revoke"), a.SessionToken, map[string]any{"invite_id": mine}))
	wantOK(t, h.do("POST", h.IngressURL("/workspace/invite/revoke"), admin.SessionToken, map[string]any{"invite_id": theirs}))
}

func TestInvite_EmptyGrantRefusedAtEveryDoor(t *testing.T) {
	h := newHarness(t, "")
	inviter := h.join("inviter", "read", "observe", "propose", "checkout", "commit", "invite")
	_, cookie := h.pageCookie(t)
	agentSet := []string{"read", "observe", "propose", "checkout", "commit"}
	bodies := []struct {
		name  string
		body  string
		field string // "": accepted with the default set
	}{
		{"an empty list", `{"capabilities": []}`, "capabilities"},
		{"a null list", `{"capabilities": null}`, "capabilities"},
		{"a list of blanks", `{"capabilities": ["", " "]}`, "capabilities"},
		{"empty permissions", `{"permissions": ""}`, "permissions"},
		{"null permissions", `{"permissions": null}`, "permissions"},
		{"no field at all", `{}`, ""},
	}
	doors := []struct {
		name string
		send func(body string) (status int, m map[string]any)
	}{
		{"HTTP owner listener, operator", func(body string) (int, map[string]any) {
			r := h.do("POST", h.OwnerURL("/workspace/invite"), h.OpToken, body)
			return r.Status, r.JSON(t)
		}},
		{"HTTP owner listener, page cookie", func(body string) (int, map[string]any) {
			r := h.do("POST", h.OwnerURL("/workspace/invite"), "", body, withCookie(cookie), withHeader("Origin", h.Owner.URL))
			return r.Status, r.JSON(t)
		}},
		{"HTTP ingress, session", func(body string) (int, map[string]any) {
			r := h.do("POST", h.IngressURL("/workspace/invite"), inviter.SessionToken, body)
			return r.Status, r.JSON(t)
		}},
		{"MCP workspace_invite", func(body string) (int, map[string]any) {
			var args map[string]any
			if err := json.Unmarshal([]byte(body), &args); err != nil {
				t.Fatal(err)
			}
			res := inviter.mcp.tool(t, "workspace_invite", args)
			sc, _ := res["structuredContent"].(map[string]any)
			if res["isError"] == true {
				return 400, sc
			}
			return 200, sc
		}},
	}
	for _, d := range doors {
		for _, b := range bodies {
			t.Run(d.name+": "+b.name, func(t *testing.T) {
				before := h.Snapshot()
				status, m := d.send(b.body)
				if b.field == "" {
					if status != 200 || !slices.Equal(stringsOf(m["capabilities"]), agentSet) {
						t.Fatalf("%d %v, want the default set", status, m)
					}
					return
				}
				if status != 400 || m["error"] != "invalid_request" || m["field"] != b.field {
					t.Fatalf("%d %v, want 400 invalid_request naming %s", status, m, b.field)
				}
				h.AssertUnchanged(t, before)
			})
		}
	}
}

func TestValueErrors_Are400NotLimits(t *testing.T) {
	h := newHarness(t, "")
	inviter := h.join("inviter", "read", "invite", "checkout")
	t.Run("HTTP expires_in_minutes names the field and the limit", func(t *testing.T) {
		before := h.Snapshot()
		m := wantError(t, h.do("POST", h.OwnerURL("/workspace/invite"), h.OpToken, map[string]any{"expires_in_minutes": 10081}), 400, "invalid_request")
		if m["field"] != "expires_in_minutes" || m["limit"] != float64(10080) {
			t.Errorf("body = %v", m)
		}
		h.AssertUnchanged(t, before)
	})
	t.Run("MCP workspace_invite expires_in_minutes", func(t *testing.T) {
		before := h.Snapshot()
		wantToolError(t, inviter.mcp.tool(t, "workspace_invite",
			map[string]any{"capabilities": []string{"read"}, "expires_in_minutes": 20000}),
			"invalid_request", "expires_in_minutes")
		h.AssertUnchanged(t, before)
	})
	t.Run("MCP workspace_checkout minutes", func(t *testing.T) {
		before := h.Snapshot()
		wantToolError(t, inviter.mcp.tool(t, "workspace_checkout",
			map[string]any{"target": "Goals", "minutes": 121}),
			"invalid_request", "minutes")
		h.AssertUnchanged(t, before)
	})
	t.Run("a type error names the field, not the decoder's path", func(t *testing.T) {
		m := wantError(t, h.do("POST", h.OwnerURL("/workspace/invite"), h.OpToken, `{"max_uses": "two"}`), 400, "invalid_request")
		if m["field"] != "max_uses" {
			t.Errorf("field = %v", m["field"])
		}
	})
}

func TestDebug_OnlyTheOperatorBearer(t *testing.T) {
	h := newHarness(t, "")
	star := h.join("star", "*")
	agent := h.join("agent")
	_, cookie := h.pageCookie(t)
	for _, path := range []string{"/debug/metrics", "/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/goroutine?debug=1"} {
		for _, tc := range []struct {
			name   string
			token  string
			opts   []reqOpt
			status int
		}{
			{"the operator bearer", h.OpToken, nil, 200},
			{"the page cookie", "", []reqOpt{withCookie(cookie)}, 403},
			{"the page cookie with its Origin", "", []reqOpt{withCookie(cookie), withHeader("Origin", h.Owner.URL)}, 403},
			{"the operator acting as the host", h.OpToken, []reqOpt{withHeader(ActAsHeader, h.Eng.HostID)}, 403},
			{"the operator acting as an agent", h.OpToken, []reqOpt{withHeader(ActAsHeader, agent.ParticipantID)}, 403},
			{"a * session", star.SessionToken, nil, 403},
			{"nobody", "", nil, 401},
		} {
			t.Run(path+" by "+tc.name, func(t *testing.T) {
				r := h.do("GET", h.OwnerURL(path), tc.token, nil, tc.opts...)
				if r.Status != tc.status {
					t.Fatalf("%d %.200s, want %d", r.Status, r.Body, tc.status)
				}
				if tc.status == 403 {
					wantError(t, r, 403, "permission_denied")
				}
			})
		}
		t.Run(path+" is not on the ingress", func(t *testing.T) {
			if r := h.do("GET", h.IngressURL(path), star.SessionToken, nil); r.Status != 404 {
				t.Errorf("%d %.200s, want 404", r.Status, r.Body)
			}
		})
	}
}
