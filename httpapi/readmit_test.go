package httpapi

// Re-admission at the HTTP and MCP doors (issue 16, item 4): the host binds
// an invitation to an existing participant with participant_id on the
// invite operation; redeeming it at /session/join gives that participant a
// new session, so its task and its idempotency key are its own again.

import (
	"encoding/json"
	"testing"
)

func TestReadmit_OverHTTPAndMCP(t *testing.T) {
	h := newHarness(t, "")
	agent := h.join("agent")
	created := h.do("POST", h.IngressURL("/workspace/handoff"), agent.SessionToken,
		map[string]any{"summary": "write the goals", "idempotency_key": "k-readmit"})
	wantOK(t, created)
	hid, _ := jsonAt(created.JSON(t), "handoff", "handoff_id").(string)
	taskID, _ := jsonAt(created.JSON(t), "task", "taskId").(string)
	if hid == "" || taskID == "" {
		t.Fatalf("create: %s", created.Body)
	}
	// The host cuts the old session off; a later invitation brings it back.
	wantOK(t, h.do("POST", h.OwnerURL("/workspace/session/end"), h.OpToken, map[string]any{"session_ref": agent.SessionRef}))

	r := h.do("POST", h.OwnerURL("/workspace/invite"), h.OpToken, map[string]any{"participant_id": agent.ParticipantID})
	wantOK(t, r)
	var inv struct {
		URI           string   `json:"uri"`
		ParticipantID string   `json:"participant_id"`
		Capabilities  []string `json:"capabilities"`
	}
	if err := json.Unmarshal(r.Body, &inv); err != nil {
		t.Fatal(err)
	}
	if inv.ParticipantID != agent.ParticipantID || len(inv.Capabilities) != len(agent.Capabilities) {
		t.Fatalf("invitation = %s", r.Body)
	}
	participants := h.Count(`SELECT count(*) FROM participants`)
	back := h.redeem(inv.URI, "a new name")
	if back.ParticipantID != agent.ParticipantID || back.SessionRef == agent.SessionRef {
		t.Fatalf("joined as %s (%s), want %s with a new session", back.ParticipantID, back.SessionRef, agent.ParticipantID)
	}
	if got := h.Count(`SELECT count(*) FROM participants`); got != participants {
		t.Errorf("participants %d -> %d", participants, got)
	}
	task := back.ext.ok(t, "tasks/get", map[string]any{"taskId": taskID})
	if task["taskId"] != taskID {
		t.Errorf("tasks/get of its own task = %v", task)
	}
	again := h.do("POST", h.IngressURL("/workspace/handoff"), back.SessionToken,
		map[string]any{"summary": "write the goals", "idempotency_key": "k-readmit"})
	wantOK(t, again)
	if m := again.JSON(t); m["replayed"] != true || jsonAt(m, "handoff", "handoff_id") != hid {
		t.Errorf("the retry with its key = %s, want the original %s replayed", again.Body, hid)
	}
	if n := h.Count(`SELECT count(*) FROM handoffs`); n != 1 {
		t.Errorf("%d handoffs, want 1", n)
	}
	t.Run("used_twice_is_refused", func(t *testing.T) {
		before := h.Snapshot()
		wantError(t, h.joinRaw(map[string]any{"invite": inv.URI}), 403, "invitation_redeemed")
		h.AssertUnchanged(t, before)
	})
	t.Run("an_admin_re_admits_through_workspace_invite", func(t *testing.T) {
		admin := h.join("moderator", "admin")
		sc := admin.mcp.toolOK(t, "workspace_invite", map[string]any{"participant_id": agent.ParticipantID, "capabilities": []string{"read"}})
		if sc["participant_id"] != agent.ParticipantID {
			t.Fatalf("workspace_invite answered for participant %v", sc["participant_id"])
		}
		g := h.redeem(sc["uri"].(string), "x")
		if g.ParticipantID != agent.ParticipantID || len(g.Capabilities) != 1 || g.Capabilities[0] != "read" {
			t.Errorf("joined %s with %v, want %s with [read]", g.ParticipantID, g.Capabilities, agent.ParticipantID)
		}
	})
}

func TestReadmit_RefusedAtEveryDoor(t *testing.T) {
	h := newHarness(t, "")
	agent := h.join("agent", "read", "observe")
	inviter := h.join("inviter", "read", "observe", "invite")
	pid := agent.ParticipantID
	cases := []struct {
		name  string
		token string
		owner bool
		body  any
		// status and code over HTTP; the MCP tool answers code as a tool error.
		status int
		code   string
		field  string
	}{
		{"a_non_admin_asking_for_participant_id", inviter.SessionToken, false, map[string]any{"participant_id": pid}, 403, "permission_denied", "participant_id"},
		{"an_unknown_participant", h.OpToken, true, map[string]any{"participant_id": "participant_nobody"}, 404, "not_found", "participant_id"},
		{"the_host", h.OpToken, true, map[string]any{"participant_id": h.Eng.HostID}, 400, "invalid_request", "participant_id"},
		{"capabilities_wider_than_the_participant's", h.OpToken, true, map[string]any{"participant_id": pid, "capabilities": []string{"read", "propose"}}, 400, "invalid_request", "capabilities"},
		{"a_number_for_participant_id", h.OpToken, true, `{"participant_id": 7}`, 400, "invalid_request", "participant_id"},
	}
	for _, tc := range cases {
		t.Run("HTTP: "+tc.name, func(t *testing.T) {
			url := h.IngressURL("/workspace/invite")
			if tc.owner {
				url = h.OwnerURL("/workspace/invite")
			}
			before := h.Snapshot()
			m := wantError(t, h.do("POST", url, tc.token, tc.body), tc.status, tc.code)
			if m["field"] != tc.field {
				t.Errorf("field = %v, want %s", m["field"], tc.field)
			}
			h.AssertUnchanged(t, before)
		})
	}
	t.Run("MCP: a_non_admin_asking_for_participant_id", func(t *testing.T) {
		before := h.Snapshot()
		res := inviter.mcp.tool(t, "workspace_invite", map[string]any{"participant_id": pid})
		wantToolError(t, res, "permission_denied", "participant_id")
		h.AssertUnchanged(t, before)
	})
	t.Run("MCP: a_participant_that_left", func(t *testing.T) {
		gone := h.join("gone")
		gone.mcp.toolOK(t, "workspace_leave", nil)
		admin := h.join("moderator", "admin")
		before := h.Snapshot()
		res := admin.mcp.tool(t, "workspace_invite", map[string]any{"participant_id": gone.ParticipantID})
		wantToolError(t, res, "invalid_request", "participant_id")
		h.AssertUnchanged(t, before)
	})
}
