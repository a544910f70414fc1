package httpapi

// handoff_cancel and handoff_answer (issue 24) at both of their doors, MCP
// tools/call and plain HTTP: each case runs the tool twin on one handoff
// and the protocol method it twins (tasks/cancel or tasks/update on MCP,
// POST /workspace/task/cancel|update on plain HTTP) on another in the same
// state, and the two must leave the same rows and write the same events.
// Refusals change nothing.

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/commonroom/ce/room"
)

// manyTasks lets one owner hold every handoff the twin tests make, and
// call as often as they do.
var manyTasks = harnessOpts{Limits: func(l *room.Limits) {
	l.RateLimitPerMinute, l.MaxActiveTasks, l.MaxTasksPerParticipant = 0, 1<<20, 1<<20
}}

// twinCast is who the twin tests call as.
type twinCast struct {
	owner, worker, approver, stranger, admin party
}

func newTwinCast(h *roomHarness) twinCast {
	return twinCast{
		owner:    h.join("owner", agentCaps...),
		worker:   h.join("worker", "read", "checkout"),
		approver: h.join("approver", "read", "approve"),
		stranger: h.join("stranger", "read", "checkout"),
		admin:    h.join("admin", "admin"),
	}
}

func (c twinCast) by(name string) party {
	return map[string]party{"owner": c.owner, "worker": c.worker, "approver": c.approver,
		"stranger": c.stranger, "admin": c.admin}[name]
}

// twinPair makes two handoffs of the owner's, addressed to the worker, in
// the same state (open, accepted, input with questions q1 and q2 open,
// result_ready, approved), through the engine in the room's writer.
func twinPair(t *testing.T, h *roomHarness, c twinCast, state string) (tool, proto room.Handoff) {
	t.Helper()
	var out [2]room.Handoff
	for i := range out {
		out[i] = inWriter(t, h, func(tx *room.Tx) (room.Handoff, error) {
			res, err := h.Eng.CreateHandoff(tx, trusted(c.owner.ParticipantID),
				room.CreateHandoffInput{Summary: "twin", Assignee: c.worker.ParticipantID})
			if err != nil || state == "open" {
				return res.Handoff, err
			}
			id, worker := res.Handoff.HandoffID, trusted(c.worker.ParticipantID)
			if _, err := h.Eng.AcceptHandoff(tx, worker, room.HandoffIDInput{HandoffID: id}); err != nil {
				return res.Handoff, err
			}
			switch state {
			case "input":
				_, err = h.Eng.RequestInput(tx, worker, room.RequestInputInput{HandoffID: id, Requests: []room.InputRequestSpec{
					{Key: "q1", Message: "which one?"}, {Key: "q2", Message: "how many?"}}})
			case "result_ready", "approved":
				_, err = h.Eng.CompleteHandoff(tx, worker, room.CompleteInput{HandoffID: id, Result: room.ResultInput{Text: "done"}})
				if err == nil && state == "approved" {
					_, err = h.Eng.ApproveHandoff(tx, trusted(c.approver.ParticipantID), room.DecideInput{HandoffID: id})
				}
			}
			return res.Handoff, err
		})
	}
	return out[0], out[1]
}

// twinRows is a handoff's rows (handoff, task, input requests) with its ids
// replaced, so two handoffs' rows compare.
func twinRows(t *testing.T, h *roomHarness, x room.Handoff) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []string{`SELECT * FROM handoffs WHERE handoff_id = ?1`, `SELECT * FROM tasks WHERE task_id = ?2`,
		`SELECT * FROM task_inputs WHERE task_id = ?2 ORDER BY request_key`} {
		_, rows := h.QueryRows(t, q, x.HandoffID, x.TaskID)
		for _, vals := range rows {
			fmt.Fprintf(&b, "%v\n", vals)
		}
		b.WriteString("--\n")
	}
	return strings.NewReplacer(x.HandoffID, "HANDOFF", x.TaskID, "TASK").Replace(b.String())
}

// twinEvents is the events after id that name x, with x's ids replaced.
func twinEvents(h *roomHarness, after int64, x room.Handoff) []string {
	var out []string
	r := strings.NewReplacer(x.HandoffID, "HANDOFF", x.TaskID, "TASK")
	for _, ev := range h.Events("") {
		if ev.ID > after && ev.Payload["handoff_id"] == x.HandoffID {
			out = append(out, ev.Type+" "+r.Replace(ev.Raw))
		}
	}
	return out
}

func lastEvent(h *roomHarness) int64 {
	return int64(h.Count(`SELECT coalesce(max(event_id), 0) FROM events`))
}

// twinDoor is one front door of the twins: call runs the tool twin as p and
// returns the error code ("" on success) and the body (the answer, or the
// error body); proto runs the protocol method it twins on x.
type twinDoor struct {
	name  string
	call  func(t *testing.T, p party, tool string, args map[string]any) (string, map[string]any)
	proto func(t *testing.T, p party, tool string, x room.Handoff, responses map[string]any)
}

func twinDoors(h *roomHarness) []twinDoor {
	routes := map[string]string{"handoff_cancel": "/workspace/handoff/cancel", "handoff_answer": "/workspace/handoff/answer"}
	return []twinDoor{
		{name: "mcp",
			call: func(t *testing.T, p party, tool string, args map[string]any) (string, map[string]any) {
				t.Helper()
				res := p.mcp.tool(t, tool, args)
				sc, _ := res["structuredContent"].(map[string]any)
				checkTextBlock(t, tool, res, sc)
				if res["isError"] == true {
					return str(sc["error"]), sc
				}
				return "", sc
			},
			proto: func(t *testing.T, p party, tool string, x room.Handoff, responses map[string]any) {
				t.Helper()
				if tool == "handoff_cancel" {
					wantAck(t, p.ext.taskCall(t, "tasks/cancel", x.TaskID, nil))
					return
				}
				wantAck(t, p.ext.taskCall(t, "tasks/update", x.TaskID, map[string]any{"inputResponses": responses}))
			}},
		{name: "http",
			call: func(t *testing.T, p party, tool string, args map[string]any) (string, map[string]any) {
				t.Helper()
				r := h.Do(t, "POST", h.IngressURL(routes[tool]), p.SessionToken, args)
				m := r.JSON(t)
				if r.Status == http.StatusOK {
					return "", m
				}
				code := str(m["error"])
				if want := httpStatus[room.Kind(code)]; r.Status != want {
					t.Errorf("POST %s: status %d for %s, want %d", routes[tool], r.Status, code, want)
				}
				return code, m
			},
			proto: func(t *testing.T, p party, tool string, x room.Handoff, responses map[string]any) {
				t.Helper()
				if tool == "handoff_cancel" {
					wantOK(t, h.Do(t, "POST", h.IngressURL("/workspace/task/cancel"), p.SessionToken, map[string]any{"task_id": x.TaskID}))
					return
				}
				wantOK(t, h.Do(t, "POST", h.IngressURL("/workspace/task/update"), p.SessionToken,
					map[string]any{"task_id": x.TaskID, "input_responses": responses}))
			}},
	}
}

// sameAsProtocol checks what the twin called name did to tool, answering
// body, against the protocol method run on proto (with responses, for
// tasks/update): the answer's handoff is what handoff_get reads now, the
// twin wrote the events wantEvents since mark, and the protocol method
// leaves proto's rows as the twin left tool's and writes the same events.
func sameAsProtocol(t *testing.T, h *roomHarness, door twinDoor, p party, name string, tool, proto room.Handoff,
	responses map[string]any, mark int64, body map[string]any, wantEvents []string) {
	t.Helper()
	if g := jsonText(jsonAt(body, "handoff")); g != jsonText(p.mcp.toolOK(t, "handoff_get", map[string]any{"handoff_id": tool.HandoffID})) {
		t.Errorf("the answer's handoff %s is not what handoff_get reads now", g)
	}
	toolEvents := twinEvents(h, mark, tool)
	var types []string
	for _, ev := range toolEvents {
		types = append(types, strings.Fields(ev)[0])
	}
	if !slices.Equal(types, wantEvents) {
		t.Errorf("events %v, want %v", types, wantEvents)
	}
	mark = lastEvent(h)
	door.proto(t, p, name, proto, responses)
	if g, w := twinRows(t, h, tool), twinRows(t, h, proto); g != w {
		t.Errorf("%s left\n%s\nthe protocol method leaves\n%s", name, g, w)
	}
	if g, w := toolEvents, twinEvents(h, mark, proto); !slices.Equal(g, w) {
		t.Errorf("%s wrote\n%v\nthe protocol method writes\n%v", name, g, w)
	}
}

func accepted(answer string) map[string]any {
	return map[string]any{"action": "accept", "content": map[string]any{"answer": answer}}
}

// TestHandoffCancelTool: handoff_cancel does at each door what tasks/cancel
// does, answers the handoff as it now stands with cancelled, and refuses
// (changing nothing) whom tasks/cancel refuses, a handoff the caller may
// not see answering as an unknown one.
func TestHandoffCancelTool(t *testing.T) {
	h := newHarness(t, "", manyTasks)
	cast := newTwinCast(h)
	cases := []struct {
		name          string
		state, caller string
		wantCode      string
		wantCancelled bool
		wantStatus    string
		wantEvents    []string
	}{
		{name: "the owner cancels an open handoff", state: "open", caller: "owner",
			wantCancelled: true, wantStatus: "cancelled", wantEvents: []string{"task.cancelled", "handoff.cancelled"}},
		{name: "the owner cancels an accepted handoff", state: "accepted", caller: "owner",
			wantCancelled: true, wantStatus: "cancelled", wantEvents: []string{"task.cancelled", "handoff.cancelled"}},
		{name: "the owner cancels a handoff waiting for answers", state: "input", caller: "owner",
			wantCancelled: true, wantStatus: "cancelled", wantEvents: []string{"task.cancelled", "handoff.cancelled"}},
		{name: "an admin cancels someone's handoff", state: "accepted", caller: "admin",
			wantCancelled: true, wantStatus: "cancelled", wantEvents: []string{"task.cancelled", "handoff.cancelled"}},
		{name: "a delivered result stays as it is", state: "result_ready", caller: "owner", wantStatus: "result_ready"},
		{name: "an approved handoff stays as it is", state: "approved", caller: "owner", wantStatus: "approved"},
		{name: "the assignee is refused", state: "accepted", caller: "worker", wantCode: "permission_denied"},
		{name: "an approver who sees it is refused", state: "accepted", caller: "approver", wantCode: "permission_denied"},
		{name: "someone who is no party gets not found", state: "accepted", caller: "stranger", wantCode: "handoff_not_found"},
	}
	for _, door := range twinDoors(h) {
		for _, c := range cases {
			t.Run(door.name+"/"+c.name, func(t *testing.T) {
				tool, proto := twinPair(t, h, cast, c.state)
				before, mark := h.Snapshot(), lastEvent(h)
				code, body := door.call(t, cast.by(c.caller), "handoff_cancel", map[string]any{"handoff_id": tool.HandoffID})
				if code != c.wantCode {
					t.Fatalf("error %q, want %q: %v", code, c.wantCode, body)
				}
				if c.wantCode != "" {
					if body["handoff_id"] != tool.HandoffID {
						t.Errorf("handoff_id = %v, want %s", body["handoff_id"], tool.HandoffID)
					}
					h.AssertUnchanged(t, before)
					return
				}
				if body["cancelled"] != c.wantCancelled || jsonAt(body, "handoff", "status") != c.wantStatus ||
					jsonAt(body, "handoff", "handoff_id") != tool.HandoffID {
					t.Errorf("answer %v, want cancelled %v and status %s", body, c.wantCancelled, c.wantStatus)
				}
				if !c.wantCancelled {
					h.AssertUnchanged(t, before)
				}
				sameAsProtocol(t, h, door, cast.by(c.caller), "handoff_cancel", tool, proto, nil, mark, body, c.wantEvents)
			})
		}
	}
}

// TestHandoffAnswerTool: handoff_answer does at each door what tasks/update
// does, says which keys it answered and which it ignored, and refuses
// (changing nothing) a bad answer and whom tasks/update refuses.
func TestHandoffAnswerTool(t *testing.T) {
	h := newHarness(t, "", manyTasks)
	cast := newTwinCast(h)
	cases := []struct {
		name          string
		state, caller string
		responses     map[string]any
		wantCode      string
		wantField     string
		wantAnswered  string
		wantIgnored   string
		wantTask      string
		wantEvents    []string
	}{
		{name: "the requester answers both questions: the task works again", state: "input", caller: "owner",
			responses:    map[string]any{"q1": accepted("this"), "q2": accepted("three")},
			wantAnswered: `["q1","q2"]`, wantIgnored: `[]`, wantTask: "working",
			wantEvents: []string{"task.working", "handoff.input_received"}},
		{name: "a partial answer keeps the task waiting", state: "input", caller: "owner",
			responses:    map[string]any{"q1": accepted("this")},
			wantAnswered: `["q1"]`, wantIgnored: `[]`, wantTask: "input_required",
			wantEvents: []string{"handoff.input_received"}},
		{name: "an admin answers", state: "input", caller: "admin",
			responses:    map[string]any{"q2": map[string]any{"action": "decline"}},
			wantAnswered: `["q2"]`, wantIgnored: `[]`, wantTask: "input_required",
			wantEvents: []string{"handoff.input_received"}},
		{name: "keys that were not asked are ignored and nothing changes", state: "input", caller: "owner",
			responses:    map[string]any{"nope": accepted("x"), "q9": accepted("y")},
			wantAnswered: `[]`, wantIgnored: `["nope","q9"]`, wantTask: "input_required"},
		{name: "an answer beside an unasked key lands, the other is ignored", state: "input", caller: "owner",
			responses:    map[string]any{"q1": accepted("this"), "q9": accepted("y")},
			wantAnswered: `["q1"]`, wantIgnored: `["q9"]`, wantTask: "input_required",
			wantEvents: []string{"handoff.input_received"}},
		{name: "with nothing asked every key is ignored", state: "accepted", caller: "owner",
			responses:    map[string]any{"q1": accepted("this")},
			wantAnswered: `[]`, wantIgnored: `["q1"]`, wantTask: "working"},
		{name: "an answer that is not an object is invalid", state: "input", caller: "owner",
			responses: map[string]any{"q1": "this", "q2": accepted("three")},
			wantCode:  "invalid_request", wantField: "input_responses.q1"},
		{name: "no answers at all is invalid", state: "input", caller: "owner",
			responses: map[string]any{}, wantCode: "invalid_request", wantField: "input_responses"},
		{name: "the worker is refused", state: "input", caller: "worker",
			responses: map[string]any{"q1": accepted("this")}, wantCode: "permission_denied"},
		{name: "an approver who sees it is refused", state: "input", caller: "approver",
			responses: map[string]any{"q1": accepted("this")}, wantCode: "permission_denied"},
		{name: "someone who is no party gets not found", state: "input", caller: "stranger",
			responses: map[string]any{"q1": accepted("this")}, wantCode: "handoff_not_found"},
	}
	for _, door := range twinDoors(h) {
		for _, c := range cases {
			t.Run(door.name+"/"+c.name, func(t *testing.T) {
				tool, proto := twinPair(t, h, cast, c.state)
				before, mark := h.Snapshot(), lastEvent(h)
				code, body := door.call(t, cast.by(c.caller), "handoff_answer",
					map[string]any{"handoff_id": tool.HandoffID, "input_responses": c.responses})
				if code != c.wantCode {
					t.Fatalf("error %q, want %q: %v", code, c.wantCode, body)
				}
				if c.wantCode != "" {
					if c.wantField != "" && body["field"] != c.wantField {
						t.Errorf("field = %v, want %s", body["field"], c.wantField)
					}
					h.AssertUnchanged(t, before)
					return
				}
				if g, i := jsonText(body["answered_keys"]), jsonText(body["ignored_keys"]); g != c.wantAnswered || i != c.wantIgnored {
					t.Errorf("answered_keys %s ignored_keys %s, want %s and %s", g, i, c.wantAnswered, c.wantIgnored)
				}
				if s := jsonAt(body, "handoff", "task_status"); s != c.wantTask {
					t.Errorf("task_status %v, want %s", s, c.wantTask)
				}
				if c.wantAnswered == `[]` {
					h.AssertUnchanged(t, before)
				}
				sameAsProtocol(t, h, door, cast.by(c.caller), "handoff_answer", tool, proto, c.responses, mark, body, c.wantEvents)
			})
		}
	}
}

// TestHandoffTwinsBadInput: what the existing tools' bad-input tests try,
// tried on the twins at both doors: an unknown id, wrong types, arguments
// that are not an object, malformed and oversized bodies, no session, and
// a session holding no capability. Each is refused with its code and
// changes nothing.
func TestHandoffTwinsBadInput(t *testing.T) {
	h := newHarness(t, "")
	cast := newTwinCast(h)
	live, _ := twinPair(t, h, cast, "input")
	bare := h.admit(t, "bare", nil, 0)
	unknown := randomID("handoff")
	type mcpCase struct {
		name, tool string
		args       any
		who        party
		wantCode   string
		wantField  string
	}
	mcpCases := []mcpCase{
		{"cancel of an unknown handoff", "handoff_cancel", map[string]any{"handoff_id": unknown}, cast.owner, "handoff_not_found", ""},
		{"answer to an unknown handoff", "handoff_answer", map[string]any{"handoff_id": unknown, "input_responses": map[string]any{"q1": accepted("x")}},
			cast.owner, "handoff_not_found", ""},
		{"a number for handoff_id", "handoff_cancel", map[string]any{"handoff_id": 5}, cast.owner, "invalid_request", "handoff_id"},
		{"input_responses as a string", "handoff_answer", map[string]any{"handoff_id": live.HandoffID, "input_responses": "q1"},
			cast.owner, "invalid_request", "input_responses"},
		{"input_responses as a list", "handoff_answer", map[string]any{"handoff_id": live.HandoffID, "input_responses": []any{accepted("x")}},
			cast.owner, "invalid_request", "input_responses"},
		{"an answer that is a number", "handoff_answer", map[string]any{"handoff_id": live.HandoffID, "input_responses": map[string]any{"q1": 5}},
			cast.owner, "invalid_request", "input_responses.q1"},
		{"input_responses missing", "handoff_answer", map[string]any{"handoff_id": live.HandoffID}, cast.owner, "invalid_request", "input_responses"},
		{"arguments that are a list", "handoff_cancel", []any{live.HandoffID}, cast.owner, "invalid_request", ""},
		{"cancel by a session holding no capability", "handoff_cancel", map[string]any{"handoff_id": live.HandoffID}, bare, "handoff_not_found", ""},
		{"answer by a session holding no capability", "handoff_answer", map[string]any{"handoff_id": live.HandoffID,
			"input_responses": map[string]any{"q1": accepted("x")}}, bare, "handoff_not_found", ""},
	}
	for _, c := range mcpCases {
		t.Run("mcp/"+c.name, func(t *testing.T) {
			before := h.Snapshot()
			res := wantResult(t, c.who.mcp.call(t, "tools/call", map[string]any{"name": c.tool, "arguments": c.args}))
			sc, _ := res["structuredContent"].(map[string]any)
			if res["isError"] != true || sc["error"] != c.wantCode {
				t.Fatalf("answer %v, want isError %s", res, c.wantCode)
			}
			if c.wantField != "" && sc["field"] != c.wantField {
				t.Errorf("field %v, want %s", sc["field"], c.wantField)
			}
			h.AssertUnchanged(t, before)
		})
	}
	t.Run("mcp/malformed JSON is -32700", func(t *testing.T) {
		before := h.Snapshot()
		r := cast.owner.mcp.do(t, mcpReq{Method: "tools/call", Raw: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"handoff_cancel",`,
			Set: map[string]string{"Mcp-Name": "handoff_cancel"}})
		if r.Status != http.StatusBadRequest || r.Error == nil {
			t.Fatalf("status %d, body %s", r.Status, r.Raw)
		}
		h.AssertUnchanged(t, before)
	})
	t.Run("mcp/an oversized body is 413", func(t *testing.T) {
		before := h.Snapshot()
		r := cast.owner.mcp.do(t, mcpReq{Method: "tools/call", Set: map[string]string{"Mcp-Name": "handoff_answer"},
			Raw: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"handoff_answer","arguments":{"handoff_id":"` + live.HandoffID +
				`","input_responses":{"q1":{"action":"accept","content":{"answer":"` + strings.Repeat("a", 1<<20) + `"}}}}}}`})
		if r.Status != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d, want 413: %.200s", r.Status, r.Raw)
		}
		h.AssertUnchanged(t, before)
	})

	httpCases := []struct {
		name, path, token, body string
		status                  int
		code, field             string
	}{
		{"cancel of an unknown handoff", "/workspace/handoff/cancel", cast.owner.SessionToken, `{"handoff_id":"` + unknown + `"}`, 404, "handoff_not_found", ""},
		{"malformed JSON", "/workspace/handoff/cancel", cast.owner.SessionToken, `{"handoff_id":`, 400, "invalid_request", ""},
		{"a number for handoff_id", "/workspace/handoff/cancel", cast.owner.SessionToken, `{"handoff_id":5}`, 400, "invalid_request", "handoff_id"},
		{"trailing data", "/workspace/handoff/cancel", cast.owner.SessionToken, `{"handoff_id":"` + live.HandoffID + `"} {}`, 400, "invalid_request", ""},
		{"input_responses as a string", "/workspace/handoff/answer", cast.owner.SessionToken,
			`{"handoff_id":"` + live.HandoffID + `","input_responses":"q1"}`, 400, "invalid_request", "input_responses"},
		{"an answer that is not an object", "/workspace/handoff/answer", cast.owner.SessionToken,
			`{"handoff_id":"` + live.HandoffID + `","input_responses":{"q1":[1]}}`, 400, "invalid_request", "input_responses.q1"},
		{"an oversized body", "/workspace/handoff/answer", cast.owner.SessionToken,
			`{"handoff_id":"` + live.HandoffID + `","input_responses":{"q1":{"action":"accept","content":{"answer":"` + strings.Repeat("a", 1<<20) + `"}}}}`,
			413, "limit_exceeded", ""},
		{"an answer over the result limit", "/workspace/handoff/answer", cast.owner.SessionToken,
			`{"handoff_id":"` + live.HandoffID + `","input_responses":{"q1":{"action":"accept","content":{"answer":"` + strings.Repeat("a", 300<<10) + `"}}}}`,
			429, "limit_exceeded", "input_responses.q1"},
		{"no session", "/workspace/handoff/cancel", "", `{"handoff_id":"` + live.HandoffID + `"}`, 401, "unauthorized", ""},
		{"a session holding no capability", "/workspace/handoff/cancel", bare.SessionToken, `{"handoff_id":"` + live.HandoffID + `"}`, 404, "handoff_not_found", ""},
	}
	for _, c := range httpCases {
		t.Run("http/"+c.name, func(t *testing.T) {
			before := h.Snapshot()
			m := wantError(t, h.Do(t, "POST", h.IngressURL(c.path), c.token, c.body), c.status, c.code)
			if c.field != "" && m["field"] != c.field {
				t.Errorf("field %v, want %s", m["field"], c.field)
			}
			h.AssertUnchanged(t, before)
		})
	}
}
